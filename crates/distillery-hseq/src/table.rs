//! The table adapter: [`encode_table`] and [`decode_table`].
//!
//! A [`Table`] becomes, in stream order:
//!
//! 1. one `table` root: `schema` = the header verbatim (T2), `content` = a compact rendering
//!    (title, caption and the header joined by ` | `, one per line, empty parts left out),
//!    `offsets` = `[-1, -1]`;
//! 2. one `table_row` per row: `content` = a JSON object `key → cell` in column order,
//!    `offsets` = `[row, -1]`;
//! 3. with [`HseqOptions::cells`], one `table_cell` per cell: `content` = the cell,
//!    `offsets` = `[row, col]`, `schema` = `[key]`, parent = its row.
//!
//! JSON object keys must be unique, but headers may repeat names or leave them empty, so the
//! keys are [`column_keys`]: the header name, `col_<j+1>` (1-based) for an empty or blank name
//! or a cell beyond the header, and ` (2)`, ` (3)`, ... appended to a name already taken. The
//! function is deterministic, so the decoder recomputes the keys from the root's `schema`
//! and maps each key back to its column position: the header comes back verbatim from
//! `schema`, the cells by key, so decoding does not depend on the order of keys in the JSON.
//! Rows shorter or longer than the header round-trip too (a row holds the first `len(row)`
//! keys).
//!
//! Ids are `stable_id([table.id, level, row, col])`; `source_id` = `table.id`; `uri` =
//! [`table_uri`]; `source_version` = the source file name; `source_type` = `table`.

use crate::options::HseqOptions;
use crate::order::{level, source_type};
use crate::{DecodeError, check_sha1, index_ids, non_empty, parent_index, sealed};
use distillery_core::id::stable_id;
use distillery_core::{Segment, Table};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The unique JSON keys of the first `max(header.len(), width)` columns (see the module
/// docs): `["Name", "Name", "", "x"]` gives `["Name", "Name (2)", "col_3", "x"]`.
pub fn column_keys(header: &[String], width: usize) -> Vec<String> {
    let n = header.len().max(width);
    let mut used: HashSet<String> = HashSet::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    for j in 0..n {
        let base = match header.get(j) {
            Some(h) if !h.trim().is_empty() => h.clone(),
            _ => format!("col_{}", j + 1),
        };
        let mut key = base.clone();
        let mut k = 2;
        while used.contains(&key) {
            key = format!("{base} ({k})");
            k += 1;
        }
        used.insert(key.clone());
        keys.push(key);
    }
    keys
}

/// The `uri` of a table's segments: the table's uri, or `table:<id>` when it has none. A
/// table that came from a document (`document_id` set) gets `#table=<index>` appended unless
/// its uri already has a fragment, so its `[row, col]` evidence never shares `(uri, offsets)`
/// with the document's text spans in κ.
pub fn table_uri(t: &Table) -> String {
    let base = if t.uri.is_empty() {
        format!("table:{}", t.id)
    } else {
        t.uri.clone()
    };
    if t.document_id.is_some() && !base.contains('#') {
        format!("{base}#table={}", t.table_index)
    } else {
        base
    }
}

/// The root's content: title, caption and header, one per line, empty parts left out.
fn summary(t: &Table) -> String {
    let mut lines: Vec<String> = Vec::new();
    if !t.title.is_empty() {
        lines.push(t.title.clone());
    }
    if let Some(c) = t
        .caption
        .as_deref()
        .filter(|c| !c.is_empty() && *c != t.title)
    {
        lines.push(c.to_string());
    }
    if !t.header.is_empty() {
        lines.push(t.header.join(" | "));
    }
    lines.join("\n")
}

/// Encodes a table as a `table` root, `table_row`s and optionally `table_cell`s, in stream
/// order (see the module docs).
pub fn encode_table(t: &Table, opts: &HseqOptions) -> Vec<Segment> {
    let uri = table_uri(t);
    let version = non_empty(&t.source);
    let width = t.rows.iter().map(Vec::len).max().unwrap_or(0);
    let keys = column_keys(&t.header, width);
    let mk = |id: String, lvl: &str, parent: Option<String>, content, offsets, schema| {
        sealed(Segment {
            id,
            level: lvl.to_string(),
            parent,
            content,
            source_id: t.id.clone(),
            uri: uri.clone(),
            offsets,
            schema,
            time: None,
            source_type: source_type::TABLE.to_string(),
            sha1: String::new(),
            source_version: version.clone(),
            ord: 0,
            page_id: None,
        })
    };
    let mut out = Vec::with_capacity(1 + t.rows.len() * if opts.cells { 1 + width } else { 1 });
    let root_id = stable_id(&[&t.id, level::TABLE]);
    out.push(mk(
        root_id.clone(),
        level::TABLE,
        None,
        summary(t),
        vec![-1, -1],
        t.header.clone(),
    ));
    let mut row_ids = Vec::with_capacity(t.rows.len());
    for (i, row) in t.rows.iter().enumerate() {
        let obj: Map<String, Value> = keys
            .iter()
            .zip(row)
            .map(|(k, c)| (k.clone(), Value::String(c.clone())))
            .collect();
        let id = stable_id(&[&t.id, level::TABLE_ROW, &i.to_string()]);
        out.push(mk(
            id.clone(),
            level::TABLE_ROW,
            Some(root_id.clone()),
            Value::Object(obj).to_string(),
            vec![i as i64, -1],
            Vec::new(),
        ));
        row_ids.push(id);
    }
    if opts.cells {
        for (i, row) in t.rows.iter().enumerate() {
            for (j, cell) in row.iter().enumerate() {
                out.push(mk(
                    stable_id(&[&t.id, level::TABLE_CELL, &i.to_string(), &j.to_string()]),
                    level::TABLE_CELL,
                    Some(row_ids[i].clone()),
                    cell.clone(),
                    vec![i as i64, j as i64],
                    vec![keys[j].clone()],
                ));
            }
        }
    }
    for (i, s) in out.iter_mut().enumerate() {
        s.ord = i as u32;
    }
    out
}

/// A table rebuilt from its segments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecodedTable {
    /// The root's `source_id` (the table's id).
    pub source_id: String,
    pub uri: String,
    /// The root's content (title, caption, header).
    pub summary: String,
    /// The header, from the root's `schema`.
    pub header: Vec<String>,
    /// The rows, in row-index order.
    pub rows: Vec<Vec<String>>,
}

