//! Wikitext tables (`{| ... |}`) into header + rows.
//!
//! The body of one table (nested tables already cut out by
//! [`super::wikitext::extract_tables`]) is read line by line as MediaWiki does: `|+` caption,
//! `|-` new row, `!` header cells (`!!` or `||` between cells on one line), `|` data cells (`||`
//! between cells), other lines continue the last cell. Lines inside an open `{{...}}` continue
//! the last cell too, so a multi-line citation template in a cell does not read as cells. A cell
//! is `attributes | content` when a single `|` sits outside `[[ ]]`/`{{ }}`; a cell whose
//! template would have supplied the separator (`| colspan="2" {{Yes}}`) is recognised by its
//! attribute-only prefix. Rows without cells are dropped (MediaWiki emits no `<tr>` for them).
//!
//! Cells are then laid out on a grid: `colspan`/`rowspan` repeat the cell's text (and links) in
//! every grid cell it covers, rows are padded to the widest row. The header is the first row
//! when all its cells are `!` cells (empty names become `col_<n>`), else `col_1..col_n`.

use distillery_core::CellLink;

use super::wikitext::{clean_fragment, find_top, match_pairs};

const MAX_SPAN: usize = 1000;
/// Most grid cells laid out for one table; rows past it are dropped.
const MAX_GRID_CELLS: usize = 1_000_000;
/// Most chars of cell text laid out for one table (spans repeat text).
const MAX_GRID_CHARS: usize = 64 << 20;

/// A table parsed from wikitext.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct ParsedTable {
    pub caption: Option<String>,
    pub section: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub links: Vec<CellLink>,
}

#[derive(Debug)]
struct RawCell {
    header: bool,
    attrs: String,
    src: String,
}

#[derive(Debug)]
struct Cell {
    header: bool,
    colspan: usize,
    rowspan: usize,
    text: String,
    links: Vec<String>,
}

/// Splits a cell line on `||` (and `!!` for header lines) outside `[[ ]]` and `{{ }}`.
fn split_cells(s: &str, header: bool) -> Vec<&str> {
    let b = s.as_bytes();
    let (mut braces, mut links) = (0usize, 0usize);
    let mut parts = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        let pair = (b[i], b.get(i + 1).copied().unwrap_or(0));
        match pair {
            (b'{', b'{') => braces += 1,
            (b'}', b'}') => braces = braces.saturating_sub(1),
            (b'[', b'[') => links += 1,
            (b']', b']') => links = links.saturating_sub(1),
            (b'|', b'|') if braces == 0 && links == 0 => {}
            (b'!', b'!') if header && braces == 0 && links == 0 => {}
            _ => {
                i += 1;
                continue;
            }
        }
        if matches!(pair, (b'|', b'|') | (b'!', b'!')) {
            parts.push(&s[start..i]);
            start = i + 2;
        }
        i += 2;
    }
    parts.push(&s[start..]);
    parts
}

const KNOWN_ATTRS: &[&str] = &[
    "colspan",
    "rowspan",
    "style",
    "align",
    "valign",
    "bgcolor",
    "class",
    "width",
    "height",
    "scope",
    "id",
    "data-sort-value",
    "data-sort-type",
    "nowrap",
];

/// Parses `name=value` attributes at the start of `s`; returns (attribute text, the rest) when
/// the attributes include a known one and the rest is empty or a template.
fn attr_prefix(s: &str) -> Option<(&str, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut end = 0;
    let mut known = false;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let name_start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'-') {
            i += 1;
        }
        if i == name_start {
            break;
        }
        let name = s[name_start..i].to_ascii_lowercase();
        let mut j = i;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        if b.get(j) != Some(&b'=') {
            break;
        }
        j += 1;
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        match b.get(j) {
            Some(&q @ (b'"' | b'\'')) => {
                let close = s[j + 1..].find(q as char)?;
                j += close + 2;
            }
            Some(_) => {
                while j < b.len() && !b[j].is_ascii_whitespace() && b[j] != b'{' && b[j] != b'|' {
                    j += 1;
                }
            }
            None => break,
        }
        known |= KNOWN_ATTRS.contains(&name.as_str());
        i = j;
        end = j;
    }
    let rest = s[end..].trim();
    (known && (rest.is_empty() || rest.starts_with("{{"))).then(|| (&s[..end], rest))
}

