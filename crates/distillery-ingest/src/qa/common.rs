//! Plumbing shared by the QA readers.
//!
//! - [`Qa`] holds what every reader needs while it reads one file: the context, the sink, the
//!   split, and the set of ids already written, so a context paragraph (or table) shared by many
//!   questions is written once per file.
//! - [`Qa::for_each_json`] streams the elements of a JSON array or JSON-lines file with
//!   [`JsonItems`] and turns every failure of one element into a quarantine record: invalid
//!   UTF-8 (`invalid_utf8`), a syntax error (`bad_json`), a missing required field
//!   (`missing_field`), a value of the wrong type (`bad_value`), an element over the
//!   `max_record_bytes` option (`record_too_large`: read past without being held), the input
//!   ending inside an element or a compressed stream cut short (`truncated_input`). Reading goes on with the next
//!   element; records read before a cut are kept.
//! - Builders for documents (sentences given by the dataset, or found by
//!   [`crate::text::sentence_spans`]), questions and answers.
//!
//! Memory: one JSON element at a time, plus the set of written ids: 16 bytes (a `u128` parsed
//! from the 32-hex-digit stable id) plus hash-table overhead per distinct context paragraph or
//! table of the file, e.g. about 20 MB for the ~900k distinct paragraphs of HotpotQA train.

use std::collections::HashSet;
use std::io::BufRead;

use distillery_core::id::stable_id;
use distillery_core::{
    Document, Paragraph, QuarantineRecord, Question, Record, RecordSink, Sentence, char_len,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::jsonstream::{JsonItems, RawItem, SplitError};
use crate::range::{LineRange, ReadMode, Shape, read_mode};
use crate::text::sentence_spans;
use crate::{IngestError, InputCtx};

/// Hex digits of a context document's id in its uri's fragment (48 bits: two paragraphs under
/// one title get one fragment with odds of about one in 2^48 a pair).
pub const URI_ID_HEX: usize = 12;

/// Why one element (or one question inside an element) was not turned into records.
#[derive(Debug)]
pub(crate) enum ItemError {
    /// The element is bad: quarantine it with this reason and go on.
    Bad {
        reason: &'static str,
        detail: String,
    },
    /// The input cannot be read any further or the sink is gone: stop.
    Fatal(IngestError),
}

impl From<IngestError> for ItemError {
    fn from(e: IngestError) -> Self {
        ItemError::Fatal(e)
    }
}

impl From<distillery_core::SinkError> for ItemError {
    fn from(e: distillery_core::SinkError) -> Self {
        ItemError::Fatal(e.into())
    }
}

/// A `bad_value` item error.
pub(crate) fn bad_value(detail: impl Into<String>) -> ItemError {
    ItemError::Bad {
        reason: "bad_value",
        detail: detail.into(),
    }
}

/// The quarantine reason of a serde_json error: syntax and premature end are `bad_json`, a
/// missing field is `missing_field`, any other data error (wrong type, wrong length, number out
/// of range) is `bad_value`.
pub(crate) fn json_error_reason(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Data => {
            if e.to_string().starts_with("missing field") {
                "missing_field"
            } else {
                "bad_value"
            }
        }
        _ => "bad_json",
    }
}

/// Deserializes a part of an element (one question of a TAT-QA context), classifying errors.
pub(crate) fn from_value<T: DeserializeOwned>(v: Value, what: &str) -> Result<T, ItemError> {
    serde_json::from_value(v).map_err(|e| ItemError::Bad {
        reason: json_error_reason(&e),
        detail: format!("{what}: {e}"),
    })
}

/// Whether an IO error met while reading a (possibly compressed) input means the data itself is
/// cut or corrupt (quarantined as `truncated_input`), rather than a transient failure of the
/// storage (returned as an error so the executor can retry).
pub(crate) use crate::input::is_data_error;

