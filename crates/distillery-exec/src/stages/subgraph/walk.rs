//! The frontier join behind the `subgraph` stage: the k-hop neighbourhoods of many questions'
//! topic entities, found level by level in one pass over the KG's edges per hop.
//!
//! A *walker* is one (question, topic entity) pair. Before pass `h` (1..=hops) each walker's
//! frontier is the nodes it reached at distance `h - 1`; the pass streams every edge once and,
//! for each walker whose frontier holds an end of the edge, adds the edge to the walker's
//! question at hop `h` and gives the other end distance `h` if it had none. Edges are followed
//! in both directions, so after `hops` passes a question holds every edge that touches a node
//! within `hops - 1` hops of one of its topic entities, as Hydra's breadth-first exploration
//! has it, and each node's distance from each topic entity (up to `hops`).
//!
//! Keys are compared in a canonical form, so a question's `m.0abc` finds FB15k's `/m/0abc`
//! ([`canon`]); rows keep the KG's own keys. Memory: the nodes the walkers reached and the
//! edges they kept, for the questions of one task, never the KG.

use std::sync::Arc;

pub use crate::kit::same_as::canon;

type FastMap<K, V> = foldhash::HashMap<K, V>;

/// A pattern of the relation and entity filters: `x` exact, `x*` a prefix, `*x` a suffix,
/// `*x*` a substring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
}

impl Pattern {
    pub fn parse(p: &str) -> Result<Pattern, String> {
        let (head, tail) = (p.starts_with('*'), p.ends_with('*') && p.len() > 1);
        let body = p.trim_start_matches('*').trim_end_matches('*');
        if body.is_empty() || body.contains('*') {
            return Err(format!(
                "`{p}`: a pattern is `x`, `x*`, `*x` or `*x*` with a non-empty `x` and no other `*`"
            ));
        }
        let body = body.to_string();
        Ok(match (head, tail) {
            (false, false) => Pattern::Exact(body),
            (false, true) => Pattern::Prefix(body),
            (true, false) => Pattern::Suffix(body),
            (true, true) => Pattern::Contains(body),
        })
    }

    pub fn matches(&self, s: &str) -> bool {
        match self {
            Pattern::Exact(x) => s == x,
            Pattern::Prefix(x) => s.starts_with(x.as_str()),
            Pattern::Suffix(x) => s.ends_with(x.as_str()),
            Pattern::Contains(x) => s.contains(x.as_str()),
        }
    }
}

/// Which edges and nodes a walk follows.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Relations (canonical form) never followed.
    pub drop_relations: Vec<Pattern>,
    /// Nodes (canonical form) never reached.
    pub drop_entities: Vec<Pattern>,
    /// Whether edges to literal and IRI objects are kept (as leaves: never expanded).
    pub literals: bool,
}

impl Filter {
    /// Whether an edge `relation` to an object of `object_kind` is followed at all.
    pub fn keeps_edge(&self, relation: &str, object_kind: &str) -> bool {
        (self.literals || object_kind == "entity") && self.keeps_relation(relation)
    }

    /// Whether edges `relation` are followed to some kind of object.
    pub fn keeps_relation(&self, relation: &str) -> bool {
        let c = canon(relation);
        !self.drop_relations.iter().any(|p| p.matches(&c))
    }

    /// Whether a node (canonical key) may be reached.
    pub fn keeps_node(&self, canonical: &str) -> bool {
        !self.drop_entities.iter().any(|p| p.matches(canonical))
    }
}

/// One edge as a walk sees it: ends in the KG's own keys.
#[derive(Debug, Clone, Copy)]
pub struct EdgeRef<'a> {
    pub subject: &'a str,
    pub object: &'a str,
    /// Whether the object is an entity (a node that may be expanded).
    pub object_is_node: bool,
}

/// Node ids of a walk: canonical key → id, and each id's KG key as first seen (kept apart
/// only where it differs from the canonical key). The map and the list share one string.
#[derive(Debug, Default)]
struct Nodes {
    ids: foldhash::HashMap<Arc<str>, u32>,
    canonical: Vec<Arc<str>>,
    keys: FastMap<u32, Box<str>>,
}

impl Nodes {
    fn get(&self, canonical: &str) -> Option<u32> {
        self.ids.get(canonical).copied()
    }

    fn intern(&mut self, canonical: &str, key: &str) -> u32 {
        if let Some(id) = self.ids.get(canonical) {
            return *id;
        }
        let id = self.canonical.len() as u32;
        let c: Arc<str> = canonical.into();
        self.ids.insert(c.clone(), id);
        self.canonical.push(c);
        if key != canonical {
            self.keys.insert(id, key.into());
        }
        id
    }

