//! A knowledge-graph adjacency index on local disk.
//!
//! Triples (subject, relation, object) from extracted triples, Freebase, Wikidata or MetaQA
//! are written by [`write_kg`] as four files in one directory:
//!
//! - `nodes.parquet`: one row per node, sorted by (`key`, `kind`) in byte order. Columns:
//!   `id` (UInt32, equal to the row number: the dense node index every edge refers to),
//!   `key` (Utf8, the KG's own key: `m.0abc`, `Q42`, a MetaQA entity name, or a literal's
//!   text), `name` (Utf8, nullable: the first non-empty subject or object name seen in input
//!   order), `kind` (Utf8: `entity`, `literal` or `iri`), `out_start`/`out_end` (UInt64: the
//!   node's row range in `edges_by_subject.parquet`) and `in_start`/`in_end` (UInt64: its
//!   row range in `edges_by_object.parquet`). A node's identity is (`kind`, `key`): a literal
//!   `"1990"` and an entity `1990` are two nodes with the same key.
//! - `edges_by_subject.parquet`: `subject` (UInt32 node id), `relation` (Utf8), `object`
//!   (UInt32 node id), `source` (Utf8, the dataset the edge came from), sorted by
//!   (subject, relation, object, source), exact duplicates removed.
//! - `edges_by_object.parquet`: the same edges and columns sorted by
//!   (object, relation, subject, source).
//! - `graph.graphml`: a GraphML export (directed; node ids `n<id>` with `key`, `name` and
//!   `kind` data, edges with `relation` and `source` data), which `networkx.read_graphml`
//!   and igraph's `Graph.Read_GraphML` load.
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
//! Memory: building holds the node map (every distinct node key and name) and all edges
//! (16 bytes each, relations and sources interned) in memory, and sorts them there. That is
//! fine for MetaQA, Wikidata subsets and extracted triples; a full Freebase dump needs a
//! sharded, external-sort build, which is future work. Node ids are `u32`, so one index
//! holds at most `u32::MAX` nodes.
//!
//! Every file is written under a temporary name and renamed when complete, and
//! `nodes.parquet` is written last.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, RecordBatch, StringArray, StringBuilder, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::basic::Compression;
use parquet::file::metadata::{PageIndexPolicy, SortingColumn};
use parquet::file::properties::WriterProperties;

use crate::IndexError;

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

/// An edge as ids: subject node, relation rank, object node, source rank.
type IdEdge = [u32; 4];

/// Interns strings to dense ids in first-seen order.
#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn intern(&mut self, s: &str, what: &str) -> Result<u32, IndexError> {
        if let Some(&id) = self.ids.get(s) {
            return Ok(id);
        }
        let id = u32::try_from(self.names.len())
            .map_err(|_| IndexError::Invalid(format!("kg: more than {} {what}", u32::MAX)))?;
        self.ids.insert(s.to_owned(), id);
        self.names.push(s.to_owned());
        Ok(id)
    }

    /// The strings in byte order, and for each first-seen id its rank in that order.
    fn into_sorted(self) -> (Vec<String>, Vec<u32>) {
        drop(self.ids);
        let mut order: Vec<u32> = (0..self.names.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.names[a as usize].cmp(&self.names[b as usize]));
        let mut rank = vec![0u32; order.len()];
        for (pos, &old) in order.iter().enumerate() {
            rank[old as usize] = pos as u32;
        }
        let mut names: Vec<Option<String>> = self.names.into_iter().map(Some).collect();
        let sorted = order
            .iter()
            .map(|&old| names[old as usize].take().unwrap_or_default())
            .collect();
        (sorted, rank)
    }
}

/// The nodes being collected: identity (kind, key) to a first-seen id, and per id the key,
/// kind and best name.
#[derive(Default)]
struct NodeMap {
    ids: HashMap<(Kind, String), u32>,
    keys: Vec<String>,
    kinds: Vec<Kind>,
    names: Vec<Option<String>>,
}

