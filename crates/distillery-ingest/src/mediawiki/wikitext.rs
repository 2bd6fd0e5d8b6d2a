//! Wikitext to clean text, with sections, paragraphs, sentences, links, infobox fields and
//! tables.
//!
//! A hand-written cleaner in four passes, each linear in the page (nesting is capped at
//! [`MAX_DEPTH`], so a pathological page costs at most `MAX_DEPTH` times its length):
//!
//! 0. [`preprocess`]: drop comments and the content of tags that carry no prose (`<ref>`,
//!    `<math>`, `<gallery>`, ...); turn `<nowiki>`/`<pre>` content into character references
//!    so later passes see no markup in it.
//! 1. [`extract_tables`]: cut every `{| ... |}` table out of the text, line by line (nested
//!    tables, and tables inside template arguments, become tables of their own), noting the
//!    heading each one sits under; [`crate::mediawiki::table`] parses them.
//! 2. `strip`: templates (dropped, except a few inline ones whose text is kept, and infoboxes,
//!    which become [`InfoboxField`]s), file/category/interlanguage links (dropped with their
//!    nested captions), magic words and HTML tags (tags dropped, text kept).
//! 3. Lines: headings open [`Section`]s, blank lines separate paragraphs, list markers go, and
//!    each line gets `inline`: `[[links]]` and `[http://x labels]` become their anchor text with
//!    a [`Link`], bold/italic quotes go, HTML entities are decoded (`&nbsp;` to a plain space).
//!
//! The clean text is the blocks (heading lines and paragraphs) joined by blank lines. All
//! offsets are char (code point) offsets into it, built on a `Vec<char>` so they are exact by
//! construction.

use std::collections::HashMap;

use distillery_core::{InfoboxField, Link, Paragraph, Section, Sentence};
use memchr::memmem;

use super::table::{self, ParsedTable};

/// Deepest nesting of templates, links and tables followed; deeper markup is dropped.
pub(crate) const MAX_DEPTH: usize = 24;

/// A page turned into clean text and structure.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Parsed {
    pub text: String,
    pub sections: Vec<Section>,
    pub paragraphs: Vec<Paragraph>,
    pub sentences: Vec<Sentence>,
    pub links: Vec<Link>,
    pub infobox: Vec<InfoboxField>,
    pub tables: Vec<ParsedTable>,
    /// Target of a `#REDIRECT [[...]]` at the start of the text.
    pub redirect: Option<String>,
}

/// Cleans a page's wikitext.
pub(crate) fn parse(wikitext: &str, title: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let pre = preprocess(wikitext);
    let (body, redirect) = split_redirect(&pre);
    parsed.redirect = redirect;
    let (rest, table_srcs) = extract_tables(body, title);
    for src in table_srcs {
        if let Some(mut t) = table::parse_table(&src.body, title) {
            t.section = src.section;
            parsed.tables.push(t);
        }
    }
    let mut ctx = Ctx {
        title,
        infobox: Some(&mut parsed.infobox),
    };
    let mut mid = String::with_capacity(rest.len());
    strip_into(&rest, &mut mid, &mut ctx, 0);
    build_document(&mid, title, &mut parsed);
    parsed
}

fn split_redirect(text: &str) -> (&str, Option<String>) {
    let t = text.trim_start();
    let Some(head) = t.get(..9) else {
        return (text, None);
    };
    if !head.eq_ignore_ascii_case("#redirect") {
        return (text, None);
    }
    let after = t[9..].trim_start_matches([' ', '\t', ':']);
    let Some(inner) = after.strip_prefix("[[") else {
        return (text, None);
    };
    let Some(end) = inner.find("]]") else {
        return (text, None);
    };
    let target = inner[..end].split('|').next().unwrap_or("");
    let target = normalize_target(target, "");
    let rest = &inner[end + 2..];
    (rest, (!target.is_empty()).then_some(target))
}

// ---------------------------------------------------------------------------------------------
// Pass 0: comments, content-free tags, nowiki.

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
struct Tag {
    name: String,
    closing: bool,
    self_closing: bool,
    /// Byte index just past `>`.
    end: usize,
}

