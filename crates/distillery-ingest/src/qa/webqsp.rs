//! WebQuestionsSP reader, in the form Think-on-Graph and Hydra release it (`data/WebQSP.json`: a
//! JSON array of `{QuestionId, RawQuestion, ProcessedQuestion, Parses [{ParseId,
//! TopicEntityMid, TopicEntityName, Sparql, InferentialChain, Answers [{AnswerType,
//! AnswerArgument, EntityName}], ...}], topic_entity {mid: name}}`), and the original release
//! (`WebQSP.train.json`: one object `{Version, FreebaseVersion, Questions [..]}` holding the same
//! question records without `topic_entity`).
//!
//! `question` = `RawQuestion`; `question_id` = `QuestionId` (else the record's index: in the
//! array, or in `Questions`); answers = the `EntityName` of each answer of the first parse, or
//! its `AnswerArgument` when the name is null or empty (a literal `Value` answer), in order,
//! exact duplicates dropped; the `AnswerArgument`s of its `Entity` answers go to
//! `meta.answer_mids`. `topic_entities` = the Freebase mids of `topic_entity` (when it names
//! none: the distinct `TopicEntityMid`s of the parses, their `TopicEntityName`s as the names),
//! then the Wikidata QIDs of `QID` (or `qid_topic_entity`), their names in
//! `meta.topic_entity_names` and `meta.qid_topic_entity_names`. Per parse, in order:
//! `meta.parse_ids`, `meta.sparql` and `meta.inferential_chains` (null where a parse has none);
//! the parses' other fields are not kept. `ProcessedQuestion` and any other field of the
//! question go to `meta` verbatim. No documents.
//!
//! A question without `RawQuestion` is quarantined as `missing_field`, one with a field of the
//! wrong type as `bad_value`; in the original form each question of `Questions` is quarantined
//! on its own (located at the file's object, its excerpt the question's).
//!
//! Memory: the ToG/Hydra array (or JSON lines) is read one question at a time. The original
//! form is one JSON value spread over many lines (told by a first line that is not a whole JSON
//! object): it is parsed whole, its questions held at once (the WebQSP files are some tens of
//! megabytes), and cannot be read in byte ranges. A syntax error or a cut anywhere in it costs
//! the whole file: one `bad_json` or `truncated_input` record, no questions.

use distillery_core::{Question, Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value};

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::common::{
    IdString, ItemError, Qa, bad_value, from_value, hydra_topic_entities, is_data_error,
    json_error_reason, json_kind, meta_string, scalar_string,
};
use crate::input::open_decompressed;
use crate::jsonstream::RawItem;
use crate::range::{HEAD_BYTES, ReadMode, Shape, is_json_lines, read_mode};
use crate::{IngestError, InputCtx};

const DATASET: &str = "webqsp";

#[derive(Deserialize)]
struct RawQuestion {
    #[serde(rename = "QuestionId", alias = "ID", alias = "id", default)]
    id: Option<IdString>,
    #[serde(rename = "RawQuestion", alias = "question")]
    question: String,
    #[serde(rename = "Parses", default)]
    parses: Option<Vec<RawParse>>,
    #[serde(default)]
    topic_entity: Option<Value>,
    #[serde(rename = "QID", default)]
    qid: Option<Value>,
    #[serde(default)]
    qid_topic_entity: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Deserialize)]
struct RawParse {
    #[serde(rename = "ParseId", default)]
    parse_id: Option<Value>,
    #[serde(rename = "TopicEntityMid", default)]
    topic_mid: Option<String>,
    #[serde(rename = "TopicEntityName", default)]
    topic_name: Option<String>,
    #[serde(rename = "Sparql", default)]
    sparql: Option<String>,
    #[serde(rename = "InferentialChain", default)]
    chain: Option<Value>,
    #[serde(rename = "Answers", default)]
    answers: Option<Vec<RawAnswer>>,
}

#[derive(Deserialize)]
struct RawAnswer {
    #[serde(rename = "AnswerType", default)]
    kind: Option<String>,
    #[serde(rename = "AnswerArgument", default)]
    argument: Option<Value>,
    #[serde(rename = "EntityName", default)]
    name: Option<String>,
}

