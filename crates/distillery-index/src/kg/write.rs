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

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, BooleanArray, ListBuilder, RecordBatch, StringArray,
    StringBuilder, UInt32Array, UInt64Array,
};
use arrow::compute::{cast, filter_record_batch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::execution::memory_pool::FairSpillPool;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::metadata::SortingColumn;
use parquet::file::properties::WriterProperties;

use super::{
    ADJACENCY_FILE, BATCH_ROWS, EDGES_BY_OBJECT_FILE, EDGES_BY_SUBJECT_FILE, GRAPHML_FILE, KgEdge,
    KgStats, Kind, NODES_FILE,
};
use crate::IndexError;

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

    /// Sorts, merges and writes the five files; returns the stats and the file names
    /// written (relative to the directory, sorted). `adjacency.bin` is written last.
    pub async fn finish(mut self) -> Result<(KgStats, Vec<String>), IndexError> {
        self.flush()?;
        self.flush_names()?;
        let spool = self.spool.close()?;
        let ends = self.ends.close()?;
        let work = &self.work;
        let ctx = session(work, self.memory)?;
        register(&ctx, "spool", &spool).await?;
        register(&ctx, "ends", &ends).await?;

        // 1. The nodes in id order.
        let nodes = work.join("nodes.parquet");
        let (n, literals) = write_nodes_sorted(
            query(
                &ctx,
                "SELECT key, kind, name, edge, alias FROM ends \
                 ORDER BY key, kind, name NULLS LAST",
            )
            .await?,
            &nodes,
        )
        .await?;

        // 2. and 3. Subjects, then objects, replaced by their ids.
        let by_subject = work.join("e1.parquet");
        let mut cursor = NodeCursor::open(&nodes)?;
        map_ids(
            query(
                &ctx,
                "SELECT subject, relation, object, object_kind, source FROM spool \
                 ORDER BY subject",
            )
            .await?,
            &by_subject,
            subject_ids_schema(),
            |b| {
                let keys = strings(b, 0)?;
                let ids = (0..b.num_rows())
                    .map(|r| cursor.seek(keys.value(r), Kind::Entity.as_str()))
                    .collect::<Result<UInt32Array, _>>()?;
                let mut cols: Vec<ArrayRef> = vec![Arc::new(ids)];
                for i in 1..5 {
                    cols.push(Arc::new(strings(b, i)?));
                }
                Ok(cols)
            },
        )
        .await?;
        register(&ctx, "e1", &by_subject).await?;
        let ided = work.join("e2.parquet");
        let mut cursor = NodeCursor::open(&nodes)?;
        map_ids(
            query(
                &ctx,
                "SELECT subject, relation, object, object_kind, source FROM e1 \
                 ORDER BY object, object_kind",
            )
            .await?,
            &ided,
            edges_schema(),
            |b| {
                let (keys, kinds) = (strings(b, 2)?, strings(b, 3)?);
                let ids = (0..b.num_rows())
                    .map(|r| cursor.seek(keys.value(r), kinds.value(r)))
                    .collect::<Result<UInt32Array, _>>()?;
                Ok(vec![
                    b.column(0).clone(),
                    Arc::new(strings(b, 1)?),
                    Arc::new(ids),
                    Arc::new(strings(b, 4)?),
                ])
            },
        )
        .await?;
        register(&ctx, "e2", &ided).await?;

        // 4. and 5. The two edge files.
        let subject_file = self.dir.join(EDGES_BY_SUBJECT_FILE);
        let edges = write_edges(
            query(
                &ctx,
                "SELECT subject, relation, object, source FROM e2 \
                 ORDER BY subject, relation, object, source",
            )
            .await?,
            &subject_file,
            [0, 1, 2, 3],
        )
        .await?;
        register(&ctx, "by_subject", &subject_file).await?;
        let object_file = self.dir.join(EDGES_BY_OBJECT_FILE);
        write_edges(
            query(
                &ctx,
                "SELECT subject, relation, object, source FROM by_subject \
                 ORDER BY object, relation, subject, source",
            )
            .await?,
            &object_file,
            [2, 1, 0, 3],
        )
        .await?;
        drop(ctx);

        super::graphml::write(&self.dir.join(GRAPHML_FILE), &nodes, &subject_file)?;
        let mut cvt = 0;
        write_nodes(
            &self.dir.join(NODES_FILE),
            &nodes,
            &subject_file,
            &object_file,
            &mut cvt,
        )?;
        super::adjacency::write(&self.dir)?;
        std::fs::remove_dir_all(work).map_err(|e| IndexError::io(work.display(), e))?;

        let stats = KgStats {
            nodes: n,
            edges,
            literals,
            duplicates: self.input - edges,
            cvt,
            wikis: Vec::new(),
        };
        tracing::info!(
            dir = %self.dir.display(),
            nodes = stats.nodes,
            edges = stats.edges,
            literals = stats.literals,
            duplicates = stats.duplicates,
            cvt = stats.cvt,
            "kg index written"
        );
        let mut files: Vec<String> = [
            NODES_FILE,
            EDGES_BY_SUBJECT_FILE,
            EDGES_BY_OBJECT_FILE,
            GRAPHML_FILE,
            ADJACENCY_FILE,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        files.sort();
        Ok((stats, files))
    }
}

fn sort_err(what: &str, e: impl std::fmt::Display) -> IndexError {
    IndexError::Invalid(format!("kg build: {what}: {e}"))
}

/// A DataFusion session whose sorts spill to `work/spill` past `memory` bytes.
fn session(work: &Path, memory: usize) -> Result<SessionContext, IndexError> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(Arc::new(FairSpillPool::new(memory)))
        .with_temp_file_path(work.join("spill"))
        .build_arc()
        .map_err(|e| sort_err("runtime", e))?;
    // One sort at a time holds the whole budget: parallel sorts split it, and merging many
    // spilled runs then found too little memory left on large graphs.
    let mut config = SessionConfig::new().with_target_partitions(1);
    // What the sort keeps back for merging its spilled runs.
    config.options_mut().execution.sort_spill_reservation_bytes = memory / 4;
    // Plain Utf8 columns, as the index files hold them.
    config
        .options_mut()
        .execution
        .parquet
        .schema_force_view_types = false;
    Ok(SessionContext::new_with_config_rt(config, runtime))
}

