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
//! [`derivation_operands`] lists the numbers a TAT-QA arithmetic answer is computed from.

use distillery_core::Question;
use foldhash::HashSet;

/// The plain form of a lower-case Latin letter with a diacritic (Latin-1 and Latin
/// Extended-A), `None` for any other char. A `match`, which compiles to a jump table: this is
/// on the labeller's hot path for every non-ASCII character.
fn plain_form(c: char) -> Option<&'static str> {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => Some("a"),
        'æ' => Some("ae"),
        'ç' | 'ć' | 'ĉ' | 'ċ' | 'č' => Some("c"),
        'ď' | 'đ' | 'ð' => Some("d"),
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ĕ' | 'ė' | 'ę' | 'ě' => Some("e"),
        'ĝ' | 'ğ' | 'ġ' | 'ģ' => Some("g"),
        'ĥ' | 'ħ' => Some("h"),
        'ì' | 'í' | 'î' | 'ï' | 'ĩ' | 'ī' | 'ĭ' | 'į' | 'ı' => Some("i"),
        'ĳ' => Some("ij"),
        'ĵ' => Some("j"),
        'ķ' | 'ĸ' => Some("k"),
        'ĺ' | 'ļ' | 'ľ' | 'ŀ' | 'ł' => Some("l"),
        'ñ' | 'ń' | 'ņ' | 'ň' | 'ŉ' | 'ŋ' => Some("n"),
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ŏ' | 'ő' => Some("o"),
        'œ' => Some("oe"),
        'ŕ' | 'ŗ' | 'ř' => Some("r"),
        'ś' | 'ŝ' | 'ş' | 'š' | 'ſ' => Some("s"),
        'ß' => Some("ss"),
        'ţ' | 'ť' | 'ŧ' => Some("t"),
        'þ' => Some("th"),
        'ù' | 'ú' | 'û' | 'ü' | 'ũ' | 'ū' | 'ŭ' | 'ů' | 'ű' | 'ų' => Some("u"),
        'ŵ' => Some("w"),
        'ý' | 'ÿ' | 'ŷ' => Some("y"),
        'ź' | 'ż' | 'ž' => Some("z"),
        _ => None,
    }
}

