//! Natural Questions (open) reader, in its released layout (`NQ-open.train.jsonl`,
//! `NQ-open.dev.jsonl`: one `{"question": ..., "answer": [...]}` a line).
//!
//! `question_id` = `id` when a copy has one, else the line's element index; answers =
//! `answer` (a list of strings, or one string); `question_type` = `single-hop`; other fields
//! go to `meta`. No documents: the open setting retrieves from a corpus (HANRAG's
//! "single-step" class). A record without `question` is quarantined as `missing_field`.

use distillery_core::{Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{IdString, Qa, answers_from, meta_string};
use crate::{IngestError, InputCtx};

const DATASET: &str = "nq";

#[derive(Deserialize)]
struct Raw {
    #[serde(alias = "question_id", default)]
    id: Option<IdString>,
    question: String,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads an NQ-open JSON-lines file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let answers = answers_from(r.answer.as_ref(), "answer")?;
        let id = r.id.map_or_else(|| raw.index.to_string(), |i| i.0);
        let mut q = qa.question(&id, r.question);
        q.answerable = (!answers.is_empty()).then_some(true);
        q.answers = answers;
        q.question_type = Some("single-hop".into());
        q.meta = meta_string(&r.extra);
        qa.emit(Record::Question(q))?;
        Ok(())
    })
}
