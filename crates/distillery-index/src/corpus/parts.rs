//! Reading and writing a corpus root's parts: documents (the `documents` schema) and, in a
//! corpus that keeps them, the HSEQ segments of its pages (the `segments` schema).

use std::collections::{HashMap, HashSet};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, Int64Type};
use bytes::Bytes;
use distillery_core::schema::{from_batch, schema_of, to_batch};
use distillery_core::{Document, Segment, TableKind};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::{Manifest, Part, Tomb, buried, key_from, tombs};
use crate::IndexError;
use crate::version::Root;

/// Rows buffered before they are encoded.
const BATCH_ROWS: usize = 512;
/// Encoded bytes past which a part is closed and uploaded (parts are read whole).
const PART_BYTES: usize = 32 << 20;

/// A row a corpus part holds: its table, the folder of its parts in a version, and about how
/// many bytes it holds in memory.
pub trait PartRow: serde::Serialize {
    const TABLE: TableKind;
    const DIR: &'static str;
    fn weight(&self) -> usize;
}

impl PartRow for Document {
    const TABLE: TableKind = TableKind::Documents;
    const DIR: &'static str = "documents";
    fn weight(&self) -> usize {
        self.text.len() * 2 + 256
    }
}

impl PartRow for Segment {
    const TABLE: TableKind = TableKind::Segments;
    const DIR: &'static str = "segments";
    fn weight(&self) -> usize {
        self.content.len() + 256
    }
}

/// Writes rows as parts under `versions/<v>/documents/` (or `segments/`), closing one at about
/// [`PART_BYTES`]; memory stays one part and one batch.
pub struct PartWriter<T: PartRow = Document> {
    root: Root,
    dir: String,
    seq: u32,
    buf: Vec<T>,
    held: usize,
    writer: Option<ArrowWriter<Vec<u8>>>,
    rows: u64,
    pub parts: Vec<Part>,
}

impl<T: PartRow> PartWriter<T> {
    pub fn new(root: &Root, version: &str, seq: u32) -> PartWriter<T> {
        PartWriter {
            root: root.clone(),
            dir: format!("versions/{version}/{}", T::DIR),
            seq,
            buf: Vec::new(),
            held: 0,
            writer: None,
            rows: 0,
            parts: Vec::new(),
        }
    }

    pub async fn push(&mut self, row: T) -> Result<(), IndexError> {
        self.held += row.weight();
        self.buf.push(row);
        if self.buf.len() >= BATCH_ROWS || self.held >= 8 << 20 {
            self.encode()?;
        }
        if self
            .writer
            .as_ref()
            .is_some_and(|w| w.bytes_written() + w.in_progress_size() >= PART_BYTES)
        {
            self.close().await?;
        }
        Ok(())
    }

    fn encode(&mut self) -> Result<(), IndexError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let batch = to_batch(T::TABLE, &self.buf)
            .map_err(|e| IndexError::Parquet(self.dir.clone(), e.to_string()))?;
        if self.writer.is_none() {
            let props = WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::default()))
                .build();
            self.writer = Some(
                ArrowWriter::try_new(Vec::new(), schema_of(T::TABLE), Some(props))
                    .map_err(|e| IndexError::parquet(&self.dir, e))?,
            );
        }
        let w = self.writer.as_mut().expect("opened above");
        w.write(&batch)
            .map_err(|e| IndexError::parquet(&self.dir, e))?;
        self.rows += self.buf.len() as u64;
        self.buf.clear();
        self.held = 0;
        Ok(())
    }

    async fn close(&mut self) -> Result<(), IndexError> {
        let Some(w) = self.writer.take() else {
            return Ok(());
        };
        let data = w
            .into_inner()
            .map_err(|e| IndexError::parquet(&self.dir, e))?;
        let path = format!("{}/part-{:05}.parquet", self.dir, self.parts.len());
        let bytes = data.len() as u64;
        self.root.put(&path, data).await?;
        self.parts.push(Part {
            path,
            seq: self.seq,
            rows: std::mem::take(&mut self.rows),
            bytes,
        });
        Ok(())
    }

    /// Writes what is buffered; returns the parts written.
    pub async fn finish(mut self) -> Result<Vec<Part>, IndexError> {
        self.encode()?;
        self.close().await?;
        Ok(self.parts)
    }
}

async fn fetch(root: &Root, rel: &str) -> Result<Bytes, IndexError> {
    root.get(rel).await?.ok_or_else(|| {
        IndexError::Corrupt(
            root.show(rel),
            "a part the manifest lists is missing".into(),
        )
    })
}