/// How the sentences of a context paragraph are joined into its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Join {
    /// Concatenate exactly as given (HotpotQA: sentences carry their own leading spaces).
    Exact,
    /// Put one space between two sentences unless one of them already has whitespace at the
    /// joint (2WikiMultihopQA strips its sentences).
    SpaceIfNeeded,
}

/// One file's reading state.
pub(crate) struct Qa<'c, 's> {
    pub ctx: &'c InputCtx<'c>,
    pub dataset: &'static str,
    pub split: String,
    sink: &'s mut dyn RecordSink,
    /// Ids of the documents and tables written so far (see the module docs for the bound).
    written: HashSet<u128>,
    /// Whether quarantine records get line numbers and element indexes (not in a byte range,
    /// which cannot know them: see [`crate::ByteRange`]).
    numbered: bool,
}

impl<'c, 's> Qa<'c, 's> {
    pub fn new(ctx: &'c InputCtx<'c>, dataset: &'static str, sink: &'s mut dyn RecordSink) -> Self {
        Qa {
            ctx,
            dataset,
            split: ctx.split(),
            sink,
            written: HashSet::new(),
            numbered: true,
        }
    }

    /// Emits a record.
    pub fn emit(&mut self, r: Record) -> Result<(), IngestError> {
        self.sink.emit(r)?;
        Ok(())
    }

    /// Whether elements carry their line numbers: not under a byte range, whose lines count
    /// from the range's start (see [`crate::ByteRange`]).
    pub fn numbered(&self) -> bool {
        self.numbered
    }

    /// Emits a record unless a record with its id was already written from this file; returns
    /// whether it was written.
    pub fn emit_once(&mut self, r: Record) -> Result<bool, IngestError> {
        let key = id_key(r.id());
        if !self.written.insert(key) {
            return Ok(false);
        }
        self.emit(r)?;
        Ok(true)
    }

    /// A quarantine record of this dataset about this input.
    pub fn quarantine_record(
        &self,
        reason: &str,
        detail: impl Into<String>,
        excerpt: &[u8],
    ) -> QuarantineRecord {
        QuarantineRecord::new(self.dataset, &self.ctx.location, reason, detail, excerpt)
    }

    /// A quarantine record located at a raw element.
    pub fn quarantine_at(
        &self,
        raw: &RawItem,
        reason: &str,
        detail: impl Into<String>,
    ) -> QuarantineRecord {
        let q = self.quarantine_record(reason, detail, &raw.bytes);
        self.locate(q, raw)
    }

    /// Places a quarantine record at a raw element: its byte offset, and its line and index
    /// when they are known.
    fn locate(&self, q: QuarantineRecord, raw: &RawItem) -> QuarantineRecord {
        let q = q.at_byte(raw.offset);
        match self.numbered {
            true => q.at_line(raw.line).at_record(raw.index),
            false => q,
        }
    }

    /// A quarantine record for one part of a raw element (the `part`-th question of a TAT-QA
    /// context): located at the element, excerpt of the part, and an id that also covers the
    /// part so two bad parts of one element stay two records.
    pub fn quarantine_part(
        &self,
        raw: &RawItem,
        part: usize,
        reason: &str,
        detail: impl Into<String>,
        excerpt: &[u8],
    ) -> QuarantineRecord {
        let mut q = self.locate(self.quarantine_record(reason, detail, excerpt), raw);
        q.id = stable_id(&[&q.id, "part", &part.to_string()]);
        q
    }

    /// Emits a quarantine record.
    pub fn quarantine(&mut self, q: QuarantineRecord) -> Result<(), IngestError> {
        self.emit(Record::Quarantine(q))
    }

    /// A question with the common fields filled in; `meta` is `{}`.
    pub fn question(&self, question_id: &str, text: String) -> Question {
        Question {
            id: stable_id(&[self.dataset, &self.ctx.source, question_id]),
            dataset: self.dataset.to_string(),
            source: self.ctx.source.clone(),
            split: self.split.clone(),
            question_id: question_id.to_string(),
            question: text,
            meta: "{}".to_string(),
            ..Default::default()
        }
    }