/// The last `name=N` in an attribute string.
fn span_attr(attrs: &str, name: &str) -> Option<usize> {
    let lower = attrs.to_ascii_lowercase();
    let mut found = None;
    let mut pos = 0;
    while let Some(off) = lower[pos..].find(name) {
        let at = pos + off;
        pos = at + name.len();
        let before_ok = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
        let rest = lower[pos..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        if !before_ok {
            continue;
        }
        let rest = rest
            .trim_start()
            .trim_start_matches(['"', '\''])
            .trim_start();
        let digits: String = rest
            .chars()
            .take_while(char::is_ascii_digit)
            .take(6)
            .collect();
        found = digits.parse::<usize>().ok();
    }
    found
}

fn raw_cell(part: &str, header: bool) -> RawCell {
    match find_top(part, b'|') {
        Some(p) => RawCell {
            header,
            attrs: part[..p].to_string(),
            src: part[p + 1..].to_string(),
        },
        None => match attr_prefix(part) {
            Some((attrs, rest)) => RawCell {
                header,
                attrs: attrs.to_string(),
                src: rest.to_string(),
            },
            None => RawCell {
                header,
                attrs: String::new(),
                src: part.to_string(),
            },
        },
    }
}

/// Lines of a table body, with the lines of a (closed) `{{...}}` spanning lines joined into
/// one (templates expand to one line in MediaWiki).
fn logical_lines(body: &str) -> Vec<&str> {
    let mut spans: Vec<(usize, usize)> = match_pairs(body.as_bytes(), *b"{{", *b"}}")
        .into_iter()
        .collect();
    spans.sort_unstable();
    // Newlines inside a top-level template do not end a line.
    let mut soft = Vec::new();
    let mut covered_to = 0;
    for (a, b) in spans {
        if b <= covered_to {
            continue;
        }
        let from = a.max(covered_to);
        soft.extend(memchr::memchr_iter(b'\n', &body.as_bytes()[from..b]).map(|i| from + i));
        covered_to = b;
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut soft = soft.into_iter().peekable();
    for nl in memchr::memchr_iter(b'\n', body.as_bytes()) {
        while soft.peek().is_some_and(|&s| s < nl) {
            soft.next();
        }
        if soft.peek() == Some(&nl) {
            continue;
        }
        out.push(&body[start..nl]);
        start = nl + 1;
    }
    out.push(&body[start..]);
    out
}

/// Parses a table body; `None` when it has no cells.
pub(crate) fn parse_table(body: &str, title: &str) -> Option<ParsedTable> {
    let mut rows: Vec<Vec<RawCell>> = vec![Vec::new()];
    let mut caption: Option<String> = None;
    // Where continuation lines go: 0 nowhere, 1 the last cell, 2 the caption.
    let mut cont = 0u8;
    for line in logical_lines(body) {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("|+") {
            let c = raw_cell(rest, false);
            caption = Some(c.src);
            cont = 2;
        } else if t.starts_with("|-") {
            rows.push(Vec::new());
            cont = 0;
        } else if t.starts_with('|') || t.starts_with('!') {
            let header = t.starts_with('!');
            let row = rows.last_mut().expect("rows is never empty");
            for part in split_cells(&t[1..], header) {
                row.push(raw_cell(part, header));
            }
            cont = 1;
        } else {
            match cont {
                1 => {
                    if let Some(c) = rows.last_mut().and_then(|r| r.last_mut()) {
                        c.src.push('\n');
                        c.src.push_str(line);
                    }
                }
                2 => {
                    if let Some(c) = caption.as_mut() {
                        c.push('\n');
                        c.push_str(line);
                    }
                }
                _ => {}
            }
        }
    }
    rows.retain(|r| !r.is_empty());
    if rows.is_empty() {
        return None;
    }

    // Clean the cells.
    let mut cells: Vec<Cell> = Vec::new();
    let mut row_cells: Vec<Vec<usize>> = Vec::with_capacity(rows.len());
    for row in rows {
        let mut ids = Vec::with_capacity(row.len());
        for rc in row {
            let out = clean_fragment(&rc.src, title, None, 0);
            cells.push(Cell {
                header: rc.header,
                colspan: span_attr(&rc.attrs, "colspan")
                    .unwrap_or(1)
                    .clamp(1, MAX_SPAN),
                rowspan: span_attr(&rc.attrs, "rowspan")
                    .unwrap_or(1)
                    .clamp(1, MAX_SPAN),
                text: out.text(),
                links: out.links.into_iter().map(|l| l.0).collect(),
            });
            ids.push(cells.len() - 1);
        }
        row_cells.push(ids);
    }
    let first_is_header = row_cells[0].iter().all(|&c| cells[c].header);

    // Lay the cells out on a grid.
    let mut grid: Vec<Vec<Option<usize>>> = Vec::with_capacity(row_cells.len());
    // Per column: (rows still covered, cell) of a rowspan from above.
    let mut carry: Vec<Option<(usize, usize)>> = Vec::new();
    let (mut width, mut n_chars) = (0usize, 0usize);
    for ids in &row_cells {
        let mut out: Vec<Option<usize>> = Vec::new();
        for (col, slot) in carry.iter_mut().enumerate() {
            if let Some((rem, id)) = slot {
                if out.len() <= col {
                    out.resize(col + 1, None);
                }
                out[col] = Some(*id);
                *rem -= 1;
                if *rem == 0 {
                    *slot = None;
                }
            }
        }
        let mut col = 0;
        for &id in ids {
            while out.get(col).is_some_and(Option::is_some) {
                col += 1;
            }
            let (cs, rs) = (cells[id].colspan, cells[id].rowspan);
            if out.len() < col + cs {
                out.resize(col + cs, None);
            }
            if carry.len() < col + cs {
                carry.resize(col + cs, None);
            }
            for j in col..col + cs {
                out[j] = Some(id);
                carry[j] = (rs > 1).then_some((rs - 1, id));
            }
            col += cs;
        }
        // Rows are padded to the widest: bound rows x width, and the text spans repeat.
        let w = width.max(out.len());
        n_chars += out
            .iter()
            .flatten()
            .map(|&id| cells[id].text.len())
            .sum::<usize>();
        if (grid.len() + 1) * w > MAX_GRID_CELLS || n_chars > MAX_GRID_CHARS {
            break;
        }
        width = w;
        grid.push(out);
    }
    if width == 0 {
        return None;
    }

    let mut table = ParsedTable {
        caption: caption
            .map(|c| clean_fragment(&c, title, None, 0).text())
            .filter(|c| !c.is_empty()),
        ..Default::default()
    };
    let text_of = |slot: &Option<usize>| slot.map(|id| cells[id].text.clone()).unwrap_or_default();
    let data_start = if first_is_header {
        table.header = (0..width)
            .map(|c| {
                let name = grid[0].get(c).map(text_of).unwrap_or_default();
                if name.is_empty() {
                    format!("col_{}", c + 1)
                } else {
                    name
                }
            })
            .collect();
        1
    } else {
        table.header = (1..=width).map(|c| format!("col_{c}")).collect();
        0
    };
    for (r, row) in grid.iter().enumerate() {
        let row_index = r as i32 - data_start as i32;
        for (c, slot) in row.iter().enumerate() {
            if let Some(id) = slot {
                for target in &cells[*id].links {
                    table.links.push(CellLink {
                        row: row_index,
                        col: c as i32,
                        target: target.clone(),
                    });
                }
            }
        }
        if r >= data_start {
            let mut values: Vec<String> = row.iter().map(text_of).collect();
            values.resize(width, String::new());
            table.rows.push(values);
        }
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_fill_the_grid() {
        let t = parse_table(
            "|+ The [[Caption]]\n|-\n! A !! colspan=\"2\" | B\n|-\n| rowspan=2 | [[X|x1]] || y1 || z1\n|-\n| y2 || z2\n|-\n| colspan=3 style=\"a\" | wide\n",
            "P",
        )
        .unwrap();
        assert_eq!(t.caption.as_deref(), Some("The Caption"));
        assert_eq!(t.header, vec!["A", "B", "B"]);
        assert_eq!(
            t.rows,
            vec![
                vec!["x1", "y1", "z1"],
                vec!["x1", "y2", "z2"],
                vec!["wide", "wide", "wide"]
            ]
        );
        assert_eq!(
            t.links,
            vec![
                CellLink {
                    row: 0,
                    col: 0,
                    target: "X".into()
                },
                CellLink {
                    row: 1,
                    col: 0,
                    target: "X".into()
                }
            ]
        );
    }

    #[test]
    fn generated_header_and_padding() {
        let t = parse_table("|-\n! Row head\n| a\n|-\n| b || c || d\n|-\n|-\n", "P").unwrap();
        assert_eq!(t.header, vec!["col_1", "col_2", "col_3"]);
        assert_eq!(t.rows, vec![vec!["Row head", "a", ""], vec!["b", "c", "d"]]);
        assert!(parse_table("|-\n|-\n", "P").is_none());
    }

    #[test]
    fn attributes_and_templates_in_cells() {
        let t = parse_table(
            "! x !! y\n|-\n| colspan=\"2\" {{CMain}}\n|-\n|bgcolor=white colspan=\"2\" {{n/a|}}\n|-\n| {{cite web\n |title=T\n |url=u}} text || [[a|b|c]]\n|-\n|style=border-right:0| ||style=border-left:0|{{IPA|m}}\n",
            "P",
        )
        .unwrap();
        assert_eq!(
            t.rows,
            vec![
                vec!["", ""],
                vec!["N/A", "N/A"],
                vec!["text", "b|c"],
                vec!["", "m"]
            ]
        );
        assert_eq!(
            span_attr("colspan=\"2\" ! colspan=\"1\" rowspan=\"2\"", "colspan"),
            Some(1)
        );
        assert_eq!(span_attr("style=\"x\" rowspan = '3'", "rowspan"), Some(3));
    }

    #[test]
    fn huge_spans_are_bounded() {
        let mut body = String::new();
        for _ in 0..2000 {
            body.push_str("|-\n| colspan=100000 rowspan=100000 | x\n");
        }
        let t = parse_table(&body, "P").unwrap();
        assert!(t.rows.len() * t.header.len() <= MAX_GRID_CELLS);
    }
}