/// What folding does with one lowercased char.
enum Fold {
    Keep(char),
    /// A combining diacritical mark.
    Drop,
    /// A Latin letter with a diacritic: its plain form.
    To(&'static str),
}

fn fold_char(c: char) -> Fold {
    if c.is_ascii() {
        Fold::Keep(c)
    } else if ('\u{0300}'..='\u{036f}').contains(&c) {
        Fold::Drop
    } else if let Some(to) = plain_form(c) {
        Fold::To(to)
    } else {
        Fold::Keep(c)
    }
}

/// Lowercases and folds diacritics; combining marks are dropped.
fn fold(s: &str) -> Vec<char> {
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars().flat_map(char::to_lowercase) {
        match fold_char(c) {
            Fold::Keep(c) => out.push(c),
            Fold::Drop => {}
            Fold::To(to) => out.extend(to.chars()),
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

/// The article-dropping, number-tidying second pass over space-separated words.
fn join_words<'a>(words: impl Iterator<Item = &'a str>, cap: usize) -> String {
    let mut out = String::with_capacity(cap);
    for w in words {
        if w.is_empty() || matches!(w, "a" | "an" | "the") {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(tidy_number(w));
    }
    out
}

/// Per byte: its lowercase form when it is an ASCII letter or digit, else 0.
static ALNUM_LOWER: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            t[b] = c.to_ascii_lowercase();
        }
        b += 1;
    }
    t
};

/// [`normalize_answer`] for ASCII text: the same rules in one pass over the bytes, words
/// written straight to the output (most Wikipedia and QA text is ASCII; this is the
/// labeller's hottest function). Tested equal to the general path.
///
/// The output is never longer than the input (a letter or digit gives one byte, a run of
/// breaks at most one space), so it is written into a buffer of the input's length.
fn normalize_ascii(s: &[u8]) -> String {
    let n = s.len();
    let digit = |i: usize| i < n && s[i].is_ascii_digit();
    let mut out = vec![0u8; n];
    let mut o = 0;
    // Start of the word being written, if one is, and whether it holds a decimal point.
    let mut word: Option<usize> = None;
    let mut dot = false;
    // Ends the word that starts at `start` and ends at `o`: articles are dropped with the
    // space before them, decimal tokens tidied.
    let end_word = |out: &[u8], o: usize, start: usize, dot: bool| -> usize {
        let w = &out[start..o];
        if matches!(w, b"a" | b"an" | b"the") {
            start.saturating_sub(1)
        } else if dot {
            // Only ASCII bytes were written.
            start + std::str::from_utf8(w).map_or(w.len(), |w| tidy_number(w).len())
        } else {
            o
        }
    };
    let mut i = 0;
    while i < n {
        let c = s[i];
        if ALNUM_LOWER[usize::from(c)] != 0 {
            if word.is_none() {
                if o > 0 {
                    out[o] = b' ';
                    o += 1;
                }
                word = Some(o);
                dot = false;
            }
            // A run of letters and digits, copied lowercased.
            while i < n {
                let l = ALNUM_LOWER[usize::from(s[i])];
                if l == 0 {
                    break;
                }
                out[o] = l;
                o += 1;
                i += 1;
            }
            continue;
        }
        if c == b'.' && i > 0 && digit(i - 1) && digit(i + 1) {
            // A decimal point: the previous byte, a digit, opened the word.
            out[o] = b'.';
            o += 1;
            dot = true;
        } else if c == b','
            && i > 0
            && digit(i - 1)
            && (1..=3).all(|k| digit(i + k))
            && !digit(i + 4)
        {
            // thousands separator: dropped, the word goes on
        } else if c == b'\'' || c == b'`' {
            let possessive = matches!(s.get(i + 1), Some(b's' | b'S'))
                && s.get(i + 2).is_none_or(|n| !n.is_ascii_alphanumeric());
            if possessive {
                i += 1;
            }
        } else if let Some(start) = word.take() {
            // whitespace and every other character: a word break
            o = end_word(&out, o, start, dot);
        }
        i += 1;
    }
    if let Some(start) = word {
        o = end_word(&out, o, start, dot);
    }
    out.truncate(o);
    String::from_utf8(out).unwrap_or_default()
}

/// SQuAD-style normalisation (see the module docs).
pub fn normalize_answer(s: &str) -> String {
    if s.is_ascii() {
        normalize_ascii(s.as_bytes())
    } else if let Some(folded) = fold_to_ascii(s) {
        normalize_ascii(&folded)
    } else {
        normalize_chars(s)
    }
}

/// [`fold`] for text whose only non-ASCII letters and digits fold to ASCII: every other
/// non-ASCII character becomes the ASCII character the rules treat it as (an apostrophe
/// `'`, else a word break ` `), so that [`normalize_ascii`] gives what [`normalize_chars`]
/// gives. `None` when a letter or digit stays non-ASCII (Greek, CJK, ...).
fn fold_to_ascii(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut rest = s;
    while !rest.is_empty() {
        // ASCII runs are copied as they are ([`normalize_ascii`] lowercases them).
        let ascii = rest.bytes().take_while(u8::is_ascii).count();
        out.extend_from_slice(&rest.as_bytes()[..ascii]);
        rest = &rest[ascii..];
        let Some(c) = rest.chars().next() else { break };
        rest = &rest[c.len_utf8()..];
        for c in c.to_lowercase() {
            match fold_char(c) {
                Fold::Keep(c) if c.is_ascii() => out.push(c as u8),
                Fold::Keep(c) if c.is_alphanumeric() => return None,
                Fold::Keep(c) if is_apostrophe(c) => out.push(b'\''),
                Fold::Keep(_) => out.push(b' '),
                Fold::Drop => {}
                Fold::To(to) => out.extend_from_slice(to.as_bytes()),
            }
        }
    }
    Some(out)
}

/// [`normalize_answer`] for any text.
fn normalize_chars(s: &str) -> String {
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
    join_words(buf.split_whitespace(), buf.len())
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
    jaccard_sets(&a, &b)
}

/// [`jaccard`] of two sets already built.
pub fn jaccard_sets(a: &HashSet<&str>, b: &HashSet<&str>) -> f64 {
    let inter = a.iter().filter(|w| b.contains(*w)).count();
    let union = a.len() + b.len() - inter;
    if union == 0 {
        return 0.0;
    }
    inter as f64 / union as f64
}

/// Whether the normalised `needle` occurs in the normalised `haystack` as whole words.
/// An empty needle never matches.
pub fn contains_phrase(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() || needle.len() > haystack.len() {
        return false;
    }
    at_word_boundaries(haystack.as_bytes(), needle.len(), |h| {
        memchr::memmem::find(h, needle.as_bytes())
    })
}

/// Whether some occurrence that `find` reports (searching ever later suffixes of `h`, so
/// overlapping occurrences are all seen) starts and ends at a word boundary.
fn at_word_boundaries(h: &[u8], len: usize, find: impl Fn(&[u8]) -> Option<usize>) -> bool {
    let mut from = 0;
    while let Some(p) = find(&h[from..]) {
        let a = from + p;
        let b = a + len;
        if (a == 0 || h[a - 1] == b' ') && (b == h.len() || h[b] == b' ') {
            return true;
        }
        // The needle starts with a char's first byte, so it cannot match one byte on.
        from = a + 1;
    }
    false
}

/// A normalised phrase searched for in many normalised texts ([`contains_phrase`] with the
/// searcher built once).
#[derive(Debug, Clone)]
pub struct Phrase<'a> {
    len: usize,
    finder: memchr::memmem::Finder<'a>,
}

