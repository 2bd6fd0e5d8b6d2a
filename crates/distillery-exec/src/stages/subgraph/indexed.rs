//! The walk over a built KG adjacency index (the `index` option): the same level-by-level
//! exploration as the scan ([`super::walk`]), but each pass reads only the edges of its
//! frontier.
//!
//! The index ([`distillery_index::kg`]) numbers its nodes by key and keeps each node's out-
//! and in-edges as one contiguous run; its `adjacency.bin`
//! ([`distillery_index::kg::adjacency`]) holds those runs as fixed-width entries found by two
//! offsets. A pass reads the runs of its frontier's nodes (in place, from the mapped file),
//! then the records (key, kind, name) of the edges' ends not seen yet, and every
//! edge goes through [`Walk::visit_nodes`] as in the scan, so the filters, distances and
//! hops are the scan's.
//!
//! Cost: the bytes of the neighbourhoods walked, not the KG (a pass over a frontier of a few
//! thousand nodes reads a few thousand runs); topic entities are found by one read of the
//! node records. Memory: the walk's nodes and kept edges, and the node records resolved;
//! never the node table or the edges as a whole.
//!
//! Differences from the scan: the index keeps one edge per (subject, relation, object,
//! source), so an edge stated twice is one row whatever its triples; its `triple_id` is
//! `stable_id(&["kg-index", source, subject, relation, object, kind])` (the index holds no
//! triple ids); names are the index's (the smallest of a node's names).

use std::collections::hash_map::Entry;
use std::path::Path;
use std::sync::Arc;

use distillery_index::kg::Adjacency;
use distillery_index::kg::adjacency::Direction;

use tracing::debug;

use super::EdgeRow;
use super::ids::Joined;
use super::walk::{EdgeKey, Filter, Walk, canon};
use crate::error::ExecError;

type FastMap<K, V> = foldhash::HashMap<K, V>;

/// The parts every edge id begins with: an index edge's `triple_id` is
/// `stable_id(&["kg-index", source, subject, relation, object, kind])`.
const EDGE_ID: [&str; 1] = ["kg-index"];

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
    /// Edge entries read (both directions, all passes).
    pub edges: u64,
    /// Node records resolved.
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

/// The KG index of one version, read in place through its `adjacency.bin`.
pub struct IndexGraph {
    adj: Adjacency,
    /// Node id → its slot in `table`, and the nodes resolved, in the order they were: the
    /// map's entries stay 8 bytes, so the two lookups of each edge read probe a small table.
    slots: FastMap<u32, u32>,
    table: Vec<Node>,
    /// Walk node → the index's entity node with its key, and the walk nodes with more than
    /// one (an index holding both `/m/0abc` and `m.0abc`) → the others.
    of_walk: FastMap<u32, u32>,
    more_of_walk: FastMap<u32, Vec<u32>>,
    strings: Interner,
    /// Label → (relation, source) as interned strings.
    labels: Vec<(u32, u32)>,
    /// The node kinds, one shared string each.
    kinds: Vec<Arc<str>>,
    /// Relation → whether the filter follows it to a value and to an entity, each
    /// [`UNKNOWN`] until asked.
    follows: Vec<[u8; 2]>,
    /// Relation → whether the filter never follows it, whatever the object ([`UNKNOWN`]
    /// until asked).
    dropped: Vec<u8>,
    /// Edge ids ([`EDGE_ID`]), made in a buffer kept.
    ids: Joined,
    read: Read,
}

impl IndexGraph {
    /// The KG index in a version's `kg` directory.
    pub fn open(dir: &Path) -> Result<IndexGraph, ExecError> {
        let adj = Adjacency::open(dir)?;
        let mut strings = Interner::default();
        let labels = (adj.labels().iter())
            .map(|(r, s)| (strings.id(r), strings.id(s)))
            .collect();
        let n = strings.strings.len();
        Ok(IndexGraph {
            adj,
            slots: FastMap::default(),
            table: Vec::new(),
            of_walk: FastMap::default(),
            more_of_walk: FastMap::default(),
            strings,
            labels,
            kinds: Vec::new(),
            follows: vec![[UNKNOWN; 2]; n],
            dropped: vec![UNKNOWN; n],
            ids: {
                let mut ids = Joined::default();
                ids.prefix(&EDGE_ID);
                ids
            },
            read: Read::default(),
        })
    }

