//! Parquet files on local disk: the one writer and reader of this crate's tables.

use std::fs::File;
use std::path::Path;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::IndexError;

/// Rows per row group: small enough that a lookup by id ([`read_where`]) reads little.
pub const ROW_GROUP: usize = 4096;

/// Writes batches to `path` (zstd), creating its directory; the file is whole or absent: it
/// is written under a temporary name and renamed.
pub fn write(
    path: &Path,
    schema: SchemaRef,
    batches: impl IntoIterator<Item = Result<RecordBatch, IndexError>>,
) -> Result<(), IndexError> {
    let show = path.display().to_string();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| IndexError::io(dir.display(), e))?;
    }
    let tmp = path.with_extension("parquet.tmp");
    let file = File::create(&tmp).map_err(|e| IndexError::io(tmp.display(), e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(ROW_GROUP))
        .build();
    let mut w = ArrowWriter::try_new(file, schema, Some(props))
        .map_err(|e| IndexError::parquet(&show, e))?;
    for b in batches {
        w.write(&b?).map_err(|e| IndexError::parquet(&show, e))?;
    }
    w.close().map_err(|e| IndexError::parquet(&show, e))?;
    std::fs::rename(&tmp, path).map_err(|e| IndexError::io(&show, e))
}

/// Reads every batch of a Parquet file.
pub fn read(path: &Path) -> Result<Vec<RecordBatch>, IndexError> {
    let show = path.display().to_string();
    let file = File::open(path).map_err(|e| IndexError::io(&show, e))?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.with_batch_size(8192).build())
        .map_err(|e| IndexError::parquet(&show, e))?
        .map(|b| b.map_err(|e| IndexError::parquet(&show, e)))
        .collect()
}

/// Reads the row groups of a file sorted by the string column `column` whose statistics
/// (min..max of `column`) may hold one of `wanted`; the caller filters the rows. A file
/// written without statistics is read whole.
pub fn read_where(
    path: &Path,
    column: &str,
    wanted: &std::collections::HashSet<&str>,
) -> Result<Vec<RecordBatch>, IndexError> {
    use parquet::file::statistics::Statistics;
    let show = path.display().to_string();
    let file = File::open(path).map_err(|e| IndexError::io(&show, e))?;
    let b = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| IndexError::parquet(&show, e))?;
    let meta = b.metadata().clone();
    let col = b
        .parquet_schema()
        .columns()
        .iter()
        .position(|c| c.name() == column)
        .ok_or_else(|| IndexError::Corrupt(show.clone(), format!("no `{column}` column")))?;
    let groups: Vec<usize> = (0..meta.num_row_groups())
        .filter(|&g| match meta.row_group(g).column(col).statistics() {
            Some(Statistics::ByteArray(s)) => match (s.min_opt(), s.max_opt()) {
                (Some(lo), Some(hi)) => {
                    let (lo, hi) = (lo.data(), hi.data());
                    wanted
                        .iter()
                        .any(|w| lo <= w.as_bytes() && w.as_bytes() <= hi)
                }
                _ => true,
            },
            _ => true,
        })
        .collect();
    b.with_row_groups(groups)
        .with_batch_size(8192)
        .build()
        .map_err(|e| IndexError::parquet(&show, e))?
        .map(|b| b.map_err(|e| IndexError::parquet(&show, e)))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    #[test]
    fn a_lookup_reads_only_the_row_groups_that_may_hold_the_ids() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("t.parquet");
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Utf8, false)]));
        let ids: Vec<String> = (0..10_000).map(|i| format!("doc#{i:05}")).collect();
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(ids))]).unwrap();
        write(&f, schema, [Ok(batch)]).unwrap();
        let rows = |wanted: &[&str]| -> Vec<String> {
            let set = wanted.iter().copied().collect();
            read_where(&f, "id", &set)
                .unwrap()
                .iter()
                .flat_map(|b| {
                    let a = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
                    (0..a.len())
                        .map(|i| a.value(i).to_string())
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        // Rows 4096..8191 are the second row group.
        let got = rows(&["doc#05000"]);
        assert_eq!(got.len(), ROW_GROUP);
        assert!(got.contains(&"doc#05000".to_string()));
        assert_eq!(rows(&["doc#00001", "doc#09999"]).len(), 10_000 - ROW_GROUP);
        assert!(rows(&["zzz"]).is_empty());
        assert!(rows(&[]).is_empty());
    }
}
