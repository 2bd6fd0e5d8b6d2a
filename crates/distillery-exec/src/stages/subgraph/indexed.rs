//! The walk over a built KG adjacency index (the `index` option): the same level-by-level
//! exploration as the scan ([`super::walk`]), but each pass reads only the edges of its
//! frontier.
//!
//! The index ([`distillery_index::kg`]) numbers its nodes by row of `nodes.parquet` and keeps
//! each node's out- and in-edges as one contiguous run of rows of `edges_by_subject.parquet`
//! and `edges_by_object.parquet`. A pass turns the frontier's node ids into those runs and
//! reads them with one Parquet row selection per file: with the page index the reader fetches
//! and decodes only the pages holding selected rows. The ends of the edges read are resolved
//! (key, kind, name) with one more row selection on `nodes.parquet`, then every edge goes
//! through [`Walk::visit`] as in the scan, so the filters, distances and hops are the scan's.
//!
//! Cost: the rows of the neighbourhoods walked, not the KG (a pass over a frontier of a few
//! thousand nodes touches a few thousand runs); topic entities are found by one read of the
//! node keys. Memory: the walk's nodes and kept edges, and the node records resolved; never
//! the node table or the edges as a whole.
//!
//! Differences from the scan: the index keeps one edge per (subject, relation, object,
//! source), so an edge stated twice is one row whatever its triples; its `triple_id` is
//! [`edge_id`] (the index holds no triple ids); names are the index's (the smallest of a
//! node's names).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use distillery_core::id::stable_id;
use distillery_index::kg::{EDGES_BY_OBJECT_FILE, EDGES_BY_SUBJECT_FILE, NODES_FILE};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::file::metadata::PageIndexPolicy;

use tracing::debug;

use super::EdgeRow;
use super::walk::{EdgeKey, Filter, Walk, canon};
use crate::error::ExecError;

type FastMap<K, V> = foldhash::HashMap<K, V>;

/// Rows per batch read.
const BATCH: usize = 8192;

/// The id a row of the `subgraphs` table gives an index edge as its `triple_id`.
pub fn edge_id(source: &str, subject: &str, relation: &str, object: &str, kind: &str) -> String {
    stable_id(&["kg-index", source, subject, relation, object, kind])
}

/// A node as the walk needs it.
#[derive(Debug, Clone)]
struct Node {
    key: Arc<str>,
    kind: Arc<str>,
    name: Option<Arc<str>>,
    /// The walk's id ([`Walk::node`]) of an entity the filter keeps.
    walk: Option<u32>,
}

/// An edge of the index: (subject id, relation, object id, source), the strings interned.
pub type IdEdge = (u32, u32, u32, u32);

/// What a walk over the index read, for the stage's counters.
#[derive(Debug, Default, Clone, Copy)]
pub struct Read {
    /// Edge rows read (both files, all passes).
    pub edges: u64,
    /// Node rows resolved.
    pub nodes: u64,
}

/// Strings numbered in first-seen order.
#[derive(Debug, Default)]
struct Interner {
    ids: FastMap<Arc<str>, u32>,
    strings: Vec<Arc<str>>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        let s: Arc<str> = s.into();
        self.ids.insert(s.clone(), i);
        self.strings.push(s);
        i
    }
}

/// The KG index of one version, read in place.
pub struct IndexGraph {
    dir: PathBuf,
    /// Node id → what was resolved of it.
    nodes: FastMap<u32, Node>,
    /// Walk node → the index's entity nodes with its key (several when an index holds both
    /// `/m/0abc` and `m.0abc`).
    of_walk: FastMap<u32, Vec<u32>>,
    strings: Interner,
    /// (relation, object is an entity) → whether the filter follows it.
    follows: FastMap<(u32, bool), bool>,
    read: Read,
}

fn corrupt(path: &Path, why: impl std::fmt::Display) -> ExecError {
    ExecError::Task(format!("{}: {why}", path.display()))
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a T, ExecError> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| corrupt(path, format!("no column `{name}` of the expected type")))
}