    /// Rows read so far.
    pub fn read(&self) -> Read {
        self.read
    }

    /// Finds the entity nodes whose canonical keys are the walk's topic entities. A key that
    /// is its own canonical form is found by a binary search over the sorted keys; the keys
    /// that are not (FB15k's `/m/0abc`) all start with `/`, one range of nodes, read whole.
    pub fn find(&mut self, walk: &mut Walk, filter: &Filter) -> Result<(), ExecError> {
        let keys = walk.topic_keys();
        let wanted: foldhash::HashSet<&str> = keys.iter().map(String::as_str).collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let mut found: Vec<u32> = Vec::new();
        for key in &keys {
            self.adj.with_key(key, |id, r| {
                if r.kind == "entity" {
                    found.push(id);
                }
            })?;
        }
        let slashed = self.adj.starting_with(b'/')?;
        self.adj.scan_range(slashed, |id, r| {
            if r.kind == "entity" && wanted.contains(canon(r.key).as_ref()) {
                found.push(id);
            }
        })?;
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
        ids.retain(|id| !self.slots.contains_key(id));
        ids.sort_unstable();
        ids.dedup();
        walk.reserve_nodes(ids.len());
        let (slots, table) = (&mut self.slots, &mut self.table);
        let (of_walk, more) = (&mut self.of_walk, &mut self.more_of_walk);
        let kinds = &mut self.kinds;
        slots.reserve(ids.len());
        table.reserve(ids.len());
        self.adj.records(&ids, |id, r| {
            let (walk_id, shared) = match (r.kind == "entity")
                .then(|| walk.node(r.key, filter))
                .flatten()
            {
                Some((w, shared)) => (Some(w), shared),
                None => (None, None),
            };
            // Each id comes once (resolved ids are skipped), so a taken slot means another
            // index node with the same canonical key.
            if let Some(w) = walk_id {
                match of_walk.entry(w) {
                    Entry::Vacant(slot) => {
                        slot.insert(id);
                    }
                    Entry::Occupied(_) => more.entry(w).or_default().push(id),
                }
            }
            let kind = match kinds.iter().find(|k| &***k == r.kind) {
                Some(k) => k.clone(),
                None => {
                    kinds.push(r.kind.into());
                    kinds[kinds.len() - 1].clone()
                }
            };
            let node = Node {
                key: shared.unwrap_or_else(|| r.key.into()),
                kind,
                name: r.name.map(Into::into),
                walk: walk_id,
            };
            slots.insert(id, table.len() as u32);
            table.push(node);
        })?;
        self.read.nodes += ids.len() as u64;
        Ok(())
    }

    /// The edges of `ids` (sorted) in one direction as (subject, relation, object, source),
    /// but those whose other end is in `skip` (sorted).
    fn read_edges(
        &mut self,
        direction: Direction,
        ids: &[u32],
        skip: &[u32],
    ) -> Result<Vec<IdEdge>, ExecError> {
        let read = self.adj.edges(direction, ids)?;
        self.read.edges += read.len() as u64;
        let labels = &self.labels;
        Ok(read
            .into_iter()
            .filter(|(_, other, _)| skip.is_empty() || skip.binary_search(other).is_err())
            .map(|(node, other, label)| {
                let (rel, source) = labels[label as usize];
                match direction {
                    Direction::Out => (node, rel, other, source),
                    Direction::In => (other, rel, node, source),
                }
            })
            .collect())
    }