/// Every document of one part, in row order, batch by batch.
pub async fn read_documents(
    root: &Root,
    rel: &str,
    f: impl FnMut(Document) -> Result<(), IndexError>,
) -> Result<(), IndexError> {
    read_rows(root, rel, TableKind::Documents, f).await
}

/// Every row of one part of `table`, in row order, batch by batch.
async fn read_rows<T: serde::de::DeserializeOwned>(
    root: &Root,
    rel: &str,
    table: TableKind,
    mut f: impl FnMut(T) -> Result<(), IndexError>,
) -> Result<(), IndexError> {
    let data = fetch(root, rel).await?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(data)
        .and_then(|b| b.with_batch_size(256).build())
        .map_err(|e| IndexError::parquet(root.show(rel), e))?;
    for batch in reader {
        let batch = batch.map_err(|e| IndexError::parquet(root.show(rel), e))?;
        let rows: Vec<T> = from_batch(table, &batch)
            .map_err(|e| IndexError::Parquet(root.show(rel), e.to_string()))?;
        rows.into_iter().try_for_each(&mut f)?;
    }
    Ok(())
}

/// The columns of a row that say which page and revision it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowHead {
    pub key: String,
    pub page_id: Option<i64>,
    pub title: String,
    pub revision_id: Option<i64>,
    pub timestamp: Option<String>,
}

fn strings(batch: &RecordBatch, name: &str) -> Result<Vec<Option<String>>, String> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| format!("no column `{name}`"))?;
    let col = arrow::compute::cast(col, &DataType::Utf8).map_err(|e| e.to_string())?;
    let a = col.as_string::<i32>();
    Ok((0..a.len())
        .map(|i| a.is_valid(i).then(|| a.value(i).to_string()))
        .collect())
}

fn ints(batch: &RecordBatch, name: &str) -> Result<Vec<Option<i64>>, String> {
    let col = batch
        .column_by_name(name)
        .ok_or_else(|| format!("no column `{name}`"))?;
    let col = arrow::compute::cast(col, &DataType::Int64).map_err(|e| e.to_string())?;
    let a = col.as_primitive::<Int64Type>();
    Ok((0..a.len())
        .map(|i| a.is_valid(i).then(|| a.value(i)))
        .collect())
}

/// The heads of one part's rows (reading six columns, not the text).
pub async fn read_heads(
    root: &Root,
    rel: &str,
    mut f: impl FnMut(RowHead),
) -> Result<(), IndexError> {
    let data = fetch(root, rel).await?;
    let bad = |e: &dyn std::fmt::Display| IndexError::parquet(root.show(rel), e);
    let b = ParquetRecordBatchReaderBuilder::try_new(data).map_err(|e| bad(&e))?;
    let names = ["id", "uri", "title", "page_id", "revision_id", "timestamp"];
    let schema = b.parquet_schema();
    let roots: Vec<usize> = names
        .iter()
        .filter_map(|n| {
            (0..schema.root_schema().get_fields().len())
                .find(|&i| schema.root_schema().get_fields()[i].name() == *n)
        })
        .collect();
    let mask = ProjectionMask::roots(schema, roots);
    let reader = b
        .with_projection(mask)
        .with_batch_size(8192)
        .build()
        .map_err(|e| bad(&e))?;
    for batch in reader {
        let batch = batch.map_err(|e| bad(&e))?;
        let cols = (|| {
            Ok::<_, String>((
                strings(&batch, "id")?,
                strings(&batch, "uri")?,
                strings(&batch, "title")?,
                ints(&batch, "page_id")?,
                ints(&batch, "revision_id")?,
                strings(&batch, "timestamp")?,
            ))
        })()
        .map_err(|e| bad(&e))?;
        let (ids, uris, titles, pages, revs, stamps) = cols;
        for i in 0..batch.num_rows() {
            f(RowHead {
                key: key_from(
                    uris[i].as_deref().unwrap_or(""),
                    pages[i],
                    ids[i].as_deref().unwrap_or(""),
                ),
                page_id: pages[i],
                title: titles[i].clone().unwrap_or_default(),
                revision_id: revs[i],
                timestamp: stamps[i].clone(),
            });
        }
    }
    Ok(())
}

