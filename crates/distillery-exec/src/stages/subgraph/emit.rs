//! Writing walked questions: each question's kept edges as `subgraphs` rows (and HSEQ KG
//! segments), its line in `<stage>/questions.jsonl`, and the stage's counters.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use distillery_core::id::stable_id;
use distillery_core::schema::{SubgraphRef, SubgraphsBuilder, to_batch};
use distillery_core::summary::StageSummary;
use distillery_core::{SubgraphEdge, TableKind};
use distillery_hseq::KgEncoder;
use serde_json::json;

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
            let mut node_set: FastSet<&str> =
                FastSet::with_capacity_and_hasher(n, Default::default());
            // A KG that states an edge twice gives it one row (one triple id).
            let mut ids: FastSet<&str> = FastSet::default();
            let mut covered_answers = vec![false; q.answers.len()];
            let mut topics_hit: HashSet<&str> = HashSet::new();
            let mut ends: FastSet<(&str, Option<&str>)> =
                FastSet::with_capacity_and_hasher(n, Default::default());
            let answers: Vec<Answer> = q.answers.iter().map(|a| Answer::new(a)).collect();
            let canon_topics: Vec<(Cow<'_, str>, &str)> =
                q.topics.iter().map(|t| (canon(t), t.as_str())).collect();
            for &(at, hop) in &kept.edges {
                let r = rows.row(at);
                // An index edge is one row by its key already.
                if opts.index.is_none() && !ids.insert(&r.id) {
                    continue;
                }
                node_set.insert(&r.subject);
                if &*r.object_kind == "entity" {
                    node_set.insert(&r.object);
                }
                let (sn, on) = (
                    name_of(&r.subject, &r.subject_name, names),
                    name_of(&r.object, &r.object_name, names),
                );
                // Each end (with the name it has here) is matched against the answers and topic
                // entities once.
                for end in [(&*r.subject, sn), (&*r.object, on)] {
                    if !ends.insert(end) {
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
                    id: &stable_id(&[stage, &q.id, &r.id]),
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
            summary.add("nodes", node_set.len() as u64);
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
                "nodes": node_set.len(),
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
}

/// A node's name: the edge's own, else the KG entities' label of its key.
fn name_of<'a>(
    key: &str,
    own: &'a Option<Arc<str>>,
    names: &'a HashMap<String, String>,
) -> Option<&'a str> {
    own.as_deref()
        .or_else(|| names.get(canon(key).as_ref()).map(String::as_str))
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
