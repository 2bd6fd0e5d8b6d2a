//! The changes a revision dump does not carry (`format = "mediawiki-log"`): page deletions,
//! restores and moves, from Wikimedia's logging dump or from a list the user keeps.
//!
//! A daily adds-changes dump holds new revisions only: a deleted page is simply absent, and a
//! moved page appears under its new title with a null revision. The logging dump
//! (`<wiki>-<date>-pages-logging.xml.gz`) says what happened, one `<logitem>` per action in log
//! id order: `<id>`, `<timestamp>`, `<type>`, `<action>`, `<logtitle>` (the page's full title,
//! namespace prefix included; no page id) and `<params>`. The reader keeps
//!
//! | type / action | change |
//! |---|---|
//! | `delete` / `delete`, `delete_redir`, `delete_redir2` | `deleted` |
//! | `delete` / `restore` | `restored` |
//! | `move` / `move`, `move_redir` | `moved`, `target` the new title (from `<params>`: the plain title of older dumps, or the `4::target` entry of a serialized PHP array) |
//!
//! and counts the other log items (uploads, blocks, revision deletions...) without a row. A
//! file that does not start with `<` is a plain list, one page a line: a number is a page id,
//! anything else a title (`#` starts a comment); each is a `deleted` change.
//!
//! Bad input never stops the reader: a `<logitem>` without a title, an unknown move target
//! or a malformed element is quarantined with its byte offset, and reading goes on.

use std::io::{BufRead, Read};

use distillery_core::id::stable_id;
use distillery_core::{Change, QuarantineRecord, Record, RecordSink};
use quick_xml::events::Event;

use crate::input::open_decompressed;
use crate::{IngestError, InputCtx};

const DATASET: &str = "mediawiki-log";

/// Longest text kept from one element (a `<comment>` is not kept at all).
const MAX_FIELD: usize = 1 << 16;

/// Reads a logging dump or a list of deleted pages into `changes` rows.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let (mut reader, _) = open_decompressed(ctx.opener, &ctx.location, ctx.bytes_read.clone())?;
    let head = reader
        .fill_buf()
        .map_err(|e| IngestError::io(&ctx.location, e))?;
    let xml = head
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|&b| b == b'<' || b == 0xEF);
    if xml {
        read_log(ctx, reader, sink)
    } else {
        read_list(ctx, reader, sink)
    }
}

/// One `<logitem>`'s fields.
#[derive(Debug, Default)]
struct Item {
    id: Option<i64>,
    timestamp: Option<String>,
    kind: String,
    action: String,
    title: Option<String>,
    params: String,
    /// Byte offset of `<logitem>`.
    offset: u64,
}

fn change_of(item: &Item) -> Option<&'static str> {
    match (item.kind.as_str(), item.action.as_str()) {
        ("delete", "delete" | "delete_redir" | "delete_redir2") => Some("deleted"),
        ("delete", "restore") => Some("restored"),
        ("move", "move" | "move_redir") => Some("moved"),
        _ => None,
    }
}

/// The new title of a move from its `<params>`: a serialized PHP array's `4::target`, or the
/// plain title older dumps write.
pub(crate) fn move_target(params: &str) -> Option<String> {
    let p = params.trim();
    if let Some(rest) = p.strip_prefix("a:") {
        let at = rest.find("\"4::target\";s:")? + "\"4::target\";s:".len();
        let rest = &rest[at..];
        let colon = rest.find(':')?;
        let len: usize = rest[..colon].parse().ok()?;
        let body = rest[colon + 1..].strip_prefix('"')?;
        return body.get(..len).map(str::to_string);
    }
    let line = p.lines().next().unwrap_or("").trim();
    (!line.is_empty()).then(|| line.to_string())
}