    /// A context document: one paragraph covering `text`, the given sentence spans (char
    /// offsets) in it. Its id depends on the dataset, title and text only, so the same
    /// paragraph in many records is one document. Its uri is `<dataset>:<title>#<the first
    /// [`URI_ID_HEX`] hex digits of its id>`: a title may name several paragraphs (MuSiQue
    /// gives paragraphs of one article under its title: 55 of the 1,246 titles of the shared
    /// sample have two or more), and the HSEQ canonicaliser κ tells places apart by uri and
    /// offsets.
    pub fn document(&self, title: &str, text: String, sentences: &[(u32, u32)]) -> Document {
        let id = stable_id(&[self.dataset, "doc", title, &text]);
        let uri = format!("{}:{}#{}", self.dataset, title, &id[..URI_ID_HEX]);
        Document {
            id,
            dataset: self.dataset.to_string(),
            source: self.ctx.source.clone(),
            uri,
            title: title.to_string(),
            paragraphs: vec![Paragraph {
                start: 0,
                end: char_len(&text),
                section: -1,
            }],
            sentences: sentences
                .iter()
                .map(|&(start, end)| Sentence {
                    start,
                    end,
                    paragraph: 0,
                })
                .collect(),
            text,
            ..Default::default()
        }
    }

    /// A context document from a text, sentences found by [`sentence_spans`].
    pub fn document_from_text(&self, title: &str, text: String) -> Document {
        let spans = sentence_spans(&text);
        self.document(title, text, &spans)
    }

    /// A context document from the dataset's own sentence segmentation: one sentence per given
    /// sentence (even an empty one), offsets exact.
    pub fn document_from_sentences(
        &self,
        title: &str,
        sentences: &[String],
        join: Join,
    ) -> Document {
        let (text, spans) = join_sentences(sentences, join);
        self.document(title, text, &spans)
    }

