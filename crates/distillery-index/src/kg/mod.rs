//! A knowledge-graph adjacency index on local disk.
//!
//! Triples (subject, relation, object) from extracted triples, Freebase, Wikidata or MetaQA
//! are written by [`write_kg`] as five files in one directory:
//!
//! - `nodes.parquet`: one row per node, sorted by (`key`, `kind`) in byte order. Columns:
//!   `id` (UInt32, equal to the row number: the dense node index every edge refers to),
//!   `key` (Utf8, the KG's own key: `m.0abc`, `Q42`, a MetaQA entity name, or a literal's
//!   text), `name` (Utf8, nullable: the smallest, in byte order, of the non-empty names
//!   edges give the node and those given apart ([`KgBuilder::name`]: Freebase's
//!   `type.object.name`, Wikidata labels), so that it does not depend on input order), `kind`
//!   (Utf8: `entity`, `literal` or `iri`), `out_start`/`out_end` (UInt64: the node's row range
//!   in `edges_by_subject.parquet`), `in_start`/`in_end` (UInt64: its row range in
//!   `edges_by_object.parquet`), `cvt` (Boolean: a Freebase mid with no name, one of
//!   Freebase's nameless mediator nodes, kept and marked) and `aliases` (List of Utf8: the
//!   distinct aliases given apart ([`KgBuilder::alias`]: Freebase's `common.topic.alias`,
//!   Wikidata's aliases), in byte order; empty when none). A node's identity is (`kind`,
//!   `key`): a literal `"1990"` and an entity `1990` are two nodes with the same key.
//! - `edges_by_subject.parquet`: `subject` (UInt32 node id), `relation` (Utf8), `object`
//!   (UInt32 node id), `source` (Utf8, the dataset the edge came from), sorted by
//!   (subject, relation, object, source), exact duplicates removed.
//! - `edges_by_object.parquet`: the same edges and columns sorted by
//!   (object, relation, subject, source).
//! - `graph.graphml`: a GraphML export (directed; node ids `n<id>` with `key`, `name`, `kind`
//!   and, on CVT nodes, `cvt` data, on nodes with aliases `aliases` (a JSON array), edges
//!   with `relation` and `source` data), which `networkx.read_graphml`
//!   and igraph's `Graph.Read_GraphML` load.
//! - `adjacency.bin`: the nodes and edges once more as fixed-width arrays, read in place from
//!   the file mapped into memory, for walks over many small neighbourhoods ([`adjacency`]).
//!
//! Why offsets: both edge files are sorted by the node id they are looked up by, so all the
//! edges leaving (or entering) a node are one contiguous run of rows. `nodes.parquet` stores
//! that run as `[out_start, out_end)` (or `[in_start, in_end)`), and [`KgIndex`] reads it
//! with a single Parquet row selection (skip `start`, select `end - start`). With the page
//! index the reader decodes only the pages that hold those rows, so a lookup never scans
//! the edge file and never needs a per-edge index in memory: [`KgIndex::open`] loads only
//! `nodes.parquet` (keys, names, kinds and offsets), and lookups are a binary search over
//! the sorted keys plus one range read.
//!
//! Memory: [`KgBuilder`] spools the pushed edges to a Parquet file and builds the index
//! with external sorts (DataFusion's, spilling to the build's scratch directory past
//! [`SORT_MEMORY`]) and streaming merges, so a build holds a few batches and the sorts'
//! budget, whatever the size of the graph. Node ids are `u32`, so one index holds at most
//! `u32::MAX` nodes. [`KgIndex::open`] holds the node table in memory.
//!
//! Every file is written under a temporary name and renamed when complete, and
//! `adjacency.bin`, derived from the others, is written last.

use std::cmp::Ordering;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, ListArray, RecordBatch, StringArray, UInt32Array, UInt64Array};
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::file::metadata::PageIndexPolicy;

use crate::IndexError;

pub mod adjacency;
mod carry;
mod graphml;
mod write;

pub use adjacency::{ADJACENCY_FILE, Adjacency};
pub use write::{KgBuilder, SORT_MEMORY, write_kg};

#[cfg(test)]
mod tests;

/// File name of the node table.
pub const NODES_FILE: &str = "nodes.parquet";
/// File name of the edges sorted by subject.
pub const EDGES_BY_SUBJECT_FILE: &str = "edges_by_subject.parquet";
/// File name of the edges sorted by object.
pub const EDGES_BY_OBJECT_FILE: &str = "edges_by_object.parquet";
/// File name of the GraphML export.
pub const GRAPHML_FILE: &str = "graph.graphml";