fn read_log(
    ctx: &InputCtx<'_>,
    reader: Box<dyn BufRead + Send>,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let mut xml = quick_xml::Reader::from_reader(reader);
    xml.config_mut().check_end_names = false;
    let mut buf = Vec::new();
    let mut path: Vec<String> = Vec::new();
    let mut item: Option<Item> = None;
    let mut value = String::new();
    let (mut kept, mut other) = (0u64, 0u64);
    loop {
        let offset = xml.buffer_position();
        let ev = match xml.read_event_into(&mut buf) {
            Ok(ev) => ev,
            Err(e) => {
                let q = QuarantineRecord::new(
                    DATASET,
                    &ctx.location,
                    "malformed_xml",
                    format!("malformed XML at byte {}: {e}", xml.error_position()),
                    &[],
                )
                .at_byte(xml.error_position());
                sink.emit(Record::Quarantine(q))?;
                break;
            }
        };
        match ev {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_string();
                if name == "logitem" {
                    item = Some(Item {
                        offset,
                        ..Item::default()
                    });
                }
                path.push(name);
                value.clear();
            }
            Event::Text(t) if item.is_some() && value.len() < MAX_FIELD => {
                value.push_str(&t.xml10_content());
            }
            Event::CData(t) if item.is_some() && value.len() < MAX_FIELD => {
                value.push_str(&t.xml10_content());
            }
            Event::GeneralRef(r) if item.is_some() && value.len() < MAX_FIELD => {
                super::xml::push_xml_ref(&mut value, &r);
            }
            Event::End(_) => {
                let name = path.pop().unwrap_or_default();
                // A field of the item: a child of `<logitem>` itself.
                if let Some(it) = item.as_mut()
                    && path.last().is_some_and(|p| p == "logitem")
                {
                    let v = std::mem::take(&mut value);
                    match name.as_str() {
                        "id" => it.id = v.trim().parse().ok(),
                        "timestamp" => it.timestamp = Some(v.trim().to_string()),
                        "type" => it.kind = v.trim().to_string(),
                        "action" => it.action = v.trim().to_string(),
                        "logtitle" => it.title = Some(v.trim().to_string()),
                        "params" => it.params = v,
                        _ => {}
                    }
                }
                if name == "logitem"
                    && let Some(it) = item.take()
                {
                    match emit(ctx, &it, sink)? {
                        true => kept += 1,
                        false => other += 1,
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    tracing::info!(location = %ctx.location, changes = kept, other_log_items = other, "mediawiki log read");
    Ok(())
}

/// The change row of a log item, or its quarantine record; `false` for a log item that is not
/// a change to a page's existence or title.
fn emit(ctx: &InputCtx<'_>, it: &Item, sink: &mut dyn RecordSink) -> Result<bool, IngestError> {
    let Some(kind) = change_of(it) else {
        return Ok(false);
    };
    let bad = |reason: &str, detail: String| {
        QuarantineRecord::new(DATASET, &ctx.location, reason, detail, &[]).at_byte(it.offset)
    };
    let Some(title) = it.title.clone().filter(|t| !t.is_empty()) else {
        let q = bad(
            "missing_field",
            format!(
                "log item {:?} ({} / {}) has no <logtitle>",
                it.id, it.kind, it.action
            ),
        );
        sink.emit(Record::Quarantine(q))?;
        return Ok(true);
    };
    let target = if kind == "moved" {
        match move_target(&it.params) {
            Some(t) => Some(t),
            None => {
                let q = bad(
                    "missing_field",
                    format!(
                        "move of {title:?} (log item {:?}) names no target in <params>",
                        it.id
                    ),
                );
                sink.emit(Record::Quarantine(q))?;
                return Ok(true);
            }
        }
    } else {
        None
    };
    let key = it
        .id
        .map_or_else(|| format!("@{}", it.offset), |i| i.to_string());
    sink.emit(Record::Change(Change {
        id: stable_id(&[DATASET, &ctx.source, &key, kind, &title]),
        dataset: DATASET.to_string(),
        source: ctx.source.clone(),
        kind: kind.to_string(),
        title,
        page_id: None,
        target,
        timestamp: it.timestamp.clone(),
        log_id: it.id,
    }))?;
    Ok(true)
}

/// A list of deleted pages: one page id or title a line.
fn read_list(
    ctx: &InputCtx<'_>,
    mut reader: Box<dyn BufRead + Send>,
    sink: &mut dyn RecordSink,
) -> Result<(), IngestError> {
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_FIELD as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| IngestError::io(&ctx.location, e))?;
        if n == 0 {
            break;
        }
        number += 1;
        if line.len() > MAX_FIELD {
            let q = QuarantineRecord::new(
                DATASET,
                &ctx.location,
                "record_too_large",
                format!("line of over {MAX_FIELD} bytes: not a page id or title"),
                &line[..512],
            )
            .at_line(number);
            sink.emit(Record::Quarantine(q))?;
            // The rest of the line.
            let mut rest = Vec::new();
            reader
                .read_until(b'\n', &mut rest)
                .map_err(|e| IngestError::io(&ctx.location, e))?;
            continue;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            let q = QuarantineRecord::new(
                DATASET,
                &ctx.location,
                "invalid_utf8",
                "line is not UTF-8".to_string(),
                &line[..line.len().min(512)],
            )
            .at_line(number);
            sink.emit(Record::Quarantine(q))?;
            continue;
        };
        let entry = text.split('#').next().unwrap_or("").trim();
        if entry.is_empty() {
            continue;
        }
        let page_id = entry.parse::<i64>().ok().filter(|&i| i > 0);
        sink.emit(Record::Change(Change {
            id: stable_id(&[DATASET, &ctx.source, &number.to_string(), entry]),
            dataset: DATASET.to_string(),
            source: ctx.source.clone(),
            kind: "deleted".to_string(),
            title: if page_id.is_some() {
                String::new()
            } else {
                entry.to_string()
            },
            page_id,
            target: None,
            timestamp: None,
            log_id: None,
        }))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn move_targets_from_both_layouts() {
        assert_eq!(
            move_target(r#"a:2:{s:9:"4::target";s:9:"New Title";s:10:"5::noredir";s:1:"0";}"#)
                .as_deref(),
            Some("New Title")
        );
        // Lengths are bytes, as PHP counts them.
        assert_eq!(
            move_target(r#"a:1:{s:9:"4::target";s:5:"Αθήνα";}"#).as_deref(),
            None,
            "5 bytes cut a character: no target"
        );
        assert_eq!(
            move_target(r#"a:1:{s:9:"4::target";s:10:"Αθήνα";}"#).as_deref(),
            Some("Αθήνα")
        );
        assert_eq!(
            move_target("Old style title\n").as_deref(),
            Some("Old style title")
        );
        assert_eq!(move_target("  "), None);
        assert_eq!(move_target(r#"a:1:{s:10:"5::noredir";s:1:"0";}"#), None);
    }
}
