//! Parquet files of the build: written under a temporary name and renamed when complete,
//! read back by column, and the writer properties of work and index files.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::WriterProperties;

use crate::IndexError;
use crate::kg::BATCH_ROWS;

pub(in crate::kg) fn reader(
    path: &Path,
    columns: &[usize],
) -> Result<ParquetRecordBatchReader, IndexError> {
    let show = path.display().to_string();
    let file = File::open(path).map_err(|e| IndexError::io(&show, e))?;
    let b = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| IndexError::parquet(&show, e))?;
    let mask = ProjectionMask::roots(b.parquet_schema(), columns.iter().copied());
    b.with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| IndexError::parquet(&show, e))
}

/// A Parquet file written under a temporary name and renamed when closed.
pub(super) struct PartWriter {
    path: PathBuf,
    tmp: PathBuf,
    w: ArrowWriter<File>,
}

impl PartWriter {
    pub(super) fn create(
        path: &Path,
        schema: SchemaRef,
        props: WriterProperties,
    ) -> Result<PartWriter, IndexError> {
        let tmp = tmp_path(path);
        let file = File::create(&tmp).map_err(|e| IndexError::io(tmp.display(), e))?;
        let w = ArrowWriter::try_new(file, schema, Some(props))
            .map_err(|e| IndexError::parquet(path.display(), e))?;
        Ok(PartWriter {
            path: path.to_path_buf(),
            tmp,
            w,
        })
    }

    pub(super) fn show(&self) -> String {
        self.path.display().to_string()
    }

    pub(super) fn write(&mut self, b: &RecordBatch) -> Result<(), IndexError> {
        self.w
            .write(b)
            .map_err(|e| IndexError::parquet(self.path.display(), e))
    }

    pub(super) fn close(self) -> Result<PathBuf, IndexError> {
        self.w
            .close()
            .map_err(|e| IndexError::parquet(self.path.display(), e))?;
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| IndexError::io(self.path.display(), e))?;
        Ok(self.path)
    }
}

pub(in crate::kg) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Work files: fast to write, read once or twice.
pub(super) fn plain() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::LZ4_RAW)
        .build()
}

pub(super) fn props(sorted_by: &[i32]) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(Default::default()))
        .set_sorting_columns(Some(
            sorted_by
                .iter()
                .map(|&column_idx| SortingColumn {
                    column_idx,
                    descending: false,
                    nulls_first: false,
                })
                .collect(),
        ))
        .build()
}
