//! A small Okapi BM25 over the units (or titles) of one question, for `answer-aware`.

/// Okapi BM25 of one query over a small in-memory collection. Only the query's terms are
/// counted (a document's other terms only matter through its length), so nothing is
/// allocated per document term.
pub(super) struct Bm25 {
    /// `tf[d * terms + j]`: occurrences of query term `j` in document `d`.
    tf: Vec<u32>,
    terms: usize,
    lens: Vec<f64>,
    /// Per query term.
    idf: Vec<f64>,
    avg: f64,
    k1: f64,
    b: f64,
}

impl Bm25 {
    /// `query`: distinct terms; `docs`: each document's terms.
    pub(super) fn new<'t, D, T>(query: &[String], docs: D, k1: f64, b: f64) -> Bm25
    where
        D: IntoIterator<Item = T>,
        T: IntoIterator<Item = &'t str>,
    {
        let mut tf = Vec::new();
        let mut lens = Vec::new();
        for d in docs {
            let at = tf.len();
            tf.resize(at + query.len(), 0);
            let mut len = 0usize;
            for w in d {
                len += 1;
                if let Some(j) = query.iter().position(|q| q == w) {
                    tf[at + j] += 1;
                }
            }
            lens.push(len as f64);
        }
        Bm25::from_counts(tf, query.len(), lens, k1, b)
    }

    /// From the counts already taken: `tf[d * terms + j]` occurrences of query term `j` in
    /// document `d`, `lens[d]` its length in terms.
    pub(super) fn from_counts(tf: Vec<u32>, terms: usize, lens: Vec<f64>, k1: f64, b: f64) -> Bm25 {
        debug_assert_eq!(tf.len(), terms * lens.len());
        let mut df = vec![0u32; terms];
        for counts in tf.chunks_exact(terms.max(1)) {
            for (j, &c) in counts.iter().enumerate() {
                if c > 0 {
                    df[j] += 1;
                }
            }
        }
        let n = lens.len() as f64;
        let idf = df
            .iter()
            .map(|&c| {
                let c = f64::from(c);
                (1.0 + (n - c + 0.5) / (c + 0.5)).ln()
            })
            .collect();
        let avg = if lens.is_empty() {
            0.0
        } else {
            lens.iter().sum::<f64>() / n
        };
        Bm25 {
            tf,
            terms,
            lens,
            idf,
            avg,
            k1,
            b,
        }
    }

    /// The score of document `i`.
    pub(super) fn score(&self, i: usize) -> f64 {
        self.score_of(i, |_| true)
    }

    /// The score of document `i` counting only the query terms `keep` accepts (by index).
    pub(super) fn score_of(&self, i: usize, keep: impl Fn(usize) -> bool) -> f64 {
        let norm = if self.avg > 0.0 {
            self.lens[i] / self.avg
        } else {
            1.0
        };
        self.tf[i * self.terms..(i + 1) * self.terms]
            .iter()
            .zip(&self.idf)
            .enumerate()
            .filter(|&(j, (f, _))| *f > 0 && keep(j))
            .map(|(_, (&f, idf))| {
                let f = f64::from(f);
                idf * f * (self.k1 + 1.0) / (f + self.k1 * (1.0 - self.b + self.b * norm))
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_prefers_rarer_terms() {
        let q = vec!["belt".to_string(), "rust".to_string()];
        let docs = ["rust language", "rust belt", "language model"];
        let bm = Bm25::new(&q, docs.iter().map(|d| d.split(' ')), 1.2, 0.75);
        assert!(bm.score(1) > bm.score(0));
        assert_eq!(bm.score(2), 0.0);
        // Three documents, "rust" in two: idf = ln(1 + 1.5 / 2.5); doc 0 has average length.
        let idf = (1.0f64 + 1.5 / 2.5).ln();
        assert!((bm.score(0) - idf * 2.2 / 2.2).abs() < 1e-12);
    }
}
