//! BM25 on disk: one tantivy index per shard, in tantivy's own directory layout, so
//! `tantivy.Index.open(dir)` of tantivy's Python package of the same version (0.27) opens it.
//!
//! Fields: `id` and `document_id` (raw strings, stored, `id` indexed so a passage can be
//! deleted by id), `title` and `text` (tokenized with tantivy's `default` analyzer, stored).
//! A build adds passages in id order on one writer thread and merges the index into one
//! segment. An incremental build starts from a copy of the previous version's shard: it
//! deletes the changed and deleted ids and adds the changed and added passages as a new
//! segment; the old segments stay as they are, so its cost follows the change. Tantivy keeps
//! a deleted document in its segment's statistics (document frequencies, token counts) until
//! a merge, so the build records what it deleted in `distillery-deleted.json` (documents,
//! tokens per field, documents per term) and [`Bm25Reader`] scores with the statistics minus
//! those: the same as a full rebuild's, so both answer every query with the same passages and
//! scores. Past a fifth of the documents deleted, or [`MAX_SEGMENTS`] segments, the update
//! merges everything into one segment and the record goes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::indexer::NoMergePolicy;
use tantivy::query::{Bm25StatisticsProvider, BooleanQuery};
use tantivy::schema::{Field, STORED, STRING, Schema, TEXT, Value};
use tantivy::tokenizer::TokenStream;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term, doc};

use crate::IndexError;
use crate::passage::Passage;

/// Writer memory budget (tantivy flushes a segment past it).
const WRITER_BYTES: usize = 256 << 20;

/// The record of deleted documents still counted in the segments' statistics.
const DELETED: &str = "distillery-deleted.json";

/// Segments past which an update merges them all.
pub const MAX_SEGMENTS: usize = 8;

/// What the deleted documents still in the segments add to tantivy's statistics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Deleted {
    docs: u64,
    /// Tokens per field name.
    tokens: BTreeMap<String, u64>,
    /// Per field name, the deleted documents holding each term.
    df: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Deleted {
    fn load(dir: &Path) -> Result<Deleted, IndexError> {
        let f = dir.join(DELETED);
        match std::fs::read(&f) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| IndexError::Corrupt(f.display().to_string(), e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Deleted::default()),
            Err(e) => Err(IndexError::io(f.display(), e)),
        }
    }

    /// Counts a deleted passage's fields as the index analysed them.
    fn add(&mut self, index: &Index, f: Fields, p: &Passage) -> Result<(), IndexError> {
        self.docs += 1;
        for (field, name, text) in [(f.title, "title", &p.title), (f.text, "text", &p.text)] {
            let mut analyzer = index.tokenizer_for_field(field)?;
            let mut stream = analyzer.token_stream(text);
            let (mut n, mut terms) = (0u64, BTreeSet::new());
            while stream.advance() {
                n += 1;
                terms.insert(stream.token().text.clone());
            }
            *self.tokens.entry(name.to_string()).or_default() += n;
            let df = self.df.entry(name.to_string()).or_default();
            for t in terms {
                *df.entry(t).or_default() += 1;
            }
        }
        Ok(())
    }
}

/// A searcher's statistics less the deleted documents'.
struct Alive<'a> {
    searcher: &'a tantivy::Searcher,
    deleted: &'a Deleted,
}

impl Alive<'_> {
    fn name(&self, field: Field) -> &str {
        self.searcher.schema().get_field_name(field)
    }
}

impl Bm25StatisticsProvider for Alive<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let all = Bm25StatisticsProvider::total_num_tokens(self.searcher, field)?;
        let gone = self.deleted.tokens.get(self.name(field)).copied();
        Ok(all.saturating_sub(gone.unwrap_or(0)))
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        let all = Bm25StatisticsProvider::total_num_docs(self.searcher)?;
        Ok(all.saturating_sub(self.deleted.docs))
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let all = self.searcher.doc_freq(term)?;
        let gone = term.value().as_str().and_then(|t| {
            let df = self.deleted.df.get(self.name(term.field()))?;
            df.get(t).copied()
        });
        Ok(all.saturating_sub(gone.unwrap_or(0)))
    }
}

/// The fields of a passage index.
#[derive(Debug, Clone, Copy)]
struct Fields {
    id: Field,
    document_id: Field,
    title: Field,
    text: Field,
    /// The page and revision a passage was cut from (stored, not searched); `None` in an
    /// index built before entries named them.
    page_id: Option<Field>,
    revision_id: Option<Field>,
}