impl NodeMap {
    fn node(&mut self, kind: Kind, key: &str, name: Option<&str>) -> Result<u32, IndexError> {
        let id = match self.ids.get(&(kind, key.to_owned())) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.keys.len()).map_err(|_| {
                    IndexError::Invalid(format!("kg: more than {} nodes", u32::MAX))
                })?;
                self.ids.insert((kind, key.to_owned()), id);
                self.keys.push(key.to_owned());
                self.kinds.push(kind);
                self.names.push(None);
                id
            }
        };
        let slot = &mut self.names[id as usize];
        if slot.is_none()
            && let Some(n) = name.filter(|n| !n.is_empty())
        {
            *slot = Some(n.to_owned());
        }
        Ok(id)
    }
}

/// The nodes in their final (key, kind) order.
struct Nodes {
    keys: Vec<String>,
    kinds: Vec<Kind>,
    names: Vec<Option<String>>,
}

/// Writes the four files into `dir` (created if missing); returns the stats and the file
/// names written (relative to `dir`, sorted).
///
/// The whole graph is held in memory while building (see the module docs).
pub fn write_kg(
    dir: &Path,
    edges: impl IntoIterator<Item = KgEdge>,
) -> Result<(KgStats, Vec<String>), IndexError> {
    std::fs::create_dir_all(dir).map_err(|e| IndexError::io(dir.display(), e))?;

    // Collect: intern nodes, relations and sources.
    let mut nodes = NodeMap::default();
    let mut relations = Interner::default();
    let mut sources = Interner::default();
    let mut ids: Vec<IdEdge> = Vec::new();
    for (i, e) in edges.into_iter().enumerate() {
        let kind = Kind::parse(&e.object_kind).ok_or_else(|| {
            IndexError::Invalid(format!(
                "{}: edge {i} ({} {} {}): unknown object_kind {:?} (want entity, literal or iri)",
                dir.display(),
                e.subject,
                e.relation,
                e.object,
                e.object_kind
            ))
        })?;
        let s = nodes.node(Kind::Entity, &e.subject, e.subject_name.as_deref())?;
        let o = nodes.node(kind, &e.object, e.object_name.as_deref())?;
        let r = relations.intern(&e.relation, "relations")?;
        let src = sources.intern(&e.source, "sources")?;
        ids.push([s, r, o, src]);
    }
    let input = ids.len() as u64;

    // Renumber nodes by (key, kind), relations and sources by byte order, so that sorting
    // the id tuples sorts the edges by their strings.
    let NodeMap {
        ids: node_ids,
        keys,
        kinds,
        names,
    } = nodes;
    drop(node_ids);
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        keys[a as usize]
            .cmp(&keys[b as usize])
            .then(kinds[a as usize].cmp(&kinds[b as usize]))
    });
    let mut node_rank = vec![0u32; order.len()];
    for (pos, &old) in order.iter().enumerate() {
        node_rank[old as usize] = pos as u32;
    }
    let nodes = {
        let mut keys: Vec<Option<String>> = keys.into_iter().map(Some).collect();
        let mut names = names;
        Nodes {
            keys: order
                .iter()
                .map(|&o| keys[o as usize].take().unwrap_or_default())
                .collect(),
            kinds: order.iter().map(|&o| kinds[o as usize]).collect(),
            names: order.iter().map(|&o| names[o as usize].take()).collect(),
        }
    };
    drop(order);
    let (relations, rel_rank) = relations.into_sorted();
    let (sources, src_rank) = sources.into_sorted();
    for e in &mut ids {
        e[0] = node_rank[e[0] as usize];
        e[1] = rel_rank[e[1] as usize];
        e[2] = node_rank[e[2] as usize];
        e[3] = src_rank[e[3] as usize];
    }
    drop(node_rank);

    // By subject: (subject, relation, object, source); remove exact duplicates.
    ids.sort_unstable();
    ids.dedup();
    let duplicates = input - ids.len() as u64;
    let n = nodes.keys.len();
    let (out_start, out_end) = ranges(n, ids.iter().map(|e| e[0]));
    write_edges(
        &dir.join(EDGES_BY_SUBJECT_FILE),
        &ids,
        &relations,
        &sources,
        [0, 1, 2, 3],
    )?;
    write_graphml(&dir.join(GRAPHML_FILE), &nodes, &ids, &relations, &sources)?;

    // By object: (object, relation, subject, source).
    ids.sort_unstable_by_key(|e| (e[2], e[1], e[0], e[3]));
    let (in_start, in_end) = ranges(n, ids.iter().map(|e| e[2]));
    write_edges(
        &dir.join(EDGES_BY_OBJECT_FILE),
        &ids,
        &relations,
        &sources,
        [2, 1, 0, 3],
    )?;

    write_nodes(
        &dir.join(NODES_FILE),
        &nodes,
        [&out_start, &out_end, &in_start, &in_end],
    )?;

    let stats = KgStats {
        nodes: n as u64,
        edges: ids.len() as u64,
        literals: nodes.kinds.iter().filter(|k| **k == Kind::Literal).count() as u64,
        duplicates,
    };
    tracing::info!(
        dir = %dir.display(),
        nodes = stats.nodes,
        edges = stats.edges,
        literals = stats.literals,
        duplicates = stats.duplicates,
        "kg index written"
    );
    let mut files: Vec<String> = [
        NODES_FILE,
        EDGES_BY_SUBJECT_FILE,
        EDGES_BY_OBJECT_FILE,
        GRAPHML_FILE,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    files.sort();
    Ok((stats, files))
}

