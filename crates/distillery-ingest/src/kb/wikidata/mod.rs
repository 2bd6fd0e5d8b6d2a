//! `wikidata`: the Wikidata JSON dump (`[`, one entity per line with a trailing comma, `]`;
//! gzip, bzip2, zstd or plain) into entities (labels, descriptions, aliases, the Wikipedia page of
//! each language from its `<lang>wiki` sitelink) and triples and literals (claims).
//!
//! Per entity, one [`Entity`] row per configured language (`languages`, default `["en"]`)
//! that has a label, a description or an alias. Per statement whose `mainsnak` has
//! `snaktype == "value"`, one [`Triple`] `id -property-> value`:
//!
//! | datavalue type | object | kind | lang / datatype |
//! |---|---|---|---|
//! | `wikibase-entityid` | `Q42` / `P31` / `L1` | `entity` | |
//! | `string` (also `external-id`, `url`, `commonsMedia`) | the string | `literal` | |
//! | `monolingualtext` | the text (only configured languages) | `literal` | lang |
//! | `quantity` | amount, unit appended unless `1` (`+5 Q11573`) | `literal` | `quantity` |
//! | `time` | the time string (`+1952-03-11T00:00:00Z`) | `literal` | `time` |
//! | `globecoordinate` | `lat,lon` | `literal` | |
//!
//! `entity` edges are written to `triples`, the others to `literals` ([`Record::edge`]).
//! A `P585` (point in time) or else `P580` (start time) qualifier becomes `Triple::time`.
//! `subject_name` is the entity's label in the first configured language.
//!
//! The dump is split by lines: each line is parsed on its own, so a broken line (bad JSON,
//! even one with unbalanced brackets) costs that entity alone (`bad_json`; an entity without
//! `id` is `missing_field`; an unreadable statement value `bad_value`, one record per entity).
//! Inputs not in that layout (a pretty-printed array or entity, a one-line array) are split
//! with [`crate::jsonstream::JsonItems`] instead, chosen from the first bytes. Memory is bounded
//! by one entity.
//!
//! A plain dump in the line layout can be read in byte ranges (the lines starting in the range,
//! positions by byte offset only: see [`crate::ByteRange`]); a compressed one is read whole,
//! decompressed on one thread and parsed on the others (`crate::parlines`), with the same
//! records in the same order.
//!
//! An entity is read by `typed` first: serde visitors over the line's bytes that build only
//! what is kept (the id; the label, description, aliases and `<lang>wiki` sitelink of the
//! configured languages; per statement the `mainsnak`'s `snaktype`, `property` and
//! `datavalue`, and the `P585`/`P580` qualifiers), with strings borrowed from the line where
//! they have no escapes. Every other part (other languages, sitelinks, references, other
//! qualifiers, statement ids) is checked as serde_json checks a `Value` (UTF-8, escapes,
//! numbers, nesting depth) and dropped without being built. Whatever that reader does not take
//! (malformed JSON, a statement that cannot be read, repeated keys, unusual types, old layouts)
//! is read again by `value`, the `Value` reader, whose records, errors and quarantine excerpts
//! are the ones written: both give the same records for every entity, which the tests check on
//! the fixtures, the shared sample and mutations of them. `RawValue` (serde_json's
//! `raw_value` feature, not enabled) is not used: it skips without checking UTF-8, lone
//! surrogates or number range, so it would let through lines that the `Value` reader refuses.

use std::io::BufRead;

use distillery_core::id::stable_id;
use distillery_core::spec::{FormatOptions, WikidataOptions};
use distillery_core::{Entity, QuarantineRecord, Record, RecordSink, Triple};

use super::{ByteLines, LineRef, too_large_line, truncated};
use crate::input::{Compression, open_decompressed};
use crate::jsonstream::{JsonItems, SplitError};
use crate::parlines::{self, ChunkSink, LineChunk};
use crate::range::{LineRange, ReadMode, Shape, read_mode};
use crate::{IngestError, InputCtx};

#[cfg(test)]
mod equivalence;
mod typed;
mod value;

const DATASET: &str = "wikidata";

/// Where an entity came from in the input (line and index are unknown in a byte range).
#[derive(Debug, Clone, Copy)]
struct Pos {
    line: Option<u64>,
    offset: u64,
    index: Option<u64>,
}

