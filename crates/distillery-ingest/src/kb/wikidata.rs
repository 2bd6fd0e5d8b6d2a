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

use std::io::BufRead;

use distillery_core::id::stable_id;
use distillery_core::spec::{FormatOptions, WikidataOptions};
use distillery_core::{Entity, QuarantineRecord, Record, RecordSink, Triple, VecSink};
use serde::Deserialize;
use serde_json::Value;

use super::{ByteLines, LineRef, too_large_line, truncated};
use crate::input::{Compression, open_decompressed};
use crate::jsonstream::{JsonItems, SplitError};
use crate::parlines::{self, LineChunk, Parsed};
use crate::range::{LineRange, ReadMode, Shape, read_mode};
use crate::{IngestError, InputCtx};

const DATASET: &str = "wikidata";

/// The parts of an entity that are read; everything else is skipped unparsed. Fields are
/// `Value`s because old dumps write empty maps as `[]`.
#[derive(Debug, Deserialize)]
struct RawEntity {
    #[serde(default)]
    id: Value,
    #[serde(default)]
    labels: Value,
    #[serde(default)]
    descriptions: Value,
    #[serde(default)]
    aliases: Value,
    #[serde(default)]
    claims: Value,
    /// MediaInfo entities (Commons) name their claims `statements`.
    #[serde(default)]
    statements: Value,
    /// `{site: {site, title, badges}}`: the `<lang>wiki` titles become [`Entity::wikipedia`].
    /// Old dumps write an empty map as `[]`.
    #[serde(default, deserialize_with = "sitelinks")]
    sitelinks: std::collections::HashMap<String, SiteTitle>,
}

#[derive(Debug, Deserialize)]
struct SiteTitle {
    title: String,
}

/// A sitelinks map, or the `[]` old dumps write for an empty one.
fn sitelinks<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<std::collections::HashMap<String, SiteTitle>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Links {
        Map(std::collections::HashMap<String, SiteTitle>),
        Empty([(); 0]),
    }
    Ok(match Links::deserialize(d)? {
        Links::Map(m) => m,
        Links::Empty(_) => Default::default(),
    })
}

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
        let mut out = VecSink::default();
        let mut entities = 0;
        for line in chunk.lines() {
            entity_line(ctx, opts, &line, &mut entities, &mut out)?;
        }
        Ok::<_, IngestError>((Parsed::new(out.records, shards)?, entities))
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
pub fn entity_records(
    source: &str,
    opts: &WikidataOptions,
    bytes: &[u8],
    line: Option<u64>,
) -> Result<(Vec<Record>, Option<EntityProblem>), EntityProblem> {
    let problem = |reason, detail: String| EntityProblem {
        reason,
        detail,
        excerpt: Vec::new(),
    };
    let raw: RawEntity =
        serde_json::from_slice(bytes).map_err(|e| problem("bad_json", e.to_string()))?;
    let Some(id) = raw.id.as_str().filter(|s| !s.is_empty()) else {
        return Err(problem("missing_field", "entity without an \"id\"".into()));
    };
    let mut out = Vec::new();
    for lang in &opts.languages {
        let label = lang_value(&raw.labels, lang);
        let description = lang_value(&raw.descriptions, lang);
        let aliases: Vec<String> = raw
            .aliases
            .get(lang)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.get("value").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if label.is_none() && description.is_none() && aliases.is_empty() {
            continue;
        }
        out.push(Record::Entity(Entity {
            id: stable_id(&[DATASET, "entity", id, lang]),
            dataset: DATASET.to_string(),
            source: source.to_string(),
            key: id.to_string(),
            lang: Some(lang.clone()),
            label,
            description,
            aliases,
            wikipedia: raw
                .sitelinks
                .get(&format!("{}wiki", lang.replace('-', "_")))
                .map(|l| l.title.clone()),
        }));
    }
    let subject_name = opts
        .languages
        .first()
        .and_then(|l| lang_value(&raw.labels, l));
    let claims = if raw.claims.is_object() {
        &raw.claims
    } else {
        &raw.statements
    };
    let mut bad: Vec<String> = Vec::new();
    let mut bad_excerpt: Vec<u8> = Vec::new();
    for (prop, statements) in claims.as_object().into_iter().flatten() {
        for st in statements.as_array().into_iter().flatten() {
            let Some(snak) = st.get("mainsnak") else {
                bad.push(format!("{prop}: statement without mainsnak"));
                continue;
            };
            if snak.get("snaktype").and_then(Value::as_str) != Some("value") {
                continue;
            }
            let predicate = snak.get("property").and_then(Value::as_str).unwrap_or(prop);
            let obj = match object_of(snak.get("datavalue"), &opts.languages) {
                Ok(Some(o)) => o,
                Ok(None) => continue,
                Err(msg) => {
                    if bad.is_empty() {
                        bad_excerpt = serde_json::to_vec(snak).unwrap_or_default();
                    }
                    bad.push(format!("{predicate}: {msg}"));
                    continue;
                }
            };
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
                time: qualifier_time(st),
                line,
                ..Triple::default()
            };
            out.push(Record::edge(triple));
        }
    }
    let bad = (!bad.is_empty()).then(|| EntityProblem {
        reason: "bad_value",
        detail: format!("{id}: {}", bad.join("; ")),
        excerpt: bad_excerpt,
    });
    Ok((out, bad))
}