fn tag_at(s: &[u8], i: usize) -> Option<Tag> {
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

// ---------------------------------------------------------------------------------------------
// Pass 1: tables.

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

// ---------------------------------------------------------------------------------------------
// Pass 2: templates, file links, tags.

struct Ctx<'a> {
    title: &'a str,
    /// Where infobox fields go; `None` drops infoboxes (inside table cells).
    infobox: Option<&'a mut Vec<InfoboxField>>,
}

/// Matches `open`/`close` pairs (`{{`/`}}`, `[[`/`]]`) with a stack: open index -> index past
/// the close. Linear; unmatched opens are absent.
pub(crate) fn match_pairs(s: &[u8], open: [u8; 2], close: [u8; 2]) -> HashMap<usize, usize> {
    let mut stack = Vec::new();
    let mut map = HashMap::new();
    let mut i = 0;
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
fn is_hidden_link(inner: &str) -> bool {
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
fn strip_into(src: &str, out: &mut String, ctx: &mut Ctx<'_>, depth: usize) {
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

fn normalize_name(s: &str) -> String {
    let s = s.replace('_', " ");
    let mut out = String::with_capacity(s.len());
    for w in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

/// Positional (unnamed) arguments of a template.
fn positional<'s>(args: &[&'s str]) -> Vec<&'s str> {
    args.iter()
        .copied()
        .filter(|a| find_top(a, b'=').is_none())
        .map(str::trim)
        .collect()
}

fn named<'s>(args: &[&'s str], key: &str) -> Option<&'s str> {
    args.iter().find_map(|a| {
        let eq = find_top(a, b'=')?;
        (a[..eq].trim() == key).then(|| a[eq + 1..].trim())
    })
}

fn date_from(args: &[&str]) -> String {
    let nums: Vec<&str> = args
        .iter()
        .copied()
        .filter(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()))
        .take(3)
        .collect();
    match nums.as_slice() {
        [y, m, d] => format!("{y}-{m:0>2}-{d:0>2}"),
        [y, m] => format!("{y}-{m:0>2}"),
        [y] => y.to_string(),
        _ => args.first().copied().unwrap_or("").to_string(),
    }
}

/// The wikitext an inline template stands for, or `None` to drop it.
fn expand(name: &str, args: &[&str]) -> Option<String> {
    let pos = positional(args);
    let p = |i: usize| pos.get(i).copied().unwrap_or("");
    if let Some((func, arg)) = name.split_once(':') {
        return match func.trim().to_lowercase().as_str() {
            "formatnum" | "lc" | "uc" | "lcfirst" | "ucfirst" => Some(arg.trim().to_string()),
            _ => None,
        };
    }
    let lower = name.to_lowercase();
    let text = match lower.as_str() {
        "lang" | "sort" | "color" | "colour" | "url" => {
            if pos.len() > 1 { p(1) } else { p(0) }.to_string()
        }
        "nowrap" | "small" | "smaller" | "big" | "larger" | "nobold" | "noitalic" | "em"
        | "strong" | "sup" | "sub" | "abbr" | "ipa" | "mvar" | "math" | "var" | "code" | "kbd"
        | "samp" | "tt" | "small caps" | "smallcaps" | "sc" | "flag" | "flagcountry" | "flagu"
        | "nts" | "ntsh" | "nihongo" | "visible anchor" | "tooltip" | "center" | "nowrap begin"
        | "lang-x" | "transl" | "keypress" | "mono" | "highlight" | "linktext" => p(0).to_string(),
        "sortname" => format!("{} {}", p(0), p(1)),
        "convert" | "cvt" => {
            let range = [
                "to", "-", "–", "and", "or", "by", "x", "×", "+/-", "to(-)", "and(-)",
            ];
            if pos.len() >= 4 && range.contains(&p(1)) {
                format!("{} {} {} {}", p(0), p(1), p(2), p(3))
            } else {
                format!("{} {}", p(0), p(1))
            }
        }
        "ill" | "interlanguage link" | "interlanguage link multi" => {
            let label = named(args, "lt").unwrap_or(p(0));
            format!("[[{}|{}]]", p(0), label)
        }
        "ubl" | "unbulleted list" | "plainlist" | "plain list" | "flatlist" | "flat list"
        | "bulleted list" | "blist" => pos.join("\n"),
        "hlist" => pos.join(" · "),
        "birth date" | "birth date and age" | "death date" | "death date and age"
        | "start date" | "end date" | "start date and age" | "end date and age" | "dob" | "bda"
        | "dda" => date_from(&pos),
        "circa" | "c." => format!("c. {}", p(0)),
        "nbsp" => " ".to_string(),
        "ndash" => "–".to_string(),
        "mdash" => "—".to_string(),
        "snd" | "spaced ndash" | "spaced en dash" => " – ".to_string(),
        "!" => "&#124;".to_string(),
        "=" => "&#61;".to_string(),
        "yes" | "no" | "partial" | "won" | "nom" | "n/a" | "na" | "dunno" => {
            let default = match lower.as_str() {
                "yes" => "Yes",
                "no" => "No",
                "partial" => "Partial",
                "won" => "Won",
                "nom" => "Nominated",
                "dunno" => "?",
                _ => "N/A",
            };
            if p(0).is_empty() { default } else { p(0) }.to_string()
        }
        _ if lower.starts_with("lang-") || lower.starts_with("ipa-") => p(0).to_string(),
        _ => return None,
    };
    Some(text)
}