/// Per node, the `[start, end)` row range of its edges, given the edges' lookup node in
/// sorted order. A node without edges gets an empty range at the position it would have.
fn ranges(n: usize, sorted: impl Iterator<Item = u32>) -> (Vec<u64>, Vec<u64>) {
    let mut count = vec![0u64; n];
    for id in sorted {
        count[id as usize] += 1;
    }
    let mut start = Vec::with_capacity(n);
    let mut end = Vec::with_capacity(n);
    let mut at = 0u64;
    for c in count {
        start.push(at);
        at += c;
        end.push(at);
    }
    (start, end)
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

/// Writes batches to `path` under a temporary name, then renames it.
fn write_parquet(
    path: &Path,
    schema: SchemaRef,
    props: WriterProperties,
    batches: impl Iterator<Item = Result<RecordBatch, arrow::error::ArrowError>>,
) -> Result<(), IndexError> {
    let show = path.display().to_string();
    let tmp = tmp_path(path);
    let file = File::create(&tmp).map_err(|e| IndexError::io(tmp.display(), e))?;
    let mut w = ArrowWriter::try_new(file, schema, Some(props))
        .map_err(|e| IndexError::parquet(&show, e))?;
    for b in batches {
        let b = b.map_err(|e| IndexError::parquet(&show, e))?;
        w.write(&b).map_err(|e| IndexError::parquet(&show, e))?;
    }
    w.close().map_err(|e| IndexError::parquet(&show, e))?;
    std::fs::rename(&tmp, path).map_err(|e| IndexError::io(&show, e))
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
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
    ]))
}

/// Writes the edges in their current order; `sorted_by` names the schema columns
/// (subject 0, relation 1, object 2, source 3) of the sort, for the Parquet metadata.
fn write_edges(
    path: &Path,
    ids: &[IdEdge],
    relations: &[String],
    sources: &[String],
    sorted_by: [i32; 4],
) -> Result<(), IndexError> {
    let schema = edges_schema();
    let batches = ids.chunks(BATCH_ROWS).map(|chunk| {
        let subject = UInt32Array::from_iter_values(chunk.iter().map(|e| e[0]));
        let relation =
            StringArray::from_iter_values(chunk.iter().map(|e| relations[e[1] as usize].as_str()));
        let object = UInt32Array::from_iter_values(chunk.iter().map(|e| e[2]));
        let source =
            StringArray::from_iter_values(chunk.iter().map(|e| sources[e[3] as usize].as_str()));
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(subject) as ArrayRef,
                Arc::new(relation),
                Arc::new(object),
                Arc::new(source),
            ],
        )
    });
    write_parquet(path, schema.clone(), props(&sorted_by), batches)
}

