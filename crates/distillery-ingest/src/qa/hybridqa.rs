//! HybridQA reader: question files (`train.json`, `dev.json`, `test.json`: `{question_id,
//! question, table_id, answer-text, answer-node, question_postag, ...}`) joined with their
//! tables and passages from WikiTables-WithLinks.
//!
//! The WikiTables-WithLinks directory is option `tables_dir`, else `WikiTables-WithLinks`
//! beside the question file. For each question its table `tables_tok/<table_id>.json` (`{url,
//! title, header [[name, links]], data [[[cell, links]]], section_title, section_text, uid}`)
//! becomes a [`distillery_core::Table`] (uri `hybridqa:<table_id>`, header names, rows of cell
//! texts padded to one width, a [`distillery_core::CellLink`] per link, row -1 for the header,
//! targets as page titles; `section` = `section_title`; `caption` = `section_text`, the text
//! that introduces the table, since WikiTables keeps no caption; `table_index` = the `_N`
//! suffix of the id). The passages of its links, `request_tok/<table_id>.json` (`{"/wiki/Link":
//! "passage"}`), become documents titled by the link (`/wiki/` removed, percent-escapes decoded,
//! underscores as spaces), sentences by [`crate::text::sentence_spans`]. The question's
//! `context_tables` is the table and its `context_documents` the passages in the order their
//! links appear in the table (header, then rows, left to right).
//!
//! The passage file is looked up as `<table_id>.json` first, then as any file of `request_tok/`
//! named `<table_id>.<something>.json`: cuts of the data set (such as the shared test sample,
//! `<table_id>.first8.json`) keep the table id but mark the cut in the name.
//!
//! Each table and passage is written once per file: loaded tables are cached by table id with
//! their record id and the (link, document id) pairs of their passages, so memory is bounded by
//! the number of distinct tables of the file times their links (a few MB for HybridQA train),
//! never by the passages' text.
//!
//! A question whose table file is missing (or unreadable) is still written, with an empty
//! context, and a `missing_context` quarantine record naming the table id is written beside it,
//! so run counts show how many questions lack their context; so is a question whose table has no
//! passage file. A table or passage file that is not valid JSON gets its own quarantine record
//! (source = that file). `answer-node` (`[[text, [row, col], link, "table"|"passage"]]`, train)
//! becomes `table_cell` evidence (table id, row, col, text) or `document` evidence (passage id,
//! title, the linking cell's row/col, text); it is also kept in `meta` with the other extra
//! fields (`question_postag`, `where`, ...) and the `table_id`.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use distillery_core::id::stable_id;
use distillery_core::spec::FormatOptions;
use distillery_core::{CellLink, Evidence, QuarantineRecord, Record, RecordSink, Table};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{
    IdString, ItemError, Qa, answers_from, bad_value, from_value, is_data_error, json_error_reason,
    meta_string,
};
use crate::input::open_decompressed;
use crate::{IngestError, InputCtx};

const DATASET: &str = "hybridqa";

#[derive(Deserialize)]
struct RawQuestion {
    question_id: IdString,
    question: String,
    table_id: String,
    #[serde(rename = "answer-text", default)]
    answer_text: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Deserialize)]
struct RawTable {
    #[serde(default)]
    title: Option<String>,
    header: Vec<(String, Option<Vec<String>>)>,
    data: Vec<Vec<(String, Option<Vec<String>>)>>,
    #[serde(default)]
    section_title: Option<String>,
    #[serde(default)]
    section_text: Option<String>,
}

/// One `answer-node` entry: text, [row, col], link, `table`/`passage`.
type AnswerNode = (String, (i32, i32), Option<String>, String);

/// A loaded table: its record id and the (link, document id) pairs of its passages.
struct Loaded {
    id: String,
    passages: Vec<(String, String)>,
    /// Why the table has no passages, when its passage file is missing or bad.
    passages_missing: Option<String>,
}

enum Cached {
    Loaded(Loaded),
    /// The table file is missing or unreadable: the reason.
    Missing(String),
}

/// Finds and loads tables, once per table id.
struct Tables {
    tables_tok: String,
    request_tok: String,
    /// The file names of `request_tok/`, listed on the first fallback lookup.
    listing: Option<Vec<String>>,
    cache: HashMap<String, Cached>,
}