    fn key(&self, id: u32) -> &str {
        match self.keys.get(&id) {
            Some(k) => k,
            None => &self.canonical[id as usize],
        }
    }

    fn len(&self) -> usize {
        self.canonical.len()
    }
}

/// The caller's name of an edge: a scan's (part, row), an index walk's edge number
/// ([`super::indexed::IndexRows`]).
pub type EdgeKey = u128;

/// The walk of one task's questions. Edges are named by the caller's key ([`EdgeKey`]), given
/// to [`Walk::visit`] with each edge and handed back per question by [`Walk::edges_of`].
#[derive(Debug)]
pub struct Walk {
    hops: u32,
    hop: u32,
    nodes: Nodes,
    /// Walker → (question, node → distance).
    walkers: Vec<(usize, FastMap<u32, u32>)>,
    /// Walker → whether it took an edge (its topic entity is in the graph).
    found: Vec<bool>,
    /// Node → walkers that reached it at distance `hop - 1` (this pass's frontier).
    frontier: FastMap<u32, Vec<u32>>,
    /// Question → edge → the hop it was first found at.
    edges: Vec<FastMap<EdgeKey, u32>>,
    /// Question → its walkers.
    of_question: Vec<Vec<u32>>,
}

impl Walk {
    /// A walk of `topics[q]` for each question `q` (keys as the questions give them; topic
    /// entities the filter drops start no walker).
    pub fn new(topics: &[Vec<String>], hops: u32, filter: &Filter) -> Walk {
        let mut w = Walk {
            hops,
            hop: 0,
            nodes: Nodes::default(),
            walkers: Vec::new(),
            found: Vec::new(),
            frontier: FastMap::default(),
            edges: vec![FastMap::default(); topics.len()],
            of_question: vec![Vec::new(); topics.len()],
        };
        for (q, keys) in topics.iter().enumerate() {
            for key in keys {
                let c = canon(key);
                if !filter.keeps_node(&c) {
                    continue;
                }
                let node = w.nodes.intern(&c, key);
                if w.of_question[q]
                    .iter()
                    .any(|&k| w.walkers[k as usize].1.contains_key(&node))
                {
                    continue; // the same topic entity listed twice
                }
                w.of_question[q].push(w.walkers.len() as u32);
                w.walkers.push((q, FastMap::from_iter([(node, 0)])));
                w.found.push(false);
            }
        }
        w
    }

    /// The canonical keys of this pass's frontier: what a scan of the edges looks for
    /// ([`Walk::visit`] then takes the edges that touch one).
    pub fn frontier_keys(&self) -> foldhash::HashSet<Box<str>> {
        self.frontier
            .keys()
            .map(|&n| self.nodes.canonical[n as usize].as_ref().into())
            .collect()
    }

    /// The canonical keys of the topic entities walked.
    pub fn topic_keys(&self) -> Vec<String> {
        let mut v: Vec<String> = (self.walkers.iter())
            .flat_map(|(_, dist)| dist.iter().filter(|&(_, &d)| d == 0))
            .map(|(&n, _)| self.nodes.canonical[n as usize].to_string())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Whether another pass is due; if so, builds its frontier.
    pub fn next_pass(&mut self) -> bool {
        if self.hop >= self.hops {
            return false;
        }
        self.hop += 1;
        self.frontier.clear();
        let at = self.hop - 1;
        for (k, (_, dist)) in self.walkers.iter().enumerate() {
            for (&node, &d) in dist {
                if d == at {
                    self.frontier.entry(node).or_default().push(k as u32);
                }
            }
        }
        !self.frontier.is_empty()
    }

    /// The hop of the pass running.
    pub fn hop(&self) -> u32 {
        self.hop
    }

    /// Looks at one edge (already past [`Filter::keeps_edge`]) during the current pass.
    /// Returns whether any question took it.
    pub fn visit(&mut self, index: EdgeKey, e: EdgeRef<'_>, filter: &Filter) -> bool {
        let cs = canon(e.subject);
        let co = canon(e.object);
        let s = self.nodes.get(&cs);
        let o = if e.object_is_node {
            self.nodes.get(&co)
        } else {
            None
        };
        let hit_s = s.and_then(|n| self.frontier.get(&n)).is_some();
        let hit_o = o.and_then(|n| self.frontier.get(&n)).is_some();
        if !hit_s && !hit_o {
            return false;
        }
        if !filter.keeps_node(&cs) || (e.object_is_node && !filter.keeps_node(&co)) {
            return false;
        }
        let s = self.nodes.intern(&cs, e.subject);
        let o = e.object_is_node.then(|| self.nodes.intern(&co, e.object));
        self.visit_nodes(index, s, o)
    }

    /// The walk's id of the node `key` (interned: a walk over another store maps its own node
    /// ids to these once), or `None` when the filter drops the node; with it, the walk's
    /// shared string of `key` when `key` is its own canonical form (a caller keeps it
    /// without a copy).
    pub fn node(&mut self, key: &str, filter: &Filter) -> Option<(u32, Option<Arc<str>>)> {
        let c = canon(key);
        if !filter.keeps_node(&c) {
            return None;
        }
        let id = self.nodes.intern(&c, key);
        let shared = matches!(c, std::borrow::Cow::Borrowed(_))
            .then(|| self.nodes.canonical[id as usize].clone());
        Some((id, shared))
    }

    /// Room for `n` more nodes, before a caller interns that many at most.
    pub fn reserve_nodes(&mut self, n: usize) {
        self.nodes.ids.reserve(n);
        self.nodes.canonical.reserve(n);
    }

    /// The nodes of this pass's frontier, as [`Walk::node`] numbers them.
    pub fn frontier_nodes(&self) -> impl Iterator<Item = u32> + '_ {
        self.frontier.keys().copied()
    }

