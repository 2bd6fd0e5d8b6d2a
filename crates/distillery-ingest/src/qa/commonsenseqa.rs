//! CommonsenseQA reader, in its released layout (`train_rand_split.jsonl`: one object a line,
//! `{answerKey, id, question: {question_concept, choices: [{label, text}], stem}}`; the test
//! split has no `answerKey`).
//!
//! `question_id` = `id`; the question = `question.stem`; answers = the text of the choice
//! labelled `answerKey` (none without a key); `question_type` = `commonsense`; the choices,
//! the key and the concept go to `meta`. No documents: these questions need no retrieval
//! (HANRAG's "straightforward" class). A record without `id` or `question.stem` is
//! quarantined as `missing_field`; an `answerKey` naming no choice as `bad_value`.

use distillery_core::{Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::common::{IdString, Qa, bad_value, meta_string};
use crate::{IngestError, InputCtx};

const DATASET: &str = "commonsenseqa";

#[derive(Deserialize)]
struct Choice {
    label: String,
    text: String,
}

#[derive(Deserialize)]
struct Stem {
    stem: String,
    #[serde(default)]
    question_concept: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Raw {
    id: IdString,
    question: Stem,
    #[serde(rename = "answerKey", default)]
    answer_key: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a CommonsenseQA JSON-lines file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, _raw| {
        let answers = match &r.answer_key {
            Some(key) => {
                let choice = r.question.choices.iter().find(|c| &c.label == key);
                let choice = choice.ok_or_else(|| {
                    bad_value(format!("answerKey {key:?} names none of the choices"))
                })?;
                vec![choice.text.clone()]
            }
            None => Vec::new(),
        };
        let mut q = qa.question(&r.id.0, r.question.stem);
        q.answerable = (!answers.is_empty()).then_some(true);
        q.answers = answers;
        q.question_type = Some("commonsense".into());
        let mut meta = r.extra;
        let choices: Vec<Value> = r
            .question
            .choices
            .iter()
            .map(|c| json!({"label": c.label, "text": c.text}))
            .collect();
        meta.insert("choices".into(), Value::Array(choices));
        if let Some(k) = r.answer_key {
            meta.insert("answerKey".into(), Value::String(k));
        }
        if let Some(c) = r.question.question_concept {
            meta.insert("question_concept".into(), Value::String(c));
        }
        q.meta = meta_string(&meta);
        qa.emit(Record::Question(q))?;
        Ok(())
    })
}