/// `map[lang].value` of a labels/descriptions map.
fn lang_value(map: &Value, lang: &str) -> Option<String> {
    map.get(lang)?.get("value")?.as_str().map(str::to_string)
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

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("value without a string \"{key}\""))
}

fn number_field(v: &Value, key: &str) -> Result<String, String> {
    match v.get(key) {
        Some(Value::Number(n)) => Ok(n.to_string()),
        _ => Err(format!("value without a number \"{key}\"")),
    }
}

/// The object of a value snak's `datavalue`; `Ok(None)` for text in another language.
fn object_of(dv: Option<&Value>, langs: &[String]) -> Result<Option<Object>, String> {
    let dv = dv.ok_or("value snak without datavalue")?;
    let ty = dv
        .get("type")
        .and_then(Value::as_str)
        .ok_or("datavalue without a type")?;
    let v = dv.get("value").ok_or("datavalue without a value")?;
    let obj = match ty {
        "wikibase-entityid" => {
            let key = match v.get("id").and_then(Value::as_str) {
                Some(id) => id.to_string(),
                None => {
                    let n = v
                        .get("numeric-id")
                        .and_then(Value::as_u64)
                        .ok_or("entity id without \"id\" or \"numeric-id\"")?;
                    let prefix = match v.get("entity-type").and_then(Value::as_str) {
                        Some("item") | None => "Q",
                        Some("property") => "P",
                        Some("lexeme") => "L",
                        Some(other) => return Err(format!("entity type {other} without \"id\"")),
                    };
                    format!("{prefix}{n}")
                }
            };
            Object {
                value: key,
                kind: "entity",
                lang: None,
                datatype: None,
            }
        }
        "string" => literal(
            v.as_str()
                .ok_or("string value is not a string")?
                .to_string(),
        ),
        "monolingualtext" => {
            let lang = str_field(v, "language")?;
            if !langs.iter().any(|l| l == lang) {
                return Ok(None);
            }
            Object {
                lang: Some(lang.to_string()),
                ..literal(str_field(v, "text")?.to_string())
            }
        }
        "quantity" => {
            let amount = str_field(v, "amount")?;
            let value = match v.get("unit").and_then(Value::as_str) {
                None | Some("1") => amount.to_string(),
                Some(unit) => format!("{amount} {}", unit.rsplit('/').next().unwrap_or(unit)),
            };
            Object {
                datatype: Some("quantity"),
                ..literal(value)
            }
        }
        "time" => Object {
            datatype: Some("time"),
            ..literal(str_field(v, "time")?.to_string())
        },
        "globecoordinate" => {
            let lat = number_field(v, "latitude")?;
            let lon = number_field(v, "longitude")?;
            literal(format!("{lat},{lon}"))
        }
        other => return Err(format!("unsupported datavalue type {other}")),
    };
    Ok(Some(obj))
}

