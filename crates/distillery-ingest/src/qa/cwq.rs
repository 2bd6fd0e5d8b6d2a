//! ComplexWebQuestions reader, in the Think-on-Graph form (a JSON array of `{ID, question,
//! webqsp_ID, webqsp_question, machine_question, sparql, answer, topic_entity {mid: name},
//! compositionality_type}`).
//!
//! `question_id` = `ID` (the element index when absent), answers = `answer` (a string, or a list
//! of strings), `topic_entities` = the Freebase mids of `topic_entity`, their names in
//! `meta.topic_entity_names`; `question_type` = `compositionality_type` (composition,
//! conjunction, comparative, superlative). The other fields (`webqsp_ID`, `webqsp_question`,
//! `machine_question`, `sparql`, ...) go to `meta` verbatim. CWQ has no text context: no
//! documents. A record without `question` is quarantined as `missing_field`.

use distillery_core::{Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{IdString, Qa, answers_from, meta_string, topic_entities};
use crate::{IngestError, InputCtx};

const DATASET: &str = "cwq";

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "ID", alias = "id", default)]
    id: Option<IdString>,
    question: String,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(default)]
    topic_entity: Option<Value>,
    #[serde(default)]
    compositionality_type: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a ComplexWebQuestions (ToG form) JSON file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let answers = answers_from(r.answer.as_ref(), "answer")?;
        let (mids, names) = topic_entities(r.topic_entity.as_ref())?;
        let id = r.id.map_or_else(|| raw.index.to_string(), |i| i.0);
        let mut q = qa.question(&id, r.question);
        q.answerable = (!answers.is_empty()).then_some(true);
        q.answers = answers;
        q.topic_entities = mids;
        q.question_type = r.compositionality_type;
        let mut meta = r.extra;
        if let Some(names) = names {
            meta.insert("topic_entity_names".to_string(), Value::Object(names));
        }
        q.meta = meta_string(&meta);
        qa.emit(Record::Question(q))?;
        Ok(())
    })
}
