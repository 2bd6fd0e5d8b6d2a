//! Sentence boundaries (UAX #29) with a fast path for ASCII lines.
//!
//! [`sentence_bounds`] gives the same segments as `unicode_segmentation`'s
//! `split_sentence_bound_indices`, which looks every char up in the Unicode tables. Two facts
//! make a cheaper route exact:
//! - a line feed is a hard boundary both ways (SB4 breaks after it; no rule looks back past
//!   it, since it is neither `Close`, `Sp` nor a terminator, and the SB8 look-ahead stops at
//!   paragraph separators), so the text is cut after each `\n` and each piece read alone;
//! - within an ASCII piece, every char's class is known from a 128-entry table, and a break
//!   can only follow a terminator (SB11) or a `CR` (SB4), so the scan jumps from one
//!   terminator to the next.
//!
//! Pieces with any non-ASCII char go to `unicode_segmentation` as before. The tests check the
//! two routes against each other on random text over the classes that matter.

use unicode_segmentation::UnicodeSegmentation;

/// Sentence-break classes of the ASCII chars (UAX #29, table 4). ASCII has no `OLetter`,
/// `Sep`, `Extend` or `Format` chars.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Other,
    Cr,
    Lf,
    Sp,
    Lower,
    Upper,
    Numeric,
    ATerm,
    STerm,
    Close,
    SContinue,
}

const fn class_of(b: u8) -> Class {
    match b {
        b'\r' => Class::Cr,
        b'\n' => Class::Lf,
        b'\t' | 0x0b | 0x0c | b' ' => Class::Sp,
        b'a'..=b'z' => Class::Lower,
        b'A'..=b'Z' => Class::Upper,
        b'0'..=b'9' => Class::Numeric,
        b'.' => Class::ATerm,
        b'!' | b'?' => Class::STerm,
        b'"' | b'\'' | b'(' | b')' | b'[' | b']' | b'{' | b'}' => Class::Close,
        b',' | b'-' | b':' | b';' => Class::SContinue,
        _ => Class::Other,
    }
}

const CLASSES: [Class; 128] = {
    let mut t = [Class::Other; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = class_of(i as u8);
        i += 1;
    }
    t
};

/// The sentence segments of `text` as `(byte offset, segment)`, in order, covering it.
pub(crate) fn sentence_bounds(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0;
    for piece in text.split_inclusive('\n') {
        if piece.is_ascii() {
            ascii_bounds(piece.as_bytes(), start, &mut out, text);
        } else {
            out.extend(
                piece
                    .split_sentence_bound_indices()
                    .map(|(b, s)| (start + b, s)),
            );
        }
        start += piece.len();
    }
    out
}

/// Segments an ASCII piece that holds no `\n` except maybe at its end; `base` is its offset
/// in `whole`.
fn ascii_bounds<'a>(b: &[u8], base: usize, out: &mut Vec<(usize, &'a str)>, whole: &'a str) {
    let class = |i: usize| CLASSES[b[i] as usize];
    let n = b.len();
    let mut seg = 0;
    let cut = |at: usize, seg: &mut usize, out: &mut Vec<(usize, &'a str)>| {
        if at > *seg && at < n {
            out.push((base + *seg, &whole[base + *seg..base + at]));
            *seg = at;
        }
    };
    let mut i = 0;
    while i < n {
        match class(i) {
            // SB3/SB4: break after CR unless a LF follows, and after LF.
            Class::Cr if i + 1 < n && class(i + 1) == Class::Lf => i += 1,
            Class::Cr | Class::Lf => {
                cut(i + 1, &mut seg, out);
                i += 1;
            }
            Class::ATerm | Class::STerm => {
                i = after_terminator(b, i, &class, &mut |at| cut(at, &mut seg, out));
            }
            _ => i += 1,
        }
    }
    if seg < n {
        out.push((base + seg, &whole[base + seg..base + n]));
    }
}