fn write_nodes(path: &Path, nodes: &Nodes, offsets: [&[u64]; 4]) -> Result<(), IndexError> {
    let schema = nodes_schema();
    let n = nodes.keys.len();
    let batches = (0..n).step_by(BATCH_ROWS).map(|lo| {
        let hi = (lo + BATCH_ROWS).min(n);
        let id = UInt32Array::from_iter_values((lo..hi).map(|i| i as u32));
        let key = StringArray::from_iter_values(nodes.keys[lo..hi].iter());
        let mut name = StringBuilder::new();
        for nm in &nodes.names[lo..hi] {
            name.append_option(nm.as_deref());
        }
        let kind = StringArray::from_iter_values(nodes.kinds[lo..hi].iter().map(|k| k.as_str()));
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(id),
            Arc::new(key),
            Arc::new(name.finish()),
            Arc::new(kind),
        ];
        for o in offsets {
            columns.push(Arc::new(UInt64Array::from(o[lo..hi].to_vec())));
        }
        RecordBatch::try_new(schema.clone(), columns)
    });
    write_parquet(path, schema.clone(), props(&[1, 3]), batches)
}

/// Escapes text for XML element content and attribute values. Characters XML 1.0 cannot
/// carry at all (control characters other than tab, newline and carriage return, U+FFFE,
/// U+FFFF) become U+FFFD; carriage returns are written as a character reference so that
/// parsers do not normalise them away.
fn xml_escape(out: &mut impl Write, s: &str) -> std::io::Result<()> {
    let mut plain = 0;
    for (i, c) in s.char_indices() {
        let rep: &str = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            '\'' => "&apos;",
            '\r' => "&#13;",
            '\t' | '\n' => continue,
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => "\u{FFFD}",
            _ => continue,
        };
        out.write_all(&s.as_bytes()[plain..i])?;
        out.write_all(rep.as_bytes())?;
        plain = i + c.len_utf8();
    }
    out.write_all(&s.as_bytes()[plain..])
}