/// The row selection of sorted, non-overlapping `[start, end)` ranges (adjacent ones merged)
/// in a file of `rows` rows.
fn selection(ranges: &[(u64, u64)], rows: u64) -> RowSelection {
    let mut sel: Vec<RowSelector> = Vec::with_capacity(ranges.len() * 2 + 1);
    let mut at = 0u64;
    for &(s, e) in ranges.iter().filter(|(s, e)| s < e) {
        if s > at {
            sel.push(RowSelector::skip((s - at) as usize));
        }
        match sel.last_mut() {
            Some(last) if !last.skip && s == at => last.row_count += (e - s) as usize,
            _ => sel.push(RowSelector::select((e - s) as usize)),
        }
        at = e;
    }
    if rows > at {
        sel.push(RowSelector::skip((rows - at) as usize));
    }
    RowSelection::from(sel)
}

/// Reads `columns` of the rows in `ranges` (sorted, non-overlapping) of the Parquet file at
/// `path`, decoding only the pages that hold them; each batch goes to `each`.
fn read_ranges(
    path: &Path,
    columns: &[&str],
    ranges: &[(u64, u64)],
    mut each: impl FnMut(&RecordBatch) -> Result<(), ExecError>,
) -> Result<(), ExecError> {
    if ranges.iter().all(|(s, e)| s >= e) {
        return Ok(());
    }
    let pq = |e: parquet::errors::ParquetError| corrupt(path, e);
    let file = File::open(path).map_err(|e| corrupt(path, e))?;
    let options = ArrowReaderOptions::new().with_offset_index_policy(PageIndexPolicy::Optional);
    let builder =
        ParquetRecordBatchReaderBuilder::try_new_with_options(file, options).map_err(pq)?;
    let rows = builder.metadata().file_metadata().num_rows() as u64;
    if let Some(&(_, end)) = ranges.last().filter(|(_, e)| *e > rows) {
        return Err(corrupt(
            path,
            format!("has {rows} rows, the index names row {end}"),
        ));
    }
    let mask = ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
    let reader = builder
        .with_projection(mask)
        .with_row_selection(selection(ranges, rows))
        .with_batch_size(BATCH)
        .build()
        .map_err(pq)?;
    for batch in reader {
        each(&batch.map_err(|e| corrupt(path, e))?)?;
    }
    Ok(())
}

/// Row ranges `[start, end)` of a Parquet file, sorted.
type Runs = Vec<(u64, u64)>;

/// The one-row ranges of sorted ids.
fn rows_of(ids: &[u32]) -> Vec<(u64, u64)> {
    ids.iter().map(|&i| (i as u64, i as u64 + 1)).collect()
}

impl IndexGraph {
    /// The KG index in a version's `kg` directory.
    pub fn new(dir: PathBuf) -> IndexGraph {
        IndexGraph {
            dir,
            nodes: FastMap::default(),
            of_walk: FastMap::default(),
            strings: Interner::default(),
            follows: FastMap::default(),
            read: Read::default(),
        }
    }