/// Parses a row's JSON object back into cells, by key.
fn parse_row(s: &Segment, header: &[String]) -> Result<Vec<String>, DecodeError> {
    let v: Value = serde_json::from_str(&s.content).map_err(|source| DecodeError::RowJson {
        id: s.id.clone(),
        source,
    })?;
    let Value::Object(obj) = v else {
        return Err(DecodeError::RowShape {
            id: s.id.clone(),
            key: None,
        });
    };
    let keys = column_keys(header, obj.len());
    let pos: HashMap<&str, usize> = keys
        .iter()
        .enumerate()
        .map(|(j, k)| (k.as_str(), j))
        .collect();
    let mut cells: Vec<Option<String>> = vec![None; obj.len()];
    for (k, v) in obj {
        let Some(&j) = pos.get(k.as_str()) else {
            return Err(DecodeError::RowKey {
                id: s.id.clone(),
                key: k,
            });
        };
        let Value::String(c) = v else {
            return Err(DecodeError::RowShape {
                id: s.id.clone(),
                key: Some(k),
            });
        };
        match cells.get_mut(j) {
            Some(slot) => *slot = Some(c),
            None => {
                return Err(DecodeError::RowColumns {
                    id: s.id.clone(),
                    width: cells.len(),
                });
            }
        }
    }
    let width = cells.len();
    cells
        .into_iter()
        .collect::<Option<Vec<String>>>()
        .ok_or_else(|| DecodeError::RowColumns {
            id: s.id.clone(),
            width,
        })
}

