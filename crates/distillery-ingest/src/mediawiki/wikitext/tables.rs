//! Pass 1 of the cleaner: cuts the `{| ... |}` tables out of a page, noting the heading each
//! one sits under.

use super::MAX_DEPTH;
use super::inline::clean_fragment;

type OpenTable = (usize, String, Option<String>);

fn close_top(stack: &mut Vec<OpenTable>, tables: &mut [Option<TableSrc>]) {
    if let Some((slot, body, section)) = stack.pop() {
        tables[slot] = Some(TableSrc { body, section });
    }
}

/// The source of one table cut out of a page.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TableSrc {
    /// The lines between `{|` and `|}`, nested tables removed.
    pub body: String,
    pub section: Option<String>,
}

/// A heading line: `(level, raw title)`.
pub(crate) fn heading(line: &str) -> Option<(u32, &str)> {
    let t = line.trim_end();
    if !t.starts_with('=') || !t.ends_with('=') || t.len() < 3 {
        return None;
    }
    let left = t.bytes().take_while(|&b| b == b'=').count();
    let right = t.bytes().rev().take_while(|&b| b == b'=').count();
    if left >= t.len() {
        return None;
    }
    let level = left.min(right).min(6);
    let inner = &t[level..t.len() - level];
    if inner.trim().is_empty() {
        return None;
    }
    Some((level as u32, inner))
}

fn closes_table(t: &str) -> bool {
    // `|}}` alone closes a template whose last argument is empty, not a table.
    t.starts_with("|}") && (!t.starts_with("|}}") || t.starts_with("|}}}"))
}

/// Cuts the tables out of a page; returns the rest of the text and the tables in the order
/// they open.
pub(crate) fn extract_tables(text: &str, title: &str) -> (String, Vec<TableSrc>) {
    let mut out = String::with_capacity(text.len());
    let mut tables: Vec<Option<TableSrc>> = Vec::new();
    // Open tables: (slot in `tables`, body so far, section).
    let mut stack: Vec<OpenTable> = Vec::new();
    let mut section: Option<String> = None;
    for line in text.split('\n') {
        let t = line.trim_start();
        if t.starts_with("{|") && stack.len() < MAX_DEPTH {
            tables.push(None);
            stack.push((tables.len() - 1, String::new(), section.clone()));
            continue;
        }
        if let Some(top) = stack.last_mut() {
            if closes_table(t) {
                close_top(&mut stack, &mut tables);
                let rest = &t[2..];
                match stack.last_mut() {
                    Some(outer) => {
                        if !rest.trim().is_empty() {
                            outer.1.push_str(rest);
                            outer.1.push('\n');
                        }
                    }
                    None => {
                        // Keep the blocks around the table apart.
                        out.push('\n');
                        out.push_str(rest);
                        out.push('\n');
                    }
                }
            } else {
                top.1.push_str(line);
                top.1.push('\n');
            }
            continue;
        }
        if let Some((_, raw)) = heading(line) {
            let h = clean_fragment(raw, title, None, 0).text();
            section = (!h.is_empty()).then_some(h);
        }
        out.push_str(line);
        out.push('\n');
    }
    while !stack.is_empty() {
        close_top(&mut stack, &mut tables);
    }
    (out, tables.into_iter().flatten().collect())
}
