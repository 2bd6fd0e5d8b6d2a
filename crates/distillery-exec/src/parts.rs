//! Parquet parts: writing batches of a table shard into `table/part-SSSSS-TAG.parquet` through
//! object_store (zstd, bounded row groups), and reading parts back as batch streams.
//!
//! A part's name is its provenance: `SSSSS` the shard, `TAG` the input name and file index
//! (`hotpot-0000`). Each part is written by exactly one sequential reader, so a re-run writes
//! the same rows in the same order, and the same bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use distillery_core::TableKind;
use distillery_core::schema::schema_of;
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::{Stream, StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore};
use parquet::arrow::AsyncArrowWriter;
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::{AsyncFileReader, MetadataSuffixFetch};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::error::ExecError;
use crate::store::Location;

/// A part written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WrittenPart {
    pub table: TableKind,
    pub shard: u32,
    /// Path relative to the directory the parts were written under: the part's path in the
    /// published output.
    pub rel: String,
    /// The directory the part lies under now (a run's staging directory, or the attempt
    /// directory of the task that wrote it); `base/rel` is where readers find it.
    pub base: String,
    pub rows: u64,
    pub bytes: u64,
}

impl WrittenPart {
    /// What the part is, from its name (`None` for a file that is not a part).
    pub fn id(&self) -> Option<PartId> {
        PartId::parse(&self.rel)
    }

    /// Where the part lies now, relative to the output location.
    pub fn path(&self) -> String {
        format!("{}/{}", self.base, self.rel)
    }
}

/// The file name of a part.
pub fn part_name(table: TableKind, shard: u32, tag: &str) -> String {
    format!("{}/part-{shard:05}-{tag}.parquet", table.name())
}

/// What a part is, read once from its name: the table and shard, the input and the file of it
/// the rows came from, and the stage that derived them (none: the input's reader). The one
/// place a part name is taken apart; the engine and the stages ask this.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartId {
    pub table: TableKind,
    pub shard: u32,
    /// The input's name.
    pub input: String,
    /// The stage that derived the part (`INPUT@STAGE-NNNN`), or none.
    pub stage: Option<String>,
    /// Index of the input's file.
    pub file: u32,
    /// The byte range of the file, for a file read as several ranges (`…-NNNN.RRRRR`).
    pub range: Option<u32>,
    /// The part's tag as written in its name: `INPUT-NNNN` or `INPUT@STAGE-NNNN`.
    pub tag: String,
}

impl PartId {
    /// Reads `…/table/part-SSSSS-TAG.parquet`; `None` for a name that is not a part's.
    pub fn parse(rel: &str) -> Option<PartId> {
        let (table, file) = rel.rsplit_once('/')?;
        let table = TableKind::from_name(table.rsplit('/').next()?)?;
        let rest = file.strip_prefix("part-")?.strip_suffix(".parquet")?;
        let (shard, tag) = rest.split_once('-')?;
        let (name, index) = tag.rsplit_once('-')?;
        let (index, range) = match index.split_once('.') {
            Some((i, r)) => (i, Some(r)),
            None => (index, None),
        };
        let digits = |s: &str| s.len() >= 4 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(index) || range.is_some_and(|r| !digits(r)) {
            return None;
        }
        let (input, stage) = match name.split_once('@') {
            Some((input, stage)) => (input, Some(stage.to_string())),
            None => (name, None),
        };
        Some(PartId {
            table,
            shard: shard.parse().ok()?,
            input: input.to_string(),
            stage,
            file: index.parse().ok()?,
            range: match range {
                Some(r) => Some(r.parse().ok()?),
                None => None,
            },
            tag: tag.to_string(),
        })
    }

    /// Whether the input's reader wrote it (no stage derived it).
    pub fn is_input(&self) -> bool {
        self.stage.is_none()
    }

    /// Whether its rows come from one of `inputs` (read or derived).
    pub fn of(&self, inputs: &[String]) -> bool {
        inputs.contains(&self.input)
    }
}

