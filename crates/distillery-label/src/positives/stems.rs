//! Stemmed question terms for `answer-aware`'s unit BM25.
//!
//! A question and its evidence often use different forms of one word ("campuses" and
//! "campus", "created" and "creating"): the exact-word BM25 sees no overlap. [`QueryStems`]
//! matches a unit's words to the question's terms by their Snowball English stems
//! (`rust-stemmers`, the stemmer tantivy's English analyzer uses), and `answer-aware` blends
//! that score with the exact-word one ([`STEM_WEIGHT`]): an exact match still counts for
//! more than a shared stem.
//!
//! Only the words that can match are stemmed, each distinct word once per question. A
//! Snowball English stem keeps its word's first three bytes ([`may_stem_to`]): the algorithm
//! rewrites suffixes only after a vowel, and what it rewrites in the first three letters is a
//! third letter `y` that becomes `i` (`cry`, `crying` → `cri`), the reverse in one special
//! form (`skies` → `sky`), an `e` put back after a cut ending (`using` → `use`), a stem
//! shorter than three bytes (`ais` → `ai`), and three special forms that change the second
//! letter ([`SECOND_BYTE_CHANGES`]). A word that cannot stem to any query stem is skipped
//! without stemming it; a test checks the rule on every word of the shared samples.

use foldhash::{HashMap, HashMapExt};
use rust_stemmers::{Algorithm, Stemmer};
use std::borrow::Cow;
use std::sync::LazyLock;

/// The share of a unit's BM25 that comes from stemmed matches; the rest comes from exact
/// words.
pub(super) const STEM_WEIGHT: f64 = 0.5;

static ENGLISH: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The Snowball English stem of a normalised word.
pub(super) fn stem(w: &str) -> Cow<'_, str> {
    ENGLISH.stem(w)
}

/// The stems of a list of terms, in order, duplicates kept.
pub(super) fn stems(terms: &[String]) -> Vec<String> {
    terms.iter().map(|w| stem(w).into_owned()).collect()
}

/// The Snowball English special forms whose stem does not keep the word's first two bytes.
const SECOND_BYTE_CHANGES: [(&str, &str); 3] =
    [("dying", "die"), ("lying", "lie"), ("tying", "tie")];

/// Whether a word can have `stem` as its Snowball English stem, short of the special forms
/// of [`SECOND_BYTE_CHANGES`]: the stem's first three bytes (all of a shorter stem) start the
/// word, a `y` and an `i` matching as the third, and a three-byte stem's third byte may be the
/// `e` that Snowball puts back after a cut `-ing` or `-ed` (`using` → `use`).
fn may_stem_to(word: &[u8], stem: &[u8]) -> bool {
    let k = stem.len().min(3);
    word.len() >= k
        && word[..k.min(2)] == stem[..k.min(2)]
        && (k < 3
            || word[2] == stem[2]
            || matches!((word[2], stem[2]), (b'y', b'i') | (b'i', b'y'))
            || (stem.len() == 3 && stem[2] == b'e'))
}

/// The distinct stems of a question's terms, looked up by a unit's words.
pub(super) struct QueryStems {
    /// Distinct stems, in the order of their first term.
    pub(super) terms: Vec<String>,
    index: HashMap<String, usize>,
    /// Whether one of `terms` is the stem of a special form of [`SECOND_BYTE_CHANGES`].
    special: bool,
}

impl QueryStems {
    pub(super) fn new(query: &[String]) -> QueryStems {
        let mut terms = Vec::new();
        let mut index = HashMap::new();
        for s in stems(query) {
            if !index.contains_key(&s) {
                index.insert(s.clone(), terms.len());
                terms.push(s);
            }
        }
        let special = SECOND_BYTE_CHANGES
            .iter()
            .any(|(_, st)| index.contains_key(*st));
        QueryStems {
            terms,
            index,
            special,
        }
    }

    /// Whether `w`'s stem can be one of [`QueryStems::terms`] (see the module's overview).
    pub(super) fn may_match(&self, w: &str) -> bool {
        let b = w.as_bytes();
        self.terms.iter().any(|s| may_stem_to(b, s.as_bytes()))
            || (self.special && SECOND_BYTE_CHANGES.iter().any(|(word, _)| *word == w))
    }

    /// The index in [`QueryStems::terms`] of `w`'s stem, if it is one. It stems `w`: a scan
    /// first asks [`QueryStems::may_match`], which gives the same answer for every word it
    /// turns away.
    pub(super) fn find(&self, w: &str) -> Option<usize> {
        self.index.get(stem(w).as_ref()).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `w` can stem to its stem by [`may_stem_to`], or is a special form that changes its
    /// second byte.
    fn assert_skip_rule_holds(w: &str) {
        let s = stem(w);
        let special = SECOND_BYTE_CHANGES
            .iter()
            .any(|&(word, st)| word == w && st == s);
        assert!(
            may_stem_to(w.as_bytes(), s.as_bytes()) || special,
            "{w} -> {s}"
        );
    }

    #[test]
    fn inflected_forms_meet_at_one_stem() {
        let q = QueryStems::new(&["campuses".into(), "created".into(), "campus".into()]);
        assert_eq!(q.terms, ["campus", "creat"]);
        assert_eq!(q.find("campus"), Some(0));
        assert_eq!(q.find("creator"), None, "Snowball keeps -or");
        assert_eq!(q.find("creates"), Some(1));
        assert_eq!(q.find("creating"), Some(1));
        assert!(!q.may_match("museum"));
        assert_eq!(q.find("camp"), None);
        assert_eq!(q.find("museum"), None);
    }

    /// The skip test is exact: a word can stem to its stem, or is one of the special forms
    /// that change its second byte.
    #[test]
    fn stems_keep_their_words_first_three_bytes() {
        let words = [
            "skies",
            "skis",
            "dying",
            "lying",
            "tying",
            "idly",
            "gently",
            "ugly",
            "early",
            "only",
            "singly",
            "news",
            "howe",
            "atlas",
            "cosmos",
            "bias",
            "andes",
            "proceed",
            "exceed",
            "succeed",
            "inning",
            "outing",
            "canning",
            "herring",
            "earring",
            "a",
            "as",
            "is",
            "ties",
            "ies",
            "s",
            "by",
            "cry",
            "cries",
            "cried",
            "ay",
            "yelling",
            "yes",
            "eyed",
            "ied",
            "relational",
            "possibility",
            "hopping",
            "hoped",
            "généralement",
            "über",
        ];
        for w in words {
            assert_skip_rule_holds(w);
        }
        // The special forms are found through the skip test.
        let q = QueryStems::new(&["die".into(), "lie".into()]);
        assert_eq!(q.find("dying"), Some(0));
        assert_eq!(q.find("lying"), Some(1));
        assert_eq!(q.find("tying"), None);
    }

    /// The skip rule on every distinct normalised word of the shared HotpotQA, MuSiQue and
    /// 2Wiki samples (some 50,000 words), when they are present.
    #[test]
    fn skip_rule_holds_on_every_word_of_the_shared_samples() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
        let mut words = std::collections::BTreeSet::new();
        for sub in ["hotpotqa", "musique", "2wikimultihopqa"] {
            let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
                eprintln!("skipping {sub}: ../shared/data/{sub} is absent");
                continue;
            };
            for e in entries.flatten() {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                let norm = crate::normalize::normalize_answer(&text);
                words.extend(norm.split(' ').map(str::to_string));
            }
        }
        for w in &words {
            assert_skip_rule_holds(w);
        }
        eprintln!("{} words checked", words.len());
    }
}
