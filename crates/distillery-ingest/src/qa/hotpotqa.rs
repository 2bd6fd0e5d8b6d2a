//! HotpotQA reader (official JSON array, distractor/fullwiki/test forms).
//!
//! Each element `{_id, question, answer, supporting_facts [[title, sent_idx]], context [[title,
//! [sentences]]], type, level}` becomes one [`distillery_core::Question`]; each context
//! paragraph becomes one [`distillery_core::Document`] whose text is its sentences concatenated
//! exactly as given (HotpotQA sentences carry their own leading spaces), with one paragraph
//! covering it and one sentence span per given sentence, even an empty one, so sentence `i` of
//! the dataset is sentence `i` of the document. Documents are content-addressed and written once
//! per file.
//!
//! Evidence: one `sentence` evidence per supporting fact (document id of that title, `index` =
//! the sentence index, `text` = the sentence when the index is in range), then one `paragraph`
//! evidence per distinct supporting title (`index` = its position in the context). A fact
//! naming a title absent from the context keeps its title and index with no record id.
//! `question_type` = `type` (bridge/comparison), `level` = `level`. Test-set records have no
//! answer: no answers and `answerable` unknown. Other fields go to `meta` verbatim.
//!
//! `read_sentence_context` is shared with the 2WikiMultihopQA reader, whose records have the
//! same context and supporting-fact layout.

use distillery_core::{Document, Evidence, Question, Record, RecordSink, char_slice};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{IdString, ItemError, Join, Qa, answers_from, meta_string};
use crate::jsonstream::RawItem;
use crate::{IngestError, InputCtx};

const DATASET: &str = "hotpotqa";

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "_id")]
    id: IdString,
    question: String,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(default)]
    supporting_facts: Vec<(String, i32)>,
    context: Vec<(String, Vec<String>)>,
    #[serde(rename = "type", default)]
    qtype: Option<String>,
    #[serde(default)]
    level: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a HotpotQA JSON file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let answers = answers_from(r.answer.as_ref(), "answer")?;
        let has_answer = !matches!(r.answer, None | Some(Value::Null));
        let mut q = qa.question(&r.id.0, r.question);
        let facts = &r.supporting_facts;
        read_sentence_context(qa, raw, &mut q, &r.context, facts, Join::Exact)?;
        q.answers = answers;
        q.answerable = has_answer.then_some(true);
        q.question_type = r.qtype;
        q.level = r.level;
        q.meta = meta_string(&r.extra);
        qa.emit(Record::Question(q))?;
        Ok(())
    })
}

/// Turns a `[[title, [sentences]]]` context and its `[[title, sent_idx]]` supporting facts into
/// documents (written once per file) and evidence, filling `context_documents` and `evidence`
/// of `q`. A fact whose title is in the context but whose sentence index is not one of that
/// paragraph's sentences (negative, or past its last) is dropped from the evidence and
/// quarantined as `bad_evidence` (one record per such fact, the question is kept); a fact whose
/// title is not in the context is kept without a record id (the fullwiki setting's retrieved
/// contexts often miss a gold paragraph).
pub(crate) fn read_sentence_context(
    qa: &mut Qa<'_, '_>,
    raw: &RawItem,
    q: &mut Question,
    context: &[(String, Vec<String>)],
    supporting_facts: &[(String, i32)],
    join: Join,
) -> Result<(), ItemError> {
    let docs: Vec<Document> = context
        .iter()
        .map(|(title, sentences)| qa.document_from_sentences(title, sentences, join))
        .collect();
    let (evidence, bad) = fact_evidence(&docs, supporting_facts);
    q.evidence.extend(evidence);
    for (k, sentences) in bad {
        let (title, idx) = &supporting_facts[k];
        let detail = format!(
            "supporting fact {k} points at sentence {idx} of {title:?}, which has {sentences} \
             sentences: the fact is dropped, the question kept"
        );
        let excerpt = serde_json::json!([title, idx]).to_string();
        let bad = qa.quarantine_part(raw, k, "bad_evidence", detail, excerpt.as_bytes());
        qa.quarantine(bad)?;
    }
    for d in docs {
        q.context_documents.push(d.id.clone());
        qa.emit_once(Record::Document(d))?;
    }
    Ok(())
}

