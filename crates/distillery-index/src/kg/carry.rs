//! Carrying a built graph into the next one: the edges, names and aliases of the subjects a
//! change left alone, pushed into a new [`KgBuilder`] beside the changed subjects' edges, so
//! a night re-reads only what changed instead of every source record.

use std::fs::File;

use arrow::array::{Array, RecordBatch, StringArray, UInt32Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::{BATCH_ROWS, EDGES_BY_SUBJECT_FILE, KgBuilder, KgEdge, KgIndex, Kind, column};
use crate::IndexError;

impl KgIndex {
    /// Pushes into `kg` every edge of the graph whose subject `keep` accepts, and the name
    /// and aliases of every entity node `keep` accepts; returns the edges pushed.
    ///
    /// The result equals a build from the sources of the kept subjects only where a node's
    /// name and aliases come from its own record (Wikidata: an entity's label and aliases
    /// are given by its own page, edges name no object), which is what a corpus-fed KG is.
    pub fn carry(
        &self,
        kg: &mut KgBuilder,
        keep: &dyn Fn(&str) -> bool,
    ) -> Result<u64, IndexError> {
        let path = self.dir.join(EDGES_BY_SUBJECT_FILE);
        let show = path.display().to_string();
        let file = File::open(&path).map_err(|e| IndexError::io(&show, e))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.with_batch_size(BATCH_ROWS).build())
            .map_err(|e| IndexError::parquet(&show, e))?;
        let node = |id: u32| -> Result<usize, IndexError> {
            let i = id as usize;
            (i < self.keys.len()).then_some(i).ok_or_else(|| {
                IndexError::Corrupt(
                    show.clone(),
                    format!("edge names node {id}, past the nodes"),
                )
            })
        };
        let mut pushed = 0u64;
        for batch in reader {
            let batch: RecordBatch = batch.map_err(|e| IndexError::parquet(&show, e))?;
            let subject = column::<UInt32Array>(&batch, "subject", &show)?;
            let relation = column::<StringArray>(&batch, "relation", &show)?;
            let object = column::<UInt32Array>(&batch, "object", &show)?;
            let source = column::<StringArray>(&batch, "source", &show)?;
            for r in 0..batch.num_rows() {
                let s = node(subject.value(r))?;
                if !keep(&self.keys[s]) {
                    continue;
                }
                let o = node(object.value(r))?;
                kg.push(KgEdge {
                    subject: self.keys[s].clone(),
                    relation: relation.value(r).to_string(),
                    object: self.keys[o].clone(),
                    object_kind: self.kinds[o].as_str().to_string(),
                    subject_name: None,
                    object_name: None,
                    source: if source.is_null(r) {
                        String::new()
                    } else {
                        source.value(r).to_string()
                    },
                })?;
                pushed += 1;
            }
        }
        for (i, key) in self.keys.iter().enumerate() {
            if self.kinds[i] != Kind::Entity || !keep(key) {
                continue;
            }
            if let Some(name) = &self.names[i] {
                kg.name(key, name)?;
            }
            for a in &self.aliases[i] {
                kg.alias(key, a)?;
            }
        }
        Ok(pushed)
    }
}