/// Streams the GraphML export: the nodes in id order, then the edges in subject order.
fn write_graphml(
    path: &Path,
    nodes: &Nodes,
    ids: &[IdEdge],
    relations: &[String],
    sources: &[String],
) -> Result<(), IndexError> {
    let show = path.display().to_string();
    let tmp = tmp_path(path);
    let file = File::create(&tmp).map_err(|e| IndexError::io(tmp.display(), e))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let body = |w: &mut BufWriter<File>| -> std::io::Result<()> {
        w.write_all(
            b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
<graphml xmlns=\"http://graphml.graphdrawing.org/xmlns\" \
xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
xsi:schemaLocation=\"http://graphml.graphdrawing.org/xmlns \
http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd\">\n\
  <key id=\"d0\" for=\"node\" attr.name=\"key\" attr.type=\"string\"/>\n\
  <key id=\"d1\" for=\"node\" attr.name=\"name\" attr.type=\"string\"/>\n\
  <key id=\"d2\" for=\"node\" attr.name=\"kind\" attr.type=\"string\"/>\n\
  <key id=\"d3\" for=\"edge\" attr.name=\"relation\" attr.type=\"string\"/>\n\
  <key id=\"d4\" for=\"edge\" attr.name=\"source\" attr.type=\"string\"/>\n\
  <graph id=\"G\" edgedefault=\"directed\">\n",
        )?;
        for (i, key) in nodes.keys.iter().enumerate() {
            write!(w, "    <node id=\"n{i}\"><data key=\"d0\">")?;
            xml_escape(w, key)?;
            w.write_all(b"</data>")?;
            if let Some(name) = &nodes.names[i] {
                w.write_all(b"<data key=\"d1\">")?;
                xml_escape(w, name)?;
                w.write_all(b"</data>")?;
            }
            writeln!(
                w,
                "<data key=\"d2\">{}</data></node>",
                nodes.kinds[i].as_str()
            )?;
        }
        for (i, e) in ids.iter().enumerate() {
            write!(
                w,
                "    <edge id=\"e{i}\" source=\"n{}\" target=\"n{}\"><data key=\"d3\">",
                e[0], e[2]
            )?;
            xml_escape(w, &relations[e[1] as usize])?;
            w.write_all(b"</data><data key=\"d4\">")?;
            xml_escape(w, &sources[e[3] as usize])?;
            w.write_all(b"</data></edge>\n")?;
        }
        w.write_all(b"  </graph>\n</graphml>\n")?;
        w.flush()
    };
    body(&mut w).map_err(|e| IndexError::io(tmp.display(), e))?;
    let file = w
        .into_inner()
        .map_err(|e| IndexError::io(tmp.display(), e.into_error()))?;
    file.sync_all()
        .map_err(|e| IndexError::io(tmp.display(), e))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| IndexError::io(&show, e))
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
/// Holds `nodes.parquet` in memory (keys, names, kinds, offsets); each edge lookup reads
/// one row range of an edge file.
pub struct KgIndex {
    dir: PathBuf,
    keys: Vec<String>,
    names: Vec<Option<String>>,
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
    /// Opens the index in `dir`: loads `nodes.parquet` (keys, names, kinds and offsets) and
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

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(
        s: &str,
        r: &str,
        o: &str,
        kind: &str,
        sn: Option<&str>,
        on: Option<&str>,
        src: &str,
    ) -> KgEdge {
        KgEdge {
            subject: s.into(),
            relation: r.into(),
            object: o.into(),
            object_kind: kind.into(),
            subject_name: sn.map(Into::into),
            object_name: on.map(Into::into),
            source: src.into(),
        }
    }

    fn hit(s: &str, r: &str, o: &str, src: &str) -> KgHit {
        KgHit {
            subject: s.into(),
            relation: r.into(),
            object: o.into(),
            source: src.into(),
        }
    }

    fn read_all(path: &Path) -> Vec<RecordBatch> {
        ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect()
    }

    fn metaqa() -> Vec<KgEdge> {
        let m = |s: &str, r: &str, o: &str| edge(s, r, o, "entity", None, None, "metaqa");
        vec![
            m("Kismet", "directed_by", "William Dieterle"),
            m("Kismet", "written_by", "Edward Knoblock"),
            m("Kismet", "starred_actors", "Marlene Dietrich"),
            m("Kismet", "release_year", "1944"),
            m("Blonde Venus", "starred_actors", "Marlene Dietrich"),
            m("Blonde Venus", "directed_by", "Josef von Sternberg"),
            m("The Blue Angel", "directed_by", "Josef von Sternberg"),
            m("The Blue Angel", "starred_actors", "Marlene Dietrich"),
        ]
    }