    /// [`Walk::visit`] of an edge between walk nodes (`object` `None` for a leaf: a literal
    /// or IRI value), both past the filter. Returns whether any question took it.
    pub fn visit_nodes(&mut self, index: EdgeKey, s: u32, object: Option<u32>) -> bool {
        let hop = self.hop;
        let Some(o) = object else {
            // A literal or IRI object is a leaf: the edge is kept, the value is no node.
            let Some(ks) = self.frontier.get(&s) else {
                return false;
            };
            for &k in ks {
                let q = self.walkers[k as usize].0;
                self.edges[q].entry(index).or_insert(hop);
                self.found[k as usize] = true;
            }
            return true;
        };
        let mut taken = false;
        for (from, to) in [(s, o), (o, s)] {
            for &k in self.frontier.get(&from).map(Vec::as_slice).unwrap_or(&[]) {
                taken = true;
                self.found[k as usize] = true;
                let (q, dist) = &mut self.walkers[k as usize];
                let seen = self.edges[*q].entry(index).or_insert(hop);
                *seen = (*seen).min(hop);
                dist.entry(to).or_insert(hop);
            }
        }
        taken
    }

    /// The edges question `q` took, with the hop each was found at, by edge index.
    pub fn edges_of(&self, q: usize) -> Vec<(EdgeKey, u32)> {
        let mut v: Vec<(EdgeKey, u32)> = self.edges[q].iter().map(|(&i, &h)| (i, h)).collect();
        v.sort_unstable();
        v
    }

    /// Question `q`'s nodes, each with its distance from the farthest of its walkers that left
    /// its topic entity (`u32::MAX` where one of them did not reach it). A topic entity with
    /// no edge the filter keeps is not in the graph and counts for nothing.
    pub fn nodes_of(&self, q: usize) -> FastMap<u32, u32> {
        let ws: Vec<u32> = self.of_question[q]
            .iter()
            .copied()
            .filter(|&k| self.found[k as usize])
            .collect();
        // Node → (farthest distance, walkers that reached it).
        let mut out: FastMap<u32, (u32, usize)> = FastMap::default();
        for &k in &ws {
            for (&node, &d) in &self.walkers[k as usize].1 {
                let e = out.entry(node).or_insert((0, 0));
                *e = (e.0.max(d), e.1 + 1);
            }
        }
        out.into_iter()
            .map(|(n, (d, by))| (n, if by == ws.len() { d } else { u32::MAX }))
            .collect()
    }

    /// The number of question `q`'s topic entities found in the graph.
    pub fn topics_of(&self, q: usize) -> usize {
        self.of_question[q]
            .iter()
            .filter(|&&k| self.found[k as usize])
            .count()
    }

    /// The canonical node id of an edge end (for [`Walk::nodes_of`]).
    pub fn node_of(&self, key: &str) -> Option<u32> {
        self.nodes.get(&canon(key))
    }

    /// The KG key of a node id.
    pub fn key(&self, node: u32) -> &str {
        self.nodes.key(node)
    }

    /// Nodes the walk has reached, all questions together.
    pub fn reached(&self) -> usize {
        self.nodes.len()
    }
}

/// The smallest `D` such that one node is within `D` hops of every topic entity (0 with one
/// topic entity), from [`Walk::nodes_of`]; `None` when no node is reached by all of them.
pub fn connect_hop(nodes: &FastMap<u32, u32>) -> Option<u32> {
    nodes.values().copied().filter(|&m| m != u32::MAX).min()
}

