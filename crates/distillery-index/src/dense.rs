//! Dense vectors: per shard, the passages' unit-length embeddings as Parquet
//! (`embeddings/shard-SSSS.parquet`: `id`, `key`, `content_hash`, `vector` as a fixed-size
//! list of f32) and a usearch HNSW index (`ann/shard-SSSS.usearch`, cosine, f32, vector keys
//! = [`crate::passage::id_key`]) that `usearch.index.Index.restore(path)` opens in Python.
//!
//! An incremental build loads the previous version's HNSW file, removes the keys of changed
//! and deleted passages and adds the new vectors; vectors of unchanged content are taken
//! from the previous embeddings table, never recomputed.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, FixedSizeListArray, Float32Array, RecordBatch, StringArray, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::IndexError;
use crate::passage::id_key;

/// What identifies an embedding model's vectors: two models (or one model pooled or
/// normalised differently) never share cached vectors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model as the pipeline names it (a directory, a Hugging Face id, a served name).
    pub id: String,
    /// The weights' revision: a Hugging Face snapshot, a hash of the weights, or what the
    /// server reports.
    pub revision: String,
    /// `mean` or `cls` (local models), `server` (an embeddings endpoint).
    pub pooling: String,
    pub normalize: bool,
    pub dimension: usize,
    /// The embeddings server, for a served model (queries are embedded there too).
    #[serde(default)]
    pub server: Option<String>,
}

impl ModelInfo {
    /// The cache key: 16 hex digits of the identity.
    pub fn key(&self) -> String {
        let s = format!(
            "{}\0{}\0{}\0{}",
            self.id, self.revision, self.pooling, self.normalize
        );
        format!("{:016x}", twox_hash::XxHash64::oneshot(0, s.as_bytes()))
    }

    /// A local mean-pooled model `m` of `dimension` (tests).
    #[cfg(test)]
    pub(crate) fn test(dimension: usize) -> ModelInfo {
        ModelInfo {
            id: "m".into(),
            revision: "1".into(),
            pooling: "mean".into(),
            normalize: true,
            dimension,
            server: None,
        }
    }
}

/// Something that embeds texts: a local model or an embeddings server.
pub trait Embedder: Send + Sync {
    fn model(&self) -> &ModelInfo;
    /// Unit-length embeddings of `texts`, in order.
    fn embed<'a>(&'a self, texts: &'a [String])
    -> BoxFuture<'a, Result<Vec<Vec<f32>>, IndexError>>;
}

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let n: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// One row of an embeddings table.
#[derive(Debug, Clone, PartialEq)]
pub struct Vector {
    pub id: String,
    pub content_hash: String,
    pub vector: Vec<f32>,
}

fn schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("key", DataType::UInt64, false),
        Field::new("content_hash", DataType::Utf8, false),
        Field::new(
            "vector",
            DataType::FixedSizeList(
                Arc::new(Field::new("item", DataType::Float32, false)),
                dim as i32,
            ),
            false,
        ),
    ]))
}

fn to_batch(dim: usize, rows: &[Vector]) -> Result<RecordBatch, IndexError> {
    let flat: Vec<f32> = rows.iter().flat_map(|r| r.vector.iter().copied()).collect();
    if flat.len() != rows.len() * dim {
        return Err(IndexError::Invalid(format!(
            "embeddings: a vector is not of dimension {dim}"
        )));
    }
    let list = FixedSizeListArray::try_new(
        Arc::new(Field::new("item", DataType::Float32, false)),
        dim as i32,
        Arc::new(Float32Array::from(flat)),
        None,
    )
    .map_err(|e| IndexError::parquet("embeddings", e))?;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.id))),
        Arc::new(UInt64Array::from_iter_values(
            rows.iter().map(|r| id_key(&r.id)),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.content_hash),
        )),
        Arc::new(list),
    ];
    RecordBatch::try_new(schema(dim), cols).map_err(|e| IndexError::parquet("embeddings", e))
}

/// Writes an embeddings table.
pub fn write_vectors(path: &Path, dim: usize, rows: &[Vector]) -> Result<(), IndexError> {
    crate::table::write(
        path,
        schema(dim),
        rows.chunks(4096).map(|c| to_batch(dim, c)),
    )
}

