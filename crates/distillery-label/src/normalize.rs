//! Answer normalisation and token overlap, shared by the labelling methods and the report.
//!
//! [`normalize_answer`] is SQuAD-style with a few additions that matter for matching answers
//! against Wikipedia and financial text:
//!
//! - lowercase, then fold Latin diacritics (`Aschenbrödel` → `aschenbrodel`, `Bråk` →
//!   `brak`; Latin-1 and Latin Extended-A letters, combining marks dropped);
//! - numbers: a comma between a digit and exactly three digits is a thousands separator and
//!   is dropped (`1,000` → `1000`), a point between digits is kept (`1000.50`), and decimal
//!   tokens lose trailing zeros (`1000.50` → `1000.5`, `12.00` → `12`);
//! - apostrophes are dropped and a possessive `'s` at a word end is dropped with it
//!   (`Temple's` → `temple`, `don't` → `dont`);
//! - every other character that is not a letter, digit or whitespace is a word break (so
//!   `$12` → `12`, `U.S.` → `u s`, `1990–2000` → `1990 2000`);
//! - the articles `a`, `an`, `the` are dropped and whitespace collapsed to single spaces.
//!
//! Matching is by whole words: [`contains_phrase`] tests whether a normalised needle occurs in
//! a normalised haystack at word boundaries (so `3` does not match `1930`).
//!
//! [`answer_variants`] lists what may be matched for a question: its normalised gold answers
//! and aliases, and for answers with a `meta.scale` (TAT-QA: `thousand`, `million`, `billion`,
//! `percent`) the scaled forms; yes/no answers (binary questions) give nothing to match.

use distillery_core::Question;
use std::collections::HashSet;

/// Lower-case Latin letters with diacritics and their plain forms.
const FOLDS: &[(&str, &str)] = &[
    ("àáâãäåāăą", "a"),
    ("æ", "ae"),
    ("çćĉċč", "c"),
    ("ďđð", "d"),
    ("èéêëēĕėęě", "e"),
    ("ĝğġģ", "g"),
    ("ĥħ", "h"),
    ("ìíîïĩīĭįı", "i"),
    ("ĳ", "ij"),
    ("ĵ", "j"),
    ("ķĸ", "k"),
    ("ĺļľŀł", "l"),
    ("ñńņňŉŋ", "n"),
    ("òóôõöøōŏő", "o"),
    ("œ", "oe"),
    ("ŕŗř", "r"),
    ("śŝşšſ", "s"),
    ("ß", "ss"),
    ("ţťŧ", "t"),
    ("þ", "th"),
    ("ùúûüũūŭůűų", "u"),
    ("ŵ", "w"),
    ("ýÿŷ", "y"),
    ("źżž", "z"),
];

/// Lowercases and folds diacritics; combining marks are dropped.
fn fold(s: &str) -> Vec<char> {
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars().flat_map(char::to_lowercase) {
        if c.is_ascii() {
            out.push(c);
        } else if ('\u{0300}'..='\u{036f}').contains(&c) {
            // combining diacritical mark
        } else if let Some((_, to)) = FOLDS.iter().find(|(from, _)| from.contains(c)) {
            out.extend(to.chars());
        } else {
            out.push(c);
        }
    }
    out
}

fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '’' | 'ʼ' | '`' | '‘')
}