/// Applies SB6-SB11 to the terminator at `t`: calls `cut` where they put a break, and returns
/// where the scan goes on.
fn after_terminator(
    b: &[u8],
    t: usize,
    class: &impl Fn(usize) -> Class,
    cut: &mut impl FnMut(usize),
) -> usize {
    let n = b.len();
    let aterm = class(t) == Class::ATerm;
    let mut c = t + 1;
    while c < n && class(c) == Class::Close {
        c += 1;
    }
    let mut s = c;
    while s < n && class(s) == Class::Sp {
        s += 1;
    }
    if s >= n {
        return n;
    }
    match class(s) {
        // SB9/SB10 keep the separator with the sentence; SB4/SB11 break after it.
        Class::Cr if s + 1 < n && class(s + 1) == Class::Lf => {
            cut(s + 2);
            return s + 2;
        }
        Class::Cr | Class::Lf => {
            cut(s + 1);
            return s + 1;
        }
        // SB8a: no break before a continuation or another terminator.
        Class::SContinue | Class::ATerm | Class::STerm => return s,
        _ => {}
    }
    if aterm && s == t + 1 {
        let next = class(s);
        // SB6: `3.14`; SB7: `U.S` (a letter, the stop, then a capital).
        if next == Class::Numeric
            || (next == Class::Upper
                && t > 0
                && matches!(class(t - 1), Class::Upper | Class::Lower))
        {
            return s;
        }
    }
    if aterm {
        // SB8: no break when a lower-case letter follows before any letter, separator or
        // terminator.
        let mut k = s;
        while k < n
            && !matches!(
                class(k),
                Class::Upper | Class::Lower | Class::Cr | Class::Lf | Class::ATerm | Class::STerm
            )
        {
            k += 1;
        }
        if k < n && class(k) == Class::Lower {
            return s;
        }
    }
    cut(s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(text: &str) -> Vec<(usize, &str)> {
        text.split_sentence_bound_indices().collect()
    }

    /// A small xorshift generator: the cases are the same on every run.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
            xs[(self.next() % xs.len() as u64) as usize]
        }
    }

    /// Random text over chars of every class, ASCII and not, weighted towards terminators,
    /// closers and spaces, where the rules differ.
    fn random_text(rng: &mut Rng, len: usize, ascii_only: bool) -> String {
        const ASCII: &[&str] = &[
            ".", ".", "!", "?", " ", " ", " ", "\t", "\n", "\r", "\r\n", "\"", "'", "(", ")", "[",
            "]", "{", "}", ",", "-", ":", ";", "a", "b", "z", "A", "Q", "Z", "0", "7", "#", "%",
            "/", "_", "~", "\x0b", "\x0c", "\x01", "\x7f", "Mr", "He", "the", "U.S",
        ];
        const WIDE: &[&str] = &[
            "é", "É", "–", "—", "…", "«", "»", "“", "”", "。", "！", "\u{85}", "\u{2028}",
            "\u{2029}", "\u{a0}", "\u{ad}", "\u{301}", "ª", "ß", "日", "١", "\u{200d}",
        ];
        let mut s = String::new();
        for _ in 0..len {
            let wide = !ascii_only && rng.next().is_multiple_of(8);
            s.push_str(rng.pick(if wide { WIDE } else { ASCII }));
        }
        s
    }

    #[test]
    fn matches_unicode_segmentation_on_random_text() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for case in 0..200_000u32 {
            let len = 1 + (rng.next() % 24) as usize;
            let t = random_text(&mut rng, len, case.is_multiple_of(2));
            assert_eq!(sentence_bounds(&t), reference(&t), "text {t:?}");
        }
    }

    #[test]
    fn matches_unicode_segmentation_on_prose() {
        for t in [
            "",
            "Dr. Smith went to Washington. He met J. R. Tolkien there!  Then éclair.",
            "It costs 3.50 dollars. (See above.) \"Quoted.\" Next one.\nA new line? Yes!\r\nEnd",
            "The U.S. Army. e.g. this one; and that... more text. 1. Item two.",
            "Ends with spaces.   ",
            "What?! Really?) no... OK.\n\n\nThree lines.",
        ] {
            assert_eq!(sentence_bounds(t), reference(t), "text {t:?}");
        }
    }
}
