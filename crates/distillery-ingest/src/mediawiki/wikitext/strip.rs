//! Pass 2 of the cleaner: drops templates (through [`super::templates`]), file, category and
//! interlanguage links, magic words and HTML tags; nesting-aware splitting of markup.

use std::collections::HashMap;

use distillery_core::InfoboxField;

use super::MAX_DEPTH;
use super::preprocess::tag_at;
use super::templates::template;

pub(super) struct Ctx<'a> {
    pub(super) title: &'a str,
    /// Where infobox fields go; `None` drops infoboxes (inside table cells).
    pub(super) infobox: Option<&'a mut Vec<InfoboxField>>,
}

/// Matches `open`/`close` pairs (`{{`/`}}`, `[[`/`]]`) with a stack: open index -> index past
/// the close. Linear; unmatched opens are absent.
pub(crate) fn match_pairs(s: &[u8], open: [u8; 2], close: [u8; 2]) -> HashMap<usize, usize> {
    let mut map = HashMap::new();
    // No opener, no pairs: most cells and lines have none, and the scan below is not free.
    let Some(first) = memchr::memmem::find(s, &open) else {
        return map;
    };
    let mut stack = Vec::new();
    let mut i = first;
    while i + 1 < s.len() {
        if s[i] == open[0] && s[i + 1] == open[1] {
            stack.push(i);
            i += 2;
        } else if s[i] == close[0] && s[i + 1] == close[1] {
            if let Some(p) = stack.pop() {
                map.insert(p, i + 2);
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    map
}

/// Splits on `sep` at nesting depth 0 of `{{ }}` and `[[ ]]`.
pub(crate) fn split_top(s: &str, sep: u8) -> Vec<&str> {
    let b = s.as_bytes();
    let mut parts = Vec::new();
    let (mut braces, mut links) = (0usize, 0usize);
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        let two = b.get(i + 1).copied();
        match (b[i], two) {
            (b'{', Some(b'{')) => {
                braces += 1;
                i += 2;
                continue;
            }
            (b'}', Some(b'}')) if braces > 0 => {
                braces -= 1;
                i += 2;
                continue;
            }
            (b'[', Some(b'[')) => {
                links += 1;
                i += 2;
                continue;
            }
            (b']', Some(b']')) if links > 0 => {
                links -= 1;
                i += 2;
                continue;
            }
            (c, _) if c == sep && braces == 0 && links == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&s[start..]);
    parts
}

/// Finds `sep` at depth 0 (see [`split_top`]).
pub(crate) fn find_top(s: &str, sep: u8) -> Option<usize> {
    let first = split_top(s, sep).into_iter().next()?;
    (first.len() < s.len()).then_some(first.len())
}

const FILE_NAMESPACES: &[&str] = &["file", "image", "category", "media"];
/// Interwiki prefixes that render as visible links (not interlanguage links).
const INTERWIKI: &[&str] = &[
    "w",
    "wp",
    "wikt",
    "s",
    "b",
    "n",
    "q",
    "v",
    "c",
    "d",
    "m",
    "f",
    "mw",
    "voy",
    "wikipedia",
    "wiktionary",
    "wikisource",
    "wikibooks",
    "wikinews",
    "wikiquote",
    "wikiversity",
    "wikivoyage",
    "commons",
    "meta",
    "species",
    "wikispecies",
    "wikidata",
    "foundation",
    "phab",
    "doi",
];

fn is_language_code(p: &str) -> bool {
    if p == "simple" {
        return true;
    }
    let mut parts = p.split('-');
    let first = parts.next().unwrap_or("");
    (2..=3).contains(&first.len())
        && first.bytes().all(|b| b.is_ascii_lowercase())
        && parts.all(|x| {
            !x.is_empty()
                && x.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Whether `[[inner]]` is a link that renders no text: a file, a category or an interlanguage
/// link.
pub(super) fn is_hidden_link(inner: &str) -> bool {
    let head = &inner.as_bytes()[..inner.len().min(64)];
    let Some(colon) = head.iter().position(|&b| b == b':') else {
        return false;
    };
    let prefix = String::from_utf8_lossy(&head[..colon]);
    let prefix = prefix.trim();
    if prefix.is_empty() || prefix.contains('|') {
        return false;
    }
    let lower = prefix.to_lowercase();
    if FILE_NAMESPACES.contains(&lower.as_str()) {
        return true;
    }
    prefix == lower && !INTERWIKI.contains(&prefix) && is_language_code(prefix)
}

/// Tags removed with their text kept; those mapped to a separator become it.
fn tag_replacement(name: &str) -> Option<&'static str> {
    Some(match name {
        "br" | "hr" | "li" | "tr" | "p" | "div" | "dd" | "dt" | "ul" | "ol" | "dl"
        | "blockquote" | "poem" | "center" | "table" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
            "\n"
        }
        "td" | "th" | "wbr" => " ",
        "b" | "i" | "u" | "s" | "strike" | "del" | "ins" | "em" | "strong" | "small" | "big"
        | "sup" | "sub" | "span" | "font" | "cite" | "code" | "tt" | "kbd" | "samp" | "var"
        | "abbr" | "q" | "mark" | "dfn" | "bdi" | "bdo" | "ruby" | "rb" | "rt" | "rp" | "data"
        | "time" | "noinclude" | "onlyinclude" | "caption" | "tbody" | "thead" | "tfoot" | "a"
        | "nowiki" | "pre" | "references" | "ref" | "includeonly" => "",
        _ => return None,
    })
}

/// Pass 2 over `src`, appending to `out`.
pub(super) fn strip_into(src: &str, out: &mut String, ctx: &mut Ctx<'_>, depth: usize) {
    let b = src.as_bytes();
    let templates = match_pairs(b, *b"{{", *b"}}");
    let links = match_pairs(b, *b"[[", *b"]]");
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        let c = b[i];
        if !matches!(c, b'{' | b'[' | b'<' | b'_') {
            i += 1;
            continue;
        }
        let next = b.get(i + 1).copied();
        match (c, next) {
            (b'{', Some(b'{')) => {
                let Some(&end) = templates.get(&i) else {
                    i += 2;
                    continue;
                };
                out.push_str(&src[copied..i]);
                if depth < MAX_DEPTH {
                    template(&src[i + 2..end - 2], out, ctx, depth + 1);
                }
                i = end;
                copied = i;
            }
            (b'[', Some(b'[')) => {
                match links.get(&i) {
                    Some(&end) if is_hidden_link(&src[i + 2..end - 2]) => {
                        out.push_str(&src[copied..i]);
                        i = end;
                        copied = i;
                    }
                    // A visible link: pass 3 handles it; its insides are stripped here.
                    _ => i += 2,
                }
            }
            (b'<', _) => match tag_at(b, i) {
                Some(tag) => match tag_replacement(&tag.name) {
                    Some(rep) => {
                        out.push_str(&src[copied..i]);
                        out.push_str(rep);
                        i = tag.end;
                        copied = i;
                    }
                    None => i += 1,
                },
                None => i += 1,
            },
            (b'_', Some(b'_')) => {
                let name_len = b[i + 2..]
                    .iter()
                    .take(32)
                    .take_while(|x| x.is_ascii_uppercase())
                    .count();
                if name_len > 0 && b[i + 2 + name_len..].starts_with(b"__") {
                    out.push_str(&src[copied..i]);
                    i += name_len + 4;
                    copied = i;
                } else {
                    i += 2;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&src[copied..]);
}