/// Walks the parts of a view newest first, calling `f` with each row's head, the part's
/// night, whether the row is live, and whether a newer row of its page shadows it. Memory:
/// the keys of every part but the oldest (the nights since the last compaction).
pub async fn walk_heads(
    root: &Root,
    m: &Manifest,
    tombs: &HashMap<String, Tomb>,
    mut f: impl FnMut(&RowHead, u32, bool, bool),
) -> Result<(), IndexError> {
    let mut seen: HashSet<String> = HashSet::new();
    for (i, part) in m.parts.iter().enumerate().rev() {
        let mut here = Vec::new();
        read_heads(root, &part.path, |h| {
            let shadowed = seen.contains(&h.key);
            let live = !shadowed && !buried(tombs.get(&h.key), part.seq);
            f(&h, part.seq, live, shadowed);
            if i > 0 {
                here.push(h.key);
            }
        })
        .await?;
        seen.extend(here);
    }
    Ok(())
}

/// The live documents of a version's view, one part at a time, newest parts first. Memory:
/// one part's documents, and the keys of the parts read (the nights since a compaction;
/// the oldest part's are not kept).
pub struct LiveView {
    tombs: HashMap<String, Tomb>,
    seen: HashSet<String>,
    /// Parts not read yet: `m.parts[..left]`.
    left: usize,
    pub count: u64,
}

impl LiveView {
    pub async fn open(root: &Root, m: &Manifest) -> Result<LiveView, IndexError> {
        Ok(LiveView {
            tombs: tombs(root, m).await?,
            seen: HashSet::new(),
            left: m.parts.len(),
            count: 0,
        })
    }

    /// The next part's live documents, `None` when every part is read.
    pub async fn next(
        &mut self,
        root: &Root,
        m: &Manifest,
    ) -> Result<Option<Vec<Document>>, IndexError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let (i, part) = (self.left, &m.parts[self.left]);
        let (mut live, mut here) = (Vec::new(), Vec::new());
        read_documents(root, &part.path, |d| {
            let key = super::key_of(&d);
            if !self.seen.contains(&key) && !buried(self.tombs.get(&key), part.seq) {
                live.push(d);
            }
            if i > 0 {
                here.push(key);
            }
            Ok(())
        })
        .await?;
        self.seen.extend(here);
        self.count += live.len() as u64;
        Ok(Some(live))
    }
}

/// The key of the page a segment of a corpus was cut from (its text, or one of its tables):
/// a corpus that keeps segments gives every one its page's id.
pub fn segment_key(s: &Segment) -> String {
    key_from(&s.uri, s.page_id, &s.source_id)
}

/// The live segments of a version's view, one night at a time, newest night first: a page's
/// segments are those written by the night of its live row. Memory: one night's segments
/// parts, and the keys of the nights read (as [`LiveView`]).
pub struct SegmentView {
    tombs: HashMap<String, Tomb>,
    seen: HashSet<String>,
    /// The nights not read yet, oldest first.
    nights: Vec<u32>,
    pub count: u64,
}

impl SegmentView {
    pub async fn open(root: &Root, m: &Manifest) -> Result<SegmentView, IndexError> {
        let mut nights: Vec<u32> = m
            .parts
            .iter()
            .chain(&m.segment_parts)
            .map(|p| p.seq)
            .collect();
        nights.sort_unstable();
        nights.dedup();
        Ok(SegmentView {
            tombs: tombs(root, m).await?,
            seen: HashSet::new(),
            nights,
            count: 0,
        })
    }

    /// The next night's live segments, `None` when every night is read.
    pub async fn next(
        &mut self,
        root: &Root,
        m: &Manifest,
    ) -> Result<Option<Vec<Segment>>, IndexError> {
        let Some(seq) = self.nights.pop() else {
            return Ok(None);
        };
        let mut live = Vec::new();
        for part in m.segment_parts.iter().filter(|p| p.seq == seq) {
            read_rows(root, &part.path, TableKind::Segments, |s: Segment| {
                let key = segment_key(&s);
                if !self.seen.contains(&key) && !buried(self.tombs.get(&key), seq) {
                    live.push(s);
                }
                Ok(())
            })
            .await?;
        }
        // The pages this night wrote shadow their rows of older nights.
        if !self.nights.is_empty() {
            for part in m.parts.iter().filter(|p| p.seq == seq) {
                let seen = &mut self.seen;
                read_heads(root, &part.path, |h| {
                    seen.insert(h.key);
                })
                .await?;
            }
        }
        self.count += live.len() as u64;
        Ok(Some(live))
    }
}