/// Reads a HybridQA question file and the tables and passages it refers to.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let dir = match ctx.options {
        FormatOptions::HybridQa(o) => o.tables_dir.clone(),
        _ => None,
    }
    .unwrap_or_else(|| ctx.opener.sibling(&ctx.location, "WikiTables-WithLinks"));
    let mut tables = Tables {
        tables_tok: ctx.opener.join(&dir, "tables_tok"),
        request_tok: ctx.opener.join(&dir, "request_tok"),
        listing: None,
        cache: HashMap::new(),
    };
    if !ctx.opener.exists(&tables.tables_tok) {
        tracing::warn!(
            "{}: no tables directory {}; every question will lack its table",
            ctx.location,
            tables.tables_tok
        );
    }
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: RawQuestion, raw| {
        let answers = answers_from(r.answer_text.as_ref(), "answer-text")?;
        let nodes: Vec<AnswerNode> = match r.extra.get("answer-node") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => from_value(v.clone(), "answer-node")?,
        };
        if !tables.cache.contains_key(&r.table_id) {
            let c = tables.load(qa, &r.table_id)?;
            tables.cache.insert(r.table_id.clone(), c);
        }
        let cached = &tables.cache[&r.table_id];
        let mut q = qa.question(&r.question_id.0, r.question);
        let mut missing = None;
        match cached {
            Cached::Loaded(t) => {
                q.context_tables.push(t.id.clone());
                q.context_documents
                    .extend(t.passages.iter().map(|(_, id)| id.clone()));
                missing.clone_from(&t.passages_missing);
            }
            Cached::Missing(why) => missing = Some(why.clone()),
        }
        for (i, (text, (row, col), link, kind)) in nodes.into_iter().enumerate() {
            let loaded = match cached {
                Cached::Loaded(t) => Some(t),
                Cached::Missing(_) => None,
            };
            let ev = match kind.as_str() {
                "table" => Evidence {
                    kind: "table_cell".to_string(),
                    record_id: loaded.map(|t| t.id.clone()),
                    ..Default::default()
                },
                "passage" => Evidence {
                    kind: "document".to_string(),
                    title: link.as_deref().map(link_title),
                    record_id: loaded.and_then(|t| {
                        let l = link.as_deref()?;
                        t.passages
                            .iter()
                            .find(|(k, _)| k == l)
                            .map(|(_, id)| id.clone())
                    }),
                    ..Default::default()
                },
                other => {
                    return Err(bad_value(format!(
                        "answer-node[{i}] has kind {other:?}, expected \"table\" or \"passage\""
                    )));
                }
            };
            q.evidence.push(Evidence {
                row: Some(row),
                col: Some(col),
                text: Some(text),
                ..ev
            });
        }
        q.answerable = r
            .answer_text
            .as_ref()
            .is_some_and(|a| !a.is_null())
            .then_some(true);
        q.answers = answers;
        let mut meta = Map::new();
        meta.insert("table_id".to_string(), Value::String(r.table_id.clone()));
        meta.extend(r.extra);
        q.meta = meta_string(&meta);
        qa.emit(Record::Question(q))?;
        if let Some(why) = missing {
            let q = qa.quarantine_at(
                raw,
                "missing_context",
                format!("table {}: {why}", r.table_id),
            );
            qa.quarantine(q)?;
        }
        Ok(())
    })
}

impl Tables {
    /// Loads a table and its passages, writing them; a missing or bad table file gives
    /// [`Cached::Missing`].
    fn load(&mut self, qa: &mut Qa<'_, '_>, table_id: &str) -> Result<Cached, ItemError> {
        let opener = qa.ctx.opener;
        let loc = opener.join(&self.tables_tok, &format!("{table_id}.json"));
        if table_id.contains('/') || !opener.exists(&loc) {
            return Ok(Cached::Missing(format!("no table file {loc}")));
        }
        let Some(t) = read_side::<RawTable>(qa, &loc)? else {
            return Ok(Cached::Missing(format!("table file {loc} is unreadable")));
        };
        let (table, links) = build_table(qa, table_id, t);
        let table_rec_id = table.id.clone();
        qa.emit_once(Record::Table(table))?;
        let mut loaded = Loaded {
            id: table_rec_id,
            passages: Vec::new(),
            passages_missing: None,
        };
        let Some(ploc) = self.passage_file(qa, table_id) else {
            loaded.passages_missing = Some(format!("no passage file in {}", self.request_tok));
            return Ok(Cached::Loaded(loaded));
        };
        let Some(passages) = read_side::<Map<String, Value>>(qa, &ploc)? else {
            loaded.passages_missing = Some(format!("passage file {ploc} is unreadable"));
            return Ok(Cached::Loaded(loaded));
        };
        for link in links {
            let Some(text) = passages.get(&link).and_then(Value::as_str) else {
                continue;
            };
            let d = qa.document_from_text(&link_title(&link), text.to_string());
            loaded.passages.push((link, d.id.clone()));
            qa.emit_once(Record::Document(d))?;
        }
        Ok(Cached::Loaded(loaded))
    }