    /// One pass of `walk` (after [`Walk::next_pass`]): reads the edges of its frontier, visits
    /// those the filter keeps, and adds the ones some question took to `rows`.
    pub fn pass(
        &mut self,
        walk: &mut Walk,
        filter: &Filter,
        rows: &mut IndexRows,
    ) -> Result<(), ExecError> {
        let mut ids: Vec<u32> = Vec::new();
        for n in walk.frontier_nodes() {
            ids.extend(self.of_walk.get(&n));
            ids.extend(self.more_of_walk.get(&n).into_iter().flatten());
        }
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return Ok(());
        }
        let t = std::time::Instant::now();
        let mut read = self.read_edges(Direction::Out, &ids, &[])?;
        // An edge whose subject is in the frontier too was read with the out-edges.
        read.extend(self.read_edges(Direction::In, &ids, &ids)?);
        // An edge whose relation is never followed needs no ends resolved.
        let strings = &self.strings.strings;
        let dropped = &mut self.dropped;
        read.retain(|e| {
            let d = &mut dropped[e.1 as usize];
            if *d == UNKNOWN {
                *d = u8::from(!filter.keeps_relation(&strings[e.1 as usize]));
            }
            *d == 0
        });
        let t_edges = t.elapsed().as_secs_f64();
        // Edges come by frontier node (out-edges by subject, in-edges by object): an end
        // equal to the one before it at its place is left out before any lookup.
        let mut ends = Vec::with_capacity(read.len() * 2);
        let mut before = [None; 2];
        for e in &read {
            for (i, id) in [e.0, e.2].into_iter().enumerate() {
                if before[i] != Some(id) {
                    ends.push(id);
                    before[i] = Some(id);
                }
            }
        }
        self.resolve(ends, walk, filter)?;
        let t_nodes = t.elapsed().as_secs_f64();
        let edges_read = read.len();
        rows.reserve(edges_read);
        // The last slot looked up at each end: the frontier's end repeats along a run.
        let mut last = [(None, 0u32); 2];
        for e in read {
            let mut ends = [0u32; 2];
            for (i, id) in [e.0, e.2].into_iter().enumerate() {
                if last[i].0 != Some(id) {
                    last[i] = (Some(id), self.slots[&id]);
                }
                ends[i] = last[i].1;
            }
            let (s, o) = (&self.table[ends[0] as usize], &self.table[ends[1] as usize]);
            let entity = &*o.kind == "entity";
            let strings = &self.strings.strings;
            let f = &mut self.follows[e.1 as usize][usize::from(entity)];
            if *f == UNKNOWN {
                *f = u8::from(filter.keeps_edge(&strings[e.1 as usize], &o.kind));
            }
            let follows = *f == 1;
            let (Some(sw), true) = (s.walk, follows) else {
                continue;
            };
            if entity && o.walk.is_none() {
                continue;
            }
            let packed = key(e);
            let (at, new) = rows.number(packed);
            if !walk.visit_nodes(at, sw, o.walk) || !new {
                continue;
            }
            let (relation, source) = (&strings[e.1 as usize], &strings[e.3 as usize]);
            let row = EdgeRow {
                id: (self.ids).id(&[source, &s.key, relation, &o.key, &o.kind]),
                dataset: source.clone(),
                subject: s.key.clone(),
                predicate: relation.clone(),
                object: o.key.clone(),
                object_kind: o.kind.clone(),
                subject_name: s.name.clone(),
                object_name: o.name.clone(),
            };
            rows.push(packed, row, ends);
        }
        debug!(
            hop = walk.hop(),
            frontier = ids.len(),
            edges_read,
            edges_seconds = t_edges,
            nodes_seconds = t_nodes - t_edges,
            visit_seconds = t.elapsed().as_secs_f64() - t_nodes,
            "index pass"
        );
        Ok(())
    }

    /// Ends the walk: `rows` with the ranks of the strings their keys name, so that
    /// [`IndexRows::order`] can sort them.
    pub fn finish(&self, rows: &mut IndexRows) {
        rows.ranks = ranks(&self.strings.strings);
    }
}