/// The data page size of the long-text columns (1 MiB, the default, for the others). A prompt
/// repeats most of the segments the step before showed, so the larger the page zstd gets, the
/// more repeats it finds: on 2,000 benchmark questions 8 MiB pages made the `sft` Parquet
/// files 38% smaller and the whole run 3.7% fewer instructions than 1 MiB pages.
const LONG_TEXT_PAGE_BYTES: usize = 8 << 20;

/// How a table's parts are encoded, from its [`distillery_core::TableSpec`]:
/// - `plain` columns (one distinct value a row: every table's `id`, a question's own id, a KG
///   edge's ends) get no dictionary: the encoder would intern every value, then write nearly
///   all of them again as the dictionary page, and plain pages under zstd come out smaller (on
///   the 10,000-question label benchmark the `documents`, `questions`, `labels` and `sft`
///   parts shrank by 3.3%, 0.7%, 0.8% and 0.2%; even a dump sorted by subject writes its
///   `triples` subject faster and smaller plain: docs/benchmarks.md, "Freebase ingest:
///   encoding"). Columns whose values repeat within a row group keep their dictionary.
/// - `sequential` columns (a KG edge's line in its dump) are delta-encoded, which stores the
///   steps in a few bits each before zstd sees them.
/// - `no_statistics` columns get no min/max statistics: a reader prunes row groups by them only
///   when the values cluster (20M Freebase lines on two cores: 9.11-9.65 s without, against
///   9.91-9.99 s with).
/// - `long_text` columns (whole prompts) get neither a dictionary nor statistics, and data
///   pages of [`LONG_TEXT_PAGE_BYTES`].
/// - The zstd level is the table's: 3, but 1 for `triples`, `literals` and `subgraphs`, where
///   level 1 measured faster and no larger.
fn writer_props(table: TableKind) -> WriterProperties {
    let spec = table.spec();
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(spec.zstd_level).expect("valid zstd level"),
        ))
        .set_max_row_group_row_count(Some(64 * 1024))
        .set_created_by("distillery".to_string());
    for name in spec.plain {
        b = b.set_column_dictionary_enabled(column(name), false);
    }
    for name in spec.sequential {
        b = b
            .set_column_dictionary_enabled(column(name), false)
            .set_column_encoding(column(name), Encoding::DELTA_BINARY_PACKED);
    }
    for name in spec.no_statistics {
        b = b.set_column_statistics_enabled(column(name), EnabledStatistics::None);
    }
    for name in spec.long_text {
        let col = column(name);
        b = b
            .set_column_dictionary_enabled(col.clone(), false)
            .set_column_data_page_size_limit(col.clone(), LONG_TEXT_PAGE_BYTES)
            .set_column_statistics_enabled(col, EnabledStatistics::None);
    }
    b.build()
}

/// A column by its dotted path (`messages.list.element.content`).
fn column(path: &str) -> ColumnPath {
    ColumnPath::new(path.split('.').map(str::to_string).collect())
}

struct OpenPart {
    writer: AsyncArrowWriter<BufWriter>,
    rows: u64,
}

/// Bytes the open parts of one [`PartWriters`] may buffer together by default (row groups in
/// progress).
pub const PART_BUFFER_BYTES: usize = 256 << 20;

/// Writers of the parts of one tag under a directory (`base`), opened lazily per (table, shard).
pub struct PartWriters {
    loc: Location,
    base: String,
    tag: String,
    open: BTreeMap<(TableKind, u32), OpenPart>,
    /// Flush a row group when its encoded size passes this.
    row_group_bytes: usize,
    /// Bytes the open parts may buffer together (row groups in progress).
    budget: usize,
}