/// The original release's file: the questions, the rest ignored.
#[derive(Deserialize)]
struct OriginalFile {
    #[serde(rename = "Questions")]
    questions: Vec<Value>,
}

/// Reads a WebQSP JSON file (the ToG/Hydra array, or the original `{Questions}` object).
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    if let Some(at) = multiline_object(ctx)? {
        return read_whole(&mut qa, at);
    }
    qa.for_each_json(|qa, v: Value, raw| match v {
        Value::Object(mut m) if m.contains_key("Questions") && !m.contains_key("RawQuestion") => {
            let questions = match m.remove("Questions") {
                Some(Value::Array(items)) => items,
                Some(other) => {
                    return Err(bad_value(format!(
                        "`Questions` is not a list: {}",
                        json_kind(&other)
                    )));
                }
                None => Vec::new(),
            };
            original(qa, questions, raw)
        }
        Value::Object(m) => {
            let r: RawQuestion = from_value(Value::Object(m), "question")?;
            let q = question(qa, r, raw.index)?;
            qa.emit(Record::Question(q))?;
            Ok(())
        }
        other => Err(bad_value(format!(
            "a WebQSP question is an object, not a {}",
            json_kind(&other)
        ))),
    })
}

/// Where the input's first value starts, as a raw element holding its first bytes, when the
/// input is one JSON object spread over lines (the original release, pretty-printed); `None`
/// for an array, JSON lines, or a byte range of JSON lines. The head is read on a counter of
/// its own, so the input's progress counts the bytes of the real read only.
fn multiline_object(ctx: &InputCtx<'_>) -> Result<Option<RawItem>, IngestError> {
    if let ReadMode::Lines(_) = read_mode(Shape::JsonQa, ctx)? {
        return Ok(None);
    }
    let mut head = Vec::new();
    let reader = open_decompressed(ctx.opener, &ctx.location, Arc::new(AtomicU64::new(0)))?.0;
    match reader.take(HEAD_BYTES).read_to_end(&mut head) {
        Ok(_) => {}
        // A cut or corrupt input: the element reader quarantines it where it is met.
        Err(e) if is_data_error(&e) => return Ok(None),
        Err(e) => return Err(IngestError::io(&ctx.location, e)),
    }
    let bom = if head.starts_with(b"\xef\xbb\xbf") {
        3
    } else {
        0
    };
    let Some(start) = head[bom..].iter().position(|b| !b.is_ascii_whitespace()) else {
        return Ok(None);
    };
    let start = bom + start;
    if head[start] != b'{' || is_json_lines(&head, HEAD_BYTES as usize) {
        return Ok(None);
    }
    let line = 1 + head[..start].iter().filter(|b| **b == b'\n').count() as u64;
    head.truncate(start + 512);
    Ok(Some(RawItem {
        bytes: head.split_off(start),
        offset: start as u64,
        line,
        index: 0,
    }))
}

/// Reads the original release's object whole; its questions one by one.
fn read_whole(qa: &mut Qa<'_, '_>, at: RawItem) -> Result<(), IngestError> {
    let reader = qa.ctx.open()?;
    let file: OriginalFile = match serde_json::from_reader(reader) {
        Ok(f) => f,
        Err(e) => {
            let reason = match e.classify() {
                serde_json::error::Category::Io => {
                    let kind = e.io_error_kind().unwrap_or(std::io::ErrorKind::Other);
                    if !is_data_error(&std::io::Error::from(kind)) {
                        return Err(IngestError::io(&qa.ctx.location, std::io::Error::from(e)));
                    }
                    "truncated_input"
                }
                serde_json::error::Category::Eof => "truncated_input",
                _ => json_error_reason(&e),
            };
            let q = qa.quarantine_at(
                &at,
                reason,
                format!("the WebQSP object cannot be read, no question of it was kept: {e}"),
            );
            return qa.quarantine(q);
        }
    };
    match original(qa, file.questions, &at) {
        Ok(()) => Ok(()),
        Err(ItemError::Fatal(e)) => Err(e),
        Err(ItemError::Bad { reason, detail }) => {
            let q = qa.quarantine_at(&at, reason, detail);
            qa.quarantine(q)
        }
    }
}