/// Reads a Wikidata JSON dump: the lines of its byte range when it has one (see
/// [`crate::ByteRange`]), else the whole file, a compressed one in the line layout
/// decompressed on one thread and parsed on the others.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let default = WikidataOptions::default();
    let opts = match ctx.options {
        FormatOptions::Wikidata(o) => o,
        _ => &default,
    };
    if let ReadMode::Lines(range) = read_mode(Shape::WikidataJson, ctx)? {
        let (reader, first) = LineRange::open(ctx, range)?;
        let lines = ByteLines::ranged(reader, first).limit(opts.max_line_bytes);
        return read_lines(ctx, opts, lines, sink);
    }
    let counter = ctx.bytes_read.clone();
    let (mut reader, compression) = open_decompressed(ctx.opener, &ctx.location, counter)?;
    let line_layout = match reader.fill_buf() {
        Ok(head) => is_line_layout(head),
        Err(e) => {
            sink.emit(truncated(DATASET, ctx, e, 0, Some(1))?)?;
            return Ok(());
        }
    };
    let parsers = parlines::parsers();
    if !line_layout {
        read_items(ctx, opts, reader, sink)
    } else if compression != Compression::None && parsers > 0 {
        read_parallel(ctx, opts, &mut *reader, parsers, sink)
    } else {
        read_lines(
            ctx,
            opts,
            ByteLines::new(reader).limit(opts.max_line_bytes),
            sink,
        )
    }
}

/// Whether the input starts like a dump (`[` alone on its line, then an entity on one line) or
/// a JSON-lines file, rather than a pretty-printed or one-line array or entity.
pub(crate) fn is_line_layout(head: &[u8]) -> bool {
    let mut rest = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    let mut seen_bracket = false;
    loop {
        let Some(first) = rest.iter().position(|b| !b.is_ascii_whitespace()) else {
            return true;
        };
        let after = &rest[first + 1..];
        let newline = memchr::memchr(b'\n', after);
        let line_end = newline.unwrap_or(after.len());
        let rest_blank = after[..line_end].iter().all(u8::is_ascii_whitespace);
        match rest[first] {
            b'[' if !seen_bracket && rest_blank => {
                seen_bracket = true;
                rest = &after[line_end..];
            }
            b'[' => return false,
            // An entity that opens and goes on on the same line; `{` alone on its line starts
            // a pretty-printed one.
            b'{' => return !(rest_blank && newline.is_some()),
            _ => return true,
        }
    }
}

/// Reads the dump line by line on this thread.
fn read_lines<R: BufRead>(
    ctx: &InputCtx<'_>,
    opts: &WikidataOptions,
    mut lines: ByteLines<R>,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let mut index = 0;
    loop {
        match lines.next_line() {
            Ok(Some(line)) => entity_line(ctx, opts, &line, &mut index, sink)?,
            Ok(None) => return Ok(()),
            Err(e) => {
                let (offset, number) = lines.position();
                sink.emit(truncated(DATASET, ctx, e, offset, number)?)?;
                return Ok(());
            }
        }
    }
}

/// Decompresses on one thread and parses chunks of lines on `parsers` others. A chunk numbers
/// its entities from 0; the indexes in its quarantine records are made absolute here.
fn read_parallel(
    ctx: &InputCtx<'_>,
    opts: &WikidataOptions,
    reader: &mut (dyn BufRead + Send),
    parsers: usize,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let shards = sink.shards();
    let parse = |chunk: LineChunk| {
        let mut out = ChunkSink::new(shards);
        let mut entities = 0;
        for line in chunk.lines() {
            entity_line(ctx, opts, &line, &mut entities, &mut out)?;
        }
        Ok::<_, IngestError>((out.finish()?, entities))
    };
    let mut base = 0;
    let cut = parlines::run(reader, parsers, opts.max_line_bytes, parse, |parsed| {
        let (mut parsed, entities) = parsed?;
        parsed.map_quarantine(|q| match q.record {
            Some(i) => q.at_record(base + i),
            None => q,
        });
        parsed.emit(sink)?;
        base += entities;
        Ok(())
    })?;
    if let Some(cut) = cut {
        sink.emit(truncated(
            DATASET,
            ctx,
            cut.error,
            cut.offset,
            Some(cut.line),
        )?)?;
    }
    Ok(())
}

