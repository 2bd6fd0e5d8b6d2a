//! Provenance: the sentence of the passage that supports a triple.
//!
//! A sentence scores 2 points when it mentions the subject and 2 when it mentions the object
//! (case-insensitive, on word boundaries), plus the share of the predicate's words it holds;
//! without any mention it scores the share of the triple's words it holds. The best sentence
//! wins, the earlier one on ties; a triple none of whose words occur in any sentence gets no
//! sentence (kept, with empty provenance, and counted by the stage).

use std::collections::HashSet;

/// A sentence of the passage: its index in the document and its char offsets there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentenceSpan {
    pub index: u32,
    pub start: u32,
    pub end: u32,
    pub text: String,
}

/// Where a triple came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    pub sentence: u32,
    pub start: u32,
    pub end: u32,
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether `phrase` (as words) occurs in `hay` (as words) as a contiguous run.
fn mentions(hay: &[String], phrase: &[String]) -> bool {
    !phrase.is_empty() && hay.windows(phrase.len()).any(|w| w == phrase)
}

fn share(hay: &HashSet<&str>, ws: &[String]) -> f64 {
    if ws.is_empty() {
        return 0.0;
    }
    ws.iter().filter(|w| hay.contains(w.as_str())).count() as f64 / ws.len() as f64
}

/// The sentence supporting `triple` among `sentences`.
pub fn support(triple: &[String; 3], sentences: &[SentenceSpan]) -> Option<Support> {
    let (s, p, o) = (words(&triple[0]), words(&triple[1]), words(&triple[2]));
    let all: Vec<String> = s.iter().chain(&p).chain(&o).cloned().collect();
    let mut best: Option<(f64, &SentenceSpan)> = None;
    for sent in sentences {
        let ws = words(&sent.text);
        let set: HashSet<&str> = ws.iter().map(String::as_str).collect();
        let mut score = 0.0;
        if mentions(&ws, &s) {
            score += 2.0;
        }
        if mentions(&ws, &o) {
            score += 2.0;
        }
        score += if score > 0.0 {
            share(&set, &p)
        } else {
            share(&set, &all)
        };
        if score > 0.0 && best.is_none_or(|(b, _)| score > b) {
            best = Some((score, sent));
        }
    }
    best.map(|(_, sent)| Support {
        sentence: sent.index,
        start: sent.start,
        end: sent.end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sents(texts: &[&str]) -> Vec<SentenceSpan> {
        let mut at = 0;
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let n = t.chars().count() as u32;
                let s = SentenceSpan {
                    index: i as u32 + 10,
                    start: at,
                    end: at + n,
                    text: t.to_string(),
                };
                at += n + 1;
                s
            })
            .collect()
    }

    fn tr(s: &str, p: &str, o: &str) -> [String; 3] {
        [s.into(), p.into(), o.into()]
    }

    #[test]
    fn the_sentence_naming_subject_and_object_wins() {
        let ss = sents(&[
            "Ada Lovelace was a mathematician.",
            "She was born in London in 1815.",
            "Ada Lovelace died in London.",
        ]);
        let sup = support(&tr("Ada Lovelace", "died in", "London"), &ss).unwrap();
        assert_eq!((sup.sentence, sup.start, sup.end), (12, 66, 94));
        // Pronoun sentence: object and predicate only.
        let sup = support(&tr("Ada Lovelace", "born in", "1815"), &ss).unwrap();
        assert_eq!(sup.sentence, 11);
        // Word boundaries: "Lon" is not "London".
        let sup = support(&tr("Lon", "is", "mathematician"), &ss).unwrap();
        assert_eq!(sup.sentence, 10);
        assert!(support(&tr("Paris", "capital of", "France"), &ss).is_none());
    }
}