impl PartWriters {
    /// The tag of the parts it writes.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    pub fn new(loc: Location, base: &str, tag: &str) -> PartWriters {
        PartWriters {
            loc,
            base: base.trim_end_matches('/').to_string(),
            tag: tag.to_string(),
            open: BTreeMap::new(),
            row_group_bytes: 32 << 20,
            budget: PART_BUFFER_BYTES,
        }
    }

    /// Sets the bytes the open parts may buffer together (default [`PART_BUFFER_BYTES`]; each part's row
    /// group is flushed at its share, between 1 and 32 MiB).
    pub fn with_budget(mut self, bytes: usize) -> PartWriters {
        self.budget = bytes;
        self
    }

    fn rel(&self, table: TableKind, shard: u32) -> String {
        format!("{}/{}", self.base, part_name(table, shard, &self.tag))
    }

    /// Opens the (table, shard) part if it is not open: a part opened and given no rows is
    /// written with none.
    pub fn open_part(&mut self, table: TableKind, shard: u32) -> Result<(), ExecError> {
        let key = (table, shard);
        if !self.open.contains_key(&key) {
            let rel = self.rel(table, shard);
            let path = self.loc.path(&rel);
            // 5 MiB: the smallest multipart part S3 accepts, and the buffer each open part holds.
            let buf = BufWriter::with_capacity(self.loc.store.clone(), path, 5 << 20);
            let writer =
                AsyncArrowWriter::try_new(buf, schema_of(table), Some(writer_props(table)))
                    .map_err(|e| ExecError::parquet(self.loc.show(&rel), e))?;
            self.open.insert(key, OpenPart { writer, rows: 0 });
            // Keep the total buffered across open parts bounded.
            self.row_group_bytes = (self.budget / self.open.len()).clamp(1 << 20, 32 << 20);
        }
        Ok(())
    }

    /// Appends a batch to the (table, shard) part.
    pub async fn write(
        &mut self,
        table: TableKind,
        shard: u32,
        batch: &RecordBatch,
    ) -> Result<(), ExecError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.open_part(table, shard)?;
        let key = (table, shard);
        let rel = self.rel(table, shard);
        let part = self.open.get_mut(&key).expect("opened above");
        part.writer
            .write(batch)
            .await
            .map_err(|e| ExecError::parquet(self.loc.show(&rel), e))?;
        part.rows += batch.num_rows() as u64;
        if part.writer.in_progress_size() > self.row_group_bytes {
            part.writer
                .flush()
                .await
                .map_err(|e| ExecError::parquet(self.loc.show(&rel), e))?;
        }
        Ok(())
    }

    /// Closes every part and returns what was written (paths relative to `base`).
    pub async fn finish(self) -> Result<Vec<WrittenPart>, ExecError> {
        let mut out = Vec::new();
        for ((table, shard), part) in self.open {
            let rel = format!("{}/{}", self.base, part_name(table, shard, &self.tag));
            part.writer
                .close()
                .await
                .map_err(|e| ExecError::parquet(self.loc.show(&rel), e))?;
            let bytes = self
                .loc
                .store
                .head(&self.loc.path(&rel))
                .await
                .map_err(|e| ExecError::store(self.loc.show(&rel), e))?
                .size;
            out.push(WrittenPart {
                table,
                shard,
                rel: part_name(table, shard, &self.tag),
                base: self.base.clone(),
                rows: part.rows,
                bytes,
            });
        }
        Ok(out)
    }
}

/// Reads a Parquet object through object_store: ranged gets for pages, a suffix get for the
/// footer (the pattern of parquet's `object_store` example, which replaced the deprecated
/// `ParquetObjectReader`).
#[derive(Clone)]
struct StoreReader {
    store: Arc<dyn ObjectStore>,
    path: Path,
}