    /// Rows read so far.
    pub fn read(&self) -> Read {
        self.read
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// Finds the entity nodes whose canonical keys are the walk's topic entities: one read
    /// of the node keys.
    pub fn find(&mut self, walk: &mut Walk, filter: &Filter) -> Result<(), ExecError> {
        let keys = walk.topic_keys();
        let wanted: foldhash::HashSet<&str> = keys.iter().map(String::as_str).collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let path = self.path(NODES_FILE);
        let pq = |e: parquet::errors::ParquetError| corrupt(&path, e);
        let file = File::open(&path).map_err(|e| corrupt(&path, e))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
        let mask = ProjectionMask::columns(builder.parquet_schema(), ["key", "kind"]);
        let reader = builder
            .with_projection(mask)
            .with_batch_size(BATCH * 8)
            .build()
            .map_err(pq)?;
        let mut found: Vec<u32> = Vec::new();
        let mut row = 0u32;
        for batch in reader {
            let batch = batch.map_err(|e| corrupt(&path, e))?;
            let key = col::<StringArray>(&batch, "key", &path)?;
            let kind = col::<StringArray>(&batch, "kind", &path)?;
            for i in 0..batch.num_rows() {
                if wanted.contains(canon(key.value(i)).as_ref()) && kind.value(i) == "entity" {
                    found.push(row + i as u32);
                }
            }
            row += batch.num_rows() as u32;
        }
        self.resolve(found, walk, filter)
    }

    /// Reads key, kind and name of the nodes `ids` not resolved yet, and gives the entities
    /// the filter keeps their walk ids.
    fn resolve(
        &mut self,
        mut ids: Vec<u32>,
        walk: &mut Walk,
        filter: &Filter,
    ) -> Result<(), ExecError> {
        ids.retain(|id| !self.nodes.contains_key(id));
        ids.sort_unstable();
        ids.dedup();
        let path = self.path(NODES_FILE);
        let mut next = ids.iter();
        let (nodes, of_walk) = (&mut self.nodes, &mut self.of_walk);
        let mut kinds: Vec<Arc<str>> = Vec::new();
        read_ranges(&path, &["key", "kind", "name"], &rows_of(&ids), |batch| {
            let key = col::<StringArray>(batch, "key", &path)?;
            let kind = col::<StringArray>(batch, "kind", &path)?;
            let name = col::<StringArray>(batch, "name", &path)?;
            for i in 0..batch.num_rows() {
                let id = *next
                    .next()
                    .ok_or_else(|| corrupt(&path, "more node rows than selected"))?;
                let (key, kind) = (key.value(i), kind.value(i));
                let walk_id = (kind == "entity").then(|| walk.node(key, filter)).flatten();
                if let Some(w) = walk_id {
                    of_walk.entry(w).or_default().push(id);
                }
                // Kinds are few: one shared string each.
                let kind = match kinds.iter().find(|k| &***k == kind) {
                    Some(k) => k.clone(),
                    None => {
                        kinds.push(kind.into());
                        kinds[kinds.len() - 1].clone()
                    }
                };
                let node = Node {
                    key: key.into(),
                    kind,
                    name: name.is_valid(i).then(|| name.value(i).into()),
                    walk: walk_id,
                };
                nodes.insert(id, node);
            }
            Ok(())
        })?;
        if next.next().is_some() {
            return Err(corrupt(&path, "fewer node rows than selected"));
        }
        self.read.nodes += ids.len() as u64;
        Ok(())
    }

    /// The out- and in-edge row runs of `ids` (sorted).
    fn runs(&self, ids: &[u32]) -> Result<(Runs, Runs), ExecError> {
        let path = self.path(NODES_FILE);
        let (mut out, mut inn) = (Vec::new(), Vec::new());
        let cols = ["out_start", "out_end", "in_start", "in_end"];
        read_ranges(&path, &cols, &rows_of(ids), |batch| {
            let [os, oe, is, ie] = cols.map(|c| col::<UInt64Array>(batch, c, &path));
            let (os, oe, is, ie) = (os?, oe?, is?, ie?);
            for i in 0..batch.num_rows() {
                out.push((os.value(i), oe.value(i)));
                inn.push((is.value(i), ie.value(i)));
            }
            Ok(())
        })?;
        if out.len() != ids.len() {
            return Err(corrupt(&path, "node rows missing"));
        }
        Ok((out, inn))
    }

    /// The edges in `runs` of one edge file, but those whose subject is in `skip` (sorted).
    fn read_edges(
        &mut self,
        file: &str,
        runs: &[(u64, u64)],
        skip: &[u32],
    ) -> Result<Vec<IdEdge>, ExecError> {
        let path = self.path(file);
        let mut v = Vec::new();
        let cols = ["subject", "relation", "object", "source"];
        let strings = &mut self.strings;
        read_ranges(&path, &cols, runs, |batch| {
            let s = col::<UInt32Array>(batch, "subject", &path)?;
            let r = col::<StringArray>(batch, "relation", &path)?;
            let o = col::<UInt32Array>(batch, "object", &path)?;
            let src = col::<StringArray>(batch, "source", &path)?;
            for i in 0..batch.num_rows() {
                if !skip.is_empty() && skip.binary_search(&s.value(i)).is_ok() {
                    continue;
                }
                let (rel, source) = (strings.id(r.value(i)), strings.id(src.value(i)));
                v.push((s.value(i), rel, o.value(i), source));
            }
            Ok(())
        })?;
        self.read.edges += v.len() as u64;
        Ok(v)
    }

    /// One pass of `walk` (after [`Walk::next_pass`]): reads the edges of its frontier, visits
    /// those the filter keeps, and adds the ones some question took to `rows` (by their
    /// [`EdgeKey`], which [`order`] sorts).
    pub fn pass(
        &mut self,
        walk: &mut Walk,
        filter: &Filter,
        rows: &mut FastMap<EdgeKey, EdgeRow>,
    ) -> Result<(), ExecError> {
        let mut ids: Vec<u32> = walk
            .frontier_nodes()
            .filter_map(|n| self.of_walk.get(&n))
            .flatten()
            .copied()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Ok(());
        }
        let t = std::time::Instant::now();
        let (out_runs, in_runs) = self.runs(&ids)?;
        let t_runs = t.elapsed().as_secs_f64();
        let mut read = self.read_edges(EDGES_BY_SUBJECT_FILE, &out_runs, &[])?;
        // An edge whose subject is in the frontier too was read from the first file.
        read.extend(self.read_edges(EDGES_BY_OBJECT_FILE, &in_runs, &ids)?);
        let t_edges = t.elapsed().as_secs_f64();
        self.resolve(read.iter().flat_map(|e| [e.0, e.2]).collect(), walk, filter)?;
        let t_nodes = t.elapsed().as_secs_f64();
        let edges_read = read.len();
        rows.reserve(edges_read);
        for e in read {
            let (s, o) = (&self.nodes[&e.0], &self.nodes[&e.2]);
            let entity = &*o.kind == "entity";
            let strings = &self.strings.strings;
            let follows = *self
                .follows
                .entry((e.1, entity))
                .or_insert_with(|| filter.keeps_edge(&strings[e.1 as usize], &o.kind));
            let (Some(sw), true) = (s.walk, follows) else {
                continue;
            };
            if entity && o.walk.is_none() {
                continue;
            }
            let at = key(e);
            if walk.visit_nodes(at, sw, o.walk) && !rows.contains_key(&at) {
                let (relation, source) = (&strings[e.1 as usize], &strings[e.3 as usize]);
                rows.insert(
                    at,
                    EdgeRow {
                        id: edge_id(source, &s.key, relation, &o.key, &o.kind),
                        dataset: source.clone(),
                        subject: s.key.clone(),
                        predicate: relation.clone(),
                        object: o.key.clone(),
                        object_kind: o.kind.clone(),
                        subject_name: s.name.clone(),
                        object_name: o.name.clone(),
                    },
                );
            }
        }
        debug!(
            hop = walk.hop(),
            frontier = ids.len(),
            edges_read,
            runs_seconds = t_runs,
            edges_seconds = t_edges - t_runs,
            nodes_seconds = t_nodes - t_edges,
            visit_seconds = t.elapsed().as_secs_f64() - t_nodes,
            "index pass"
        );
        Ok(())
    }

