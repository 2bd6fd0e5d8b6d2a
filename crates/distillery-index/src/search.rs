//! Searching a version: BM25, dense, and hybrid by reciprocal-rank fusion.
//!
//! Each shard answers on its own and the shards' hits are merged by score (ties by id).
//! Dense hits get their documents, titles and texts from the shard's passage table.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::IndexError;
use crate::bm25::Bm25Reader;
use crate::dense::DenseReader;
use crate::version::Opened;

/// One hit, as `distillery search --format json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub id: String,
    pub document_id: String,
    pub title: String,
    pub score: f32,
    pub text: String,
    /// The page and revision the passage was cut from (`None` for a passage of no wiki
    /// page, or of an index built before passages named them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision_id: Option<i64>,
}

/// How a query is answered.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Retrieval {
    /// BM25 over the tantivy index.
    #[default]
    Bm25,
    /// Nearest passages by embedding (the query embedded with the version's model).
    Dense,
    /// Reciprocal-rank fusion of BM25 and dense.
    Hybrid,
}

impl Retrieval {
    /// Whether the query needs an embedding.
    pub fn needs_vector(self) -> bool {
        self != Retrieval::Bm25
    }
}

/// The constant of reciprocal-rank fusion (Cormack et al.: 60).
pub const RRF_K: f32 = 60.0;

/// A version opened for searching.
pub struct Searcher {
    opened: Opened,
    bm25: Vec<Bm25Reader>,
    dense: Vec<DenseReader>,
}

impl std::fmt::Debug for Searcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Searcher")
            .field("version", &self.opened.manifest.version)
            .finish()
    }
}

impl Searcher {
    pub fn open(opened: Opened) -> Result<Searcher, IndexError> {
        let m = &opened.manifest;
        let has = |k: &str| m.kinds.iter().any(|x| x == k);
        let mut bm25 = Vec::new();
        let mut dense = Vec::new();
        for s in 0..m.shards as usize {
            let sn = format!("shard-{s:04}");
            if has("bm25") {
                bm25.push(Bm25Reader::open(&opened.dir.join("bm25").join(&sn))?);
            }
            if has("dense") {
                dense.push(DenseReader::open(
                    &opened.dir.join("ann").join(format!("{sn}.usearch")),
                    &opened.dir.join("embeddings").join(format!("{sn}.parquet")),
                )?);
            }
        }
        Ok(Searcher {
            opened,
            bm25,
            dense,
        })
    }

    pub fn version(&self) -> &str {
        &self.opened.manifest.version
    }

    pub fn manifest(&self) -> &crate::version::Manifest {
        &self.opened.manifest
    }

    pub fn has_bm25(&self) -> bool {
        !self.bm25.is_empty()
    }

    pub fn has_dense(&self) -> bool {
        !self.dense.is_empty()
    }

    /// The `k` best hits by `how` (`q`: the query's embedding, for dense and hybrid).
    pub fn search(
        &self,
        how: Retrieval,
        query: &str,
        q: Option<&[f32]>,
        k: usize,
    ) -> Result<Vec<Hit>, IndexError> {
        let vector = || {
            q.ok_or_else(|| IndexError::Invalid(format!("{how:?} retrieval needs a query vector")))
        };
        match how {
            Retrieval::Bm25 => self.bm25(query, k),
            Retrieval::Dense => self.dense(vector()?, k, false),
            Retrieval::Hybrid => self.hybrid(query, vector()?, k),
        }
    }

    /// BM25 over every shard.
    pub fn bm25(&self, query: &str, k: usize) -> Result<Vec<Hit>, IndexError> {
        if self.bm25.is_empty() {
            return Err(IndexError::Invalid(format!(
                "version {} has no bm25 index",
                self.version()
            )));
        }
        let mut hits = Vec::new();
        for r in &self.bm25 {
            hits.extend(r.search(query, k)?.into_iter().map(|h| Hit {
                id: h.id,
                document_id: h.document_id,
                title: h.title,
                score: h.score,
                text: h.text,
                page_id: h.page_id,
                revision_id: h.revision_id,
            }));
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        hits.truncate(k);
        Ok(hits)
    }

    /// Nearest passages to a query vector over every shard (`exact`: no graph walk).
    pub fn dense(&self, q: &[f32], k: usize, exact: bool) -> Result<Vec<Hit>, IndexError> {
        if self.dense.is_empty() {
            return Err(IndexError::Invalid(format!(
                "version {} has no dense index",
                self.version()
            )));
        }
        let mut ids = Vec::new();
        for r in &self.dense {
            ids.extend(r.search(q, k, exact)?);
        }
        ids.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ids.truncate(k);
        self.fill(ids)
    }

    /// Reciprocal-rank fusion of BM25 and dense results (each asked for `2k`).
    pub fn hybrid(&self, query: &str, q: &[f32], k: usize) -> Result<Vec<Hit>, IndexError> {
        let lists = [self.bm25(query, 2 * k)?, self.dense(q, 2 * k, false)?];
        let mut fused: HashMap<String, (f32, Hit)> = HashMap::new();
        for list in lists {
            for (rank, h) in list.into_iter().enumerate() {
                let add = 1.0 / (RRF_K + rank as f32 + 1.0);
                fused
                    .entry(h.id.clone())
                    .and_modify(|e| e.0 += add)
                    .or_insert((add, h));
            }
        }
        let mut hits: Vec<Hit> = fused
            .into_values()
            .map(|(s, mut h)| {
                h.score = s;
                h
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        hits.truncate(k);
        Ok(hits)
    }

    /// Hits with their passages' fields, read from the passage tables (each shard's parts,
    /// newest first: the first part holding an id has its row, and an id a part removed is
    /// not looked for in older ones).
    fn fill(&self, ids: Vec<(String, f32)>) -> Result<Vec<Hit>, IndexError> {
        let mut found: HashMap<String, Hit> = HashMap::new();
        let dir = self.opened.dir.join("passages");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| IndexError::io(dir.display(), e))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        for s in 0..self.opened.manifest.shards as usize {
            let sn = format!("shard-{s:04}");
            let parts = crate::passage_parts::of_shard(names.iter().map(String::as_str), &sn);
            let mut want: HashSet<&str> = ids
                .iter()
                .map(|h| h.0.as_str())
                .filter(|id| !found.contains_key(*id))
                .collect();
            for part in parts.iter().rev() {
                if want.is_empty() {
                    break;
                }
                let f = dir.join(&part.table);
                for b in crate::table::read_where(&f, "id", &want)? {
                    let rows = crate::passage::Rows::of(&b, &f)?;
                    for i in 0..b.num_rows() {
                        if want.contains(rows.id.value(i)) {
                            let p = rows.passage(i);
                            found.insert(
                                p.id.clone(),
                                Hit {
                                    id: p.id,
                                    document_id: p.document_id,
                                    title: p.title,
                                    score: 0.0,
                                    text: p.text,
                                    page_id: p.page_id,
                                    revision_id: p.revision_id,
                                },
                            );
                        }
                    }
                }
                want.retain(|id| !found.contains_key(*id));
                let hidden = crate::passage_parts::hidden_by(&dir, part)?;
                for id in &hidden {
                    want.remove(id.as_str());
                }
            }
        }
        Ok(ids
            .into_iter()
            .filter_map(|(id, score)| {
                let mut h = found.remove(&id)?;
                h.score = score;
                Some(h)
            })
            .collect())
    }
}