/// One line of the dump: an entity (counted in `index`), or `[`, `]` or blank (skipped).
fn entity_line(
    ctx: &InputCtx<'_>,
    opts: &WikidataOptions,
    line: &LineRef<'_>,
    index: &mut u64,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    if line.oversized() {
        *index += 1;
        let q = too_large_line(DATASET, ctx, line);
        sink.emit(match (q, line.number) {
            (Record::Quarantine(q), Some(_)) => Record::Quarantine(q.at_record(*index - 1)),
            (q, _) => q,
        })?;
        return Ok(());
    }
    let bytes = line.bytes.trim_ascii();
    if bytes.is_empty() || bytes == b"[" || bytes == b"]" {
        return Ok(());
    }
    let bytes = bytes.strip_suffix(b",").unwrap_or(bytes);
    let lead = line.bytes.len() - line.bytes.trim_ascii_start().len();
    let pos = Pos {
        line: line.number,
        offset: line.offset + lead as u64,
        index: line.number.map(|_| *index),
    };
    *index += 1;
    entity(ctx, opts, bytes, pos, sink)
}

fn read_items(
    ctx: &InputCtx<'_>,
    opts: &WikidataOptions,
    reader: impl BufRead,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    // End of the last complete element: where a mid-stream failure is reported.
    let (mut end, mut end_line) = (0u64, 1u64);
    let mut items = JsonItems::new(reader);
    items.max_item = usize::try_from(opts.max_line_bytes).unwrap_or(usize::MAX);
    for item in items {
        match item {
            Ok(it) => {
                end = it.offset + it.bytes.len() as u64;
                end_line = it.line + memchr::memchr_iter(b'\n', &it.bytes).count() as u64;
                let pos = Pos {
                    line: Some(it.line),
                    offset: it.offset,
                    index: Some(it.index),
                };
                entity(ctx, opts, &it.bytes, pos, sink)?;
            }
            Err(SplitError::Io(e)) => {
                sink.emit(truncated(DATASET, ctx, e, end, Some(end_line))?)?;
                break;
            }
            Err(SplitError::TooLarge {
                offset,
                line,
                index,
                len,
                limit,
                excerpt,
            }) => {
                end = offset + len;
                sink.emit(Record::Quarantine(
                    QuarantineRecord::new(
                        DATASET,
                        &ctx.location,
                        "record_too_large",
                        format!(
                            "entity of {len} bytes is over the limit of {limit} bytes; it was \
                             read past, not parsed (raise the reader option `max_line_bytes` \
                             if it is a real entity)"
                        ),
                        &excerpt,
                    )
                    .at_byte(offset)
                    .at_line(line)
                    .at_record(index),
                ))?;
            }
            Err(SplitError::Truncated {
                offset,
                line,
                excerpt,
            }) => {
                sink.emit(Record::Quarantine(
                    QuarantineRecord::new(
                        DATASET,
                        &ctx.location,
                        "truncated_input",
                        "the input ends inside a JSON element",
                        &excerpt,
                    )
                    .at_byte(offset)
                    .at_line(line),
                ))?;
                break;
            }
        }
    }
    Ok(())
}

fn quarantine(
    ctx: &InputCtx<'_>,
    pos: Pos,
    reason: &str,
    detail: impl Into<String>,
    excerpt: &[u8],
) -> Record {
    let mut q = QuarantineRecord::new(DATASET, &ctx.location, reason, detail, excerpt);
    if let Some(line) = pos.line {
        q = q.at_line(line);
    }
    q = q.at_byte(pos.offset);
    if let Some(index) = pos.index {
        q = q.at_record(index);
    }
    Record::Quarantine(q)
}

/// Emits the entity rows and triples of one entity's JSON.
fn entity(
    ctx: &InputCtx<'_>,
    opts: &WikidataOptions,
    bytes: &[u8],
    pos: Pos,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    match entity_records(&ctx.source, opts, bytes, pos.line) {
        Err(p) => Ok(sink.emit(quarantine(ctx, pos, p.reason, p.detail, bytes))?),
        Ok((records, bad)) => {
            for r in records {
                sink.emit(r)?;
            }
            match bad {
                Some(p) => Ok(sink.emit(quarantine(ctx, pos, p.reason, p.detail, &p.excerpt))?),
                None => Ok(()),
            }
        }
    }
}

/// Why an entity (or some of its statements) was not read.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityProblem {
    /// `bad_json`, `missing_field` or `bad_value`.
    pub reason: &'static str,
    pub detail: String,
    /// The statement at fault (`bad_value`); empty otherwise.
    pub excerpt: Vec<u8>,
}

/// The entity rows and edges of one entity's JSON (today's layout, as the JSON dump and the
/// `<text>` of a `wikibase-item` page hold it), and the statements that could not be read;
/// or why the entity could not be read at all. `source` names the file; `line` the dump line.
/// Read by `typed`, or by `value` where the typed reader gives up (see the module docs).
pub fn entity_records(
    source: &str,
    opts: &WikidataOptions,
    bytes: &[u8],
    line: Option<u64>,
) -> Result<(Vec<Record>, Option<EntityProblem>), EntityProblem> {
    match typed::records(source, opts, bytes, line) {
        Some(records) => Ok((records, None)),
        None => value::records(source, opts, bytes, line),
    }
}

