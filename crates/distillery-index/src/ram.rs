//! BM25 in memory ([`Bm25Index`]): what a distillation stage retrieves from when it is given
//! no built index.
//!
//! The index is built in memory by one writer thread and committed once, so document ids,
//! scores and the order of results are the same on every run over the same passages (ties
//! broken by the caller's key). Queries are free text: they are tokenized with the index's
//! own analyzer (lowercase words) and searched as a disjunction over title and text, so no
//! query syntax can fail to parse.

use tantivy::collector::TopDocs;
use tantivy::query::BooleanQuery;
use tantivy::schema::{Field, INDEXED, STORED, Schema, TEXT, Value};
use tantivy::tokenizer::TokenStream;
use tantivy::{Index, IndexReader, TantivyDocument, Term, doc};

use crate::IndexError;

/// A BM25 index over passages, each named by a `u64` key.
pub struct Bm25Index {
    index: Index,
    reader: IndexReader,
    key: Field,
    title: Field,
    text: Field,
    len: usize,
}

impl std::fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Index")
            .field("passages", &self.len)
            .finish()
    }
}

impl Bm25Index {
    /// Indexes `(key, title, text)` passages.
    pub fn build<'a>(
        passages: impl IntoIterator<Item = (u64, &'a str, &'a str)>,
    ) -> Result<Bm25Index, IndexError> {
        let mut sb = Schema::builder();
        let key = sb.add_u64_field("key", INDEXED | STORED);
        let title = sb.add_text_field("title", TEXT);
        let text = sb.add_text_field("text", TEXT);
        let index = Index::create_in_ram(sb.build());
        let mut writer = index.writer_with_num_threads::<TantivyDocument>(1, 50_000_000)?;
        let mut len = 0;
        for (k, t, x) in passages {
            writer.add_document(doc!(key => k, title => t, text => x))?;
            len += 1;
        }
        writer.commit()?;
        let reader = index.reader()?;
        Ok(Bm25Index {
            index,
            reader,
            key,
            title,
            text,
            len,
        })
    }

    /// Passages indexed.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `k` best passages for a free-text query: `(key, score)`, best first, ties by key.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<(u64, f32)>, IndexError> {
        let mut analyzer = self.index.tokenizer_for_field(self.text)?;
        let mut terms = Vec::new();
        let mut stream = analyzer.token_stream(query);
        while stream.advance() {
            let t = stream.token().text.clone();
            terms.push(Term::from_field_text(self.text, &t));
            terms.push(Term::from_field_text(self.title, &t));
        }
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let q = BooleanQuery::new_multiterms_query(terms);
        let searcher = self.reader.searcher();
        // Take a few more than asked so ties at the cut are ordered by key.
        let top = searcher.search(&q, &TopDocs::with_limit(k + 16).order_by_score())?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr)?;
            let key = d
                .get_first(self.key)
                .and_then(|v| v.as_u64())
                .ok_or_else(|| {
                    IndexError::Corrupt(
                        "bm25 index in memory".into(),
                        "a document without its key".into(),
                    )
                })?;
            hits.push((key, score));
        }
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bm25_ranks_the_passage_with_the_rare_terms_first() {
        let ps = [
            (
                7,
                "Lake Zell",
                "Lake Zell is a lake in Salzburg, next to Zell am See.",
            ),
            (
                3,
                "Salzburg",
                "Salzburg is a state of Austria. Its capital is Salzburg.",
            ),
            (9, "Vienna", "Vienna is the capital of Austria."),
        ];
        let idx = Bm25Index::build(ps.iter().map(|(k, t, x)| (*k, *t, *x))).unwrap();
        assert_eq!(idx.len(), 3);
        let hits = idx.search("Which lake is next to Zell am See?", 2).unwrap();
        assert_eq!(hits[0].0, 7);
        let hits = idx.search("capital of Austria", 3).unwrap();
        assert_eq!(hits.len(), 3.min(hits.len()));
        assert!(hits.iter().any(|h| h.0 == 9));
        // Query syntax is just text.
        assert!(idx.search("AND OR \"( title:x", 3).is_ok());
        assert!(idx.search("", 3).unwrap().is_empty());
        // Same index, same answers.
        let again = Bm25Index::build(ps.iter().map(|(k, t, x)| (*k, *t, *x))).unwrap();
        assert_eq!(
            again.search("capital of Austria", 3).unwrap(),
            idx.search("capital of Austria", 3).unwrap()
        );
    }
}