    fn freebase() -> Vec<KgEdge> {
        vec![
            edge(
                "m.01",
                "film.film.directed_by",
                "m.02",
                "entity",
                Some("Tom & Jerry <Movie>"),
                Some("Joe \"Hanna\""),
                "freebase",
            ),
            // An exact duplicate (names differ: still the same edge).
            edge(
                "m.01",
                "film.film.directed_by",
                "m.02",
                "entity",
                None,
                Some("Other name"),
                "freebase",
            ),
            edge(
                "m.01",
                "film.film.initial_release_date",
                "1975",
                "literal",
                None,
                None,
                "freebase",
            ),
            // Same literal text from MetaQA's entity "1944" vs a Freebase literal "1944".
            edge(
                "m.01",
                "film.film.release_year",
                "1944",
                "literal",
                None,
                None,
                "freebase",
            ),
            edge(
                "m.02",
                "type.object.type",
                "http://rdf.freebase.com/ns/people.person",
                "iri",
                None,
                None,
                "freebase",
            ),
            // The same edge from another source is not a duplicate.
            edge(
                "m.01",
                "film.film.directed_by",
                "m.02",
                "entity",
                None,
                None,
                "wikidata",
            ),
        ]
    }

    fn build() -> (tempfile::TempDir, KgStats, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let mut edges = metaqa();
        edges.extend(freebase());
        // A duplicate MetaQA edge.
        edges.push(edge(
            "Kismet",
            "directed_by",
            "William Dieterle",
            "entity",
            None,
            None,
            "metaqa",
        ));
        let (stats, files) = write_kg(dir.path(), edges).unwrap();
        (dir, stats, files)
    }

    #[test]
    fn kg_counts_and_files() {
        let (dir, stats, files) = build();
        assert_eq!(
            files,
            vec![
                "edges_by_object.parquet",
                "edges_by_subject.parquet",
                "graph.graphml",
                "nodes.parquet"
            ]
        );
        for f in &files {
            assert!(dir.path().join(f).is_file(), "{f} missing");
        }
        // MetaQA: Kismet, William Dieterle, Edward Knoblock, Marlene Dietrich, 1944 (entity),
        // Blonde Venus, Josef von Sternberg, The Blue Angel = 8.
        // Freebase: m.01, m.02, 1975 (literal), 1944 (literal), the iri = 5.
        assert_eq!(
            stats,
            KgStats {
                nodes: 13,
                edges: 8 + 5,
                literals: 2,
                duplicates: 2,
            }
        );
        let idx = KgIndex::open(dir.path()).unwrap();
        assert_eq!(idx.len(), 13);
        assert!(!idx.is_empty());
    }

    #[test]
    fn kg_out_and_in_edges() {
        let (dir, _, _) = build();
        let idx = KgIndex::open(dir.path()).unwrap();
        assert_eq!(
            idx.out_edges("Kismet").unwrap(),
            vec![
                hit("Kismet", "directed_by", "William Dieterle", "metaqa"),
                hit("Kismet", "release_year", "1944", "metaqa"),
                hit("Kismet", "starred_actors", "Marlene Dietrich", "metaqa"),
                hit("Kismet", "written_by", "Edward Knoblock", "metaqa"),
            ]
        );
        let into_marlene = idx.in_edges("Marlene Dietrich").unwrap();
        assert_eq!(
            into_marlene,
            vec![
                hit(
                    "Blonde Venus",
                    "starred_actors",
                    "Marlene Dietrich",
                    "metaqa"
                ),
                hit("Kismet", "starred_actors", "Marlene Dietrich", "metaqa"),
                hit(
                    "The Blue Angel",
                    "starred_actors",
                    "Marlene Dietrich",
                    "metaqa"
                ),
            ]
        );
        // No edges in one direction.
        assert!(idx.out_edges("Marlene Dietrich").unwrap().is_empty());
        assert!(idx.in_edges("Kismet").unwrap().is_empty());
        // Freebase: duplicate removed, other source kept, literal objects.
        assert_eq!(
            idx.out_edges("m.01").unwrap(),
            vec![
                hit("m.01", "film.film.directed_by", "m.02", "freebase"),
                hit("m.01", "film.film.directed_by", "m.02", "wikidata"),
                hit("m.01", "film.film.initial_release_date", "1975", "freebase"),
                hit("m.01", "film.film.release_year", "1944", "freebase"),
            ]
        );
        assert_eq!(
            idx.in_edges("m.02").unwrap(),
            vec![
                hit("m.01", "film.film.directed_by", "m.02", "freebase"),
                hit("m.01", "film.film.directed_by", "m.02", "wikidata"),
            ]
        );
        assert_eq!(
            idx.out_edges("m.02").unwrap(),
            vec![hit(
                "m.02",
                "type.object.type",
                "http://rdf.freebase.com/ns/people.person",
                "freebase"
            )]
        );
        // "1944" is both a MetaQA entity and a Freebase literal: the entity is preferred.
        assert_eq!(
            idx.in_edges("1944").unwrap(),
            vec![hit("Kismet", "release_year", "1944", "metaqa")]
        );
        let n = idx.node("1944").unwrap();
        assert_eq!(n.kind, "entity");
        let lit = idx.node("1975").unwrap();
        assert_eq!(lit.kind, "literal");
        assert_eq!(lit.name, None);
        assert_eq!(
            idx.in_edges("1975").unwrap(),
            vec![hit(
                "m.01",
                "film.film.initial_release_date",
                "1975",
                "freebase"
            )]
        );
        assert_eq!(
            idx.node("http://rdf.freebase.com/ns/people.person")
                .unwrap()
                .kind,
            "iri"
        );
    }