/// The edges an index walk took, numbered in the order they were first taken: the walk names
/// an edge by its number (an [`EdgeKey`] below `u32::MAX`), and a row is one slot of a vector
/// away. Rows as a map from the packed key were one random probe of large buckets per row
/// written, most of the writing's time on the 50M-edge bench KG.
#[derive(Default)]
pub struct IndexRows {
    /// Packed key ([`key`]) → number.
    numbers: FastMap<u128, u32>,
    /// Number → packed key, and row.
    keys: Vec<u128>,
    rows: Vec<EdgeRow>,
    /// Number → the table slots of its subject and object: one number per index node of
    /// the walk, for the writer's sets of nodes seen ([`IndexRows::ends`]).
    ends: Vec<[u32; 2]>,
    /// [`ranks`] of the walk's strings, once it is over.
    ranks: Vec<u32>,
}

impl IndexRows {
    /// The number of the edge `key`, and whether it is new: a new edge gets the next number,
    /// kept only if [`IndexRows::push`] follows.
    fn number(&self, key: u128) -> (EdgeKey, bool) {
        match self.numbers.get(&key) {
            Some(&n) => (n as EdgeKey, false),
            None => (self.rows.len() as EdgeKey, true),
        }
    }

    /// Empties the rows, keeping their memory (the rows of a batch written).
    pub fn clear(&mut self) {
        self.numbers.clear();
        self.keys.clear();
        self.rows.clear();
        self.ends.clear();
        self.ranks.clear();
    }

    fn reserve(&mut self, n: usize) {
        self.numbers.reserve(n);
        self.keys.reserve(n);
        self.rows.reserve(n);
        self.ends.reserve(n);
    }

    fn push(&mut self, key: u128, row: EdgeRow, ends: [u32; 2]) {
        self.numbers.insert(key, self.rows.len() as u32);
        self.keys.push(key);
        self.rows.push(row);
        self.ends.push(ends);
    }

    /// The walk's numbers of edge `at`'s subject and object nodes: two rows' ends are the
    /// same index node when their numbers are equal. A subject is an entity, and an index
    /// holds one entity node per key, so equal numbers of entities are equal keys.
    pub fn ends(&self, at: EdgeKey) -> [u32; 2] {
        self.ends[at as usize]
    }

    /// The row of edge number `at`.
    pub fn row(&self, at: EdgeKey) -> &EdgeRow {
        &self.rows[at as usize]
    }

    /// Puts one question's edges in the index's order ([`order`]), whichever task or batch
    /// numbered them.
    pub fn order(&self, edges: &mut Vec<(EdgeKey, u32)>) {
        let mut by: Vec<(u128, EdgeKey, u32)> = edges
            .iter()
            .map(|&(at, hop)| (order(self.keys[at as usize], &self.ranks), at, hop))
            .collect();
        by.sort_unstable_by_key(|&(o, _, _)| o);
        edges.clear();
        edges.extend(by.into_iter().map(|(_, at, hop)| (at, hop)));
    }
}

/// A cached filter answer not computed yet.
const UNKNOWN: u8 = 2;

/// An index edge as the walk names it: subject and object ids, relation and source ids.
fn key((s, r, o, src): IdEdge) -> u128 {
    ((s as u128) << 96) | ((o as u128) << 64) | ((r as u128) << 32) | src as u128
}

/// The rank of each of `strings`, in byte order (for [`order`]).
fn ranks(strings: &[Arc<str>]) -> Vec<u32> {
    let mut by: Vec<u32> = (0..strings.len() as u32).collect();
    by.sort_unstable_by(|&a, &b| strings[a as usize].cmp(&strings[b as usize]));
    let mut rank = vec![0u32; strings.len()];
    for (r, &i) in by.iter().enumerate() {
        rank[i as usize] = r as u32;
    }
    rank
}

/// The index's own order of edge keys: (subject, relation, object, source), node ids
/// following the keys' byte order and strings by `ranks` ([`ranks`]), so the rows of a
/// question come out the same whichever task read them.
fn order(at: u128, ranks: &[u32]) -> u128 {
    let (s, o) = ((at >> 96) as u32, (at >> 64) as u32);
    let (r, src) = (ranks[(at >> 32) as u32 as usize], ranks[at as u32 as usize]);
    ((s as u128) << 96) | ((r as u128) << 64) | ((o as u128) << 32) | src as u128
}