fn schema() -> (Schema, Fields) {
    let mut sb = Schema::builder();
    let f = Fields {
        id: sb.add_text_field("id", STRING | STORED),
        document_id: sb.add_text_field("document_id", STRING | STORED),
        title: sb.add_text_field("title", TEXT | STORED),
        text: sb.add_text_field("text", TEXT | STORED),
        page_id: Some(sb.add_i64_field("page_id", STORED)),
        revision_id: Some(sb.add_i64_field("revision_id", STORED)),
    };
    (sb.build(), f)
}

fn fields(index: &Index, dir: &Path) -> Result<Fields, IndexError> {
    let s = index.schema();
    let get = |n: &str| {
        s.get_field(n)
            .map_err(|_| IndexError::Corrupt(dir.display().to_string(), format!("no field `{n}`")))
    };
    Ok(Fields {
        id: get("id")?,
        document_id: get("document_id")?,
        title: get("title")?,
        text: get("text")?,
        page_id: s.get_field("page_id").ok(),
        revision_id: s.get_field("revision_id").ok(),
    })
}

fn writer(index: &Index, dir: &Path) -> Result<IndexWriter<TantivyDocument>, IndexError> {
    let w = index
        .writer_with_num_threads(1, WRITER_BYTES)
        .map_err(|e| IndexError::tantivy(dir.display(), e))?;
    w.set_merge_policy(Box::new(NoMergePolicy));
    Ok(w)
}

fn add(w: &IndexWriter<TantivyDocument>, f: Fields, ps: &[&Passage]) -> Result<(), IndexError> {
    for p in ps {
        let mut d = doc!(
            f.id => p.id.as_str(),
            f.document_id => p.document_id.as_str(),
            f.title => p.title.as_str(),
            f.text => p.text.as_str(),
        );
        for (field, v) in [(f.page_id, p.page_id), (f.revision_id, p.revision_id)] {
            if let (Some(field), Some(v)) = (field, v) {
                d.add_i64(field, v);
            }
        }
        w.add_document(d)?;
    }
    Ok(())
}

/// Commits, merges every segment into one and removes the files no longer used.
fn finish(
    index: &Index,
    mut w: IndexWriter<TantivyDocument>,
    dir: &Path,
) -> Result<(), IndexError> {
    let t = |e: tantivy::TantivyError| IndexError::tantivy(dir.display(), e);
    w.commit().map_err(t)?;
    let segments = index.searchable_segment_ids().map_err(t)?;
    if segments.len() > 1 {
        w.merge(&segments).wait().map_err(t)?;
    }
    w.garbage_collect_files().wait().map_err(t)?;
    w.wait_merging_threads().map_err(t)
}

/// Builds a new index of `passages` (in id order) in the empty directory `dir`.
pub fn build(dir: &Path, passages: &[&Passage]) -> Result<(), IndexError> {
    std::fs::create_dir_all(dir).map_err(|e| IndexError::io(dir.display(), e))?;
    let (schema, f) = schema();
    let index =
        Index::create_in_dir(dir, schema).map_err(|e| IndexError::tantivy(dir.display(), e))?;
    let w = writer(&index, dir)?;
    add(&w, f, passages)?;
    finish(&index, w, dir)
}

/// Updates the index in `dir` (a copy of the previous version's, with its deleted record):
/// deletes the `removed` passages (as the index holds them), then adds `added` as a new
/// segment; merges everything when deletes or segments pile up.
pub fn update(dir: &Path, removed: &[&Passage], added: &[&Passage]) -> Result<(), IndexError> {
    let t = |e: tantivy::TantivyError| IndexError::tantivy(dir.display(), e);
    let index = Index::open_in_dir(dir).map_err(t)?;
    let f = fields(&index, dir)?;
    let mut deleted = Deleted::load(dir)?;
    let mut w = writer(&index, dir)?;
    for p in removed {
        w.delete_term(Term::from_field_text(f.id, &p.id));
        deleted.add(&index, f, p)?;
    }
    add(&w, f, added)?;
    w.commit().map_err(t)?;
    let segments = index.searchable_segment_metas().map_err(t)?;
    let max_doc: u64 = segments.iter().map(|m| u64::from(m.max_doc())).sum();
    if deleted.docs * 5 > max_doc || segments.len() > MAX_SEGMENTS {
        let _ = std::fs::remove_file(dir.join(DELETED));
        return finish(&index, w, dir);
    }
    let body = serde_json::to_vec(&deleted).map_err(|e| IndexError::Invalid(e.to_string()))?;
    std::fs::write(dir.join(DELETED), body).map_err(|e| IndexError::io(dir.display(), e))?;
    w.garbage_collect_files().wait().map_err(t)?;
    w.wait_merging_threads().map_err(t)
}