/// The questions of the original release's `Questions` list, each quarantined on its own.
fn original(qa: &mut Qa<'_, '_>, questions: Vec<Value>, raw: &RawItem) -> Result<(), ItemError> {
    for (i, v) in questions.into_iter().enumerate() {
        let excerpt = v.to_string();
        let built = from_value::<RawQuestion>(v, &format!("Questions[{i}]"))
            .and_then(|r| question(qa, r, i as u64));
        match built {
            Ok(q) => qa.emit(Record::Question(q))?,
            Err(ItemError::Bad { reason, detail }) => {
                let q = qa.quarantine_part(raw, i, reason, detail, excerpt.as_bytes());
                qa.quarantine(q)?;
            }
            Err(e @ ItemError::Fatal(_)) => return Err(e),
        }
    }
    Ok(())
}

/// One question; `index` is its position, its id when it has no `QuestionId`.
fn question(qa: &Qa<'_, '_>, r: RawQuestion, index: u64) -> Result<Question, ItemError> {
    let parses = r.parses.unwrap_or_default();
    let mut meta = r.extra;
    let mut answers: Vec<String> = Vec::new();
    let mut answer_mids: Vec<Value> = Vec::new();
    if let Some(first) = parses.first() {
        for (i, a) in first.answers.iter().flatten().enumerate() {
            let argument = match &a.argument {
                None | Some(Value::Null) => None,
                Some(v) => Some(scalar_string(v).ok_or_else(|| {
                    bad_value(format!(
                        "`Parses[0].Answers[{i}].AnswerArgument` is not a string: {}",
                        json_kind(v)
                    ))
                })?),
            };
            let name = a.name.clone().filter(|n| !n.is_empty());
            if let Some(text) = name.clone().or_else(|| argument.clone())
                && !answers.contains(&text)
            {
                answers.push(text);
            }
            let entity = match a.kind.as_deref() {
                Some(kind) => kind == "Entity",
                None => name.is_some(),
            };
            if entity
                && let Some(mid) = argument
                && !answer_mids.iter().any(|m| m.as_str() == Some(mid.as_str()))
            {
                answer_mids.push(Value::String(mid));
            }
        }
        meta.insert("answer_mids".to_string(), Value::Array(answer_mids));
    }
    // The parses' topic entities stand in for an absent or empty `topic_entity`.
    let names_none = match &r.topic_entity {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    };
    let mut from_parses = Map::new();
    if names_none {
        for p in &parses {
            if let Some(mid) = p.topic_mid.as_ref().filter(|m| !m.is_empty())
                && !from_parses.contains_key(mid)
            {
                let name = p.topic_name.clone().map_or(Value::Null, Value::String);
                from_parses.insert(mid.clone(), name);
            }
        }
    }
    let from_parses = Value::Object(from_parses);
    let mids = if names_none && from_parses.as_object().is_some_and(|m| !m.is_empty()) {
        Some(&from_parses)
    } else {
        r.topic_entity.as_ref()
    };
    let topics =
        hydra_topic_entities(mids, r.qid.as_ref(), r.qid_topic_entity.as_ref(), &mut meta)?;
    if !parses.is_empty() {
        let per_parse = |f: &dyn Fn(&RawParse) -> Value| -> Value {
            Value::Array(parses.iter().map(f).collect())
        };
        meta.insert(
            "parse_ids".to_string(),
            per_parse(&|p| p.parse_id.clone().unwrap_or(Value::Null)),
        );
        meta.insert(
            "sparql".to_string(),
            per_parse(&|p| p.sparql.clone().map_or(Value::Null, Value::String)),
        );
        meta.insert(
            "inferential_chains".to_string(),
            per_parse(&|p| p.chain.clone().unwrap_or(Value::Null)),
        );
    }
    let id = r.id.map_or_else(|| index.to_string(), |i| i.0);
    let mut q = qa.question(&id, r.question);
    q.answerable = (!answers.is_empty()).then_some(true);
    q.answers = answers;
    q.topic_entities = topics;
    q.meta = meta_string(&meta);
    Ok(q)
}