    #[test]
    fn kg_nodes_names_and_unknown_keys() {
        let (dir, _, _) = build();
        let idx = KgIndex::open(dir.path()).unwrap();
        let m01 = idx.node("m.01").unwrap();
        assert_eq!(m01.name.as_deref(), Some("Tom & Jerry <Movie>"));
        assert_eq!(m01.kind, "entity");
        // First non-empty name in input order.
        assert_eq!(
            idx.node("m.02").unwrap().name.as_deref(),
            Some("Joe \"Hanna\"")
        );
        assert_eq!(idx.node("Kismet").unwrap().name, None);
        assert!(idx.node("m.99").is_none());
        assert!(idx.node("").is_none());
        assert!(idx.out_edges("m.99").unwrap().is_empty());
        assert!(idx.in_edges("zzz").unwrap().is_empty());
        // Ids are the rows, in (key, kind) byte order.
        let a = idx.node("Blonde Venus").unwrap().id;
        let b = idx.node("Kismet").unwrap().id;
        let c = idx.node("m.01").unwrap().id;
        assert!(a < b && b < c);
        // "1944" (entity), "1944" (literal), "1975" (literal): same key, entity first.
        assert_eq!(
            idx.node("1944").unwrap().id + 2,
            idx.node("1975").unwrap().id
        );
    }

    #[test]
    fn kg_offsets_are_consistent() {
        let (dir, stats, _) = build();
        let nodes = read_all(&dir.path().join(NODES_FILE));
        let mut out_sum = 0;
        let mut in_sum = 0;
        let mut prev_out_end = 0;
        let mut prev_in_end = 0;
        for b in &nodes {
            let col = |n: &str| b[n].as_any().downcast_ref::<UInt64Array>().unwrap().clone();
            let (os, oe, is, ie) = (
                col("out_start"),
                col("out_end"),
                col("in_start"),
                col("in_end"),
            );
            for r in 0..b.num_rows() {
                assert_eq!(os.value(r), prev_out_end);
                assert_eq!(is.value(r), prev_in_end);
                out_sum += oe.value(r) - os.value(r);
                in_sum += ie.value(r) - is.value(r);
                prev_out_end = oe.value(r);
                prev_in_end = ie.value(r);
            }
        }
        assert_eq!(out_sum, stats.edges);
        assert_eq!(in_sum, stats.edges);
        for f in [EDGES_BY_SUBJECT_FILE, EDGES_BY_OBJECT_FILE] {
            let rows: usize = read_all(&dir.path().join(f))
                .iter()
                .map(|b| b.num_rows())
                .sum();
            assert_eq!(rows as u64, stats.edges, "{f}");
        }
        // Every node's out and in edges, read by range, add up to every edge once.
        let idx = KgIndex::open(dir.path()).unwrap();
        let mut outs = 0;
        let mut ins = 0;
        for i in 0..idx.len() {
            let r = idx.out_range[i];
            outs += idx
                .read_range(EDGES_BY_SUBJECT_FILE, "subject", i, r)
                .unwrap()
                .len();
            let r = idx.in_range[i];
            ins += idx
                .read_range(EDGES_BY_OBJECT_FILE, "object", i, r)
                .unwrap()
                .len();
        }
        assert_eq!(outs as u64, stats.edges);
        assert_eq!(ins as u64, stats.edges);
    }