/// `1000.50` → `1000.5`, `12.00` → `12`; other tokens unchanged.
fn tidy_number(w: &str) -> &str {
    let Some((int, frac)) = w.split_once('.') else {
        return w;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || !digits(frac) {
        return w;
    }
    w.trim_end_matches('0').trim_end_matches('.')
}

/// SQuAD-style normalisation (see the module docs).
pub fn normalize_answer(s: &str) -> String {
    let cs = fold(s);
    let digit = |i: usize| cs.get(i).is_some_and(char::is_ascii_digit);
    let mut buf = String::with_capacity(cs.len());
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        let prev_digit = i > 0 && digit(i - 1);
        if c.is_alphanumeric() {
            buf.push(c);
        } else if c.is_whitespace() {
            buf.push(' ');
        } else if c == ',' && prev_digit && (1..=3).all(|k| digit(i + k)) && !digit(i + 4) {
            // thousands separator
        } else if c == '.' && prev_digit && digit(i + 1) {
            buf.push('.');
        } else if is_apostrophe(c) {
            let possessive =
                cs.get(i + 1) == Some(&'s') && cs.get(i + 2).is_none_or(|n| !n.is_alphanumeric());
            if possessive {
                i += 1;
            }
        } else {
            buf.push(' ');
        }
        i += 1;
    }
    let mut out = String::with_capacity(buf.len());
    for w in buf.split_whitespace() {
        if matches!(w, "a" | "an" | "the") {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(tidy_number(w));
    }
    out
}

/// Normalised word tokens of `s`.
pub fn tokens(s: &str) -> Vec<String> {
    normalize_answer(s)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Jaccard similarity of two token sets (duplicates ignored); 0 when both are empty.
pub fn jaccard(a: &[String], b: &[String]) -> f64 {
    let a: HashSet<&str> = a.iter().map(String::as_str).collect();
    let b: HashSet<&str> = b.iter().map(String::as_str).collect();
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// Whether the normalised `needle` occurs in the normalised `haystack` as whole words.
/// An empty needle never matches.
pub fn contains_phrase(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() || needle.len() > haystack.len() {
        return false;
    }
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    let mut from = 0;
    while let Some(p) = haystack[from..].find(needle) {
        let a = from + p;
        let b = a + n.len();
        if (a == 0 || h[a - 1] == b' ') && (b == h.len() || h[b] == b' ') {
            return true;
        }
        // Advance past this char (needle starts at a char boundary).
        from = a + haystack[a..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// `digits[.digits]` shifted `k` decimal places left-to-right (×10^k), exactly, in
/// normalised form (`1.5`, 6 → `1500000`; `0.25`, 3 → `250`; `1.23456`, 3 → `1234.56`).
fn scale_up(num: &str, k: usize) -> Option<String> {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) {
        return None;
    }
    let mut s = int.to_string();
    if frac.len() <= k {
        s.push_str(frac);
        s.extend(std::iter::repeat_n('0', k - frac.len()));
    } else {
        s.push_str(&frac[..k]);
        s.push('.');
        s.push_str(&frac[k..]);
    }
    let s = s.trim_start_matches('0');
    let s = if s.is_empty() || s.starts_with('.') {
        format!("0{s}")
    } else {
        s.to_string()
    };
    Some(tidy_number(&s).to_string())
}

/// The `scale` of a question's `meta` JSON (TAT-QA), lowercased; empty when absent.
fn meta_scale(q: &Question) -> String {
    serde_json::from_str::<serde_json::Value>(&q.meta)
        .ok()
        .and_then(|m| m.get("scale")?.as_str().map(str::to_lowercase))
        .unwrap_or_default()
}

/// What to look for in segment content: the normalised gold answers and aliases (first the
/// canonical answer, no duplicates, no empty strings). Numeric answers of a question whose
/// `meta.scale` is `thousand`, `million` or `billion` also give `"<n> <scale>"` and the value
/// written out (`1.5` million → `1.5 million`, `1500000`); `percent` gives `"<n> percent"`
/// (`12.5%` already normalises to `12.5`). Yes/no answers give nothing: a binary question's
/// answer cannot be matched in text.
pub fn answer_variants(q: &Question) -> Vec<String> {
    let scale = meta_scale(q);
    let zeros = match scale.as_str() {
        "thousand" => Some(3),
        "million" => Some(6),
        "billion" => Some(9),
        _ => None,
    };
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: String| {
        if !s.is_empty() && !out.contains(&s) {
            out.push(s);
        }
    };
    for a in &q.answers {
        let n = normalize_answer(a);
        if n == "yes" || n == "no" {
            continue;
        }
        let numeric = !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            && n.bytes().next().is_some_and(|b| b.is_ascii_digit());
        push(n.clone());
        if !numeric {
            continue;
        }
        if let Some(k) = zeros {
            push(format!("{n} {scale}"));
            if let Some(v) = scale_up(&n, k) {
                push(v);
            }
        } else if scale == "percent" {
            push(format!("{n} percent"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squad_style() {
        assert_eq!(normalize_answer("The Beatles"), "beatles");
        assert_eq!(normalize_answer("  An  apple, a day! "), "apple day");
        assert_eq!(normalize_answer("Shirley Temple's"), "shirley temple");
        assert_eq!(normalize_answer("U.S."), "u s");
        assert_eq!(normalize_answer("Aschenbrödel"), "aschenbrodel");
        assert_eq!(normalize_answer("1990–2000"), "1990 2000");
    }

    #[test]
    fn numbers() {
        assert_eq!(normalize_answer("1,000"), "1000");
        assert_eq!(normalize_answer("1,000.50"), "1000.5");
        assert_eq!(normalize_answer("$12"), "12");
        assert_eq!(normalize_answer("12.00"), "12");
        assert_eq!(normalize_answer("3,677 seated"), "3677 seated");
        assert_eq!(normalize_answer("1, 2"), "1 2");
        assert_eq!(normalize_answer("12,34"), "12 34");
    }

    #[test]
    fn phrase_containment_is_by_words() {
        assert!(contains_phrase("born in 1930 in ohio", "1930"));
        assert!(!contains_phrase("born in 1930 in ohio", "3"));
        assert!(contains_phrase("beatles", "beatles"));
        assert!(!contains_phrase("beatlesque", "beatles"));
        assert!(!contains_phrase("x", ""));
    }

    #[test]
    fn scaling() {
        assert_eq!(scale_up("1.5", 6).as_deref(), Some("1500000"));
        assert_eq!(scale_up("0.25", 3).as_deref(), Some("250"));
        assert_eq!(scale_up("1.23456", 3).as_deref(), Some("1234.56"));
        assert_eq!(scale_up("12", 3).as_deref(), Some("12000"));
    }

    #[test]
    fn jaccard_sets() {
        let t = tokens("the cat sat on the mat");
        let u = tokens("a cat on a hat");
        // {cat, sat, on, mat} vs {cat, on, hat}: 2 / 5.
        assert!((jaccard(&t, &u) - 0.4).abs() < 1e-12);
        assert_eq!(jaccard(&[], &[]), 0.0);
    }
}
