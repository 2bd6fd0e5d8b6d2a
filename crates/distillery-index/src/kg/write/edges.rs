//! The edges, steps 2 to 5: ends replaced by node ids, and the two sorted edge files with
//! exact duplicates dropped.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use arrow::datatypes::SchemaRef;
use datafusion::physical_plan::SendableRecordBatchStream;

use super::parts::{PartWriter, plain, props};
use super::schema::edges_schema;
use super::sort::{ids, next, strings};
use crate::IndexError;

/// Steps 2 and 3: writes each sorted batch mapped by `f`.
pub(super) async fn map_ids(
    mut s: SendableRecordBatchStream,
    path: &Path,
    schema: SchemaRef,
    mut f: impl FnMut(&RecordBatch) -> Result<Vec<ArrayRef>, IndexError>,
) -> Result<(), IndexError> {
    let mut w = PartWriter::create(path, schema.clone(), plain())?;
    while let Some(b) = next(&mut s, path).await? {
        let out = RecordBatch::try_new(schema.clone(), f(&b)?)
            .map_err(|e| IndexError::parquet(path.display(), e))?;
        w.write(&out)?;
    }
    w.close().map(drop)
}

/// Steps 4 and 5: writes the id edges in their sorted order, exact duplicates dropped;
/// returns the edges written.
pub(super) async fn write_edges(
    mut s: SendableRecordBatchStream,
    path: &Path,
    sorted_by: [i32; 4],
) -> Result<u64, IndexError> {
    let mut w = PartWriter::create(path, edges_schema(), props(&sorted_by))?;
    let mut last: Option<(u32, String, u32, String)> = None;
    let mut written = 0u64;
    while let Some(b) = next(&mut s, path).await? {
        let (subj, obj) = (ids(&b, 0)?.clone(), ids(&b, 2)?.clone());
        let (rel, src) = (strings(&b, 1)?, strings(&b, 3)?);
        let mut keep = Vec::with_capacity(b.num_rows());
        for r in 0..b.num_rows() {
            let row = (subj.value(r), rel.value(r), obj.value(r), src.value(r));
            let new = last
                .as_ref()
                .is_none_or(|l| (l.0, l.1.as_str(), l.2, l.3.as_str()) != row);
            if new {
                last = Some((row.0, row.1.to_owned(), row.2, row.3.to_owned()));
                written += 1;
            }
            keep.push(new);
        }
        let cols: Vec<ArrayRef> = vec![Arc::new(subj), Arc::new(rel), Arc::new(obj), Arc::new(src)];
        let b = RecordBatch::try_new(edges_schema(), cols)
            .and_then(|b| filter_record_batch(&b, &BooleanArray::from(keep)))
            .map_err(|e| IndexError::parquet(path.display(), e))?;
        w.write(&b)?;
    }
    w.close()?;
    Ok(written)
}