    /// Streams the elements of the input, deserializes each as `T` and hands it to `f`; every
    /// element that fails (here or in `f`) becomes one quarantine record.
    ///
    /// Under a byte range, a JSON-lines file gives the elements of the lines starting in the
    /// range, located by byte offset only (see [`crate::ByteRange`]). Documents and tables are
    /// written once per range then: one shared by questions of two ranges is written by both,
    /// with the same id and content.
    pub fn for_each_json<T, F>(&mut self, mut f: F) -> Result<(), IngestError>
    where
        T: DeserializeOwned,
        F: FnMut(&mut Self, T, &RawItem) -> Result<(), ItemError>,
    {
        let ctx = self.ctx;
        let mut items = match read_mode(Shape::JsonQa, ctx)? {
            ReadMode::Lines(range) => {
                let (reader, first) = LineRange::open(ctx, range)?;
                self.numbered = false;
                JsonItems::starting_at(Box::new(reader) as Box<dyn BufRead + '_>, first)
            }
            _ => JsonItems::new(ctx.open()? as Box<dyn BufRead + '_>),
        };
        let (limit, option) = ctx.options.record_limit();
        items.max_item = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut end = 0u64;
        for item in items {
            let raw = match item {
                Ok(raw) => raw,
                Err(SplitError::Truncated {
                    offset,
                    line,
                    excerpt,
                }) => {
                    let q = self
                        .quarantine_record(
                            "truncated_input",
                            "the input ends inside this element; everything before it was kept",
                            &excerpt,
                        )
                        .at_byte(offset);
                    let q = if self.numbered { q.at_line(line) } else { q };
                    self.quarantine(q)?;
                    break;
                }
                Err(SplitError::Io(e)) if is_data_error(&e) => {
                    let q = self
                        .quarantine_record(
                            "truncated_input",
                            format!(
                                "reading stopped after byte {end} of the decompressed input: {e}; \
                                 everything before it was kept"
                            ),
                            b"",
                        )
                        .at_byte(end);
                    self.quarantine(q)?;
                    break;
                }
                Err(SplitError::Io(e)) => return Err(IngestError::io(&self.ctx.location, e)),
                Err(SplitError::TooLarge {
                    offset,
                    line,
                    index,
                    len,
                    limit,
                    excerpt,
                }) => {
                    end = offset + len;
                    let q = self
                        .quarantine_record(
                            "record_too_large",
                            format!(
                                "record of {len} bytes is over the limit of {limit} bytes; it \
                                 was read past, not parsed (raise the reader option `{option}` \
                                 if it is a real record; else a bracket or quote may be \
                                 unbalanced)"
                            ),
                            &excerpt,
                        )
                        .at_byte(offset);
                    let q = match self.numbered {
                        true => q.at_line(line).at_record(index),
                        false => q,
                    };
                    self.quarantine(q)?;
                    continue;
                }
            };
            end = raw.offset + raw.bytes.len() as u64;
            if let Err(e) = std::str::from_utf8(&raw.bytes) {
                let q = self.quarantine_at(
                    &raw,
                    "invalid_utf8",
                    format!("invalid UTF-8 at byte {} of the element", e.valid_up_to()),
                );
                self.quarantine(q)?;
                continue;
            }
            let parsed = match serde_json::from_slice::<T>(&raw.bytes) {
                Ok(v) => v,
                Err(e) => {
                    let q = self.quarantine_at(&raw, json_error_reason(&e), e.to_string());
                    self.quarantine(q)?;
                    continue;
                }
            };
            match f(self, parsed, &raw) {
                Ok(()) => {}
                Err(ItemError::Bad { reason, detail }) => {
                    let q = self.quarantine_at(&raw, reason, detail);
                    self.quarantine(q)?;
                }
                Err(ItemError::Fatal(e)) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The set key of a stable id: its 128 bits (ids are 32 hex digits); any other string is
/// hashed into the same space.
fn id_key(id: &str) -> u128 {
    match u128::from_str_radix(id, 16) {
        Ok(v) if id.len() == 32 => v,
        _ => u128::from_str_radix(&stable_id(&[id]), 16).unwrap_or_default(),
    }
}

/// Joins sentences into a text and returns the char span of each.
pub(crate) fn join_sentences(sentences: &[String], join: Join) -> (String, Vec<(u32, u32)>) {
    let mut text = String::with_capacity(sentences.iter().map(|s| s.len() + 1).sum());
    let mut spans = Vec::with_capacity(sentences.len());
    let mut pos = 0u32;
    for s in sentences {
        if join == Join::SpaceIfNeeded
            && !s.is_empty()
            && !text.is_empty()
            && !text.ends_with(char::is_whitespace)
            && !s.starts_with(char::is_whitespace)
        {
            text.push(' ');
            pos += 1;
        }
        let len = char_len(s);
        text.push_str(s);
        spans.push((pos, pos + len));
        pos += len;
    }
    (text, spans)
}

/// A JSON scalar as text: strings as they are, numbers as JSON writes them (`1.5`, `7`),
/// booleans as `true`/`false`; `None` for null, arrays and objects.
pub(crate) fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Gold answers from a JSON answer field: a string or number is one answer, a list one answer
/// per element, null none. Exact duplicates are dropped, order kept (canonical first).
pub(crate) fn answers_from(v: Option<&Value>, field: &str) -> Result<Vec<String>, ItemError> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: String| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    match v {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match scalar_string(item) {
                    Some(s) => push(s),
                    None => {
                        return Err(bad_value(format!(
                            "`{field}[{i}]` is not a string or number: {}",
                            excerpt_of(item)
                        )));
                    }
                }
            }
        }
        Some(other) => match scalar_string(other) {
            Some(s) => push(s),
            None => {
                return Err(bad_value(format!(
                    "`{field}` is not a string, number or list: {}",
                    excerpt_of(other)
                )));
            }
        },
    }
    Ok(out)
}

/// Adds aliases after the answers, dropping exact duplicates.
pub(crate) fn push_aliases(answers: &mut Vec<String>, aliases: Vec<String>) {
    for a in aliases {
        if !answers.contains(&a) {
            answers.push(a);
        }
    }
}

/// A JSON object as a string (the `meta` column), `{}` when empty.
pub(crate) fn meta_string(meta: &Map<String, Value>) -> String {
    serde_json::to_string(meta).unwrap_or_else(|_| "{}".to_string())
}

/// A short JSON rendering of a value for error details.
pub(crate) fn excerpt_of(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 120 {
        return s;
    }
    let mut cut = 120;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &s[..cut])
}

/// Topic entity mids, and their names when the record gives them.
pub(crate) type TopicEntities = (Vec<String>, Option<Map<String, Value>>);

/// Topic entities of a KBQA record (CWQ, SimpleQuestions in the Think-on-Graph form): an object
/// `{mid: name}` gives the mids, in order, and the names; a list of mids or a single mid gives
/// the mids alone.
pub(crate) fn topic_entities(v: Option<&Value>) -> Result<TopicEntities, ItemError> {
    entity_keys(v, "topic_entity", "mid")
}

/// The entity ids of a field `field` of a record: the keys of an object `{id: name}`, in order,
/// and the object itself (the names); the ids alone from a list of ids or a single id; nothing
/// from null or an absent field. `kind` names the ids in errors (`mid`, `qid`).
pub(crate) fn entity_keys(
    v: Option<&Value>,
    field: &str,
    kind: &str,
) -> Result<TopicEntities, ItemError> {
    match v {
        None | Some(Value::Null) => Ok((Vec::new(), None)),
        Some(Value::Object(m)) => Ok((m.keys().cloned().collect(), Some(m.clone()))),
        Some(Value::String(s)) => Ok((vec![s.clone()], None)),
        Some(Value::Array(items)) => {
            let mut ids = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) => ids.push(s.clone()),
                    other => {
                        return Err(bad_value(format!(
                            "`{field}[{i}]` is not a string: {}",
                            excerpt_of(other)
                        )));
                    }
                }
            }
            Ok((ids, None))
        }
        Some(other) => Err(bad_value(format!(
            "`{field}` is not an object of {kind} -> name: {}",
            excerpt_of(other)
        ))),
    }
}