/// Reads an embeddings table: its dimension and rows.
pub fn read_vectors(path: &Path) -> Result<(usize, Vec<Vector>), IndexError> {
    let show = path.display().to_string();
    let bad = |m: &str| IndexError::Corrupt(show.clone(), m.to_string());
    let mut out = Vec::new();
    let mut dim = 0;
    for b in crate::table::read(path)? {
        let s = |n: &str| {
            b.column_by_name(n)
                .and_then(|c| c.as_any().downcast_ref::<StringArray>())
                .ok_or_else(|| bad(&format!("no Utf8 column `{n}`")))
        };
        let (id, hash) = (s("id")?, s("content_hash")?);
        let list = b
            .column_by_name("vector")
            .and_then(|c| c.as_any().downcast_ref::<FixedSizeListArray>())
            .ok_or_else(|| bad("no fixed-size list column `vector`"))?;
        dim = list.value_length() as usize;
        let values = list
            .values()
            .as_any()
            .downcast_ref::<Float32Array>()
            .ok_or_else(|| bad("`vector` is not of f32"))?;
        for i in 0..b.num_rows() {
            let start = (list.value_offset(i)) as usize;
            out.push(Vector {
                id: id.value(i).to_string(),
                content_hash: hash.value(i).to_string(),
                vector: values.values()[start..start + dim].to_vec(),
            });
        }
    }
    Ok((dim, out))
}

fn new_ann(dim: usize, path: &Path) -> Result<Index, IndexError> {
    let opts = IndexOptions {
        dimensions: dim,
        metric: MetricKind::Cos,
        quantization: ScalarKind::F32,
        ..Default::default()
    };
    Index::new(&opts).map_err(|e| IndexError::usearch(path.display(), e))
}

fn path_str(path: &Path) -> Result<&str, IndexError> {
    path.to_str()
        .ok_or_else(|| IndexError::Invalid(format!("{}: not a UTF-8 path", path.display())))
}

fn add_all(index: &Index, rows: &[&Vector], path: &Path) -> Result<(), IndexError> {
    let u = |e: String| IndexError::usearch(path.display(), e);
    index
        .reserve(index.size() + rows.len())
        .map_err(|e| u(e.to_string()))?;
    for r in rows {
        index
            .add(id_key(&r.id), &r.vector)
            .map_err(|e| u(e.to_string()))?;
    }
    Ok(())
}

/// Builds an HNSW file of `rows` (in the given order) at `path`.
pub fn build_ann(path: &Path, dim: usize, rows: &[&Vector]) -> Result<(), IndexError> {
    let index = new_ann(dim, path)?;
    add_all(&index, rows, path)?;
    save(&index, path)
}

/// Updates the HNSW file `prev` into `path`: removes `removed` ids, adds `added`.
pub fn update_ann(
    prev: &Path,
    path: &Path,
    dim: usize,
    removed: &[&str],
    added: &[&Vector],
) -> Result<(), IndexError> {
    let index = new_ann(dim, prev)?;
    index
        .load(path_str(prev)?)
        .map_err(|e| IndexError::usearch(prev.display(), e))?;
    for id in removed {
        index
            .remove(id_key(id))
            .map_err(|e| IndexError::usearch(prev.display(), e))?;
    }
    add_all(&index, added, path)?;
    save(&index, path)
}

fn save(index: &Index, path: &Path) -> Result<(), IndexError> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| IndexError::io(d.display(), e))?;
    }
    index
        .save(path_str(path)?)
        .map_err(|e| IndexError::usearch(path.display(), e))
}

/// An HNSW file opened for searching, with the ids of its keys.
pub struct DenseReader {
    index: Index,
    ids: HashMap<u64, String>,
    path: String,
}

impl std::fmt::Debug for DenseReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseReader")
            .field("path", &self.path)
            .finish()
    }
}

impl DenseReader {
    /// Opens `ann` with the ids of the embeddings table `table`.
    pub fn open(ann: &Path, table: &Path) -> Result<DenseReader, IndexError> {
        let (dim, rows) = read_vectors(table)?;
        let index = new_ann(dim.max(1), ann)?;
        index
            .load(path_str(ann)?)
            .map_err(|e| IndexError::usearch(ann.display(), e))?;
        index.change_expansion_search(128);
        let ids = rows.into_iter().map(|r| (id_key(&r.id), r.id)).collect();
        Ok(DenseReader {
            index,
            ids,
            path: ann.display().to_string(),
        })
    }

