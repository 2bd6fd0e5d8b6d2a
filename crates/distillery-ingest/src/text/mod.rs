//! Text helpers shared by the readers: sentence spans and char offsets.

mod bounds;

use bounds::sentence_bounds;

/// Splits `text` into sentence spans, as char offsets `[start, end)` relative to `text`, with
/// surrounding whitespace excluded. Uses the Unicode sentence boundary rules (UAX #29), then
/// merges breaks after common abbreviations ("Mr.", "St.", "U.S.") and single initials, which
/// UAX #29 splits on.
pub fn sentence_spans(text: &str) -> Vec<(u32, u32)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (b, s) in sentence_bounds(text) {
        let trimmed_start = b + (s.len() - s.trim_start().len());
        let trimmed_end = b + s.trim_end().len();
        if trimmed_end <= trimmed_start {
            continue;
        }
        if let Some(last) = spans.last_mut()
            && ends_with_abbreviation(&text[last.0..last.1])
        {
            last.1 = trimmed_end;
            continue;
        }
        spans.push((trimmed_start, trimmed_end));
    }
    // Byte offsets to char offsets in one pass.
    let mut out = Vec::with_capacity(spans.len());
    let mut chars = 0u32;
    let mut pos = 0usize;
    for (a, b) in spans {
        chars += text[pos..a].chars().count() as u32;
        let ca = chars;
        chars += text[a..b].chars().count() as u32;
        out.push((ca, chars));
        pos = b;
    }
    out
}

const ABBREVIATIONS: &[&str] = &[
    "mr.", "mrs.", "ms.", "dr.", "prof.", "st.", "jr.", "sr.", "vs.", "etc.", "e.g.", "i.e.",
    "no.", "inc.", "ltd.", "co.", "corp.", "gen.", "col.", "lt.", "sgt.", "mt.", "ft.", "u.s.",
    "u.k.", "a.m.", "p.m.", "jan.", "feb.", "aug.", "sept.", "oct.", "nov.", "dec.", "c.",
];

fn ends_with_abbreviation(s: &str) -> bool {
    let last = s.rsplit(char::is_whitespace).next().unwrap_or(s);
    let lower = last.to_lowercase();
    if ABBREVIATIONS.iter().any(|a| {
        lower.ends_with(a)
            && (lower.len() == a.len()
                || !lower.as_bytes()[lower.len() - a.len() - 1].is_ascii_alphabetic())
    }) {
        return true;
    }
    // A single capital initial such as "J." in "J. R. R. Tolkien".
    let mut cs = last.chars();
    matches!((cs.next(), cs.next(), cs.next()), (Some(c), Some('.'), None) if c.is_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sents(t: &str) -> Vec<String> {
        sentence_spans(t)
            .into_iter()
            .map(|(a, b)| t.chars().skip(a as usize).take((b - a) as usize).collect())
            .collect()
    }

    #[test]
    fn splits_and_keeps_abbreviations() {
        assert_eq!(
            sents("Dr. Smith went to Washington. He met J. R. Tolkien there!  Then éclair."),
            vec![
                "Dr. Smith went to Washington.",
                "He met J. R. Tolkien there!",
                "Then éclair."
            ]
        );
        assert_eq!(sents("   "), Vec::<String>::new());
        assert_eq!(sents("No end"), vec!["No end"]);
    }

    #[test]
    fn offsets_are_chars() {
        let t = "Ünïcode one. Two.";
        assert_eq!(sentence_spans(t), vec![(0, 12), (13, 17)]);
    }
}