/// Rows per Arrow batch when writing the tables.
const BATCH_ROWS: usize = 64 * 1024;

/// One input triple, as the triple readers produce it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KgEdge {
    /// The subject's key in its KG (`m.0abc`, `Q42`, a MetaQA entity name); always an entity.
    pub subject: String,
    /// The relation (predicate), e.g. `directed_by` or `P31`.
    pub relation: String,
    /// The object's key, or a literal's text when `object_kind` is `literal`.
    pub object: String,
    /// `entity`, `literal` or `iri` (an empty string is taken as `entity`).
    pub object_kind: String,
    /// A display name of the subject, when the source has one.
    pub subject_name: Option<String>,
    /// A display name of the object, when the source has one.
    pub object_name: Option<String>,
    /// The dataset the edge came from (`metaqa`, `freebase`, `wikidata`, ...).
    pub source: String,
}

/// What [`write_kg`] wrote.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KgStats {
    /// Distinct nodes (distinct (kind, key) pairs).
    pub nodes: u64,
    /// Distinct edges written (after removing duplicates).
    pub edges: u64,
    /// Nodes of kind `literal`.
    pub literals: u64,
    /// Input edges dropped as exact duplicates of an earlier one.
    pub duplicates: u64,
    /// Freebase's nameless mediator (CVT) nodes: `m.` entities without a name.
    #[serde(default)]
    pub cvt: u64,
    /// The wikis whose entity pages a KG fed by a corpus root was built from
    /// (`wikidatawiki`): a later night tells from them which removed pages were entities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wikis: Vec<String>,
}

/// The kind of a node. The discriminant order is the on-disk sort order of kinds (the
/// byte order of their names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    Entity,
    Iri,
    Literal,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Entity => "entity",
            Kind::Iri => "iri",
            Kind::Literal => "literal",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        match s {
            "entity" | "" => Some(Kind::Entity),
            "iri" => Some(Kind::Iri),
            "literal" => Some(Kind::Literal),
            _ => None,
        }
    }
}

/// A node of an opened index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KgNode {
    /// The dense node id (its row in `nodes.parquet`).
    pub id: u32,
    /// The KG's own key, or the literal's text.
    pub key: String,
    /// The best name seen, if any.
    pub name: Option<String>,
    /// `entity`, `literal` or `iri`.
    pub kind: String,
    /// One of Freebase's nameless mediator (CVT) nodes: a mid with no name.
    pub cvt: bool,
    /// The node's aliases, distinct, in byte order.
    pub aliases: Vec<String>,
}

/// One edge returned by a lookup, with node ids resolved back to keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct KgHit {
    /// The subject's key.
    pub subject: String,
    /// The relation.
    pub relation: String,
    /// The object's key (a literal's text for literal objects).
    pub object: String,
    /// The dataset the edge came from.
    pub source: String,
}

/// A KG adjacency index opened from a directory [`write_kg`] wrote.
///
/// Holds `nodes.parquet` in memory (keys, names, aliases, kinds, offsets); each edge lookup reads
/// one row range of an edge file.
pub struct KgIndex {
    dir: PathBuf,
    keys: Vec<String>,
    names: Vec<Option<String>>,
    aliases: Vec<Vec<String>>,
    kinds: Vec<Kind>,
    out_range: Vec<(u64, u64)>,
    in_range: Vec<(u64, u64)>,
}

impl std::fmt::Debug for KgIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KgIndex")
            .field("dir", &self.dir)
            .field("nodes", &self.keys.len())
            .finish()
    }
}

fn column<'a, T: 'static>(
    batch: &'a RecordBatch,
    name: &str,
    show: &str,
) -> Result<&'a T, IndexError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| {
            IndexError::Corrupt(
                show.to_owned(),
                format!(
                    "column {name} is missing or not of type {}",
                    std::any::type_name::<T>()
                ),
            )
        })
}

