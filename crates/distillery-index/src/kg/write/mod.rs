//! Building a KG index in bounded memory.
//!
//! [`KgBuilder::push`] checks each edge and spools it to a Parquet file in the build's work
//! directory. [`KgBuilder::finish`] then runs five external sorts (DataFusion, spilling to
//! the work directory past the memory budget), each read back as one ordered stream:
//!
//! 1. each edge's ends as (key, kind, name) rows (spooled beside the edges, with the names
//!    and aliases given apart), by key, kind and name: the distinct nodes in id order, the
//!    smallest non-empty name first, each node's aliases gathered;
//! 2. the edges by subject, merged with the node stream to replace the subject by its id;
//! 3. those by (object, object kind), merged again to replace the object by its id;
//! 4. the id edges by (subject, relation, object, source), exact duplicates dropped:
//!    `edges_by_subject.parquet`;
//! 5. that file by (object, relation, subject, source): `edges_by_object.parquet`.
//!
//! The GraphML export and `nodes.parquet` (with each node's row ranges, from the runs of
//! its id in the two edge files) are streamed from those files, and `adjacency.bin` from
//! the finished tables ([`super::adjacency`]). Strings compare in byte order everywhere, as
//! Arrow sorts them, so the node stream and the edge streams agree.
//!
//! Here: the builder and what it spools. The sorts and merges are in `finish`, the
//! DataFusion session and streams in `sort`, the node table in `nodes`, the edge files in
//! `edges`, the Parquet files written under temporary names in `parts` and their schemas in
//! `schema`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray, StringBuilder};
use arrow::datatypes::DataType;

use self::parts::{PartWriter, plain};
use self::schema::{ends_schema, spool_schema};
use super::{BATCH_ROWS, KgEdge, KgStats, Kind};
use crate::IndexError;

mod edges;
mod finish;
mod nodes;
mod parts;
mod schema;
mod sort;

pub(super) use self::nodes::is_cvt;
pub(super) use self::parts::{reader, tmp_path};
pub(super) use self::sort::{ids, strings};

/// Memory the build's sorts hold before they spill to disk.
pub const SORT_MEMORY: usize = 256 << 20;

/// Builds a KG index from edges pushed one at a time, in bounded memory (module docs).
pub struct KgBuilder {
    dir: PathBuf,
    work: PathBuf,
    memory: usize,
    spool: PartWriter,
    /// Each edge's two ends as (key, kind, name) rows, so the node sort reads one table.
    ends: PartWriter,
    buf: Vec<KgEdge>,
    /// Names and aliases given apart from edges ([`KgBuilder::name`], [`KgBuilder::alias`]),
    /// not yet spooled: (key, text, whether it is an alias).
    names: Vec<(String, String, bool)>,
    input: u64,
    digest: [u64; 2],
}

impl std::fmt::Debug for KgBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KgBuilder")
            .field("dir", &self.dir)
            .field("input", &self.input)
            .finish()
    }
}

/// Writes the index of `edges` into `dir` with the default memory budget: a [`KgBuilder`]
/// pushed every edge. Returns the stats and the file names written (relative to `dir`,
/// sorted).
pub async fn write_kg(
    dir: &Path,
    edges: impl IntoIterator<Item = KgEdge>,
) -> Result<(KgStats, Vec<String>), IndexError> {
    let mut b = KgBuilder::new(dir, SORT_MEMORY)?;
    for e in edges {
        b.push(e)?;
    }
    b.finish().await
}

impl KgBuilder {
    /// A build writing into `dir` (created if missing), its sorts holding at most `memory`
    /// bytes; spool and spill files go to `dir/_work`, removed by [`KgBuilder::finish`].
    pub fn new(dir: &Path, memory: usize) -> Result<KgBuilder, IndexError> {
        let work = dir.join("_work");
        std::fs::create_dir_all(&work).map_err(|e| IndexError::io(work.display(), e))?;
        let spool = PartWriter::create(&work.join("spool.parquet"), spool_schema(), plain())?;
        let ends = PartWriter::create(&work.join("ends.parquet"), ends_schema(), plain())?;
        Ok(KgBuilder {
            dir: dir.to_path_buf(),
            work,
            memory,
            spool,
            ends,
            buf: Vec::with_capacity(BATCH_ROWS),
            names: Vec::new(),
            input: 0,
            digest: [0; 2],
        })
    }

    /// The directory the index is written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Edges pushed so far, and two order-independent sums of their hashes (a build's
    /// input fingerprint).
    pub fn digest(&self) -> (u64, [u64; 2]) {
        (self.input, self.digest)
    }

    /// Names an entity apart from any edge (Freebase's `type.object.name`, a Wikidata label):
    /// it counts with the names edges give, and names no node that no edge has.
    pub fn name(&mut self, key: &str, name: &str) -> Result<(), IndexError> {
        self.given(key, name, false)
    }