    pub fn len(&self) -> usize {
        self.index.size()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `k` nearest passages: `(id, cosine similarity)`, best first, ties by id. `exact`
    /// compares against every vector instead of walking the graph.
    pub fn search(
        &self,
        q: &[f32],
        k: usize,
        exact: bool,
    ) -> Result<Vec<(String, f32)>, IndexError> {
        if k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        // A few more than asked, so ties at the cut are ordered by id.
        let m = if exact {
            self.index.exact_search(q, k + 16)
        } else {
            self.index.search(q, k + 16)
        }
        .map_err(|e| IndexError::usearch(&self.path, e))?;
        let mut hits: Vec<(String, f32)> = m
            .keys
            .iter()
            .zip(&m.distances)
            .filter_map(|(k, d)| self.ids.get(k).map(|id| (id.clone(), 1.0 - d)))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        hits.truncate(k);
        Ok(hits)
    }
}

/// The ids among `rows` whose content hash is in `wanted` (vectors reusable by content).
pub fn by_hash(rows: Vec<Vector>, wanted: &HashSet<&str>) -> HashMap<String, Vec<f32>> {
    rows.into_iter()
        .filter(|r| wanted.contains(r.content_hash.as_str()))
        .map(|r| (r.content_hash, r.vector))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(id: &str, x: [f32; 4]) -> Vector {
        let mut vector = x.to_vec();
        normalize(&mut vector);
        Vector {
            id: id.into(),
            content_hash: format!("h-{id}"),
            vector,
        }
    }

    #[test]
    fn vectors_round_trip_and_an_update_equals_a_rebuild() {
        let tmp = tempfile::tempdir().unwrap();
        let rows = vec![
            v("a", [1.0, 0.0, 0.0, 0.0]),
            v("b", [0.0, 1.0, 0.0, 0.0]),
            v("c", [0.7, 0.7, 0.0, 0.0]),
            v("d", [0.0, 0.0, 1.0, 0.1]),
        ];
        let t1 = tmp.path().join("e1.parquet");
        write_vectors(&t1, 4, &rows).unwrap();
        let (dim, back) = read_vectors(&t1).unwrap();
        assert_eq!((dim, &back), (4, &rows));
        let a1 = tmp.path().join("a1.usearch");
        build_ann(&a1, 4, &rows.iter().collect::<Vec<_>>()).unwrap();
        // Drop c, add e.
        let e = v("e", [0.0, 0.0, 0.1, 1.0]);
        let now: Vec<Vector> = vec![rows[0].clone(), rows[1].clone(), rows[3].clone(), e.clone()];
        let (t2, a2, t3, a3) = (
            tmp.path().join("e2.parquet"),
            tmp.path().join("a2.usearch"),
            tmp.path().join("e3.parquet"),
            tmp.path().join("a3.usearch"),
        );
        write_vectors(&t2, 4, &now).unwrap();
        update_ann(&a1, &a2, 4, &["c"], &[&e]).unwrap();
        write_vectors(&t3, 4, &now).unwrap();
        build_ann(&a3, 4, &now.iter().collect::<Vec<_>>()).unwrap();
        let (inc, full, old) = (
            DenseReader::open(&a2, &t2).unwrap(),
            DenseReader::open(&a3, &t3).unwrap(),
            DenseReader::open(&a1, &t1).unwrap(),
        );
        assert_eq!(inc.len(), 4);
        for q in [
            [1.0, 0.2, 0.0, 0.0],
            [0.0, 0.1, 0.2, 1.0],
            [0.5, 0.5, 0.5, 0.5],
        ] {
            let mut q = q.to_vec();
            normalize(&mut q);
            let (i, f) = (
                inc.search(&q, 3, true).unwrap(),
                full.search(&q, 3, true).unwrap(),
            );
            assert_eq!(
                i.iter().map(|h| &h.0).collect::<Vec<_>>(),
                f.iter().map(|h| &h.0).collect::<Vec<_>>()
            );
            assert!(i.iter().all(|h| h.0 != "c"));
        }
        assert_eq!(old.search(&rows[2].vector, 1, false).unwrap()[0].0, "c");
        let m = ModelInfo {
            id: "m".into(),
            revision: "r".into(),
            pooling: "mean".into(),
            normalize: true,
            dimension: 4,
            server: None,
        };
        let mut m2 = m.clone();
        m2.pooling = "cls".into();
        assert_ne!(m.key(), m2.key());
    }
}