/// The sitelink key of a language's Wikipedia: `en` → `enwiki`, `zh-min-nan` → `zh_min_nanwiki`.
fn site_of(lang: &str) -> String {
    format!("{}wiki", lang.replace('-', "_"))
}

/// The entity row of one language, unless it has no label, description or alias.
fn entity_row(
    source: &str,
    id: &str,
    lang: &str,
    label: Option<String>,
    description: Option<String>,
    aliases: Vec<String>,
    wikipedia: impl FnOnce() -> Option<String>,
) -> Option<Record> {
    if label.is_none() && description.is_none() && aliases.is_empty() {
        return None;
    }
    Some(Record::Entity(Entity {
        id: stable_id(&[DATASET, "entity", id, lang]),
        dataset: DATASET.to_string(),
        source: source.to_string(),
        key: id.to_string(),
        lang: Some(lang.to_string()),
        label,
        description,
        aliases,
        wikipedia: wikipedia(),
    }))
}

/// The edge `id -predicate-> obj` of one statement.
fn triple(
    source: &str,
    id: &str,
    predicate: &str,
    obj: Object,
    subject_name: &Option<String>,
    time: Option<String>,
    line: Option<u64>,
) -> Record {
    let triple = Triple {
        id: stable_id(&[
            DATASET,
            source,
            id,
            predicate,
            &obj.value,
            obj.lang.as_deref().unwrap_or(""),
            obj.datatype.unwrap_or(""),
        ]),
        dataset: DATASET.to_string(),
        source: source.to_string(),
        subject: id.to_string(),
        predicate: predicate.to_string(),
        object: obj.value,
        object_kind: obj.kind.to_string(),
        lang: obj.lang,
        datatype: obj.datatype.map(str::to_string),
        subject_name: subject_name.clone(),
        object_name: None,
        time,
        line,
        ..Triple::default()
    };
    Record::edge(triple)
}

/// A triple's object.
#[derive(Debug, PartialEq)]
struct Object {
    value: String,
    kind: &'static str,
    lang: Option<String>,
    datatype: Option<&'static str>,
}

