//! `hseq-paper`: weak positives exactly as HSEQ appendix 9.2 describes them.
//!
//! 1. Candidates: every segment of S_h except source roots (`document`, `table`,
//!    `subgraph`: their content is a title or summary), stably sorted by level priority
//!    favouring containers, the ρ rank of [`distillery_hseq::level_rank`]: `section ≺
//!    paragraph ≺ table_row ≺ sentence ≺ table_cell ≺ triplet` (S_h order within a level).
//! 2. The candidate set is capped at `max_segments` (the preset's: small 48, medium 48,
//!    large 32, unless `LabelOptions::max_segments` overrides it).
//! 3. Positives: candidates whose normalised content equals a normalised gold answer
//!    (`exact`, score 1) or contains one as whole words (`substring`, score 0.5 + 0.5 ×
//!    answer words / content words), in candidate order — so containers come first.
//! 4. When fewer than `min_positives` positives matched, the question is low-confidence and
//!    the remaining candidates with the highest Jaccard overlap between question tokens and
//!    content tokens are added (`lexical`, score = the overlap; ties in candidate order;
//!    only candidates with some overlap) until `min_positives` is reached.

use super::{Method, Positive, Positives, Prepared, is_root, max_segments};
use crate::normalize::{Phrase, answer_variants, jaccard_sets, normalize_answer};
use crate::options::LabelOptions;
use distillery_core::{Question, Segment};
use distillery_hseq::level_rank;
use foldhash::HashSet;

/// The method's name.
pub const NAME: &str = "hseq-paper";

/// The HSEQ 9.2 labeller.
#[derive(Debug, Clone)]
pub struct HseqPaper {
    pub max_segments: usize,
    pub min_positives: usize,
}

impl HseqPaper {
    pub fn new(opts: &LabelOptions) -> HseqPaper {
        HseqPaper {
            max_segments: max_segments(opts),
            min_positives: opts.min_positives as usize,
        }
    }
}

impl Method for HseqPaper {
    fn name(&self) -> &str {
        NAME
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "max_segments": self.max_segments,
            "min_positives": self.min_positives,
            "priority": ["section", "paragraph", "table_row", "sentence", "table_cell", "triplet"],
            "match": "normalised exact or whole-word substring",
            "fallback": "jaccard",
        })
    }

    fn label(&self, q: &Question, sh: &[Segment], ctx: &crate::QuestionContext<'_>) -> Positives {
        self.label_prepared(q, sh, &Prepared::new(sh), ctx)
    }

    fn label_prepared(
        &self,
        q: &Question,
        sh: &[Segment],
        prep: &Prepared<'_>,
        _ctx: &crate::QuestionContext<'_>,
    ) -> Positives {
        let mut cands: Vec<usize> = (0..sh.len()).filter(|&i| !is_root(&sh[i].level)).collect();
        cands.sort_by_key(|&i| level_rank(&sh[i].level));
        cands.truncate(self.max_segments);

        let variants = answer_variants(q);
        let phrases: Vec<(Phrase<'_>, usize)> = variants
            .iter()
            .map(|v| (Phrase::new(v), v.split(' ').count()))
            .collect();
        let mut items = Vec::new();
        let mut rest = Vec::new();
        for &i in &cands {
            let content = prep.norm(i);
            let exact = variants.iter().any(|v| v == content);
            let sub = phrases
                .iter()
                .filter(|(p, _)| p.in_text(content))
                .map(|&(_, words)| words)
                .max();
            if exact {
                items.push(Positive {
                    index: i,
                    reason: "exact".into(),
                    score: 1.0,
                    lexical: false,
                });
            } else if let Some(words) = sub {
                let total = content.split(' ').count().max(words);
                items.push(Positive {
                    index: i,
                    reason: "substring".into(),
                    score: 0.5 + 0.5 * words as f64 / total as f64,
                    lexical: false,
                });
            } else {
                rest.push(i);
            }
        }

        let low_confidence = items.len() < self.min_positives;
        if low_confidence {
            let qn = normalize_answer(&q.question);
            let qt: HashSet<&str> = qn.split_whitespace().collect();
            let mut scored: Vec<(f64, usize)> = rest
                .iter()
                .map(|&i| {
                    let t: HashSet<&str> = prep.norm(i).split_whitespace().collect();
                    (jaccard_sets(&qt, &t), i)
                })
                .filter(|(s, _)| *s > 0.0)
                .collect();
            scored.sort_by(|a, b| b.0.total_cmp(&a.0));
            let want = self.min_positives - items.len();
            items.extend(scored.into_iter().take(want).map(|(s, i)| Positive {
                index: i,
                reason: "lexical".into(),
                score: s,
                lexical: true,
            }));
        }
        Positives {
            items,
            candidates: cands.len() as u32,
            low_confidence,
            teacher: None,
        }
    }
}