/// Sentence evidence per fact, then paragraph evidence per distinct title; and the facts left
/// out because their index names no sentence of their paragraph (the fact's index in `facts`,
/// the paragraph's sentence count).
fn fact_evidence(
    docs: &[Document],
    facts: &[(String, i32)],
) -> (Vec<Evidence>, Vec<(usize, usize)>) {
    let position = |title: &str| docs.iter().position(|d| d.title == title);
    let mut out = Vec::with_capacity(facts.len() * 2);
    let mut bad = Vec::new();
    let mut titles: Vec<&str> = Vec::new();
    for (k, (title, idx)) in facts.iter().enumerate() {
        let pos = position(title);
        let doc = pos.map(|p| &docs[p]);
        if let Some(d) = doc
            && usize::try_from(*idx).map_or(true, |i| i >= d.sentences.len())
        {
            bad.push((k, d.sentences.len()));
            continue;
        }
        let text = doc.and_then(|d| {
            let s = usize::try_from(*idx)
                .ok()
                .and_then(|i| d.sentences.get(i))?;
            char_slice(&d.text, s.start, s.end).map(str::to_string)
        });
        out.push(Evidence {
            kind: "sentence".to_string(),
            title: Some(title.clone()),
            record_id: doc.map(|d| d.id.clone()),
            index: Some(*idx),
            text,
            ..Default::default()
        });
        if !titles.contains(&title.as_str()) {
            titles.push(title);
        }
    }
    for title in titles {
        let pos = position(title);
        out.push(Evidence {
            kind: "paragraph".to_string(),
            title: Some(title.to_string()),
            record_id: pos.map(|p| docs[p].id.clone()),
            index: pos.map(|p| p as i32),
            ..Default::default()
        });
    }
    (out, bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;
    use distillery_core::spec::{Format, FormatOptions};

    fn run(json: &str) -> VecSink {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("hotpot_train_v1.1.json");
        std::fs::write(&p, json).unwrap();
        let o = FormatOptions::default_for(Format::HotpotQa);
        let ctx = InputCtx::local(p.to_str().unwrap(), &o);
        let mut sink = VecSink::default();
        read(&ctx, &mut sink).unwrap();
        sink
    }

    #[test]
    fn keeps_given_segmentation_and_dedupes_paragraphs() {
        let s = run(
            r#"[{"_id":"a","question":"Q1?","answer":"x","supporting_facts":[["T",1],["T",0],["U",5],["Z",0]],
                 "context":[["T",["First.", " ", " Third é."]],["U",["Only."]]],"type":"bridge","level":"easy"},
                {"_id":"b","question":"Q2?","context":[["U",["Only."]]]}]"#,
        );
        let bad = s.quarantine();
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].reason, "bad_evidence");
        assert!(
            bad[0].detail.contains("sentence 5 of \"U\""),
            "{}",
            bad[0].detail
        );
        assert_eq!(bad[0].record, Some(0));
        let docs = s.documents();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].text, "First.  Third é.");
        let spans: Vec<_> = docs[0].sentences.iter().map(|x| (x.start, x.end)).collect();
        assert_eq!(spans, vec![(0, 6), (6, 7), (7, 16)]);
        let qs = s.questions();
        assert_eq!(qs[0].answers, vec!["x"]);
        assert_eq!(qs[0].answerable, Some(true));
        assert_eq!(qs[0].question_type.as_deref(), Some("bridge"));
        let ev = &qs[0].evidence;
        // The fact with index 5 of a one-sentence paragraph is dropped (and quarantined).
        assert_eq!(ev.len(), 3 + 2);
        assert_eq!(ev[0].text.as_deref(), Some(" "));
        assert_eq!(ev[1].text.as_deref(), Some("First."));
        assert_eq!(ev[2].record_id, None, "title absent from the context");
        assert_eq!(ev[3].kind, "paragraph");
        assert_eq!(ev[3].index, Some(0));
        // The test-form record: no answer.
        assert!(qs[1].answers.is_empty());
        assert_eq!(qs[1].answerable, None);
        assert_eq!(qs[1].context_documents, vec![docs[1].id.clone()]);
        assert_eq!(qs[1].split, "train");
    }
}
