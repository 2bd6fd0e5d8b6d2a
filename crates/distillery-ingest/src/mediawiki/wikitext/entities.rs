//! HTML entities: decoding named and numeric character references in text.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The text of a named entity: every HTML5 name ([`html5`]), except that the spaces become a
/// plain space (so spans trim cleanly) and the invisible format characters (soft hyphen,
/// joiners, direction marks) are dropped.
fn entity(name: &str) -> Option<&'static str> {
    match name {
        "nbsp" | "ensp" | "emsp" | "emsp13" | "emsp14" | "thinsp" | "ThinSpace" | "numsp"
        | "puncsp" | "hairsp" | "VeryThinSpace" | "MediumSpace" | "Tab" | "NewLine" => Some(" "),
        "shy"
        | "zwj"
        | "zwnj"
        | "lrm"
        | "rlm"
        | "ZeroWidthSpace"
        | "NoBreak"
        | "NegativeVeryThinSpace"
        | "NegativeThinSpace"
        | "NegativeMediumSpace"
        | "NegativeThickSpace"
        | "af"
        | "it"
        | "ic"
        | "InvisibleTimes"
        | "InvisibleComma"
        | "ApplyFunction" => Some(""),
        _ => html5(name),
    }
}

/// The HTML5 table, `html5_entities.txt`: the WHATWG list of named character references.
const HTML5_TABLE: &str = include_str!("html5_entities.txt");

/// The text of an HTML5 named character reference (the name without `&` and `;`).
fn html5(name: &str) -> Option<&'static str> {
    static TABLE: OnceLock<HashMap<&'static str, String>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            HTML5_TABLE
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .filter_map(|l| {
                    let (name, points) = l.split_once('\t')?;
                    let text = points
                        .split(' ')
                        .map(|h| u32::from_str_radix(h, 16).ok().and_then(char::from_u32))
                        .collect::<Option<String>>()?;
                    Some((name, text))
                })
                .collect()
        })
        .get(name)
        .map(String::as_str)
}

/// Decodes an HTML entity at the start of `s` (which starts with `&`): (text, bytes used).
pub(super) fn entity_at(s: &str) -> Option<(String, usize)> {
    let end = s.as_bytes().iter().take(34).position(|&b| b == b';')?;
    let name = &s[1..end];
    if name.is_empty() {
        return None;
    }
    let text = if name.starts_with('#') {
        crate::mediawiki::xml::decode_char_ref(name)?.to_string()
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