impl<'a> Phrase<'a> {
    pub fn new(needle: &'a str) -> Phrase<'a> {
        Phrase {
            len: needle.len(),
            finder: memchr::memmem::Finder::new(needle.as_bytes()),
        }
    }

    /// [`contains_phrase`]`(haystack, needle)`.
    pub fn in_text(&self, haystack: &str) -> bool {
        if self.len == 0 || self.len > haystack.len() {
            return false;
        }
        at_word_boundaries(haystack.as_bytes(), self.len, |h| self.finder.find(h))
    }
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

/// The numbers an arithmetic question's answer is computed from: the operands of its
/// `meta.derivation` (TAT-QA `answer_type` `arithmetic`, e.g. `(73,260-57,768)/57,768`),
/// normalised ([`normalize_answer`]: `73,260` → `73260`, `4.00` → `4`), first occurrence
/// first. Left out: the constants of averages and percentages (a whole number up to 12, or 100
/// or 1000, after `/` or `*` or before `*`: the `2` of `(166+178)/2`, the `100` of
/// `100*(a-b)/b`), and one-digit operands when there are longer ones (a lone `4` is in too
/// many segments to say which one the derivation read). Empty for any other question: its
/// answer is matched as it is.
pub fn derivation_operands(q: &Question) -> Vec<String> {
    if q.question_type.as_deref() != Some("arithmetic") {
        return Vec::new();
    }
    let derivation = serde_json::from_str::<serde_json::Value>(&q.meta)
        .ok()
        .and_then(|m| m.get("derivation")?.as_str().map(str::to_string))
        .unwrap_or_default();
    let b = derivation.as_bytes();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() || (i > 0 && b[i - 1].is_ascii_alphanumeric()) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len()
            && (b[i].is_ascii_digit()
                || (matches!(b[i], b',' | b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
        {
            i += 1;
        }
        // `.25` is written `0.25` in text.
        let n = match start > 0 && b[start - 1] == b'.' {
            true => normalize_answer(&format!("0.{}", &derivation[start..i])),
            false => normalize_answer(&derivation[start..i]),
        };
        let skip = |c: &u8| c.is_ascii_whitespace() || matches!(c, b'(' | b')' | b'[' | b']');
        let before = b[..start].iter().rev().find(|c| !skip(c));
        let after = b[i..].iter().find(|c| !skip(c));
        let constant = (matches!(before, Some(b'/' | b'*')) || after == Some(&b'*'))
            && n.parse::<u32>()
                .is_ok_and(|v| v <= 12 || v == 100 || v == 1000);
        if !constant && !n.is_empty() && !out.contains(&n) {
            out.push(n);
        }
    }
    if out.iter().any(|n| n.len() > 1) {
        out.retain(|n| n.len() > 1);
    }
    out
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
    fn operands_of_arithmetic_derivations() {
        let q = |t: &str, d: &str| Question {
            question_type: Some(t.into()),
            meta: serde_json::json!({ "derivation": d, "scale": "million" }).to_string(),
            ..Default::default()
        };
        let ops = |t: &str, d: &str| derivation_operands(&q(t, d));
        assert_eq!(
            ops("arithmetic", "(73,260-57,768)/57,768"),
            ["73260", "57768"]
        );
        // A one-digit operand is left out beside longer ones, kept when all are one digit.
        assert_eq!(ops("arithmetic", "4.00 - 1.90 "), ["1.9"]);
        assert_eq!(ops("arithmetic", "4 - 3"), ["4", "3"]);
        // Constants of averages and percentages are not operands; a divisor that is a value is.
        assert_eq!(
            ops("arithmetic", "[(166+178)/2] - [(57+44)/2]"),
            ["166", "178", "57", "44"]
        );
        assert_eq!(ops("arithmetic", "(2-1)/1*100"), ["2", "1"]);
        assert_eq!(ops("arithmetic", "100*(35-30)/ (30)"), ["35", "30"]);
        assert_eq!(ops("arithmetic", "(35-30)/30*1,000"), ["35", "30"]);
        assert_eq!(ops("arithmetic", "(3.5+4.5)/2.0"), ["3.5", "4.5"]);
        assert_eq!(ops("arithmetic", ".25 * 480"), ["0.25", "480"]);
        assert_eq!(ops("arithmetic", "2,664/909 "), ["2664", "909"]);
        assert_eq!(ops("arithmetic", "-9,819 - 6,639 "), ["9819", "6639"]);
        // Only arithmetic questions have operands.
        assert!(ops("span", "1 + 2").is_empty());
        assert!(ops("arithmetic", "").is_empty());
        assert!(derivation_operands(&Question::default()).is_empty());
    }

    #[test]
    fn squad_style() {
        assert_eq!(normalize_answer("The Beatles"), "beatles");
        assert_eq!(normalize_answer("  An  apple, a day! "), "apple day");
        assert_eq!(normalize_answer("Shirley Temple's"), "shirley temple");
        assert_eq!(normalize_answer("U.S."), "u s");
        assert_eq!(normalize_answer("Aschenbrödel"), "aschenbrodel");
        assert_eq!(normalize_answer("1990–2000"), "1990 2000");
    }

    /// 20,000 deterministic pseudo-random strings (xorshift) of up to 23 chars of `alphabet`.
    fn random_strings(alphabet: &str) -> impl Iterator<Item = String> {
        let alphabet: Vec<char> = alphabet.chars().collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..20_000).map(move |_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (0..(x % 24))
                .map(|k| alphabet[x.rotate_left(k as u32 * 5) as usize % alphabet.len()])
                .collect()
        })
    }

    #[test]
    fn ascii_fast_path_agrees_with_the_general_one() {
        // ASCII over the characters the rules treat specially.
        for t in random_strings("aAsS01239 ,.'`-$\t\x0b\ntheTHEnN") {
            assert_eq!(normalize_ascii(t.as_bytes()), normalize_chars(&t), "{t:?}");
        }
        for t in [
            "The Beatles",
            "1,000.50",
            "Temple's",
            "don't",
            "A's 's",
            "12.00",
            "U.S.",
        ] {
            assert_eq!(normalize_ascii(t.as_bytes()), normalize_chars(t), "{t:?}");
        }
        // Non-ASCII text through the folding fast path (or the general one).
        for t in random_strings("aSs19 ,.'-éÄß–’‘\u{a0}\u{301}Ωİçthe") {
            assert_eq!(normalize_answer(&t), normalize_chars(&t), "{t:?}");
        }
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
        // An occurrence inside a word, then one at word boundaries that overlaps it.
        assert!(contains_phrase("xab ab ab", "ab ab"));
        assert!(Phrase::new("ab ab").in_text("xab ab ab"));
        assert!(!Phrase::new("3").in_text("born in 1930"));
        assert!(!Phrase::new("").in_text("x"));
        assert!(contains_phrase("señor ñ", "ñ"));
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