/// The time of a `P585` (point in time) or else `P580` (start time) qualifier.
fn qualifier_time(statement: &Value) -> Option<String> {
    let q = statement.get("qualifiers")?;
    ["P585", "P580"].iter().find_map(|p| {
        q.get(p)?.as_array()?.iter().find_map(|snak| {
            if snak.get("snaktype")?.as_str()? != "value" {
                return None;
            }
            let dv = snak.get("datavalue")?;
            if dv.get("type")?.as_str()? != "time" {
                return None;
            }
            dv.get("value")?.get("time")?.as_str().map(str::to_string)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;
    use serde_json::json;

    fn langs(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn objects_of_each_value_type() {
        let en = langs(&["en"]);
        let o = |v: Value| object_of(Some(&v), &en).unwrap().unwrap();
        let e = o(
            json!({"type":"wikibase-entityid","value":{"entity-type":"item","numeric-id":5,"id":"Q5"}}),
        );
        assert_eq!((e.value.as_str(), e.kind), ("Q5", "entity"));
        let e = o(
            json!({"type":"wikibase-entityid","value":{"entity-type":"property","numeric-id":31}}),
        );
        assert_eq!(e.value, "P31");
        assert_eq!(
            o(json!({"type":"string","value":"abc"})),
            literal("abc".into())
        );
        let m = o(json!({"type":"monolingualtext","value":{"text":"Hi","language":"en"}}));
        assert_eq!((m.value.as_str(), m.lang.as_deref()), ("Hi", Some("en")));
        assert_eq!(
            object_of(
                Some(&json!({"type":"monolingualtext","value":{"text":"Salut","language":"fr"}})),
                &en
            ),
            Ok(None)
        );
        let q = o(
            json!({"type":"quantity","value":{"amount":"+5","unit":"http://www.wikidata.org/entity/Q11573"}}),
        );
        assert_eq!(
            (q.value.as_str(), q.datatype),
            ("+5 Q11573", Some("quantity"))
        );
        let q = o(json!({"type":"quantity","value":{"amount":"+42","unit":"1"}}));
        assert_eq!(q.value, "+42");
        let t = o(json!({"type":"time","value":{"time":"+1952-03-11T00:00:00Z","precision":11}}));
        assert_eq!(
            (t.value.as_str(), t.datatype),
            ("+1952-03-11T00:00:00Z", Some("time"))
        );
        let g = o(
            json!({"type":"globecoordinate","value":{"latitude":55.953,"longitude":-3.189,"precision":0.001}}),
        );
        assert_eq!(g.value, "55.953,-3.189");
        assert!(object_of(Some(&json!({"type":"musical-thing","value":1})), &en).is_err());
        assert!(object_of(Some(&json!({"type":"quantity","value":{}})), &en).is_err());
        assert!(object_of(None, &en).is_err());
    }

    #[test]
    fn qualifier_times_prefer_point_in_time() {
        let t =
            |s: &str| json!({"snaktype":"value","datavalue":{"type":"time","value":{"time":s}}});
        let st = json!({"qualifiers":{"P580":[t("+2000")],"P585":[t("+2001")]}});
        assert_eq!(qualifier_time(&st).as_deref(), Some("+2001"));
        let st = json!({"qualifiers":{"P580":[t("+2000")]}});
        assert_eq!(qualifier_time(&st).as_deref(), Some("+2000"));
        assert_eq!(qualifier_time(&json!({})), None);
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

    const ENTITY: &str = r#"{"type":"item","id":"Q1","labels":{"en":{"language":"en","value":"One"},"de":{"language":"de","value":"Eins"}},"descriptions":{"fr":{"language":"fr","value":"un"}},"aliases":{"en":[{"language":"en","value":"1"},{"language":"en","value":"I"}]},"claims":{"P31":[{"mainsnak":{"snaktype":"value","property":"P31","datavalue":{"value":{"entity-type":"item","numeric-id":5,"id":"Q5"},"type":"wikibase-entityid"}},"qualifiers":{"P580":[{"snaktype":"value","property":"P580","datavalue":{"value":{"time":"+2000-01-01T00:00:00Z"},"type":"time"}}]}},{"mainsnak":{"snaktype":"novalue","property":"P31"}}],"P1448":[{"mainsnak":{"snaktype":"value","property":"P1448","datavalue":{"value":{"text":"Ein","language":"de"},"type":"monolingualtext"}}}]},"sitelinks":{}}"#;

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