fn template(inner: &str, out: &mut String, ctx: &mut Ctx<'_>, depth: usize) {
    let parts = split_top(inner, b'|');
    let mut name = parts[0].trim();
    for prefix in ["subst:", "safesubst:", "Template:", "template:", "msgnw:"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            name = rest.trim();
        }
    }
    if name.starts_with('#') || name.starts_with('{') {
        return;
    }
    let name = normalize_name(name);
    let args = &parts[1..];
    if name
        .get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("infobox"))
    {
        if ctx.infobox.is_some() {
            infobox(&name, args, ctx, depth);
        }
        return;
    }
    if let Some(text) = expand(&name, args) {
        strip_into(&text, out, ctx, depth);
    }
}

fn infobox(name: &str, args: &[&str], ctx: &mut Ctx<'_>, depth: usize) {
    for arg in args {
        let Some(eq) = find_top(arg, b'=') else {
            continue;
        };
        let key = normalize_name(arg[..eq].trim());
        if key.is_empty() {
            continue;
        }
        let mut sub = Ctx {
            title: ctx.title,
            infobox: ctx.infobox.as_deref_mut(),
        };
        let value = clean_fragment_ctx(&arg[eq + 1..], &mut sub, depth).text();
        if value.is_empty() {
            continue;
        }
        if let Some(fields) = ctx.infobox.as_deref_mut() {
            fields.push(InfoboxField {
                template: name.to_string(),
                key,
                value,
            });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pass 3: inline markup into chars with links.

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
    fn append(&mut self, other: Out) {
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

fn entity(name: &str) -> Option<&'static str> {
    Some(match name {
        "nbsp" | "ensp" | "emsp" | "thinsp" | "numsp" | "puncsp" | "hairsp" => " ",
        "amp" => "&",
        "lt" => "<",
        "gt" => ">",
        "quot" => "\"",
        "apos" => "'",
        "ndash" => "–",
        "mdash" => "—",
        "minus" => "−",
        "times" => "×",
        "divide" => "÷",
        "deg" => "°",
        "plusmn" => "±",
        "hellip" => "…",
        "laquo" => "«",
        "raquo" => "»",
        "lsquo" => "‘",
        "rsquo" => "’",
        "sbquo" => "‚",
        "ldquo" => "“",
        "rdquo" => "”",
        "bdquo" => "„",
        "bull" => "•",
        "middot" => "·",
        "copy" => "©",
        "reg" => "®",
        "trade" => "™",
        "euro" => "€",
        "pound" => "£",
        "yen" => "¥",
        "cent" => "¢",
        "sect" => "§",
        "para" => "¶",
        "frac12" => "½",
        "frac14" => "¼",
        "frac34" => "¾",
        "sup1" => "¹",
        "sup2" => "²",
        "sup3" => "³",
        "micro" => "µ",
        "prime" => "′",
        "Prime" => "″",
        "larr" => "←",
        "rarr" => "→",
        "uarr" => "↑",
        "darr" => "↓",
        "harr" => "↔",
        "rArr" => "⇒",
        "lArr" => "⇐",
        "hArr" => "⇔",
        "le" => "≤",
        "ge" => "≥",
        "ne" => "≠",
        "asymp" => "≈",
        "infin" => "∞",
        "dagger" => "†",
        "Dagger" => "‡",
        "permil" => "‰",
        "iexcl" => "¡",
        "iquest" => "¿",
        "ordm" => "º",
        "ordf" => "ª",
        "not" => "¬",
        "shy" | "zwj" | "zwnj" | "lrm" | "rlm" => "",
        "alpha" => "α",
        "beta" => "β",
        "gamma" => "γ",
        "delta" => "δ",
        "epsilon" => "ε",
        "lambda" => "λ",
        "mu" => "μ",
        "pi" => "π",
        "sigma" => "σ",
        "omega" => "ω",
        "Delta" => "Δ",
        "Sigma" => "Σ",
        "Omega" => "Ω",
        "eacute" => "é",
        "egrave" => "è",
        "aacute" => "á",
        "agrave" => "à",
        "oacute" => "ó",
        "uacute" => "ú",
        "iacute" => "í",
        "ntilde" => "ñ",
        "ouml" => "ö",
        "uuml" => "ü",
        "auml" => "ä",
        "Ouml" => "Ö",
        "Uuml" => "Ü",
        "Auml" => "Ä",
        "szlig" => "ß",
        "ccedil" => "ç",
        _ => return None,
    })
}

/// Decodes an HTML entity at the start of `s` (which starts with `&`): (text, bytes used).
fn entity_at(s: &str) -> Option<(String, usize)> {
    let end = s.as_bytes().iter().take(34).position(|&b| b == b';')?;
    let name = &s[1..end];
    if name.is_empty() {
        return None;
    }
    let text = if name.starts_with('#') {
        super::xml::decode_char_ref(name)?.to_string()
    } else {
        entity(name)?.to_string()
    };
    Some((text, end + 1))
}

/// Decodes HTML entities in plain text.
pub(crate) fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(off) = s[i..].find('&') {
        out.push_str(&s[i..i + off]);
        let at = i + off;
        match entity_at(&s[at..]) {
            Some((t, n)) => {
                out.push_str(&t);
                i = at + n;
            }
            None => {
                out.push('&');
                i = at + 1;
            }
        }
    }
    out.push_str(&s[i..]);
    out
}

/// Pass 3 over `src` (one line, or a fragment), appending to `out`.
fn inline(src: &str, out: &mut Out, title: &str, depth: usize) {
    let b = src.as_bytes();
    let links = if memmem::find(b, b"[[").is_some() {
        match_pairs(b, *b"[[", *b"]]")
    } else {
        HashMap::new()
    };
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

fn strip_list_markers(line: &str) -> &str {
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

fn clean_fragment_ctx(src: &str, ctx: &mut Ctx<'_>, depth: usize) -> Out {
    let mut mid = String::with_capacity(src.len());
    strip_into(src, &mut mid, ctx, depth);
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

// ---------------------------------------------------------------------------------------------
// Document assembly.

enum Block {
    Heading { level: u32, out: Out },
    Para(Out),
}

fn build_document(mid: &str, title: &str, parsed: &mut Parsed) {
    let mut blocks: Vec<Block> = Vec::new();
    let mut para: Option<Out> = None;
    let flush = |para: &mut Option<Out>, blocks: &mut Vec<Block>| {
        if let Some(p) = para.take() {
            blocks.push(Block::Para(p));
        }
    };
    for line in mid.split('\n') {
        if let Some((level, raw)) = heading(line) {
            flush(&mut para, &mut blocks);
            let mut o = Out::default();
            inline(raw.trim(), &mut o, title, 0);
            o.trim_end();
            if !o.chars.is_empty() {
                blocks.push(Block::Heading { level, out: o });
            }
            continue;
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with("----") {
            flush(&mut para, &mut blocks);
            continue;
        }
        let mut o = Out::default();
        inline(strip_list_markers(t), &mut o, title, 0);
        o.trim_end();
        if o.chars.is_empty() {
            flush(&mut para, &mut blocks);
            continue;
        }
        match para.as_mut() {
            Some(p) => {
                p.chars.push('\n');
                p.append(o);
            }
            None => para = Some(o),
        }
    }
    flush(&mut para, &mut blocks);

    let mut text: Vec<char> = Vec::new();
    let mut links: Vec<Link> = Vec::new();
    // Open sections: (index, level); the lead is closed by any heading.
    let mut open: Vec<(usize, u32)> = Vec::new();
    let mut current: i32 = -1;
    let mut last_end = 0u32;
    let mut paragraphs: Vec<(u32, u32, i32)> = Vec::new();
    for block in blocks {
        if !text.is_empty() {
            text.extend(['\n', '\n']);
        }
        let start = text.len() as u32;
        let out = match block {
            Block::Heading { level, out } => {
                while let Some(&(idx, l)) = open.last() {
                    if l == 0 || l >= level {
                        parsed.sections[idx].end = last_end;
                        open.pop();
                    } else {
                        break;
                    }
                }
                parsed.sections.push(Section {
                    title: out.text(),
                    level,
                    start,
                    end: start,
                });
                open.push((parsed.sections.len() - 1, level));
                current = parsed.sections.len() as i32 - 1;
                out
            }
            Block::Para(out) => {
                if parsed.sections.is_empty() {
                    parsed.sections.push(Section {
                        title: title.to_string(),
                        level: 1,
                        start: 0,
                        end: 0,
                    });
                    // Level 0 in the stack: the lead ends at the first heading.
                    open.push((0, 0));
                    current = 0;
                }
                paragraphs.push((start, start + out.chars.len() as u32, current));
                out
            }
        };
        let base = text.len() as u32;
        for (target, a, b) in out.links {
            links.push(Link {
                target,
                start: base + a as u32,
                end: base + b as u32,
            });
        }
        text.extend(out.chars);
        last_end = text.len() as u32;
    }
    for (idx, _) in open {
        parsed.sections[idx].end = last_end;
    }
    for (pi, (a, b, section)) in paragraphs.into_iter().enumerate() {
        parsed.paragraphs.push(Paragraph {
            start: a,
            end: b,
            section,
        });
        let ptext: String = text[a as usize..b as usize].iter().collect();
        for (sa, sb) in crate::text::sentence_spans(&ptext) {
            parsed.sentences.push(Sentence {
                start: a + sa,
                end: a + sb,
                paragraph: pi as i32,
            });
        }
    }
    let text: String = text.into_iter().collect();
    parsed.text = text;
    parsed.links = links;
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::char_slice;

    fn clean(s: &str) -> String {
        parse(s, "Page").text
    }

    pub(crate) fn check_spans(p: &Parsed) {
        let t = &p.text;
        for s in &p.sections {
            assert!(char_slice(t, s.start, s.end).is_some(), "section {s:?}");
            if s.level > 1 {
                assert!(char_slice(t, s.start, s.end).unwrap().starts_with(&s.title));
            }
        }
        for pa in &p.paragraphs {
            let s = &p.sections[pa.section as usize];
            assert!(
                s.start <= pa.start && pa.end <= s.end,
                "{pa:?} outside {s:?}"
            );
            let body = char_slice(t, pa.start, pa.end).unwrap();
            assert!(!body.is_empty() && body.trim() == body, "{body:?}");
        }
        for se in &p.sentences {
            let pa = &p.paragraphs[se.paragraph as usize];
            assert!(pa.start <= se.start && se.end <= pa.end);
            assert!(!char_slice(t, se.start, se.end).unwrap().trim().is_empty());
        }
        for l in &p.links {
            let a = char_slice(t, l.start, l.end).unwrap();
            assert!(!a.is_empty() && a.trim() == a, "link {l:?} -> {a:?}");
        }
    }

    #[test]
    fn links_and_formatting() {
        let p = parse(
            "The '''[[Foo bar|foo]]''' is a [[baz]]s and [[qux (thing)|]] at [http://x.org the site] [http://y.org].",
            "Page",
        );
        assert_eq!(p.text, "The foo is a bazs and qux at the site.");
        let got: Vec<(&str, &str)> = p
            .links
            .iter()
            .map(|l| {
                (
                    l.target.as_str(),
                    char_slice(&p.text, l.start, l.end).unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("Foo bar", "foo"),
                ("Baz", "bazs"),
                ("Qux (thing)", "qux"),
                ("http://x.org", "the site")
            ]
        );
        check_spans(&p);
    }

    #[test]
    fn drops_templates_refs_files_and_comments() {
        let s = "A{{cite|x={{y|z}}}} b<ref name=\"n\">{{c}} [[d]]</ref> c<ref name=n/>.<!-- hidden\n\n-->\n\
                 [[File:X.jpg|thumb|A [[caption]] {{x}}]] [[Category:Things]] [[de:Ding]] __TOC__ e &amp; f&nbsp;g &#x41;";
        assert_eq!(clean(s), "A b c.\ne & f g A");
    }

    #[test]
    fn tags_keep_inner_text() {
        assert_eq!(
            clean(
                "a <b>bold</b> <span style=\"x\">s</span> <math>x^2</math> 1 < 2 <sup>3</sup><br/>next"
            ),
            "a bold s 1 < 2 3\nnext"
        );
        assert_eq!(
            clean("<nowiki>[[not a link]] ''x''</nowiki>"),
            "[[not a link]] ''x''"
        );
    }

    #[test]
    fn sections_paragraphs_sentences() {
        let p = parse(
            "Lead one. Lead two.\nStill lead.\n\nSecond para.\n== History ==\nOld times. More.\n=== Early ===\n* item [[a]]\n* item b\n\n== Later ==\nNow.",
            "Page",
        );
        assert_eq!(
            p.text,
            "Lead one. Lead two.\nStill lead.\n\nSecond para.\n\nHistory\n\nOld times. More.\n\nEarly\n\nitem a\nitem b\n\nLater\n\nNow."
        );
        let secs: Vec<(&str, u32)> = p
            .sections
            .iter()
            .map(|s| (s.title.as_str(), s.level))
            .collect();
        assert_eq!(
            secs,
            vec![("Page", 1), ("History", 2), ("Early", 3), ("Later", 2)]
        );
        let t = &p.text;
        assert_eq!(
            char_slice(t, p.sections[0].start, p.sections[0].end).unwrap(),
            "Lead one. Lead two.\nStill lead.\n\nSecond para."
        );
        assert_eq!(
            char_slice(t, p.sections[1].start, p.sections[1].end).unwrap(),
            "History\n\nOld times. More.\n\nEarly\n\nitem a\nitem b"
        );
        assert_eq!(
            char_slice(t, p.sections[3].start, p.sections[3].end).unwrap(),
            "Later\n\nNow."
        );
        let paras: Vec<(&str, i32)> = p
            .paragraphs
            .iter()
            .map(|x| (char_slice(t, x.start, x.end).unwrap(), x.section))
            .collect();
        assert_eq!(
            paras,
            vec![
                ("Lead one. Lead two.\nStill lead.", 0),
                ("Second para.", 0),
                ("Old times. More.", 1),
                ("item a\nitem b", 2),
                ("Now.", 3)
            ]
        );
        let sents: Vec<&str> = p
            .sentences
            .iter()
            .map(|s| char_slice(t, s.start, s.end).unwrap())
            .collect();
        assert_eq!(sents[..3], ["Lead one.", "Lead two.", "Still lead."]);
        check_spans(&p);
    }

    #[test]
    fn infobox_fields() {
        let p = parse(
            "{{Infobox river\n| name = Testa {{small|(river)}}\n| length = {{convert|12|km}}\n| mouth = [[Lake X|the lake]]<ref>r</ref>\n| empty =\n| nested = {{infobox dam|height=3 m}}\n| list = {{ubl|a|b}}\n}}\nThe '''Testa''' flows.",
            "Testa",
        );
        assert_eq!(p.text, "The Testa flows.");
        let f: Vec<(&str, &str, &str)> = p
            .infobox
            .iter()
            .map(|f| (f.template.as_str(), f.key.as_str(), f.value.as_str()))
            .collect();
        assert_eq!(
            f,
            vec![
                ("Infobox river", "name", "Testa (river)"),
                ("Infobox river", "length", "12 km"),
                ("Infobox river", "mouth", "the lake"),
                ("infobox dam", "height", "3 m"),
                ("Infobox river", "list", "a b"),
            ]
        );
    }

    #[test]
    fn tables_are_cut_out() {
        let p = parse(
            "Before.\n== S ==\n{| class=x\n|+ Cap\n! A !! B\n|-\n| 1 || {{n/a}}\n|-\n|\n{|\n| inner\n|}\n|}\nAfter.",
            "Page",
        );
        assert_eq!(p.text, "Before.\n\nS\n\nAfter.");
        assert_eq!(p.tables.len(), 2);
        assert_eq!(p.tables[0].caption.as_deref(), Some("Cap"));
        assert_eq!(p.tables[0].section.as_deref(), Some("S"));
        assert_eq!(p.tables[0].header, vec!["A", "B"]);
        assert_eq!(p.tables[0].rows, vec![vec!["1", "N/A"], vec!["", ""]]);
        assert_eq!(p.tables[1].rows, vec![vec!["inner"]]);
    }

    #[test]
    fn redirects() {
        let p = parse("#REDIRECT [[Target page#Sec]] {{R from move}}", "X");
        assert_eq!(p.redirect.as_deref(), Some("Target page"));
        assert_eq!(p.text, "");
        assert!(p.sections.is_empty());
        assert_eq!(split_redirect("#redirect:[[a]]").1.as_deref(), Some("A"));
        assert_eq!(split_redirect("no").1, None);
    }

    #[test]
    fn pathological_input_is_bounded() {
        let mut s = String::new();
        for _ in 0..20000 {
            s.push_str("{{a|[[b|");
        }
        s.push_str(&"<ref>".repeat(5000));
        s.push_str(&"<math>".repeat(5000));
        s.push_str(&"{|\n".repeat(3000));
        s.push_str(&"[[".repeat(20000));
        s.push_str(&"]]".repeat(20000));
        s.push_str(&"{{x|".repeat(3000));
        s.push_str(&"}}".repeat(3000));
        let t = std::time::Instant::now();
        let p = parse(&s, "P");
        check_spans(&p);
        assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    }

    #[test]
    fn random_markup_never_breaks_the_invariants() {
        const TOKENS: &[&str] = &[
            "{{",
            "}}",
            "[[",
            "]]",
            "|",
            "||",
            "\n",
            "\n\n",
            "==",
            "===",
            "\n{|",
            "\n|}",
            "\n|-",
            "\n!",
            "!!",
            "\n|",
            "<ref>",
            "</ref>",
            "<ref name=a/>",
            "<!--",
            "-->",
            "'''",
            "''",
            "&amp;",
            "&#x41;",
            "&#160;",
            "\u{a0}",
            "\t",
            "&",
            ";",
            "é",
            "漢",
            "[http://",
            "[h\u{e9}",
            "]",
            "*",
            ":",
            "=",
            " ",
            "a",
            "Word.",
            "{{Infobox x|",
            "k=",
            "rowspan=2",
            "colspan=3|",
            "<nowiki>",
            "</nowiki>",
            "<br/>",
            "#REDIRECT ",
            "__TOC__",
            "<",
            ">",
            "<b>",
            "</b>",
            "File:",
            "{{lang|de|",
            "{{convert|1|km}}",
            "(",
            ")",
            ",",
            "\n* ",
            "\n== H ==\n",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..1500 {
            let n = (next() % 120) as usize;
            let s: String = (0..n)
                .map(|_| TOKENS[(next() % TOKENS.len() as u64) as usize])
                .collect();
            let p = parse(&s, "P");
            check_spans(&p);
            for t in &p.tables {
                assert!(t.rows.iter().all(|r| r.len() == t.header.len()), "{s:?}");
            }
        }
    }

    #[test]
    fn unicode_offsets() {
        let p = parse("Ünïcödé [[漢字|漢]] and [[Ωmega]]. Ça va.", "P");
        assert_eq!(p.text, "Ünïcödé 漢 and Ωmega. Ça va.");
        check_spans(&p);
        assert_eq!(p.links[0].start, 8);
        assert_eq!(p.sentences.len(), 2);
    }
}
