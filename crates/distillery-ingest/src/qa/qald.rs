//! QALD-10 (English) reader, in the form Hydra's code reads it (a JSON array of `{question,
//! answer {qid: name}, sparql, QID {qid: name}, topic_entity {mid: name}}`).
//!
//! `question_id` = `id`/`ID`/`question_id`, else the element index; answers = the names (values)
//! of `answer`, in order, exact duplicates dropped, the key standing in for a null name; its
//! keys that are Wikidata QIDs (`Q` and digits: a literal answer is keyed by itself, `{"26":
//! "26"}`) go to `meta.answer_qids`. An `answer` that is not an object (a string, number,
//! boolean or list, as literal answers may be) gives its values as answers and no
//! `answer_qids`. `topic_entities` = the Freebase mids of `topic_entity`, then the Wikidata QIDs
//! of `QID` (or `qid_topic_entity`), their names in `meta.topic_entity_names` and
//! `meta.qid_topic_entity_names`. `sparql` and any other field go to `meta` verbatim. No
//! documents. A record without `question` is quarantined as `missing_field`, an answer name
//! that is an object or a list as `bad_value`.

use distillery_core::{Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{
    HydraTopics, IdString, ItemError, Qa, answers_from, bad_value, excerpt_of, meta_string,
    scalar_string,
};
use crate::{IngestError, InputCtx};

const DATASET: &str = "qald";

#[derive(Deserialize)]
struct Raw {
    #[serde(alias = "ID", alias = "question_id", default)]
    id: Option<IdString>,
    question: String,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(flatten)]
    topics: HydraTopics,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a QALD-10 (Hydra form) JSON file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let (answers, qids) = answer_names(r.answer.as_ref())?;
        let mut meta = r.extra;
        let topics = r.topics.keys(&mut meta)?;
        if let Some(qids) = qids {
            let qids = qids.into_iter().map(Value::String).collect();
            meta.insert("answer_qids".to_string(), Value::Array(qids));
        }
        let id = r.id.map_or_else(|| raw.index.to_string(), |i| i.0);
        let mut q = qa.question(&id, r.question);
        q.answerable = (!answers.is_empty()).then_some(true);
        q.answers = answers;
        q.topic_entities = topics;
        q.meta = meta_string(&meta);
        qa.emit(Record::Question(q))?;
        Ok(())
    })
}

/// The answer names of an `answer` field and, when it is an object `{qid: name}`, its QIDs.
fn answer_names(v: Option<&Value>) -> Result<(Vec<String>, Option<Vec<String>>), ItemError> {
    let Some(Value::Object(m)) = v else {
        return Ok((answers_from(v, "answer")?, None));
    };
    let mut names: Vec<String> = Vec::with_capacity(m.len());
    for (qid, name) in m {
        let name = match name {
            Value::Null => qid.clone(),
            other => scalar_string(other).ok_or_else(|| {
                bad_value(format!(
                    "`answer.{qid}` is not a name: {}",
                    excerpt_of(other)
                ))
            })?,
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let qids = m.keys().filter(|k| is_qid(k)).cloned().collect();
    Ok((names, Some(qids)))
}

/// Whether a string is a Wikidata item id (`Q42`).
fn is_qid(s: &str) -> bool {
    s.strip_prefix('Q')
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}
