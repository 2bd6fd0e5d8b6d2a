//! Pass 3 of the cleaner: inline markup (`[[links]]`, `[url labels]`, quotes, entities) into
//! clean chars with the links found in them.

use std::borrow::Cow;

use distillery_core::InfoboxField;

use super::entities::{decode_entities, entity_at};
use super::strip::{Ctx, is_hidden_link, match_pairs, strip_into};
use super::templates::normalize_name;

/// Clean text being built, in chars, with the links found in it (char offsets).
#[derive(Debug, Default, Clone)]
pub(crate) struct Out {
    pub chars: Vec<char>,
    pub links: Vec<(String, usize, usize)>,
}

impl Out {
    pub(crate) fn text(&self) -> String {
        self.chars.iter().collect()
    }

    fn last(&self) -> Option<char> {
        self.chars.last().copied()
    }

    fn pop(&mut self) {
        self.chars.pop();
        let n = self.chars.len();
        for l in &mut self.links {
            l.2 = l.2.min(n);
            l.1 = l.1.min(l.2);
        }
        self.links.retain(|l| l.2 > l.1);
    }

    /// Appends a char, collapsing runs of whitespace into one space and tidying what removed
    /// markup leaves behind (a space before `,` `;` `)`, empty `()`).
    fn push(&mut self, c: char) {
        let c = match c {
            '\r' => return,
            // Tabs, no-break and other spaces: one plain space, so spans trim cleanly.
            c if c != '\n' && c.is_whitespace() => ' ',
            c => c,
        };
        match c {
            ' ' if self.last().is_none_or(|l| l == ' ' || l == '\n') => return,
            '\n' => {
                while self.last() == Some(' ') {
                    self.pop();
                }
            }
            ',' | ';' | ')' => {
                if self.last() == Some(' ') {
                    self.pop();
                }
                if c == ')' && self.last() == Some('(') {
                    self.pop();
                    return;
                }
            }
            _ => {}
        }
        self.chars.push(c);
    }

    fn push_str(&mut self, s: &str) {
        for c in s.chars() {
            self.push(c);
        }
    }

    /// Removes trailing whitespace.
    pub(crate) fn trim_end(&mut self) {
        while self.last().is_some_and(char::is_whitespace) {
            self.pop();
        }
    }

    /// Appends another `Out` as is, shifting its links.
    pub(super) fn append(&mut self, other: Out) {
        let base = self.chars.len();
        self.chars.extend(other.chars);
        self.links.extend(
            other
                .links
                .into_iter()
                .map(|(t, a, b)| (t, a + base, b + base)),
        );
    }
}

/// Normalizes a link target to a page title: no fragment, `_` as space, first letter upper
/// case; `[[#Section]]` links to `page`.
pub(crate) fn normalize_target(raw: &str, page: &str) -> String {
    let decoded = decode_entities(raw);
    let t = decoded.trim().trim_start_matches(':').trim();
    let t = match t.find('#') {
        Some(0) => page,
        Some(i) => &t[..i],
        None => t,
    };
    let t = normalize_name(t);
    let mut cs = t.chars();
    match cs.next() {
        Some(f) if !t.contains("://") => f.to_uppercase().chain(cs).collect(),
        _ => t,
    }
}

const URL_SCHEMES: &[&str] = &[
    "http://",
    "https://",
    "ftp://",
    "ftps://",
    "//",
    "mailto:",
    "news:",
    "irc://",
    "ircs://",
    "gopher://",
    "sftp://",
    "git://",
    "svn://",
];

