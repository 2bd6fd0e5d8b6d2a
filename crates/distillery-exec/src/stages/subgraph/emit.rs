//! Writing walked questions: each question's kept edges as `subgraphs` rows (and HSEQ KG
//! segments), its line in `<stage>/questions.jsonl`, and the stage's counters.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use distillery_core::schema::{SubgraphRef, SubgraphsBuilder, to_batch};
use distillery_core::summary::StageSummary;
use distillery_core::{SubgraphEdge, TableKind};
use distillery_hseq::KgEncoder;
use serde_json::json;

use super::ids::Joined;
use super::walk::{self, EdgeKey, Walk, canon};
use super::{EdgeRow, FastMap, FastSet, Labels, Q, SubgraphOptions, indexed, pages};
use crate::contract::stage_tag;
use crate::error::ExecError;
use crate::kit::fragments::Fragments;
use crate::parts::{PartWriters, WrittenPart};
use crate::store::Location;

/// The outputs of one task, written question by question.
pub(super) struct Emit<'a> {
    pub opts: &'a SubgraphOptions,
    pub stage: &'a str,
    pub out: &'a Location,
    pub staging: &'a str,
    pub labels: Labels,
    pub page_ids: HashMap<String, i64>,
    pub by_tag: BTreeMap<String, PartWriters>,
    pub lines: Fragments,
}