fn pq_err(e: object_store::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

impl AsyncFileReader for StoreReader {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.path, range)
                .await
                .map_err(pq_err)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        async move {
            self.store
                .get_ranges(&self.path, &ranges)
                .await
                .map_err(pq_err)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let metadata = ParquetMetaDataReader::new()
                .with_arrow_reader_options(options)
                .load_via_suffix_and_finish(self)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

impl MetadataSuffixFetch for &mut StoreReader {
    fn fetch_suffix(&mut self, suffix: usize) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        let options = GetOptions {
            range: Some(GetRange::Suffix(suffix as u64)),
            ..Default::default()
        };
        async move {
            let resp = self
                .store
                .get_opts(&self.path, options)
                .await
                .map_err(pq_err)?;
            resp.bytes().await.map_err(pq_err)
        }
        .boxed()
    }
}

/// Streams the batches of one Parquet object (4096 rows a batch).
pub async fn read_part(
    loc: &Location,
    rel: &str,
) -> Result<impl Stream<Item = Result<RecordBatch, ExecError>> + use<>, ExecError> {
    read_part_rows(loc, rel, 4096).await
}

/// Streams the batches of one Parquet object, `rows` rows a batch: tables of large records
/// (whole wiki pages) are read in small batches so memory stays bounded by the batch.
pub async fn read_part_rows(
    loc: &Location,
    rel: &str,
    rows: usize,
) -> Result<impl Stream<Item = Result<RecordBatch, ExecError>> + use<>, ExecError> {
    stream_part(loc, rel, rows, None).await
}

/// Streams the batches of one Parquet object with only some of its top-level columns (by
/// name, in the table's order; a name the part does not have is an error).
pub async fn read_part_columns(
    loc: &Location,
    rel: &str,
    columns: &[&str],
) -> Result<impl Stream<Item = Result<RecordBatch, ExecError>> + use<>, ExecError> {
    stream_part(loc, rel, 4096, Some(columns)).await
}

async fn stream_part(
    loc: &Location,
    rel: &str,
    rows: usize,
    columns: Option<&[&str]>,
) -> Result<impl Stream<Item = Result<RecordBatch, ExecError>> + use<>, ExecError> {
    let reader = StoreReader {
        store: Arc::clone(&loc.store),
        path: loc.path(rel),
    };
    let show = loc.show(rel);
    let mut builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| ExecError::parquet(&show, e))?
        .with_batch_size(rows.max(1));
    if let Some(columns) = columns {
        let mut roots = Vec::with_capacity(columns.len());
        for c in columns {
            let i = builder.schema().index_of(c).map_err(|_| {
                ExecError::parquet(&show, ParquetError::General(format!("no column `{c}`")))
            })?;
            roots.push(i);
        }
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        builder = builder.with_projection(mask);
    }
    let stream = builder.build().map_err(|e| ExecError::parquet(&show, e))?;
    Ok(stream.map_err(move |e| ExecError::parquet(&show, e)))
}

/// Reads all batches of one part (for small parts and tests).
pub async fn read_part_all(loc: &Location, rel: &str) -> Result<Vec<RecordBatch>, ExecError> {
    let s = read_part(loc, rel).await?;
    s.try_collect().await
}