/// Decodes the segments of one table (root, rows, optional cells; parents before children).
///
/// Checks: one `table` root without parent; unique ids; rows are children of the root with
/// offsets `[i, -1]`, indices `0..n` each exactly once, content a JSON object of strings
/// whose keys are the [`column_keys`] of the schema; cells are children of a row with offsets
/// `[i, j]` for that row's `i` and agree with the row's cell `j`; `sha1` matches; one
/// `source_id`.
pub fn decode_table(segs: &[Segment]) -> Result<DecodedTable, DecodeError> {
    if segs.is_empty() {
        return Err(DecodeError::Empty);
    }
    let ids = index_ids(segs)?;
    let roots: Vec<usize> = (0..segs.len())
        .filter(|&i| segs[i].level == level::TABLE)
        .collect();
    let ri = match roots[..] {
        [] => {
            return Err(DecodeError::NoRoot {
                level: level::TABLE,
            });
        }
        [r] => r,
        _ => {
            return Err(DecodeError::ManyRoots {
                level: level::TABLE,
                count: roots.len(),
            });
        }
    };
    let root = &segs[ri];
    if root.parent.is_some() {
        return Err(DecodeError::RootHasParent {
            id: root.id.clone(),
        });
    }
    let header = root.schema.clone();
    let mut rows: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    let mut row_of: HashMap<usize, i64> = HashMap::new();
    let mut cells: Vec<(usize, usize)> = Vec::new();
    for (i, s) in segs.iter().enumerate() {
        check_sha1(s)?;
        if s.source_id != root.source_id {
            return Err(DecodeError::SourceMismatch {
                id: s.id.clone(),
                expected: root.source_id.clone(),
                found: s.source_id.clone(),
            });
        }
        if i == ri {
            continue;
        }
        let bad_offsets = || DecodeError::BadOffsets {
            id: s.id.clone(),
            level: s.level.clone(),
            offsets: s.offsets.clone(),
        };
        let want_parent = match s.level.as_str() {
            level::TABLE_ROW => level::TABLE,
            level::TABLE_CELL => level::TABLE_ROW,
            _ => {
                return Err(DecodeError::UnexpectedLevel {
                    id: s.id.clone(),
                    level: s.level.clone(),
                    source_type: source_type::TABLE,
                });
            }
        };
        let pi = parent_index(segs, &ids, i)?;
        if segs[pi].level != want_parent {
            return Err(DecodeError::WrongParent {
                id: s.id.clone(),
                level: s.level.clone(),
                parent: segs[pi].id.clone(),
                parent_level: segs[pi].level.clone(),
            });
        }
        if s.level == level::TABLE_ROW {
            let r = match s.offsets[..] {
                [r, -1] if r >= 0 => r,
                _ => return Err(bad_offsets()),
            };
            let cells = parse_row(s, &header)?;
            if rows.insert(r, cells).is_some() {
                return Err(DecodeError::DuplicateRow { row: r });
            }
            row_of.insert(i, r);
        } else {
            match s.offsets[..] {
                [r, c] if r >= 0 && c >= 0 && row_of.get(&pi) == Some(&r) => {}
                _ => return Err(bad_offsets()),
            }
            cells.push((i, pi));
        }
    }
    for (k, &r) in rows.keys().enumerate() {
        if r != k as i64 {
            return Err(DecodeError::MissingRow { row: k as i64 });
        }
    }
    for (i, _) in cells {
        let s = &segs[i];
        let (r, c) = (s.offsets[0], s.offsets[1]);
        let ok = rows
            .get(&r)
            .and_then(|row| row.get(c as usize))
            .is_some_and(|cell| *cell == s.content);
        if !ok {
            return Err(DecodeError::CellMismatch {
                id: s.id.clone(),
                row: r,
                col: c,
            });
        }
    }
    Ok(DecodedTable {
        source_id: root.source_id.clone(),
        uri: root.uri.clone(),
        summary: root.content.clone(),
        header,
        rows: rows.into_values().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn keys_are_unique_and_deterministic() {
        assert_eq!(
            column_keys(&s(&["Name", "Name", "", "x", " "]), 0),
            s(&["Name", "Name (2)", "col_3", "x", "col_5"])
        );
        assert_eq!(
            column_keys(&s(&["col_2", "", "col_2 (2)"]), 4),
            s(&["col_2", "col_2 (2)", "col_2 (2) (2)", "col_4"])
        );
        assert_eq!(column_keys(&[], 2), s(&["col_1", "col_2"]));
    }

    #[test]
    fn uri_gets_a_fragment_inside_a_document() {
        let mut t = Table {
            id: "t".into(),
            uri: "enwiki:X".into(),
            table_index: 2,
            ..Default::default()
        };
        assert_eq!(table_uri(&t), "enwiki:X");
        t.document_id = Some("d".into());
        assert_eq!(table_uri(&t), "enwiki:X#table=2");
        t.uri.clear();
        assert_eq!(table_uri(&t), "table:t#table=2");
    }
}