async fn register(ctx: &SessionContext, name: &str, path: &Path) -> Result<(), IndexError> {
    let url = path
        .to_str()
        .ok_or_else(|| sort_err(name, "path is not UTF-8"))?;
    ctx.register_parquet(name, url, ParquetReadOptions::default())
        .await
        .map_err(|e| sort_err(name, e))
}

async fn query(ctx: &SessionContext, sql: &str) -> Result<SendableRecordBatchStream, IndexError> {
    ctx.sql(sql)
        .await
        .map_err(|e| sort_err(sql, e))?
        .execute_stream()
        .await
        .map_err(|e| sort_err(sql, e))
}

async fn next(
    s: &mut SendableRecordBatchStream,
    show: &Path,
) -> Result<Option<RecordBatch>, IndexError> {
    match s.next().await {
        None => Ok(None),
        Some(b) => b
            .map(Some)
            .map_err(|e| sort_err(&show.display().to_string(), e)),
    }
}

/// Column `i` of a batch as plain Utf8 (DataFusion may hand out other string layouts).
pub(super) fn strings(b: &RecordBatch, i: usize) -> Result<StringArray, IndexError> {
    let c = cast(b.column(i), &DataType::Utf8).map_err(|e| sort_err("utf8", e))?;
    c.as_any()
        .downcast_ref::<StringArray>()
        .cloned()
        .ok_or_else(|| sort_err("utf8", "not a string column"))
}

pub(super) fn ids(b: &RecordBatch, i: usize) -> Result<&UInt32Array, IndexError> {
    b.column(i)
        .as_any()
        .downcast_ref::<UInt32Array>()
        .ok_or_else(|| sort_err("ids", "not a UInt32 column"))
}

/// The (key, kind) run being read in step 1.
struct Run {
    key: String,
    kind: String,
    name: Option<String>,
    aliases: BTreeSet<String>,
    edge: bool,
}