impl KgIndex {
    /// Opens the index in `dir`: loads `nodes.parquet` (keys, names, aliases, kinds and offsets) and
    /// checks it is sorted, densely numbered and its ranges are consistent. The edge files
    /// are read only by lookups.
    pub fn open(dir: &Path) -> Result<KgIndex, IndexError> {
        let path = dir.join(NODES_FILE);
        let show = path.display().to_string();
        let file = File::open(&path).map_err(|e| IndexError::io(&show, e))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.with_batch_size(BATCH_ROWS).build())
            .map_err(|e| IndexError::parquet(&show, e))?;
        let mut index = KgIndex {
            dir: dir.to_path_buf(),
            keys: Vec::new(),
            names: Vec::new(),
            aliases: Vec::new(),
            kinds: Vec::new(),
            out_range: Vec::new(),
            in_range: Vec::new(),
        };
        for batch in reader {
            let batch = batch.map_err(|e| IndexError::parquet(&show, e))?;
            let id = column::<UInt32Array>(&batch, "id", &show)?;
            let key = column::<StringArray>(&batch, "key", &show)?;
            let name = column::<StringArray>(&batch, "name", &show)?;
            let kind = column::<StringArray>(&batch, "kind", &show)?;
            let out_start = column::<UInt64Array>(&batch, "out_start", &show)?;
            let out_end = column::<UInt64Array>(&batch, "out_end", &show)?;
            let in_start = column::<UInt64Array>(&batch, "in_start", &show)?;
            let in_end = column::<UInt64Array>(&batch, "in_end", &show)?;
            // Indexes written before aliases were kept have no `aliases` column.
            let aliases = batch
                .column_by_name("aliases")
                .map(|c| {
                    c.as_any().downcast_ref::<ListArray>().ok_or_else(|| {
                        IndexError::Corrupt(show.clone(), "column aliases is not a list".into())
                    })
                })
                .transpose()?;
            for r in 0..batch.num_rows() {
                let row = index.keys.len();
                let corrupt = |why: String| IndexError::Corrupt(show.clone(), why);
                if id.is_null(r) || id.value(r) as usize != row {
                    return Err(corrupt(format!("row {row}: id is not the row number")));
                }
                if key.is_null(r) || kind.is_null(r) {
                    return Err(corrupt(format!("row {row}: null key or kind")));
                }
                let k = Kind::parse(kind.value(r))
                    .filter(|_| !kind.value(r).is_empty())
                    .ok_or_else(|| {
                        corrupt(format!("row {row}: unknown kind {:?}", kind.value(r)))
                    })?;
                let ranges = [out_start, out_end, in_start, in_end];
                if ranges.iter().any(|c| c.is_null(r)) {
                    return Err(corrupt(format!("row {row}: null offset")));
                }
                let [os, oe, is, ie] = ranges.map(|c| c.value(r));
                if os > oe || is > ie {
                    return Err(corrupt(format!("row {row}: range ends before it starts")));
                }
                if let (Some(pk), Some(&pkind)) = (index.keys.last(), index.kinds.last())
                    && (pk.as_str(), pkind).cmp(&(key.value(r), k)) != Ordering::Less
                {
                    return Err(corrupt(format!(
                        "row {row}: nodes not sorted by (key, kind)"
                    )));
                }
                index.keys.push(key.value(r).to_owned());
                index.kinds.push(k);
                index
                    .names
                    .push((!name.is_null(r)).then(|| name.value(r).to_owned()));
                let list = aliases
                    .filter(|a| a.is_valid(r))
                    .map(|a| a.value(r))
                    .map(|v| {
                        v.as_string_opt::<i32>()
                            .map(|v| v.iter().flatten().map(str::to_owned).collect())
                            .ok_or_else(|| corrupt(format!("row {row}: aliases are not strings")))
                    })
                    .transpose()?;
                index.aliases.push(list.unwrap_or_default());
                index.out_range.push((os, oe));
                index.in_range.push((is, ie));
            }
        }
        if u32::try_from(index.keys.len()).is_err() {
            return Err(IndexError::Corrupt(show, "more than u32::MAX nodes".into()));
        }
        Ok(index)
    }

    /// The id of the node with `key`: the entity when several kinds share the key,
    /// otherwise the first in kind order.
    fn find(&self, key: &str) -> Option<usize> {
        let lo = self.keys.partition_point(|k| k.as_str() < key);
        let hi = lo + self.keys[lo..].partition_point(|k| k.as_str() == key);
        if lo == hi {
            return None;
        }
        (lo..hi)
            .find(|&i| self.kinds[i] == Kind::Entity)
            .or(Some(lo))
    }

    /// The node with `key`, or `None` if there is none; an entity is preferred when the key
    /// is shared by nodes of several kinds (a literal with the same text as an entity key).
    pub fn node(&self, key: &str) -> Option<KgNode> {
        self.find(key).map(|i| KgNode {
            id: i as u32,
            key: self.keys[i].clone(),
            name: self.names[i].clone(),
            kind: self.kinds[i].as_str().to_owned(),
            cvt: write::is_cvt(
                &self.keys[i],
                self.kinds[i].as_str(),
                self.names[i].is_some(),
            ),
            aliases: self.aliases[i].clone(),
        })
    }

    /// The edges leaving the node with `key` (the one [`KgIndex::node`] picks), in
    /// (relation, object, source) order: one row-range read of `edges_by_subject.parquet`.
    /// An unknown key gives no edges.
    pub fn out_edges(&self, key: &str) -> Result<Vec<KgHit>, IndexError> {
        match self.find(key) {
            Some(i) => self.read_range(EDGES_BY_SUBJECT_FILE, "subject", i, self.out_range[i]),
            None => Ok(Vec::new()),
        }
    }

    /// The edges entering the node with `key` (the one [`KgIndex::node`] picks), in
    /// (relation, subject, source) order: one row-range read of `edges_by_object.parquet`.
    /// An unknown key gives no edges.
    pub fn in_edges(&self, key: &str) -> Result<Vec<KgHit>, IndexError> {
        match self.find(key) {
            Some(i) => self.read_range(EDGES_BY_OBJECT_FILE, "object", i, self.in_range[i]),
            None => Ok(Vec::new()),
        }
    }

    /// Reads rows `[start, end)` of an edge file with a row selection, checking that every
    /// row's `by` column is node `node`.
    fn read_range(
        &self,
        file_name: &str,
        by: &str,
        node: usize,
        (start, end): (u64, u64),
    ) -> Result<Vec<KgHit>, IndexError> {
        if start == end {
            return Ok(Vec::new());
        }
        let path = self.dir.join(file_name);
        let show = path.display().to_string();
        let file = File::open(&path).map_err(|e| IndexError::io(&show, e))?;
        // The offset index (page locations) lets the reader fetch and decode only the pages
        // that hold the selected rows.
        let options = ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Optional);
        let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
            .map_err(|e| IndexError::parquet(&show, e))?;
        let rows = builder.metadata().file_metadata().num_rows();
        if !u64::try_from(rows).is_ok_and(|r| r >= end) {
            return Err(IndexError::Corrupt(
                show,
                format!("has {rows} rows, but node {node} has edges up to row {end}"),
            ));
        }
        let to_usize = |v: u64| {
            usize::try_from(v).map_err(|_| {
                IndexError::Corrupt(show.clone(), format!("row offset {v} out of range"))
            })
        };
        let selection = RowSelection::from(vec![
            RowSelector::skip(to_usize(start)?),
            RowSelector::select(to_usize(end - start)?),
        ]);
        let reader = builder
            .with_row_selection(selection)
            .with_batch_size(to_usize(end - start)?.clamp(1, BATCH_ROWS))
            .build()
            .map_err(|e| IndexError::parquet(&show, e))?;
        let resolve = |id: u32| {
            self.keys.get(id as usize).cloned().ok_or_else(|| {
                IndexError::Corrupt(show.clone(), format!("node id {id} out of range"))
            })
        };
        let mut hits = Vec::with_capacity(to_usize(end - start)?);
        for batch in reader {
            let batch = batch.map_err(|e| IndexError::parquet(&show, e))?;
            let subject = column::<UInt32Array>(&batch, "subject", &show)?;
            let relation = column::<StringArray>(&batch, "relation", &show)?;
            let object = column::<UInt32Array>(&batch, "object", &show)?;
            let source = column::<StringArray>(&batch, "source", &show)?;
            let check = if by == "subject" { subject } else { object };
            for r in 0..batch.num_rows() {
                if check.is_null(r) || check.value(r) as usize != node {
                    return Err(IndexError::Corrupt(
                        show.clone(),
                        format!(
                            "row {}: {by} is not node {node}, the offsets in {NODES_FILE} disagree",
                            start as usize + hits.len()
                        ),
                    ));
                }
                if subject.is_null(r) || object.is_null(r) || relation.is_null(r) {
                    return Err(IndexError::Corrupt(
                        show.clone(),
                        format!("row {}: null edge column", start as usize + hits.len()),
                    ));
                }
                hits.push(KgHit {
                    subject: resolve(subject.value(r))?,
                    relation: relation.value(r).to_owned(),
                    object: resolve(object.value(r))?,
                    source: if source.is_null(r) {
                        String::new()
                    } else {
                        source.value(r).to_owned()
                    },
                });
            }
        }
        if hits.len() as u64 != end - start {
            return Err(IndexError::Corrupt(
                show,
                format!(
                    "read {} rows for node {node}, expected {}",
                    hits.len(),
                    end - start
                ),
            ));
        }
        Ok(hits)
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the index has no nodes.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
