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

mod document;
mod entities;
mod inline;
mod preprocess;
mod strip;
mod tables;
mod templates;
#[cfg(test)]
mod tests;

use distillery_core::{InfoboxField, Link, Paragraph, Section, Sentence};

use super::table::{self, ParsedTable};
use document::build_document;
pub(crate) use inline::clean_fragment;
use inline::normalize_target;
use preprocess::preprocess;
use strip::{Ctx, strip_into};
pub(crate) use strip::{find_top, match_pairs};
use tables::extract_tables;

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