    /// Gives an entity an alias (Freebase's `common.topic.alias`, Wikidata's aliases): a
    /// node's aliases are the distinct ones given, in byte order, in `nodes.parquet`'s
    /// `aliases`. Like a name, an alias alone makes no node.
    pub fn alias(&mut self, key: &str, alias: &str) -> Result<(), IndexError> {
        self.given(key, alias, true)
    }

    fn given(&mut self, key: &str, text: &str, alias: bool) -> Result<(), IndexError> {
        if text.is_empty() {
            return Ok(());
        }
        let what = if alias { "alias" } else { "name" };
        let digest = format!("{what}|{key}|{text}");
        for (seed, sum) in self.digest.iter_mut().enumerate() {
            *sum = sum.wrapping_add(twox_hash::XxHash64::oneshot(seed as u64, digest.as_bytes()));
        }
        self.names.push((key.to_string(), text.to_string(), alias));
        if self.names.len() >= BATCH_ROWS {
            self.flush_names()?;
        }
        Ok(())
    }

    fn flush_names(&mut self) -> Result<(), IndexError> {
        if self.names.is_empty() {
            return Ok(());
        }
        let n = &self.names;
        let batch = RecordBatch::try_new(
            ends_schema(),
            vec![
                Arc::new(StringArray::from_iter_values(
                    n.iter().map(|x| x.0.as_str()),
                )),
                Arc::new(StringArray::from_iter_values(
                    n.iter().map(|_| Kind::Entity.as_str()),
                )),
                Arc::new(StringArray::from_iter(
                    n.iter().map(|x| (!x.2).then_some(x.1.as_str())),
                )),
                Arc::new(BooleanArray::from(vec![false; n.len()])),
                Arc::new(StringArray::from_iter(
                    n.iter().map(|x| x.2.then_some(x.1.as_str())),
                )),
            ],
        )
        .map_err(|e| IndexError::parquet(self.ends.show(), e))?;
        self.ends.write(&batch)?;
        self.names.clear();
        Ok(())
    }

    /// Adds one edge; fails on an unknown `object_kind`, naming the edge.
    pub fn push(&mut self, mut e: KgEdge) -> Result<(), IndexError> {
        let kind = Kind::parse(&e.object_kind).ok_or_else(|| {
            IndexError::Invalid(format!(
                "{}: edge {} ({} {} {}): unknown object_kind {:?} (want entity, literal or iri)",
                self.dir.display(),
                self.input,
                e.subject,
                e.relation,
                e.object,
                e.object_kind
            ))
        })?;
        let key = format!("{e:?}");
        for (seed, sum) in self.digest.iter_mut().enumerate() {
            *sum = sum.wrapping_add(twox_hash::XxHash64::oneshot(seed as u64, key.as_bytes()));
        }
        if e.object_kind != kind.as_str() {
            e.object_kind = kind.as_str().to_string();
        }
        self.input += 1;
        self.buf.push(e);
        if self.buf.len() >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IndexError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let b = &self.buf;
        let names = |f: fn(&KgEdge) -> Option<&str>| {
            let mut n = StringBuilder::new();
            for e in b {
                n.append_option(f(e).filter(|s| !s.is_empty()));
            }
            Arc::new(n.finish()) as ArrayRef
        };
        let text = |f: fn(&KgEdge) -> &str| {
            Arc::new(StringArray::from_iter_values(b.iter().map(f))) as ArrayRef
        };
        let batch = RecordBatch::try_new(
            spool_schema(),
            vec![
                text(|e| &e.subject),
                text(|e| &e.relation),
                text(|e| &e.object),
                text(|e| &e.object_kind),
                names(|e| e.subject_name.as_deref()),
                names(|e| e.object_name.as_deref()),
                text(|e| &e.source),
            ],
        )
        .map_err(|e| IndexError::parquet(self.spool.show(), e))?;
        self.spool.write(&batch)?;
        let c = batch.columns();
        let entity = StringArray::from_iter_values(b.iter().map(|_| Kind::Entity.as_str()));
        let both = |x: &ArrayRef, y: &ArrayRef| {
            arrow::compute::concat(&[x.as_ref(), y.as_ref()])
                .map_err(|e| IndexError::parquet(self.ends.show(), e))
        };
        let ends = RecordBatch::try_new(
            ends_schema(),
            vec![
                both(&c[0], &c[2])?,
                both(&(Arc::new(entity) as ArrayRef), &c[3])?,
                both(&c[4], &c[5])?,
                Arc::new(BooleanArray::from(vec![true; 2 * b.len()])),
                arrow::array::new_null_array(&DataType::Utf8, 2 * b.len()),
            ],
        )
        .map_err(|e| IndexError::parquet(self.ends.show(), e))?;
        self.ends.write(&ends)?;
        self.buf.clear();
        Ok(())
    }
}
