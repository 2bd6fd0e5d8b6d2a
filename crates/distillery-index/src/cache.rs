//! The embedding cache: vectors keyed by model and text, packed, in an object store that
//! jobs share, so no text is embedded twice by the same model.
//!
//! Layout: `CACHE/<model key>/<b>/<pack>.parquet`, where the model key
//! ([`ModelInfo::key`]) covers the model id, revision, pooling and normalisation, `<b>` is
//! the first hex digit of the content hash (16 buckets), and a pack holds the vectors one
//! build embedded in that bucket (`content_hash`, `vector`). A lookup reads only the buckets
//! of the texts it misses, so its memory is about a sixteenth of the model's cache. Packs
//! are immutable and named by the hash of their content, so two jobs writing at once never
//! clobber each other.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, FixedSizeListArray, Float32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::IndexError;
use crate::dense::ModelInfo;
use crate::version::Root;

/// The cache of one model.
#[derive(Debug, Clone)]
pub struct EmbeddingCache {
    root: Root,
    model: String,
}

impl EmbeddingCache {
    pub fn new(root: Root, model: &ModelInfo) -> EmbeddingCache {
        EmbeddingCache {
            root,
            model: model.key(),
        }
    }

    fn bucket(hash: &str) -> &str {
        hash.get(..1).unwrap_or("0")
    }

    /// The cached vectors of those `hashes` the cache has.
    pub async fn lookup(&self, hashes: &[&str]) -> Result<HashMap<String, Vec<f32>>, IndexError> {
        let mut wanted: BTreeMap<&str, HashSet<&str>> = BTreeMap::new();
        for h in hashes {
            wanted.entry(Self::bucket(h)).or_default().insert(h);
        }
        let mut found = HashMap::new();
        for (b, want) in wanted {
            let rel = format!("{}/{b}", self.model);
            for (pack, _) in self.root.list(&rel).await? {
                let Some(bytes) = self.root.get(&pack).await? else {
                    continue;
                };
                let show = self.root.show(&pack);
                let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
                    .and_then(|r| r.build())
                    .map_err(|e| IndexError::parquet(&show, e))?;
                for batch in reader {
                    let batch = batch.map_err(|e| IndexError::parquet(&show, e))?;
                    read_pack(&batch, &show, &want, &mut found)?;
                }
            }
        }
        Ok(found)
    }

    /// Stores vectors (`content_hash`, vector), one pack per bucket.
    pub async fn store(&self, entries: &[(String, Vec<f32>)]) -> Result<u64, IndexError> {
        let mut by: BTreeMap<&str, Vec<&(String, Vec<f32>)>> = BTreeMap::new();
        for e in entries {
            by.entry(Self::bucket(&e.0)).or_default().push(e);
        }
        let mut packs = 0;
        for (b, mut rows) in by {
            rows.sort_by(|x, y| x.0.cmp(&y.0));
            let dim = rows[0].1.len();
            let mut h = twox_hash::XxHash64::with_seed(0);
            for r in &rows {
                std::hash::Hasher::write(&mut h, r.0.as_bytes());
            }
            let name = format!(
                "{}/{b}/{:016x}.parquet",
                self.model,
                std::hash::Hasher::finish(&h)
            );
            let batch = pack_batch(dim, &rows).map_err(|e| IndexError::parquet(&name, e))?;
            let mut buf = Vec::new();
            let mut w = ArrowWriter::try_new(&mut buf, batch.schema(), None)
                .map_err(|e| IndexError::parquet(&name, e))?;
            w.write(&batch).map_err(|e| IndexError::parquet(&name, e))?;
            w.close().map_err(|e| IndexError::parquet(&name, e))?;
            self.root.put(&name, buf).await?;
            packs += 1;
        }
        Ok(packs)
    }
}

fn pack_batch(
    dim: usize,
    rows: &[&(String, Vec<f32>)],
) -> Result<RecordBatch, arrow::error::ArrowError> {
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let schema = Arc::new(Schema::new(vec![
        Field::new("content_hash", DataType::Utf8, false),
        Field::new(
            "vector",
            DataType::FixedSizeList(item.clone(), dim as i32),
            false,
        ),
    ]));
    let flat: Vec<f32> = rows.iter().flat_map(|r| r.1.iter().copied()).collect();
    let list =
        FixedSizeListArray::try_new(item, dim as i32, Arc::new(Float32Array::from(flat)), None)?;
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0))),
            Arc::new(list),
        ],
    )
}

fn read_pack(
    batch: &RecordBatch,
    show: &str,
    want: &HashSet<&str>,
    found: &mut HashMap<String, Vec<f32>>,
) -> Result<(), IndexError> {
    let bad = |m: &str| IndexError::Corrupt(show.to_string(), m.to_string());
    let hashes = batch
        .column_by_name("content_hash")
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| bad("no `content_hash`"))?;
    let list = batch
        .column_by_name("vector")
        .and_then(|c| c.as_any().downcast_ref::<FixedSizeListArray>())
        .ok_or_else(|| bad("no `vector`"))?;
    let dim = list.value_length() as usize;
    let values = list
        .values()
        .as_any()
        .downcast_ref::<Float32Array>()
        .ok_or_else(|| bad("`vector` is not of f32"))?;
    for i in 0..batch.num_rows() {
        let h = hashes.value(i);
        if want.contains(h) {
            let s = list.value_offset(i) as usize;
            found.insert(h.to_string(), values.values()[s..s + dim].to_vec());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn vectors_come_back_per_model() {
        let root = Root {
            store: Arc::new(InMemory::new()),
            prefix: object_store::path::Path::from("cache"),
            display: "memory://cache".into(),
            local_dir: None,
        };
        let m = ModelInfo::test(2);
        let c = EmbeddingCache::new(root.clone(), &m);
        let packs = c
            .store(&[
                ("a1".into(), vec![1.0, 0.0]),
                ("b2".into(), vec![0.0, 1.0]),
                ("a3".into(), vec![0.6, 0.8]),
            ])
            .await
            .unwrap();
        assert_eq!(packs, 2);
        let got = c.lookup(&["a1", "a3", "zz"]).await.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got["a3"], vec![0.6, 0.8]);
        let mut other = m.clone();
        other.revision = "2".into();
        assert!(
            EmbeddingCache::new(root, &other)
                .lookup(&["a1"])
                .await
                .unwrap()
                .is_empty()
        );
    }
}