/// The columns of the sorted node table being built: key, kind, name and aliases.
#[derive(Default)]
struct NodeColumns {
    text: [StringBuilder; 3],
    aliases: ListBuilder<StringBuilder>,
}

/// Step 1: one row per (key, kind) run that some edge has, with the run's first name (the
/// smallest, as names sort nulls last) and its distinct aliases; returns the nodes and
/// literals.
async fn write_nodes_sorted(
    mut s: SendableRecordBatchStream,
    path: &Path,
) -> Result<(u64, u64), IndexError> {
    let mut w = PartWriter::create(path, sorted_nodes_schema(), plain())?;
    let (mut n, mut literals) = (0u64, 0u64);
    let mut out = NodeColumns::default();
    let mut run: Option<Run> = None;
    let mut emit = |r: Run, out: &mut NodeColumns, w: &mut PartWriter| {
        if !r.edge {
            return Ok(());
        }
        n += 1;
        literals += u64::from(r.kind == Kind::Literal.as_str());
        out.text[0].append_value(&r.key);
        out.text[1].append_value(&r.kind);
        out.text[2].append_option(r.name);
        for a in &r.aliases {
            out.aliases.values().append_value(a);
        }
        out.aliases.append(true);
        if out.text[0].len() >= BATCH_ROWS {
            flush_nodes(out, w, path)?;
        }
        Ok::<_, IndexError>(())
    };
    while let Some(b) = next(&mut s, path).await? {
        let (keys, kinds, names) = (strings(&b, 0)?, strings(&b, 1)?, strings(&b, 2)?);
        let edge = b
            .column(3)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| sort_err("ends", "`edge` is not a Boolean column"))?
            .clone();
        let aliases = strings(&b, 4)?;
        for r in 0..b.num_rows() {
            let (k, kd) = (keys.value(r), kinds.value(r));
            let name = (!names.is_null(r) && !names.value(r).is_empty()).then(|| names.value(r));
            let alias = aliases.is_valid(r).then(|| aliases.value(r));
            match &mut run {
                Some(cur) if cur.key == k && cur.kind == kd => {
                    cur.edge |= edge.value(r);
                    if cur.name.is_none() {
                        cur.name = name.map(str::to_owned);
                    }
                    if let Some(a) = alias.filter(|a| !cur.aliases.contains(*a)) {
                        cur.aliases.insert(a.to_owned());
                    }
                }
                _ => {
                    let next = Run {
                        key: k.to_owned(),
                        kind: kd.to_owned(),
                        name: name.map(str::to_owned),
                        aliases: alias.map(str::to_owned).into_iter().collect(),
                        edge: edge.value(r),
                    };
                    if let Some(done) = run.replace(next) {
                        emit(done, &mut out, &mut w)?;
                    }
                }
            }
        }
    }
    if let Some(done) = run.take() {
        emit(done, &mut out, &mut w)?;
    }
    flush_nodes(&mut out, &mut w, path)?;
    if n > u64::from(u32::MAX) + 1 {
        return Err(IndexError::Invalid(format!(
            "kg: more than {} nodes",
            u32::MAX
        )));
    }
    w.close()?;
    Ok((n, literals))
}

fn flush_nodes(out: &mut NodeColumns, w: &mut PartWriter, path: &Path) -> Result<(), IndexError> {
    if out.text[0].is_empty() {
        return Ok(());
    }
    let mut cols: Vec<ArrayRef> = out
        .text
        .iter_mut()
        .map(|b| Arc::new(b.finish()) as ArrayRef)
        .collect();
    cols.push(Arc::new(out.aliases.finish()));
    let b = RecordBatch::try_new(sorted_nodes_schema(), cols)
        .map_err(|e| IndexError::parquet(path.display(), e))?;
    w.write(&b)
}

