//! Zero-Shot RE reader (Levy et al.'s relation slot filling in KILT's layout), in the form
//! Hydra's code reads it (a JSON array of `{input: "Entity [SEP] relation", QID {qid:
//! name}, template_questions [..], answer, relation, alias [..], answer_numbers, topic_entity
//! {mid: name}}`).
//!
//! The question is the first of `template_questions` (a record with none falls back to a
//! `question` field, kept in `meta.question` otherwise); the other template questions go to
//! `meta.other_template_questions`.
//! `question_id` = `id`/`question_id`, else the element index; answers = `answer`, then the
//! `alias` list, exact duplicates dropped; `topic_entities` = the Freebase mids of
//! `topic_entity`, then the Wikidata QIDs of `QID` (or `qid_topic_entity`), their names in
//! `meta.topic_entity_names` and `meta.qid_topic_entity_names`. `input`, `relation`,
//! `answer_numbers` and any other field go to `meta` verbatim. No documents. A record with no
//! template question and no `question` is quarantined as `missing_field`.

use distillery_core::{Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{
    HydraTopics, IdString, ItemError, Qa, answers_from, meta_string, push_aliases,
};
use crate::{IngestError, InputCtx};

const DATASET: &str = "zeroshot-re";

#[derive(Deserialize)]
struct Raw {
    #[serde(alias = "question_id", default)]
    id: Option<IdString>,
    #[serde(default)]
    template_questions: Option<Vec<String>>,
    #[serde(default)]
    question: Option<String>,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(default)]
    alias: Option<Value>,
    #[serde(flatten)]
    topics: HydraTopics,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a Zero-Shot RE (Hydra form) JSON file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let mut templates = r.template_questions.unwrap_or_default().into_iter();
        let mut meta = r.extra;
        let text = match (templates.next(), r.question) {
            (Some(t), Some(question)) => {
                meta.insert("question".to_string(), Value::String(question));
                t
            }
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => {
                return Err(ItemError::Bad {
                    reason: "missing_field",
                    detail: "no `template_questions` (or `question`) to ask".to_string(),
                });
            }
        };
        let mut answers = answers_from(r.answer.as_ref(), "answer")?;
        push_aliases(&mut answers, answers_from(r.alias.as_ref(), "alias")?);
        let topics = r.topics.keys(&mut meta)?;
        let others: Vec<Value> = templates.map(Value::String).collect();
        if !others.is_empty() {
            meta.insert("other_template_questions".to_string(), Value::Array(others));
        }
        let id = r.id.map_or_else(|| raw.index.to_string(), |i| i.0);
        let mut q = qa.question(&id, text);
        q.answerable = (!answers.is_empty()).then_some(true);
        q.answers = answers;
        q.topic_entities = topics;
        q.meta = meta_string(&meta);
        qa.emit(Record::Question(q))?;
        Ok(())
    })
}