/// Pass 3 over `src` (one line, or a fragment), appending to `out`.
pub(super) fn inline(src: &str, out: &mut Out, title: &str, depth: usize) {
    let b = src.as_bytes();
    let links = match_pairs(b, *b"[[", *b"]]");
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'[' if b.get(i + 1) == Some(&b'[') => {
                if let Some(&end) = links.get(&i)
                    && let Some(next) = wikilink(src, i, end, out, title, depth)
                {
                    i = next;
                    continue;
                }
                out.push('[');
                out.push('[');
                i += 2;
            }
            b'[' => {
                if let Some(next) = ext_link(src, i, out, title, depth) {
                    i = next;
                } else {
                    out.push('[');
                    i += 1;
                }
            }
            b'\'' if b.get(i + 1) == Some(&b'\'') => {
                let n = b[i..].iter().take_while(|&&x| x == b'\'').count();
                let literal = match n {
                    4 => 1,
                    n if n > 5 => n - 5,
                    _ => 0,
                };
                for _ in 0..literal {
                    out.push('\'');
                }
                i += n;
            }
            b'&' => match entity_at(&src[i..]) {
                Some((t, n)) => {
                    out.push_str(&t);
                    i += n;
                }
                None => {
                    out.push('&');
                    i += 1;
                }
            },
            _ => {
                let ch = src[i..].chars().next().unwrap_or('\u{fffd}');
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
}

/// `[[target|anchor]]trail` at `i..end`; returns where to continue, or `None` to print it
/// literally.
fn wikilink(
    src: &str,
    i: usize,
    end: usize,
    out: &mut Out,
    title: &str,
    depth: usize,
) -> Option<usize> {
    let inner = &src[i + 2..end - 2];
    let (target_raw, anchor) = match inner.find('|') {
        Some(p) => (&inner[..p], Some(&inner[p + 1..])),
        None => (inner, None),
    };
    if target_raw.len() > 512
        || target_raw.trim().is_empty()
        || target_raw.contains(['[', ']', '{', '}', '\n', '<', '>'])
        || depth >= 8
    {
        return None;
    }
    if is_hidden_link(inner) {
        return Some(end);
    }
    let target = normalize_target(target_raw, title);
    let display: String = match anchor {
        Some(a) if !a.trim().is_empty() => a.to_string(),
        Some(_) => {
            // The pipe trick: `[[Foo (bar)|]]` shows `Foo`.
            let t = target_raw.trim().trim_start_matches(':');
            let t = t.split_once(':').map_or(t, |(_, r)| r);
            t.split(" (").next().unwrap_or(t).trim().to_string()
        }
        None => target_raw.trim().trim_start_matches(':').to_string(),
    };
    // The link trail: `[[apple]]s` shows `apples`.
    let trail_len = src[end..]
        .bytes()
        .take_while(|b| b.is_ascii_lowercase())
        .count();
    let mut anchor_out = Out::default();
    inline(&display, &mut anchor_out, title, depth + 1);
    anchor_out.push_str(&src[end..end + trail_len]);
    anchor_out.trim_end();
    let lead = anchor_out
        .chars
        .iter()
        .take_while(|c| c.is_whitespace())
        .count();
    anchor_out.chars.drain(..lead);
    // Nested links of the anchor are dropped: the outer link covers the text.
    anchor_out.links.clear();
    let a = out.chars.len();
    let n = anchor_out.chars.len();
    out.append(anchor_out);
    if n > 0 && !target.is_empty() {
        out.links.push((target, a, a + n));
    }
    Some(end + trail_len)
}

/// `[url label]` at `i`; returns where to continue, or `None` when it is no external link.
fn ext_link(src: &str, i: usize, out: &mut Out, title: &str, depth: usize) -> Option<usize> {
    let rest = &src[i + 1..];
    if !URL_SCHEMES.iter().any(|s| {
        rest.len() >= s.len() && rest.as_bytes()[..s.len()].eq_ignore_ascii_case(s.as_bytes())
    }) {
        return None;
    }
    let close = rest
        .bytes()
        .take(4096)
        .position(|b| b == b']' || b == b'\n')?;
    if rest.as_bytes()[close] != b']' {
        return None;
    }
    let inner = &rest[..close];
    let (url, label) = match inner.find([' ', '\t']) {
        Some(p) => (&inner[..p], inner[p + 1..].trim()),
        None => (inner, ""),
    };
    if label.is_empty() {
        // Rendered as a bare `[1]`: drop it with the space before it.
        if out.last() == Some(' ') {
            out.pop();
        }
    } else if depth < 8 {
        let mut anchor = Out::default();
        inline(label, &mut anchor, title, depth + 1);
        anchor.trim_end();
        anchor.links.clear();
        let a = out.chars.len();
        let n = anchor.chars.len();
        out.append(anchor);
        if n > 0 {
            out.links.push((decode_entities(url), a, a + n));
        }
    }
    Some(i + 1 + close + 1)
}

pub(super) fn strip_list_markers(line: &str) -> &str {
    line.trim_start_matches(['*', '#', ':', ';']).trim_start()
}

/// Cleans a fragment (a table cell, an infobox value, a caption, a heading): passes 2 and 3,
/// with lines joined by spaces.
pub(crate) fn clean_fragment(
    src: &str,
    title: &str,
    infobox: Option<&mut Vec<InfoboxField>>,
    depth: usize,
) -> Out {
    let mut ctx = Ctx { title, infobox };
    clean_fragment_ctx(src, &mut ctx, depth)
}

pub(super) fn clean_fragment_ctx(src: &str, ctx: &mut Ctx<'_>, depth: usize) -> Out {
    // Pass 2 only acts at `{`, `[`, `<` and `_`; without them it would copy `src` as is.
    let mid: Cow<'_, str> = if src.bytes().any(|c| matches!(c, b'{' | b'[' | b'<' | b'_')) {
        let mut mid = String::with_capacity(src.len());
        strip_into(src, &mut mid, ctx, depth);
        Cow::Owned(mid)
    } else {
        Cow::Borrowed(src)
    };
    let mut out = Out::default();
    for line in mid.split('\n') {
        let t = strip_list_markers(line.trim());
        if t.is_empty() {
            continue;
        }
        if !out.chars.is_empty() {
            out.push(' ');
        }
        inline(t, &mut out, ctx.title, 0);
        out.trim_end();
    }
    out.trim_end();
    out
}