/// Steps 2 and 3: writes each sorted batch mapped by `f`.
async fn map_ids(
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
async fn write_edges(
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

/// Walks the sorted node table forward, turning (key, kind) into the node's id (its row).
struct NodeCursor {
    rows: ParquetRecordBatchReader,
    keys: StringArray,
    kinds: StringArray,
    at: usize,
    id: u64,
    show: String,
}

impl NodeCursor {
    fn open(path: &Path) -> Result<NodeCursor, IndexError> {
        let show = path.display().to_string();
        Ok(NodeCursor {
            rows: reader(path, &[0, 1])?,
            keys: StringArray::from(Vec::<&str>::new()),
            kinds: StringArray::from(Vec::<&str>::new()),
            at: 0,
            id: 0,
            show,
        })
    }

    /// The id of (key, kind); keys must come in the table's order.
    fn seek(&mut self, key: &str, kind: &str) -> Result<u32, IndexError> {
        loop {
            if self.at == self.keys.len() {
                let b = self
                    .rows
                    .next()
                    .ok_or_else(|| missing(&self.show, key, kind))?
                    .map_err(|e| IndexError::parquet(&self.show, e))?;
                (self.keys, self.kinds) = (strings(&b, 0)?, strings(&b, 1)?);
                self.at = 0;
                continue;
            }
            match (self.keys.value(self.at), self.kinds.value(self.at)).cmp(&(key, kind)) {
                Ordering::Less => {
                    self.at += 1;
                    self.id += 1;
                }
                Ordering::Equal => return Ok(self.id as u32),
                Ordering::Greater => return Err(missing(&self.show, key, kind)),
            }
        }
    }
}

fn missing(show: &str, key: &str, kind: &str) -> IndexError {
    IndexError::Corrupt(
        show.to_owned(),
        format!("kg build: node ({key:?}, {kind}) not found in sorted order"),
    )
}

/// Per node id, in order, the row range of its run in a sorted id column.
struct IdRuns {
    rows: ParquetRecordBatchReader,
    ids: UInt32Array,
    at: usize,
    pos: u64,
    show: String,
}

impl IdRuns {
    fn open(path: &Path, column: usize) -> Result<IdRuns, IndexError> {
        Ok(IdRuns {
            rows: reader(path, &[column])?,
            ids: UInt32Array::from(Vec::<u32>::new()),
            at: 0,
            pos: 0,
            show: path.display().to_string(),
        })
    }

    fn take(&mut self, id: u32) -> Result<(u64, u64), IndexError> {
        let start = self.pos;
        loop {
            if self.at == self.ids.len() {
                match self.rows.next() {
                    None => break,
                    Some(b) => {
                        let b = b.map_err(|e| IndexError::parquet(&self.show, e))?;
                        self.ids = ids(&b, 0)?.clone();
                        self.at = 0;
                        continue;
                    }
                }
            }
            if self.ids.value(self.at) != id {
                break;
            }
            self.at += 1;
            self.pos += 1;
        }
        Ok((start, self.pos))
    }

    /// Fails unless every row was taken (an id with no node).
    fn done(mut self) -> Result<(), IndexError> {
        if self.at < self.ids.len() || self.rows.next().is_some() {
            return Err(IndexError::Corrupt(
                self.show,
                "kg build: an edge names a node id past the node table".into(),
            ));
        }
        Ok(())
    }
}

pub(super) fn reader(
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

/// Whether a node is one of Freebase's nameless mediator (CVT) nodes: an entity keyed as a
/// Freebase mid (`m.`, or FB15k's `/m/`) that no edge or name names.
pub(super) fn is_cvt(key: &str, kind: &str, named: bool) -> bool {
    !named && kind == Kind::Entity.as_str() && (key.starts_with("m.") || key.starts_with("/m/"))
}

/// `nodes.parquet`: the sorted nodes with ids, both row ranges and the CVT mark; adds the
/// CVT nodes to `cvts`.
fn write_nodes(
    path: &Path,
    nodes: &Path,
    by_subject: &Path,
    by_object: &Path,
    cvts: &mut u64,
) -> Result<(), IndexError> {
    let mut outs = IdRuns::open(by_subject, 0)?;
    let mut ins = IdRuns::open(by_object, 2)?;
    let mut w = PartWriter::create(path, nodes_schema(), props(&[1, 3]))?;
    let mut id = 0u32;
    for b in reader(nodes, &[0, 1, 2, 3])? {
        let b = b.map_err(|e| IndexError::parquet(nodes.display(), e))?;
        let rows = b.num_rows();
        let mut ranges: [Vec<u64>; 4] = Default::default();
        let mut ids = Vec::with_capacity(rows);
        for _ in 0..rows {
            let (os, oe) = outs.take(id)?;
            let (is, ie) = ins.take(id)?;
            for (v, x) in ranges.iter_mut().zip([os, oe, is, ie]) {
                v.push(x);
            }
            ids.push(id);
            id = id.wrapping_add(1);
        }
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from(ids)),
            b.column(0).clone(),
            b.column(2).clone(),
            b.column(1).clone(),
        ];
        cols.extend(ranges.map(|v| Arc::new(UInt64Array::from(v)) as ArrayRef));
        let (keys, kinds, names) = (strings(&b, 0)?, strings(&b, 1)?, strings(&b, 2)?);
        let cvt: BooleanArray = (0..rows)
            .map(|r| Some(is_cvt(keys.value(r), kinds.value(r), !names.is_null(r))))
            .collect();
        *cvts += cvt.true_count() as u64;
        cols.push(Arc::new(cvt));
        cols.push(b.column(3).clone());
        let out = RecordBatch::try_new(nodes_schema(), cols)
            .map_err(|e| IndexError::parquet(path.display(), e))?;
        w.write(&out)?;
    }
    outs.done()?;
    ins.done()?;
    w.close().map(drop)
}

/// A Parquet file written under a temporary name and renamed when closed.
struct PartWriter {
    path: PathBuf,
    tmp: PathBuf,
    w: ArrowWriter<File>,
}

impl PartWriter {
    fn create(
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

    fn show(&self) -> String {
        self.path.display().to_string()
    }

    fn write(&mut self, b: &RecordBatch) -> Result<(), IndexError> {
        self.w
            .write(b)
            .map_err(|e| IndexError::parquet(self.path.display(), e))
    }

    fn close(self) -> Result<PathBuf, IndexError> {
        self.w
            .close()
            .map_err(|e| IndexError::parquet(self.path.display(), e))?;
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| IndexError::io(self.path.display(), e))?;
        Ok(self.path)
    }
}

pub(super) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Work files: fast to write, read once or twice.
fn plain() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::LZ4_RAW)
        .build()
}