    #[test]
    fn kg_graphml_is_escaped() {
        let (dir, stats, _) = build();
        let xml = std::fs::read_to_string(dir.path().join(GRAPHML_FILE)).unwrap();
        assert!(xml.contains("<data key=\"d1\">Tom &amp; Jerry &lt;Movie&gt;</data>"));
        assert!(xml.contains("Joe &quot;Hanna&quot;"));
        assert!(!xml.contains("Tom & Jerry"));
        assert!(xml.contains("edgedefault=\"directed\""));
        assert_eq!(xml.matches("<node ").count() as u64, stats.nodes);
        assert_eq!(xml.matches("<edge ").count() as u64, stats.edges);
        assert!(xml.trim_end().ends_with("</graphml>"));
        let mut out = Vec::new();
        xml_escape(&mut out, "a\u{1}b\rc\td'").unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\u{FFFD}b&#13;c\td&apos;");
    }

    #[test]
    fn kg_empty_and_bad_kind() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("new/kg");
        let (stats, files) = write_kg(&sub, Vec::new()).unwrap();
        assert_eq!(stats, KgStats::default());
        assert_eq!(files.len(), 4);
        let idx = KgIndex::open(&sub).unwrap();
        assert!(idx.is_empty());
        assert!(idx.node("x").is_none());
        assert!(idx.out_edges("x").unwrap().is_empty());

        let bad = vec![edge("a", "r", "b", "blank", None, None, "x")];
        let err = write_kg(dir.path(), bad).unwrap_err();
        assert!(err.to_string().contains("object_kind"), "{err}");

        let missing = KgIndex::open(&dir.path().join("absent")).unwrap_err();
        assert!(missing.to_string().contains(NODES_FILE), "{missing}");
    }

    #[test]
    fn kg_range_reads_across_pages() {
        // Enough edges for several batches and pages: node "hub" has edges in the middle.
        let dir = tempfile::tempdir().unwrap();
        let mut edges = Vec::new();
        for i in 0..70_000u32 {
            edges.push(edge(
                &format!("s{:06}", i),
                "r",
                &format!("o{:03}", i % 500),
                "entity",
                None,
                None,
                "synthetic",
            ));
        }
        for i in 0..3000u32 {
            edges.push(edge(
                "s035000x",
                "links",
                &format!("o{:03}", i % 500),
                "entity",
                None,
                None,
                &format!("src{}", i / 500),
            ));
        }
        let (stats, _) = write_kg(dir.path(), edges).unwrap();
        assert_eq!(stats.duplicates, 0);
        let idx = KgIndex::open(dir.path()).unwrap();
        let out = idx.out_edges("s035000x").unwrap();
        assert_eq!(out.len(), 3000);
        assert!(
            out.iter()
                .all(|h| h.subject == "s035000x" && h.relation == "links")
        );
        assert!(
            out.windows(2)
                .all(|w| (&w[0].object, &w[0].source) < (&w[1].object, &w[1].source))
        );
        let into = idx.in_edges("o042").unwrap();
        assert_eq!(into.len(), 140 + 6);
        assert_eq!(
            idx.out_edges("s069999").unwrap(),
            vec![hit("s069999", "r", "o499", "synthetic")]
        );
    }
}