/// The topic-entity fields of a record of Hydra's benchmark set, read with
/// `#[serde(flatten)]` ahead of a reader's flattened `extra` map (a flattened struct takes its
/// keys, so `extra` does not see them).
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct HydraTopics {
    #[serde(default)]
    pub topic_entity: Option<Value>,
    #[serde(rename = "QID", default)]
    pub qid: Option<Value>,
    #[serde(default)]
    pub qid_topic_entity: Option<Value>,
}

impl HydraTopics {
    /// [`hydra_topic_entities`] of these fields.
    pub fn keys(&self, meta: &mut Map<String, Value>) -> Result<Vec<String>, ItemError> {
        hydra_topic_entities(
            self.topic_entity.as_ref(),
            self.qid.as_ref(),
            self.qid_topic_entity.as_ref(),
            meta,
        )
    }
}

/// The topic entities of a record of Hydra's benchmark set (WebQuestions, WebQSP, QALD-10,
/// AdvHotpotQA, Zero-Shot RE), which names them in two knowledge graphs: the Freebase mids of
/// `topic_entity` (`{mid: name}`), then the Wikidata QIDs of `QID` and of `qid_topic_entity`
/// (`{qid: name}`, the name CWQ's ToG copy uses), one list, mids first, exact duplicates
/// dropped. The names go to `meta`: `topic_entity_names` (mid -> name) and
/// `qid_topic_entity_names` (qid -> name), each present when its field is an object (even an
/// empty one).
pub(crate) fn hydra_topic_entities(
    mids: Option<&Value>,
    qid: Option<&Value>,
    qid_topic_entity: Option<&Value>,
    meta: &mut Map<String, Value>,
) -> Result<Vec<String>, ItemError> {
    let (mut ids, mid_names) = entity_keys(mids, "topic_entity", "mid")?;
    if let Some(names) = mid_names {
        meta.insert("topic_entity_names".to_string(), Value::Object(names));
    }
    let mut qid_names: Option<Map<String, Value>> = None;
    for (v, field) in [(qid, "QID"), (qid_topic_entity, "qid_topic_entity")] {
        let (qids, names) = entity_keys(v, field, "qid")?;
        for q in qids {
            if !ids.contains(&q) {
                ids.push(q);
            }
        }
        if let Some(names) = names {
            let all = qid_names.get_or_insert_with(Map::new);
            for (k, name) in names {
                all.entry(k).or_insert(name);
            }
        }
    }
    if let Some(names) = qid_names {
        meta.insert("qid_topic_entity_names".to_string(), Value::Object(names));
    }
    Ok(ids)
}

