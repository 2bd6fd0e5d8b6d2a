//! Pass 0 of the cleaner: drops comments and the content of tags that carry no prose, and
//! escapes the content of `<nowiki>`/`<pre>` so later passes see no markup in it.

use std::collections::HashMap;

use memchr::memmem;

/// Tags whose content is not prose: dropped with everything inside.
const DROP_TAGS: &[&str] = &[
    "ref",
    "references",
    "math",
    "chem",
    "ce",
    "score",
    "timeline",
    "graph",
    "syntaxhighlight",
    "source",
    "templatedata",
    "templatestyles",
    "mapframe",
    "maplink",
    "imagemap",
    "gallery",
    "hiero",
    "inputbox",
    "categorytree",
    "includeonly",
    "section",
    "indicator",
    "charinsert",
    "langconvert",
    "style",
    "script",
];

/// Tags whose content is literal text.
const LITERAL_TAGS: &[&str] = &["nowiki", "pre"];

/// Finds the next occurrence of a tag (`<name` or `</name` followed by a non-name byte) at or
/// after a position, remembering the answer: positions asked for only grow, so all the searches
/// of one tag cost one scan of the text.
struct TagFinder {
    needle: Vec<u8>,
    cached: Option<Option<usize>>,
}

impl TagFinder {
    fn new(needle: String) -> TagFinder {
        TagFinder {
            needle: needle.into_bytes(),
            cached: None,
        }
    }

    fn find(&mut self, lower: &[u8], from: usize) -> Option<usize> {
        if let Some(c) = self.cached {
            match c {
                None => return None,
                Some(p) if p >= from => return Some(p),
                _ => {}
            }
        }
        let mut pos = from;
        let found = loop {
            if pos >= lower.len() {
                break None;
            }
            match memmem::find(&lower[pos..], &self.needle) {
                None => break None,
                Some(i) => {
                    let at = pos + i;
                    let next = lower.get(at + self.needle.len()).copied();
                    if next.is_none_or(|b| !b.is_ascii_alphanumeric()) {
                        break Some(at);
                    }
                    pos = at + 1;
                }
            }
        };
        self.cached = Some(found);
        found
    }
}

/// A parsed HTML-like tag at a position.
pub(super) struct Tag {
    pub(super) name: String,
    pub(super) closing: bool,
    pub(super) self_closing: bool,
    /// Byte index just past `>`.
    pub(super) end: usize,
}

pub(super) fn tag_at(s: &[u8], i: usize) -> Option<Tag> {
    let mut j = i + 1;
    let closing = s.get(j) == Some(&b'/');
    if closing {
        j += 1;
    }
    let name_start = j;
    if !s.get(j)?.is_ascii_alphabetic() {
        return None;
    }
    while j < s.len() && s[j].is_ascii_alphanumeric() {
        j += 1;
    }
    let name = String::from_utf8_lossy(&s[name_start..j]).to_ascii_lowercase();
    // The rest of the tag: attributes, up to `>`, within a bounded distance.
    let limit = (j + 2048).min(s.len());
    let mut quote: Option<u8> = None;
    while j < limit {
        let b = s[j];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None => match b {
                b'"' | b'\'' if j > name_start && s[j - 1] == b'=' => quote = Some(b),
                b'>' => {
                    let self_closing = s[j - 1] == b'/';
                    return Some(Tag {
                        name,
                        closing,
                        self_closing,
                        end: j + 1,
                    });
                }
                b'<' => return None,
                _ => {}
            },
        }
        j += 1;
    }
    None
}

/// Escapes markup characters of literal text as character references.
fn escape_literal(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '[' | ']' | '{' | '}' | '|' | '<' | '>' | '\'' | '=' | '*' | '#' | ':' | ';' | '!'
            | '_' | '-' | '&' => {
                out.push_str("&#");
                out.push_str(&(c as u32).to_string());
                out.push(';');
            }
            '\n' => out.push(' '),
            c => out.push(c),
        }
    }
}

/// Pass 0; see the module docs.
pub(crate) fn preprocess(src: &str) -> String {
    let bytes = src.as_bytes();
    let lower = src.to_ascii_lowercase().into_bytes();
    let mut out = String::with_capacity(src.len());
    let mut finders: HashMap<String, (TagFinder, TagFinder)> = HashMap::new();
    let mut i = 0;
    let mut copied = 0;
    while let Some(off) = memchr::memchr(b'<', &bytes[i..]) {
        let at = i + off;
        if bytes[at..].starts_with(b"<!--") {
            out.push_str(&src[copied..at]);
            // `-->` is followed by anything: search it plainly.
            let end = memmem::find(&bytes[at + 4..], b"-->").map(|e| at + 4 + e + 3);
            i = end.unwrap_or(bytes.len());
            copied = i;
            continue;
        }
        let Some(tag) = tag_at(bytes, at) else {
            i = at + 1;
            continue;
        };
        let drop = DROP_TAGS.contains(&tag.name.as_str());
        let literal = LITERAL_TAGS.contains(&tag.name.as_str());
        if !(drop || literal) {
            i = at + 1;
            continue;
        }
        out.push_str(&src[copied..at]);
        if tag.closing || tag.self_closing {
            // A stray closing tag or `<ref name="x" />`: drop the tag itself.
            i = tag.end;
            copied = i;
            continue;
        }
        let (open_f, close_f) = finders.entry(tag.name.clone()).or_insert_with(|| {
            (
                TagFinder::new(format!("<{}", tag.name)),
                TagFinder::new(format!("</{}", tag.name)),
            )
        });
        let close = close_f.find(&lower, tag.end);
        let reopen = open_f.find(&lower, tag.end);
        match close {
            Some(c) if reopen.is_none_or(|r| r > c) => {
                let close_end = memchr::memchr(b'>', &bytes[c..])
                    .map(|e| c + e + 1)
                    .unwrap_or(bytes.len());
                if literal {
                    escape_literal(&src[tag.end..c], &mut out);
                }
                i = close_end;
            }
            // Unclosed: drop the opening tag only.
            _ => i = tag.end,
        }
        copied = i;
    }
    out.push_str(&src[copied..]);
    out
}