/// Hydra's reduction of a subgraph over `cap` nodes: keep the nodes within `D` hops of every
/// topic entity and the edges between them, `D` from `hops` down to 1, the first that fits.
/// Returns the kept nodes and `D`, or `None` when the subgraph fits as it is. When even
/// `D = 1` is over the cap, that is what is kept (the caller counts it).
pub fn reduce(
    nodes: &FastMap<u32, u32>,
    hops: u32,
    cap: u64,
) -> Option<(foldhash::HashSet<u32>, u32)> {
    if nodes.len() as u64 <= cap {
        return None;
    }
    let mut d = hops;
    loop {
        let kept: foldhash::HashSet<u32> = nodes
            .iter()
            .filter(|&(_, &m)| m <= d)
            .map(|(&n, _)| n)
            .collect();
        if kept.len() as u64 <= cap || d <= 1 {
            return Some((kept, d));
        }
        d -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walked(edges: &[(&str, &str)], topics: &[&[&str]], hops: u32) -> Walk {
        let f = Filter::default();
        let topics: Vec<Vec<String>> = topics
            .iter()
            .map(|t| t.iter().map(|s| s.to_string()).collect())
            .collect();
        let mut w = Walk::new(&topics, hops, &f);
        while w.next_pass() {
            for (i, (s, o)) in edges.iter().enumerate() {
                let e = EdgeRef {
                    subject: s,
                    object: o,
                    object_is_node: true,
                };
                w.visit(i as EdgeKey, e, &f);
            }
        }
        w
    }

    fn run(edges: &[(&str, &str)], topics: &[&[&str]], hops: u32) -> Vec<Vec<(EdgeKey, u32)>> {
        let w = walked(edges, topics, hops);
        (0..topics.len()).map(|q| w.edges_of(q)).collect()
    }

    #[test]
    fn edges_are_found_both_ways_at_their_hop() {
        // a-b-c-d chain, e->a, with edge directions mixed.
        let edges = [("a", "b"), ("c", "b"), ("c", "d"), ("e", "a")];
        let got = run(&edges, &[&["a"], &["d"], &["a", "d"]], 2);
        assert_eq!(got[0], vec![(0, 1), (1, 2), (3, 1)]);
        assert_eq!(got[1], vec![(1, 2), (2, 1)]);
        assert_eq!(got[2], vec![(0, 1), (1, 2), (2, 1), (3, 1)]);
        let one = run(&edges, &[&["b"]], 1);
        assert_eq!(one[0], vec![(0, 1), (1, 1)]);
    }

    #[test]
    fn keys_match_across_freebase_and_fb15k_forms() {
        let got = run(&[("/m/01", "/m/02")], &[&["m.01"]], 1);
        assert_eq!(got[0], vec![(0, 1)]);
    }

    #[test]
    fn patterns_and_the_filter() {
        let p = |s: &str| Pattern::parse(s).unwrap();
        assert!(p("common.*").matches("common.topic.webpage"));
        assert!(!p("common.*").matches("film.common"));
        assert!(p("*sameAs*").matches("owl#sameAs"));
        assert!(p("*.id").matches("x.id"));
        assert!(p("type.object.name").matches("type.object.name"));
        assert!(Pattern::parse("*").is_err() && Pattern::parse("a*b").is_err());
        let f = Filter {
            drop_relations: vec![p("common.*")],
            drop_entities: vec![p("g.*")],
            literals: false,
        };
        assert!(!f.keeps_edge("/common/topic/webpage./common/webpage/category", "entity"));
        assert!(f.keeps_edge("/film/film/genre", "entity"));
        assert!(!f.keeps_edge("film.film.genre", "literal"));
        assert!(!f.keeps_node("g.11b") && f.keeps_node("m.0abc"));
    }

    #[test]
    fn connect_hop_and_reduction() {
        // a-x-b with a tail b-y-z: topics a and b meet at x (D = 1).
        let edges = [("a", "x"), ("x", "b"), ("b", "y"), ("y", "z")];
        let w = walked(&edges, &[&["a", "b"]], 3);
        let nodes = w.nodes_of(0);
        assert_eq!(nodes.len(), 5);
        assert_eq!(connect_hop(&nodes), Some(1));
        assert_eq!(reduce(&nodes, 3, 10), None);
        let (kept, d) = reduce(&nodes, 3, 3).unwrap();
        let mut keys: Vec<&str> = kept.iter().map(|&n| w.key(n)).collect();
        keys.sort();
        assert_eq!((keys, d), (vec!["a", "b", "x"], 2));
    }
}