impl Emit<'_> {
    /// Writes `questions`, walked by `walk` (question `i` is the walk's `i`) with the edges
    /// `rows`.
    pub async fn questions(
        &mut self,
        questions: &[Q],
        walk: &Walk,
        rows: &impl Rows,
        summary: &mut StageSummary,
    ) -> Result<(), ExecError> {
        let (opts, stage) = (self.opts, self.stage);
        let names = &self.labels.names;
        // An index walk's rows name their ends by node number: the sets of nodes and ends
        // seen are then marks by number, cleared per question without hashing a key.
        let (mut seen_nodes, mut seen_ends) = (Seen::default(), Seen::default());
        // Row ids: `stable_id(&[stage, question, triple])`, the first two joined once.
        let mut row_ids = Joined::default();
        for (qi, q) in questions.iter().enumerate() {
            let mut kept = subgraph_of(walk, qi, opts, rows);
            rows.order(&mut kept.edges);
            let tag = stage_tag(&q.tag, stage);
            let w = (self.by_tag.entry(tag.clone()))
                .or_insert_with(|| PartWriters::new(self.out.clone(), self.staging, &tag));
            summary.add("topics", q.topics.len() as u64);
            if q.topics.is_empty() {
                summary.add("questions.without_topic", 1);
            }
            let mut batch = SubgraphsBuilder::default();
            // The rows as records, for the segments.
            let mut edges: Vec<SubgraphEdge> = Vec::new();
            let n = kept.edges.len();
            let mut node_set: FastSet<&str> = FastSet::default();
            let mut nodes = 0usize;
            seen_nodes.clear();
            seen_ends.clear();
            // A KG that states an edge twice gives it one row (one triple id).
            let mut ids: FastSet<&str> = FastSet::default();
            let mut covered_answers = vec![false; q.answers.len()];
            let mut topics_hit: HashSet<&str> = HashSet::new();
            let mut ends: FastSet<(&str, Option<&str>)> = FastSet::default();
            let numbered = rows.numbered();
            if !numbered {
                node_set.reserve(n);
                ends.reserve(n);
            }
            let answers: Vec<Answer> = q.answers.iter().map(|a| Answer::new(a)).collect();
            row_ids.prefix(&[stage, &q.id]);
            let canon_topics: Vec<(Cow<'_, str>, &str)> =
                q.topics.iter().map(|t| (canon(t), t.as_str())).collect();
            for &(at, hop) in &kept.edges {
                let r = rows.row(at);
                // An index edge is one row by its key already.
                if opts.index.is_none() && !ids.insert(&r.id) {
                    continue;
                }
                let entity = &*r.object_kind == "entity";
                let numbers = rows.ends(at);
                match numbers {
                    // Subjects and entity objects are entities: one index node per key.
                    Some([s, o]) => {
                        nodes += usize::from(seen_nodes.insert(s));
                        if entity {
                            nodes += usize::from(seen_nodes.insert(o));
                        }
                    }
                    None => {
                        node_set.insert(&r.subject);
                        if entity {
                            node_set.insert(&r.object);
                        }
                    }
                }
                let (sn, on) = (
                    name_of(&r.subject, &r.subject_name, names),
                    name_of(&r.object, &r.object_name, names),
                );
                // Each end (with the name it has here) is matched against the answers and topic
                // entities once (an index node once: its key and name are its own, and a match
                // made twice changes nothing).
                for (i, end) in [(&*r.subject, sn), (&*r.object, on)]
                    .into_iter()
                    .enumerate()
                {
                    let new = match numbers {
                        Some(numbers) => seen_ends.insert(numbers[i]),
                        None => ends.insert(end),
                    };
                    if !new {
                        continue;
                    }
                    let (key, n) = (canon(end.0), end.1);
                    for (a, hit) in answers.iter().zip(covered_answers.iter_mut()) {
                        if !*hit && (a.matches(&key) || n.is_some_and(|n| a.matches(n))) {
                            *hit = true;
                        }
                    }
                    for (t, raw) in &canon_topics {
                        if *t == key {
                            topics_hit.insert(raw);
                        }
                    }
                }
                let row = SubgraphRef {
                    id: &row_ids.id(&[&r.id]),
                    question_id: &q.id,
                    subject: &r.subject,
                    relation: &r.predicate,
                    object: &r.object,
                    object_kind: &r.object_kind,
                    hop,
                    subject_name: sn,
                    object_name: on,
                    triple_id: &r.id,
                    source: &r.dataset,
                };
                batch.push(row);
                if opts.segments {
                    edges.push(row.to_owned());
                }
            }
            let rows_out = batch.len() as u64;
            let nodes = if numbered { nodes } else { node_set.len() };
            let distinct: HashSet<&str> = q.topics.iter().map(String::as_str).collect();
            let wikipedia: BTreeMap<&str, &str> = q
                .given
                .iter()
                .zip(&q.topics)
                .filter_map(|(given, t)| {
                    Some((
                        given.as_str(),
                        self.labels.wikipedia.get(canon(t).as_ref())?.as_str(),
                    ))
                })
                .collect();
            let wikipedia_ids: BTreeMap<&str, i64> = wikipedia
                .iter()
                .filter_map(|(t, title)| {
                    Some((*t, *self.page_ids.get(pages::norm(title).as_ref())?))
                })
                .collect();
            summary.add("topics.wikipedia_ids", wikipedia_ids.len() as u64);
            let found = walk.topics_of(qi);
            summary.add("topics.missing", (distinct.len() - found) as u64);
            let covered = covered_answers.iter().filter(|&&c| c).count() as u64;
            summary.add("questions", 1);
            summary.records_in += 1;
            summary.add("edges", rows_out);
            summary.add("nodes", nodes as u64);
            summary.add("answers", q.answers.len() as u64);
            summary.add("answers.covered", covered);
            if covered > 0 {
                summary.add("questions.answer_covered", 1);
            }
            if kept.depth.is_some() {
                summary.add("questions.reduced", 1);
            }
            if kept.over_cap {
                summary.add("questions.over_cap", 1);
            }
            let line = json!({
                "question_id": q.id,
                "dataset_question_id": q.question_id,
                "dataset": q.dataset,
                "topic_entities": q.given,
                "topics_found": found,
                "topics_kept": topics_hit.len(),
                "topic_wikipedia": wikipedia,
                "topic_wikipedia_ids": wikipedia_ids,
                "nodes": nodes,
                "edges": rows_out,
                "connect_hop": kept.connect_hop,
                "depth": kept.depth,
                "answers": q.answers.len(),
                "answers_covered": covered,
            });
            self.lines
                .write(&q.tag, q.shard, &format!("{line}\n"))
                .await?;
            if opts.segments && !edges.is_empty() {
                let segs = segments_of(&edges);
                summary.add("segments", segs.len() as u64);
                w.write(
                    TableKind::Segments,
                    q.shard,
                    &to_batch(TableKind::Segments, &segs)?,
                )
                .await?;
            }
            if rows_out > 0 {
                summary.records_out += rows_out;
                w.write(TableKind::Subgraphs, q.shard, &batch.finish()?)
                    .await?;
            }
        }
        Ok(())
    }

    /// Closes the part writers: the parts written, in path order.
    pub async fn finish(self) -> Result<(Vec<WrittenPart>, Fragments), ExecError> {
        let mut written: Vec<WrittenPart> = Vec::new();
        for (_, w) in self.by_tag {
            written.extend(w.finish().await?);
        }
        written.sort_by(|a, b| a.rel.cmp(&b.rel));
        Ok((written, self.lines))
    }
}