/// Reads all batches of one part with a stream adapter (keeps the API symmetrical).
pub async fn count_rows(loc: &Location, rel: &str) -> Result<u64, ExecError> {
    let mut s = Box::pin(read_part(loc, rel).await?);
    let mut n = 0;
    while let Some(b) = s.next().await {
        n += b?.num_rows() as u64;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_round_trip() {
        let n = part_name(TableKind::Documents, 3, "wiki-0001");
        assert_eq!(n, "documents/part-00003-wiki-0001.parquet");
        let short = |rel: &str| PartId::parse(rel).map(|id| (id.table, id.shard, id.tag));
        let want = Some((TableKind::Documents, 3, "wiki-0001".to_string()));
        assert_eq!(short(&n), want);
        assert_eq!(short(&format!("_staging/x/{n}")), want);
        assert_eq!(short("documents/readme.txt"), None);
        let id =
            PartId::parse("_staging/a/triples/part-00002-wiki-en@my-triples-0012.parquet").unwrap();
        assert_eq!(
            (
                id.table,
                id.shard,
                id.input.as_str(),
                id.stage.as_deref(),
                id.file
            ),
            (TableKind::Triples, 2, "wiki-en", Some("my-triples"), 12)
        );
        assert!(!id.is_input() && id.of(&["wiki-en".into()]));
        assert_eq!(id.tag, "wiki-en@my-triples-0012");
        assert!(PartId::parse("documents/part-00001-nodigits.parquet").is_none());
        let ranged = PartId::parse("documents/part-00001-wiki-0002.00013.parquet").unwrap();
        assert_eq!((ranged.file, ranged.range), (2, Some(13)));
        let derived = PartId::parse("triples/part-00001-wiki@t-0002.00013.parquet").unwrap();
        assert_eq!(
            (
                derived.input.as_str(),
                derived.stage.as_deref(),
                derived.range
            ),
            ("wiki", Some("t"), Some(13))
        );
    }

    /// Asserts that `path` names a leaf column of `table`: a path that names no leaf would
    /// silently configure nothing.
    fn assert_leaf(table: TableKind, path: &str) -> ColumnPath {
        let desc = parquet::arrow::ArrowSchemaConverter::new()
            .convert(&schema_of(table))
            .expect("schema converts");
        let col = column(path);
        assert!(
            desc.columns().iter().any(|c| *c.path() == col),
            "{col} is not a column of {}",
            table.name()
        );
        col
    }

    /// The plain columns are leaves without a dictionary, every table's `id` among them, and
    /// every other column but the long-text and sequential ones keeps its dictionary.
    #[test]
    fn id_columns_are_leaves_without_a_dictionary() {
        for table in TableKind::ALL {
            let spec = table.spec();
            for path in spec.plain {
                assert_leaf(table, path);
            }
            assert!(
                spec.plain.contains(&"id"),
                "{} has no id column listed",
                table.name()
            );
            let desc = parquet::arrow::ArrowSchemaConverter::new()
                .convert(&schema_of(table))
                .expect("schema converts");
            let props = writer_props(table);
            for leaf in desc.columns() {
                let listed = spec
                    .plain
                    .iter()
                    .chain(spec.long_text)
                    .chain(spec.sequential)
                    .any(|p| column(p) == *leaf.path());
                assert_eq!(
                    props.dictionary_enabled(leaf.path()),
                    !listed,
                    "{} of {}",
                    leaf.path(),
                    table.name()
                );
            }
        }
    }

    #[test]
    fn sequential_columns_are_delta_encoded_leaves() {
        for table in TableKind::ALL {
            for path in table.spec().sequential {
                let col = assert_leaf(table, path);
                let props = writer_props(table);
                assert!(!props.dictionary_enabled(&col));
                assert_eq!(
                    props.encoding(&col),
                    Some(Encoding::DELTA_BINARY_PACKED),
                    "{} of {}",
                    col,
                    table.name()
                );
            }
        }
    }

    #[test]
    fn kg_columns_without_statistics_are_leaves_of_their_tables() {
        for table in TableKind::ALL {
            for name in table.spec().no_statistics {
                let col = assert_leaf(table, name);
                let props = writer_props(table);
                assert_eq!(props.statistics_enabled(&col), EnabledStatistics::None);
            }
        }
        let subject = ColumnPath::new(vec!["subject".to_string()]);
        assert_ne!(
            writer_props(TableKind::Triples).statistics_enabled(&subject),
            EnabledStatistics::None
        );
    }

    #[test]
    fn long_text_columns_are_leaves_of_their_tables() {
        for table in TableKind::ALL {
            for path in table.spec().long_text {
                let col = assert_leaf(table, path);
                let props = writer_props(table);
                assert!(!props.dictionary_enabled(&col));
                assert_eq!(props.statistics_enabled(&col), EnabledStatistics::None);
                assert_eq!(
                    props.column_data_page_size_limit(&col),
                    LONG_TEXT_PAGE_BYTES
                );
                let other = ColumnPath::new(vec!["id".to_string()]);
                assert_eq!(props.column_data_page_size_limit(&other), 1 << 20);
                assert!(writer_props(TableKind::Documents).dictionary_enabled(&col));
            }
        }
    }
}
