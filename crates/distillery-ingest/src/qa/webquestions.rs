//! WebQuestions reader, in the form Hydra's code reads it (a JSON array of `{url, question,
//! answers [..], topic_entity {mid: name}, QID {qid: name}}`).
//!
//! `question_id` = `id`/`question_id`, else the element index; answers = `answers` (a list of
//! strings, or one string); `topic_entities` = the Freebase mids of `topic_entity`, then the
//! Wikidata QIDs of `QID` (or `qid_topic_entity`), their names in `meta.topic_entity_names` and
//! `meta.qid_topic_entity_names`. `url` and any other field go to `meta` verbatim. No
//! documents. A record without `question` is quarantined as `missing_field`.

use distillery_core::{Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{HydraTopics, IdString, Qa, answers_from, meta_string};
use crate::{IngestError, InputCtx};

const DATASET: &str = "webquestions";

#[derive(Deserialize)]
struct Raw {
    #[serde(alias = "question_id", default)]
    id: Option<IdString>,
    question: String,
    #[serde(default)]
    answers: Option<Value>,
    #[serde(flatten)]
    topics: HydraTopics,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a WebQuestions (Hydra form) JSON file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let answers = answers_from(r.answers.as_ref(), "answers")?;
        let mut meta = r.extra;
        let topics = r.topics.keys(&mut meta)?;
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