/// The rows a walk took, by the keys it named them with.
pub(super) trait Rows {
    fn row(&self, at: EdgeKey) -> &EdgeRow;

    /// Puts one question's edges (by key) in the order its rows are written.
    fn order(&self, _edges: &mut Vec<(EdgeKey, u32)>) {}

    /// Whether rows name their ends by node number ([`Rows::ends`]).
    fn numbered(&self) -> bool {
        false
    }

    /// The numbers of edge `at`'s subject and object, where rows are [`Rows::numbered`]:
    /// equal numbers are the same node, the same key and name.
    fn ends(&self, _at: EdgeKey) -> Option<[u32; 2]> {
        None
    }
}

/// A scan's rows, by (part, row): written in that order.
impl Rows for FastMap<EdgeKey, EdgeRow> {
    fn row(&self, at: EdgeKey) -> &EdgeRow {
        &self[&at]
    }
}

/// An index walk numbers edges in the order its task read them: rows go in key order, so
/// any split of the questions over tasks or batches writes the same bytes.
impl Rows for indexed::IndexRows {
    fn row(&self, at: EdgeKey) -> &EdgeRow {
        indexed::IndexRows::row(self, at)
    }

    fn order(&self, edges: &mut Vec<(EdgeKey, u32)>) {
        indexed::IndexRows::order(self, edges)
    }

    fn numbered(&self) -> bool {
        true
    }

    fn ends(&self, at: EdgeKey) -> Option<[u32; 2]> {
        Some(indexed::IndexRows::ends(self, at))
    }
}

/// A set of small numbers cleared in constant time: a mark per number, the round that set
/// it; [`Seen::clear`] starts a new round.
pub(super) struct Seen {
    marks: Vec<u32>,
    round: u32,
}

impl Default for Seen {
    fn default() -> Seen {
        Seen {
            marks: Vec::new(),
            round: 1,
        }
    }
}

impl Seen {
    /// Adds `n`; whether it was not in the set.
    pub fn insert(&mut self, n: u32) -> bool {
        let i = n as usize;
        if i >= self.marks.len() {
            self.marks.resize((i + 1).max(self.marks.len() * 2), 0);
        }
        let new = self.marks[i] != self.round;
        self.marks[i] = self.round;
        new
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        if self.round == u32::MAX {
            self.marks.fill(0);
            self.round = 0;
        }
        self.round += 1;
    }
}

/// A node's name: the edge's own, else the KG entities' label of its key.
fn name_of<'a>(
    key: &str,
    own: &'a Option<Arc<str>>,
    names: &'a HashMap<String, String>,
) -> Option<&'a str> {
    // An index walk's rows carry their names and `names` is empty: no key to canonicalise.
    own.as_deref().or_else(|| {
        (!names.is_empty())
            .then(|| names.get(canon(key).as_ref()).map(String::as_str))
            .flatten()
    })
}

/// A gold answer as labels are compared with it: lowercase, runs of whitespace as one space.
struct Answer(String);

impl Answer {
    fn new(answer: &str) -> Answer {
        Answer(norm(answer).collect())
    }