    /// `request_tok/<table_id>.json`, else the first `request_tok/<table_id>.*.json`.
    fn passage_file(&mut self, qa: &Qa<'_, '_>, table_id: &str) -> Option<String> {
        let opener = qa.ctx.opener;
        let exact = opener.join(&self.request_tok, &format!("{table_id}.json"));
        if opener.exists(&exact) {
            return Some(exact);
        }
        let listing = self
            .listing
            .get_or_insert_with(|| opener.list(&self.request_tok).unwrap_or_default());
        let name = listing.iter().find(|n| {
            n.strip_prefix(table_id)
                .is_some_and(|rest| rest.starts_with('.') && rest.ends_with(".json"))
        })?;
        Some(opener.join(&self.request_tok, name))
    }
}

/// Reads and parses one side file (a table or passage file). A bad file is quarantined (source
/// = that file) and gives `None`; a transient read error stops the input.
fn read_side<T: serde::de::DeserializeOwned>(
    qa: &mut Qa<'_, '_>,
    loc: &str,
) -> Result<Option<T>, ItemError> {
    let bad = |reason: &str, detail: String, excerpt: &[u8]| {
        QuarantineRecord::new(DATASET, loc, reason, detail, excerpt)
    };
    // Held whole to be parsed, so bounded like a record: one byte past the limit says it is
    // over, and the rest is never read.
    let (limit, option) = qa.ctx.options.record_limit();
    let mut bytes = Vec::new();
    let read =
        open_decompressed(qa.ctx.opener, loc, Arc::new(AtomicU64::new(0))).and_then(|(r, _)| {
            r.take(limit.saturating_add(1))
                .read_to_end(&mut bytes)
                .map_err(|e| IngestError::io(loc, e))
        });
    match read {
        Ok(_) if bytes.len() as u64 > limit => {
            let detail = format!(
                "side file over the limit of {limit} bytes; not read further (raise the reader \
                 option `{option}` if it is a real file)"
            );
            qa.quarantine(bad("record_too_large", detail, &bytes))?;
            return Ok(None);
        }
        Ok(_) => {}
        Err(IngestError::Io { source, .. }) if is_data_error(&source) => {
            qa.quarantine(bad("truncated_input", source.to_string(), &bytes))?;
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    }
    if let Err(e) = std::str::from_utf8(&bytes) {
        let detail = format!("invalid UTF-8 at byte {}", e.valid_up_to());
        qa.quarantine(bad("invalid_utf8", detail, &bytes).at_byte(e.valid_up_to() as u64))?;
        return Ok(None);
    }
    match serde_json::from_slice(&bytes) {
        Ok(v) => Ok(Some(v)),
        Err(e) => {
            let q = bad(json_error_reason(&e), e.to_string(), &bytes).at_line(e.line() as u64);
            qa.quarantine(q)?;
            Ok(None)
        }
    }
}

/// The table record, and its raw links (as the passage file keys them) in table order, each
/// once.
fn build_table(qa: &Qa<'_, '_>, table_id: &str, t: RawTable) -> (Table, Vec<String>) {
    let mut links = Vec::new();
    let mut raw_links: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    let mut note = |l: &String| {
        if seen.insert(l.clone()) {
            raw_links.push(l.clone());
        }
    };
    let mut header = Vec::with_capacity(t.header.len());
    for (c, (name, ls)) in t.header.into_iter().enumerate() {
        for l in ls.unwrap_or_default() {
            note(&l);
            links.push(CellLink {
                row: -1,
                col: c as i32,
                target: link_title(&l),
            });
        }
        header.push(name);
    }
    let mut rows = Vec::with_capacity(t.data.len());
    for (r, row) in t.data.into_iter().enumerate() {
        let mut cells = Vec::with_capacity(row.len());
        for (c, (text, ls)) in row.into_iter().enumerate() {
            for l in ls.unwrap_or_default() {
                note(&l);
                links.push(CellLink {
                    row: r as i32,
                    col: c as i32,
                    target: link_title(&l),
                });
            }
            cells.push(text);
        }
        rows.push(cells);
    }
    let width = rows
        .iter()
        .map(Vec::len)
        .chain([header.len()])
        .max()
        .unwrap_or(0);
    header.resize(width, String::new());
    for row in &mut rows {
        row.resize(width, String::new());
    }
    let table = Table {
        id: stable_id(&[DATASET, "table", table_id]),
        dataset: DATASET.to_string(),
        source: qa.ctx.source.clone(),
        uri: format!("{DATASET}:{table_id}"),
        document_id: None,
        table_index: table_id
            .rsplit_once('_')
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0),
        title: t.title.unwrap_or_default(),
        caption: t.section_text.filter(|s| !s.trim().is_empty()),
        section: t.section_title.filter(|s| !s.is_empty()),
        header,
        rows,
        links,
    };
    (table, raw_links)
}

/// A page title from a `/wiki/Page_name` link: prefix removed, percent-escapes decoded (when
/// they decode to UTF-8), underscores as spaces.
fn link_title(link: &str) -> String {
    let path = link.strip_prefix("/wiki/").unwrap_or(link);
    percent_decode(path)
        .unwrap_or_else(|| path.to_string())
        .replace('_', " ")
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