fn literal(value: String) -> Object {
    Object {
        value,
        kind: "literal",
        lang: None,
        datatype: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;
    use serde_json::{Value, json};

    fn langs(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn layout_is_detected_from_the_first_bytes() {
        assert!(is_line_layout(b"[\n{\"id\":\"Q1\"},\n"));
        assert!(is_line_layout(b"\xEF\xBB\xBF[\r\n{"));
        assert!(is_line_layout(b"{\"id\":\"Q1\"}\n{\"id\":\"Q2\"}\n"));
        assert!(!is_line_layout(b"[{\"id\":\"Q1\"},{\"id\":\"Q2\"}]"));
        assert!(!is_line_layout(b"[\n  {\n    \"id\": \"Q1\"\n  }\n]"));
        assert!(!is_line_layout(b"{\n  \"id\": \"Q1\"\n}\n"));
        assert!(is_line_layout(b"[\n"));
        assert!(is_line_layout(b"[\n{\"id\":\"Q1\""));
    }

    fn read_str(content: &str, languages: &[&str]) -> VecSink {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("wd.json");
        std::fs::write(&p, content).unwrap();
        let options = FormatOptions::Wikidata(WikidataOptions {
            languages: langs(languages),
            ..Default::default()
        });
        let ctx = InputCtx::local(p.to_str().unwrap(), &options);
        let mut sink = VecSink::default();
        read(&ctx, &mut sink).unwrap();
        sink
    }

    pub(super) const ENTITY: &str = r#"{"type":"item","id":"Q1","labels":{"en":{"language":"en","value":"One"},"de":{"language":"de","value":"Eins"}},"descriptions":{"fr":{"language":"fr","value":"un"}},"aliases":{"en":[{"language":"en","value":"1"},{"language":"en","value":"I"}]},"claims":{"P31":[{"mainsnak":{"snaktype":"value","property":"P31","datavalue":{"value":{"entity-type":"item","numeric-id":5,"id":"Q5"},"type":"wikibase-entityid"}},"qualifiers":{"P580":[{"snaktype":"value","property":"P580","datavalue":{"value":{"time":"+2000-01-01T00:00:00Z"},"type":"time"}}]}},{"mainsnak":{"snaktype":"novalue","property":"P31"}}],"P1448":[{"mainsnak":{"snaktype":"value","property":"P1448","datavalue":{"value":{"text":"Ein","language":"de"},"type":"monolingualtext"}}}]},"sitelinks":{}}"#;

    #[test]
    fn sitelinks_name_each_language_s_wikipedia_page() {
        let links = r#""sitelinks":{"enwiki":{"site":"enwiki","title":"One (number)","badges":[]},"frwiki":{"site":"frwiki","title":"Un","badges":["Q17437796"]},"enwikiquote":{"site":"enwikiquote","title":"One","badges":[]}}}"#;
        let entity = ENTITY.replace(r#""sitelinks":{}}"#, links);
        let s = read_str(&format!("[\n{entity},\n]\n"), &["en", "fr"]);
        let e = s.entities();
        assert_eq!(e[0].wikipedia.as_deref(), Some("One (number)"));
        assert_eq!(e[1].wikipedia.as_deref(), Some("Un"));
        // No sitelinks, and the `[]` old dumps write for an empty map.
        let old = ENTITY.replace(r#""sitelinks":{}}"#, r#""sitelinks":[]}"#);
        for text in [ENTITY, old.as_str()] {
            let s = read_str(&format!("[\n{text},\n]\n"), &["en"]);
            assert_eq!(s.entities()[0].wikipedia, None);
            assert!(s.quarantine().is_empty());
        }
    }

    #[test]
    fn entities_per_language_and_triples() {
        let s = read_str(&format!("[\n{ENTITY},\n]\n"), &["en", "fr", "es"]);
        let e = s.entities();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].lang.as_deref(), Some("en"));
        assert_eq!(e[0].label.as_deref(), Some("One"));
        assert_eq!(e[0].aliases, vec!["1", "I"]);
        assert_eq!(e[0].id, stable_id(&["wikidata", "entity", "Q1", "en"]));
        assert_eq!(e[1].lang.as_deref(), Some("fr"));
        assert_eq!(
            (e[1].label.as_deref(), e[1].description.as_deref()),
            (None, Some("un"))
        );
        let t = s.triples();
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].subject.as_str(), t[0].predicate.as_str()),
            ("Q1", "P31")
        );
        assert_eq!(
            (t[0].object.as_str(), t[0].object_kind.as_str()),
            ("Q5", "entity")
        );
        assert_eq!(t[0].subject_name.as_deref(), Some("One"));
        assert_eq!(t[0].time.as_deref(), Some("+2000-01-01T00:00:00Z"));
        assert_eq!(t[0].line, Some(2));
        // German keeps the monolingual text.
        let s = read_str(&format!("[\n{ENTITY},\n]\n"), &["de"]);
        assert_eq!(s.triples().len(), 1);
        assert_eq!(s.literals().len(), 1);
        assert_eq!(s.literals()[0].lang.as_deref(), Some("de"));
        assert_eq!(s.literals()[0].object_kind, "literal");
        assert_eq!(s.triples()[0].subject_name.as_deref(), Some("Eins"));
    }

    #[test]
    fn pretty_printed_arrays_are_split_as_json() {
        let pretty = serde_json::to_string_pretty(&vec![
            serde_json::from_str::<Value>(ENTITY).unwrap(),
            json!({"id":"Q2","labels":{"en":{"language":"en","value":"Two"}}}),
        ])
        .unwrap();
        let s = read_str(&pretty, &["en"]);
        assert_eq!(s.entities().len(), 2);
        assert_eq!(s.triples().len(), 1);
        assert!(s.quarantine().is_empty());
    }

    #[test]
    fn bad_values_are_quarantined_once_per_entity() {
        let line = r#"{"id":"Q3","claims":{"P1":[{"mainsnak":{"snaktype":"value","datavalue":{"type":"time","value":{}}}},{"mainsnak":{"snaktype":"value","datavalue":{"type":"nope","value":1}}},{"mainsnak":{"snaktype":"value","datavalue":{"type":"string","value":"ok"}}}]}}"#;
        let s = read_str(&format!("[\n{line}\n]"), &["en"]);
        assert_eq!(s.literals().len(), 1);
        assert!(s.triples().is_empty());
        let q = s.quarantine();
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].reason, "bad_value");
        assert!(
            q[0].detail.contains("unsupported datavalue type nope"),
            "{}",
            q[0].detail
        );
        assert_eq!(q[0].line, Some(2));
    }
}