    /// Whether `label` is this answer (case- and space-insensitively); stops at the first
    /// character that differs, without allocating.
    fn matches(&self, label: &str) -> bool {
        // Most labels differ at their first character: compared before the iterators are
        // built (both `None` for empty ones).
        let first = label.trim_start().chars().next();
        if first.and_then(|c| c.to_lowercase().next()) != self.0.chars().next() {
            return false;
        }
        norm(label).eq(self.0.chars())
    }
}

/// A label's characters as answers are compared: lowercase, runs of whitespace as one space.
fn norm(s: &str) -> impl Iterator<Item = char> + '_ {
    s.split_whitespace()
        .enumerate()
        .flat_map(|(i, w)| (i > 0).then_some(' ').into_iter().chain(w.chars()))
        .flat_map(char::to_lowercase)
}

/// What one question keeps after the cap.
struct Kept {
    edges: Vec<(EdgeKey, u32)>,
    connect_hop: Option<u32>,
    depth: Option<u32>,
    over_cap: bool,
}

fn subgraph_of(walk: &Walk, q: usize, opts: &SubgraphOptions, rows: &impl Rows) -> Kept {
    let nodes = walk.nodes_of(q);
    let edges = walk.edges_of(q);
    let connect_hop = (walk.topics_of(q) > 0)
        .then(|| walk::connect_hop(&nodes))
        .flatten();
    let cap = opts.max_nodes.unwrap_or(u64::MAX);
    let Some((kept, depth)) = walk::reduce(&nodes, opts.hops, cap) else {
        return Kept {
            edges,
            connect_hop,
            depth: None,
            over_cap: false,
        };
    };
    // An edge stays when both ends are kept nodes (a literal object follows its subject).
    let holds = |key: &str| walk.node_of(key).is_some_and(|n| kept.contains(&n));
    let edges = edges
        .into_iter()
        .filter(|(at, _)| {
            let r = rows.row(*at);
            holds(&r.subject) && (&*r.object_kind != "entity" || holds(&r.object))
        })
        .collect();
    Kept {
        edges,
        connect_hop,
        depth: Some(depth),
        over_cap: kept.len() as u64 > cap,
    }
}

/// The HSEQ KG segments of one question's subgraph, its edges in row order (by subject): each
/// triple's `source` is the question id, so two questions' roots never collide.
fn segments_of(edges: &[SubgraphEdge]) -> Vec<distillery_core::Segment> {
    let mut enc = KgEncoder::new();
    edges
        .iter()
        .flat_map(|e| enc.push(&e.edge_triple()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Answer, Seen, norm};

    #[test]
    fn answers_match_labels_as_normalised() {
        let slow = |a: &str, l: &str| norm(l).eq(Answer::new(a).0.chars());
        let cases = [
            ("Foo  Bar", "foo bar"),
            ("foo bar", " FOO\tbar "),
            ("foo bar", "xfoo bar"),
            ("foo", "Foo "),
            ("", ""),
            ("", "  "),
            ("", "a"),
            ("a", ""),
            ("İstanbul", "i\u{307}stanbul"),
            ("i\u{307}stanbul", "İSTANBUL"),
            ("istanbul", "İstanbul"),
            ("Émile", "émile"),
        ];
        for (a, l) in cases {
            assert_eq!(Answer::new(a).matches(l), slow(a, l), "{a:?} {l:?}");
        }
        assert!(Answer::new("Foo  Bar").matches(" FOO\tbar "));
        assert!(!Answer::new("foo").matches("bar"));
    }

    #[test]
    fn seen_is_a_set_per_round() {
        let mut s = Seen::default();
        assert!(s.insert(5) && !s.insert(5) && s.insert(0) && s.insert(1000));
        assert!(!s.insert(0) && !s.insert(1000));
        s.clear();
        assert!(s.insert(5) && s.insert(1000) && !s.insert(5));
        // The round counter wraps: marks of old rounds never read as the new one's.
        s.round = u32::MAX;
        assert!(s.insert(7) && !s.insert(7));
        s.clear();
        assert!(s.insert(7) && s.insert(5) && s.insert(1000) && !s.insert(7));
        for _ in 0..3 {
            s.clear();
            assert!(s.insert(7));
        }
    }
}