    /// The relation and source strings, by the ids edge keys hold ([`order`]).
    pub fn strings(&self) -> Vec<Arc<str>> {
        self.strings.strings.clone()
    }
}

/// An index edge as the walk names it: subject and object ids, relation and source ids.
fn key((s, r, o, src): IdEdge) -> EdgeKey {
    ((s as u128) << 96) | ((o as u128) << 64) | ((r as u128) << 32) | src as u128
}

/// The index's own order of edge keys: (subject, relation, object, source), node ids
/// following the keys' byte order, so the rows of a question come out the same whichever
/// task read them; `strings` from [`IndexGraph::strings`].
pub fn order(at: EdgeKey, strings: &[Arc<str>]) -> (u32, &str, u32, &str) {
    let (s, o) = ((at >> 96) as u32, (at >> 64) as u32);
    let (r, src) = ((at >> 32) as u32, at as u32);
    (s, &strings[r as usize], o, &strings[src as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_merge_adjacent_runs_and_skip_the_rest() {
        let s = selection(&[(2, 4), (4, 5), (5, 5), (8, 9)], 12);
        let v: Vec<RowSelector> = s.into();
        assert_eq!(
            v,
            vec![
                RowSelector::skip(2),
                RowSelector::select(3),
                RowSelector::skip(3),
                RowSelector::select(1),
                RowSelector::skip(3),
            ]
        );
    }
}