fn props(sorted_by: &[i32]) -> WriterProperties {
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

fn spool_schema() -> SchemaRef {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    Arc::new(Schema::new(vec![
        s("subject", false),
        s("relation", false),
        s("object", false),
        s("object_kind", false),
        s("subject_name", true),
        s("object_name", true),
        s("source", false),
    ]))
}

fn subject_ids_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("subject", DataType::UInt32, false),
        Field::new("relation", DataType::Utf8, false),
        Field::new("object", DataType::Utf8, false),
        Field::new("object_kind", DataType::Utf8, false),
        Field::new("source", DataType::Utf8, false),
    ]))
}

fn ends_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("edge", DataType::Boolean, false),
        Field::new("alias", DataType::Utf8, true),
    ]))
}

/// A node's aliases: a list of strings, empty when it has none.
fn aliases_field() -> Field {
    Field::new(
        "aliases",
        DataType::List(Arc::new(Field::new_list_field(DataType::Utf8, true))),
        false,
    )
}

fn sorted_nodes_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        aliases_field(),
    ]))
}

fn edges_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("subject", DataType::UInt32, false),
        Field::new("relation", DataType::Utf8, false),
        Field::new("object", DataType::UInt32, false),
        Field::new("source", DataType::Utf8, false),
    ]))
}

fn nodes_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::UInt32, false),
        Field::new("key", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("kind", DataType::Utf8, false),
        Field::new("out_start", DataType::UInt64, false),
        Field::new("out_end", DataType::UInt64, false),
        Field::new("in_start", DataType::UInt64, false),
        Field::new("in_end", DataType::UInt64, false),
        Field::new("cvt", DataType::Boolean, false),
        aliases_field(),
    ]))
}
