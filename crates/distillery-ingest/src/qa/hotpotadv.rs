//! AdvHotpotQA reader (HotpotQA questions with adversarial distractor paragraphs), in the form
//! Hydra's code reads it (a JSON array of `{qas_id, question, paragraphs [{title, context,
//! is_supp}], answer, rationale [{title, sentence}], QID {qid: name}, topic_entity {mid:
//! name}}`).
//!
//! `question_id` = `qas_id` (the element index when absent); answers = `answer` (a string, or a
//! list); `topic_entities` = the Freebase mids of `topic_entity`, then the Wikidata QIDs of `QID`
//! (or `qid_topic_entity`), their names in `meta.topic_entity_names` and
//! `meta.qid_topic_entity_names`.
//!
//! Each paragraph becomes a context document (one paragraph span, sentences by
//! [`crate::text::sentence_spans`]), written once per file; `context_documents` lists them in
//! the record's order. The adversarial paragraphs all have the title `added`: a document's id
//! covers its text as well as its title, so they stay distinct documents (and distinct uris).
//!
//! Evidence: one `sentence` evidence per `rationale` entry (its title, `text` = the sentence,
//! `record_id` = the first paragraph of that title whose text holds the sentence, `index` = the
//! index of the document's sentence that is it, else of the first one that holds it, none
//! where the document's segmentation cuts it in pieces), then one `paragraph`
//! evidence per paragraph with `is_supp` true (`record_id`, `index` = its position in the
//! context). `rationale` is also kept in `meta` verbatim, as are the other fields. A record
//! without `question` or `paragraphs` is quarantined as `missing_field`.

use distillery_core::{Document, Evidence, Record, RecordSink, char_slice};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{HydraTopics, IdString, Qa, answers_from, from_value, meta_string};
use crate::{IngestError, InputCtx};

const DATASET: &str = "hotpotadv";

#[derive(Deserialize)]
struct Raw {
    #[serde(alias = "_id", alias = "id", default)]
    qas_id: Option<IdString>,
    question: String,
    paragraphs: Vec<RawParagraph>,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(default)]
    rationale: Option<Value>,
    #[serde(flatten)]
    topics: HydraTopics,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Deserialize)]
struct RawParagraph {
    title: String,
    context: String,
    #[serde(default)]
    is_supp: Option<bool>,
}

#[derive(Deserialize)]
struct RawRationale {
    title: String,
    sentence: String,
}

/// Reads an AdvHotpotQA (Hydra form) JSON file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let answers = answers_from(r.answer.as_ref(), "answer")?;
        let has_answer = !matches!(r.answer, None | Some(Value::Null));
        let rationale: Vec<RawRationale> = match &r.rationale {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => from_value(v.clone(), "rationale")?,
        };
        let mut meta = r.extra;
        let topics = r.topics.keys(&mut meta)?;
        if let Some(v) = r.rationale {
            meta.insert("rationale".to_string(), v);
        }
        let id = r.qas_id.map_or_else(|| raw.index.to_string(), |i| i.0);
        let mut q = qa.question(&id, r.question);
        q.answers = answers;
        q.answerable = has_answer.then_some(true);
        q.topic_entities = topics;
        q.meta = meta_string(&meta);
        let docs: Vec<(Document, bool)> = r
            .paragraphs
            .into_iter()
            .map(|p| {
                let supporting = p.is_supp.unwrap_or(false);
                (qa.document_from_text(&p.title, p.context), supporting)
            })
            .collect();
        for s in &rationale {
            q.evidence.push(sentence_evidence(&docs, s));
        }
        for (i, (d, supporting)) in docs.iter().enumerate() {
            if *supporting {
                q.evidence.push(Evidence {
                    kind: "paragraph".to_string(),
                    title: Some(d.title.clone()),
                    record_id: Some(d.id.clone()),
                    index: Some(i as i32),
                    ..Default::default()
                });
            }
        }
        for (d, _) in docs {
            q.context_documents.push(d.id.clone());
            qa.emit_once(Record::Document(d))?;
        }
        qa.emit(Record::Question(q))?;
        Ok(())
    })
}

/// The evidence of one rationale sentence: located in the first paragraph of its title that
/// holds it, with the index of the document's sentence that is it or holds it.
fn sentence_evidence(docs: &[(Document, bool)], s: &RawRationale) -> Evidence {
    let wanted = s.sentence.trim();
    let doc = docs
        .iter()
        .map(|(d, _)| d)
        .find(|d| d.title == s.title && !wanted.is_empty() && d.text.contains(wanted));
    let index = doc.and_then(|d| {
        let texts: Vec<&str> = d
            .sentences
            .iter()
            .map(|x| char_slice(&d.text, x.start, x.end).unwrap_or_default())
            .collect();
        texts
            .iter()
            .position(|t| *t == wanted)
            .or_else(|| texts.iter().position(|t| t.contains(wanted)))
            .map(|i| i as i32)
    });
    Evidence {
        kind: "sentence".to_string(),
        title: Some(s.title.clone()),
        record_id: doc.map(|d| d.id.clone()),
        index,
        text: Some(s.sentence.clone()),
        ..Default::default()
    }
}