/// The files of an index directory worth keeping (not tantivy's lock files).
pub fn files(dir: &Path) -> Result<Vec<String>, IndexError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| IndexError::io(dir.display(), e))? {
        let e = e.map_err(|e| IndexError::io(dir.display(), e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".lock") && e.path().is_file() {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// Whether `name` is a file of one segment (`<32 hex digits>.<ext>`): written once, never
/// changed, so a version can share it with the one before.
pub fn is_segment_file(name: &str) -> bool {
    name.split_once('.').is_some_and(|(id, ext)| {
        id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) && !ext.is_empty()
    })
}

/// A hit of a search.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    pub id: String,
    pub document_id: String,
    pub title: String,
    pub text: String,
    pub score: f32,
    pub page_id: Option<i64>,
    pub revision_id: Option<i64>,
}

/// The terms of a free-text query for a title and a text field, tokenized by the index's own
/// analyzer: a disjunction no query syntax can break.
pub(crate) fn query_terms(
    index: &Index,
    title: Field,
    text: Field,
    query: &str,
) -> Result<Vec<Term>, IndexError> {
    let mut analyzer = index.tokenizer_for_field(text)?;
    let mut terms = Vec::new();
    let mut stream = analyzer.token_stream(query);
    while stream.advance() {
        let t = stream.token().text.clone();
        terms.push(Term::from_field_text(text, &t));
        terms.push(Term::from_field_text(title, &t));
    }
    Ok(terms)
}

/// An index opened for searching.
pub struct Bm25Reader {
    index: Index,
    reader: IndexReader,
    f: Fields,
    dir: String,
    deleted: Deleted,
}

impl std::fmt::Debug for Bm25Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Reader")
            .field("dir", &self.dir)
            .finish()
    }
}