/// A dataset id that may be written as a string or a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdString(pub String);

impl<'de> serde::Deserialize<'de> for IdString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        match v {
            Value::String(s) => Ok(IdString(s)),
            Value::Number(n) => Ok(IdString(n.to_string())),
            other => Err(serde::de::Error::custom(format!(
                "invalid type: {}, expected a string or number id",
                json_kind(&other)
            ))),
        }
    }
}

/// The JSON type name of a value.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::char_slice;

    #[test]
    fn joins_exactly_or_with_spaces() {
        let s = vec![
            "A b.".to_string(),
            " C é.".to_string(),
            "".to_string(),
            "D".to_string(),
        ];
        let (t, spans) = join_sentences(&s, Join::Exact);
        assert_eq!(t, "A b. C é.D");
        assert_eq!(spans, vec![(0, 4), (4, 9), (9, 9), (9, 10)]);
        for (i, &(a, b)) in spans.iter().enumerate() {
            assert_eq!(char_slice(&t, a, b), Some(s[i].as_str()));
        }
        let (t, spans) = join_sentences(&s, Join::SpaceIfNeeded);
        assert_eq!(t, "A b. C é. D");
        assert_eq!(spans, vec![(0, 4), (4, 9), (9, 9), (10, 11)]);
        for (i, &(a, b)) in spans.iter().enumerate() {
            assert_eq!(char_slice(&t, a, b), Some(s[i].as_str()));
        }
    }

    #[test]
    fn answers_normalise_scalars_and_lists() {
        let v: Value = serde_json::json!([1.5, "x", 7, "x", true]);
        assert_eq!(
            answers_from(Some(&v), "answer").unwrap(),
            vec!["1.5", "x", "7", "true"]
        );
        assert_eq!(
            answers_from(Some(&serde_json::json!(2.1)), "a").unwrap(),
            vec!["2.1"]
        );
        assert!(answers_from(None, "a").unwrap().is_empty());
        assert!(answers_from(Some(&Value::Null), "a").unwrap().is_empty());
        assert!(answers_from(Some(&serde_json::json!({"a": 1})), "a").is_err());
        assert!(answers_from(Some(&serde_json::json!([[1]])), "a").is_err());
    }

    #[test]
    fn json_errors_are_classified() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            a: String,
        }
        let r = |s: &str| json_error_reason(&serde_json::from_str::<T>(s).unwrap_err());
        assert_eq!(r("{\"b\": 1}"), "missing_field");
        assert_eq!(r("{\"a\": 1}"), "bad_value");
        assert_eq!(r("{\"a\": "), "bad_json");
        assert_eq!(r("{\"a\" 1}"), "bad_json");
        assert_eq!(r("[1]"), "bad_value");
    }

    #[test]
    fn ids_key_compactly() {
        let id = stable_id(&["x"]);
        assert_eq!(id_key(&id), u128::from_str_radix(&id, 16).unwrap());
        assert_ne!(id_key("not-hex"), id_key("not-hex2"));
    }
}