impl Bm25Reader {
    pub fn open(dir: &Path) -> Result<Bm25Reader, IndexError> {
        let show = dir.display().to_string();
        let index = Index::open_in_dir(dir).map_err(|e| IndexError::tantivy(&show, e))?;
        let f = fields(&index, dir)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| IndexError::tantivy(&show, e))?;
        Ok(Bm25Reader {
            index,
            reader,
            f,
            dir: show,
            deleted: Deleted::load(dir)?,
        })
    }

    /// Passages in the index.
    pub fn len(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k` best passages for a free-text query, best first, ties by id.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<Hit>, IndexError> {
        let terms = query_terms(&self.index, self.f.title, self.f.text, query)?;
        if terms.is_empty() || k == 0 {
            return Ok(Vec::new());
        }
        let t = |e: tantivy::TantivyError| IndexError::tantivy(&self.dir, e);
        let q = BooleanQuery::new_multiterms_query(terms);
        let searcher = self.reader.searcher();
        // A few more than asked, so ties at the cut are ordered by id.
        let alive = Alive {
            searcher: &searcher,
            deleted: &self.deleted,
        };
        let top = searcher
            .search_with_statistics_provider(
                &q,
                &TopDocs::with_limit(k + 16).order_by_score(),
                &alive,
            )
            .map_err(t)?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr).map_err(t)?;
            let get = |f: Field| {
                d.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let int = |f: Option<Field>| d.get_first(f?).and_then(|v| v.as_i64());
            hits.push(Hit {
                id: get(self.f.id),
                document_id: get(self.f.document_id),
                title: get(self.f.title),
                text: get(self.f.text),
                score,
                page_id: int(self.f.page_id),
                revision_id: int(self.f.revision_id),
            });
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        hits.truncate(k);
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(id: &str, title: &str, text: &str) -> Passage {
        Passage::new(id.into(), format!("doc-{id}"), title.into(), text.into())
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for name in files(from).unwrap() {
            std::fs::copy(from.join(&name), to.join(&name)).unwrap();
        }
    }

    /// `old` built into `v1`, copied to `v2` and updated there (`deleted` out, `added` in);
    /// `full` is a path for the rebuild to compare with.
    fn versions(
        old: &[Passage],
        deleted: &[&Passage],
        added: &[&Passage],
    ) -> (
        tempfile::TempDir,
        std::path::PathBuf,
        std::path::PathBuf,
        std::path::PathBuf,
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let (v1, v2, full) = (
            tmp.path().join("v1"),
            tmp.path().join("v2"),
            tmp.path().join("full"),
        );
        build(&v1, &old.iter().collect::<Vec<_>>()).unwrap();
        copy_dir(&v1, &v2);
        update(&v2, deleted, added).unwrap();
        (tmp, v1, v2, full)
    }

    #[test]
    fn an_update_answers_as_a_rebuild_does() {
        let old = [
            p("a", "Lake Zell", "Lake Zell is a lake in Salzburg."),
            p("b", "Salzburg", "Salzburg is a state of Austria."),
            p("c", "Vienna", "Vienna is the capital of Austria."),
            p("d", "Graz", "Graz is a city in Styria."),
        ];
        let new = [
            p("a", "Lake Zell", "Lake Zell is a lake next to Zell am See."),
            p("b", "Salzburg", "Salzburg is a state of Austria."),
            p("d", "Graz", "Graz is a city in Styria."),
            p("e", "Linz", "Linz lies on the Danube in Austria."),
        ];
        let (_tmp, v1, v2, full) = versions(&old, &[&old[0], &old[2]], &[&new[0], &new[3]]);
        // Two of five documents deleted: past a fifth, so the update merged.
        assert!(!v2.join(DELETED).exists());
        build(&full, &new.iter().collect::<Vec<_>>()).unwrap();
        let (inc, reb, before) = (
            Bm25Reader::open(&v2).unwrap(),
            Bm25Reader::open(&full).unwrap(),
            Bm25Reader::open(&v1).unwrap(),
        );
        assert_eq!(inc.len(), 4);
        for q in [
            "lake Zell am See",
            "Austria",
            "capital",
            "Danube city",
            "Styria Graz",
            "",
        ] {
            assert_eq!(inc.search(q, 3).unwrap(), reb.search(q, 3).unwrap(), "{q}");
        }
        assert!(inc.search("capital", 3).unwrap().is_empty());
        assert_eq!(before.search("capital", 3).unwrap()[0].id, "c");
        // The old version is untouched.
        assert_eq!(before.len(), 4);
        assert!(files(&v2).unwrap().iter().all(|f| !f.ends_with(".lock")));
    }

    #[test]
    fn an_update_without_a_merge_scores_as_a_rebuild_does() {
        let words = [
            "river", "lake", "town", "castle", "bridge", "forest", "hill", "valley",
        ];
        let old: Vec<Passage> = (0..24)
            .map(|i| {
                let text = format!(
                    "The {} by the {} near {} {i}. The {} is old.",
                    words[i % 8],
                    words[(i * 3) % 8],
                    words[(i * 5 + 1) % 8],
                    words[(i + 2) % 8]
                );
                p(&format!("p{i:02}"), &format!("Place {i}"), &text)
            })
            .collect();
        let mut new = old.clone();
        new[3] = p(
            "p03",
            "Place 3",
            "The river castle bridge was rebuilt in stone.",
        );
        new.remove(7);
        new.push(p("p99", "Place 99", "A new lake town by the forest hill."));
        let (tmp, _, v2, full) =
            versions(&old, &[&old[3], &old[7]], &[&new[3], new.last().unwrap()]);
        // Two of 26 documents deleted: no merge, the old segment stays.
        assert!(v2.join(DELETED).exists());
        let metas = Index::open_in_dir(&v2)
            .unwrap()
            .searchable_segment_metas()
            .unwrap();
        assert_eq!(metas.len(), 2);
        build(&full, &new.iter().collect::<Vec<_>>()).unwrap();
        let (inc, reb) = (
            Bm25Reader::open(&v2).unwrap(),
            Bm25Reader::open(&full).unwrap(),
        );
        assert_eq!(inc.len(), reb.len());
        for q in [
            "river castle",
            "lake town forest",
            "stone bridge rebuilt",
            "valley hill",
            "place 3",
            "old",
        ] {
            assert_eq!(
                inc.search(q, 10).unwrap(),
                reb.search(q, 10).unwrap(),
                "{q}"
            );
        }
        // A second update counts both rounds of deletes.
        let v3 = tmp.path().join("v3");
        copy_dir(&v2, &v3);
        update(&v3, &[&new[0]], &[]).unwrap();
        let full2 = tmp.path().join("full2");
        build(&full2, &new[1..].iter().collect::<Vec<_>>()).unwrap();
        let (inc, reb) = (
            Bm25Reader::open(&v3).unwrap(),
            Bm25Reader::open(&full2).unwrap(),
        );
        for q in ["river castle", "lake", "place"] {
            assert_eq!(
                inc.search(q, 10).unwrap(),
                reb.search(q, 10).unwrap(),
                "{q}"
            );
        }
    }
}
