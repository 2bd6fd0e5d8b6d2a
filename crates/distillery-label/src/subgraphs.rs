//! Questions' KG edges from a `subgraph` stage, instead of a whole KB in memory.
//!
//! A `subgraph` stage writes, per question, the edges of its topic entities' k-hop
//! neighbourhood (`subgraphs` rows, in row order) and the HSEQ KG segments of exactly those
//! edges. [`QuestionSubgraphs`] holds the rows of some questions (a task's shard) grouped by
//! question; [`QuestionSubgraphs::for_question`] gives a question its edges as triples with
//! the segment ids the subgraph stage's segments carry ([`kg_ids`] over the question's whole
//! edge list, encoded as that stage encodes it), keeping the edges within the question's hop
//! count ([`question_hops`]) up to a cap, nearest hops first.

use foldhash::{HashMap, HashMapExt};

use distillery_core::{Question, SubgraphEdge, Triple};

use crate::sh::{KgIds, kg_ids, question_hops};

/// One question's subgraph: its edges as triples, their segment ids and hops, in row order.
#[derive(Debug, Default)]
struct Subgraph {
    triples: Vec<Triple>,
    ids: Vec<KgIds>,
    hops: Vec<u32>,
}

/// The subgraphs of some questions, by question record id.
#[derive(Debug, Default)]
pub struct QuestionSubgraphs {
    by_question: HashMap<String, Subgraph>,
    edges: usize,
}

impl QuestionSubgraphs {
    /// Groups `subgraphs` rows by question, each question's rows kept in their order.
    pub fn new(rows: impl IntoIterator<Item = SubgraphEdge>) -> QuestionSubgraphs {
        let mut by_question: HashMap<String, Subgraph> = HashMap::new();
        let mut edges = 0;
        for r in rows {
            edges += 1;
            let g = by_question.entry(r.question_id.clone()).or_default();
            g.hops.push(r.hop);
            g.triples.push(r.edge_triple());
        }
        for g in by_question.values_mut() {
            g.ids = kg_ids(&g.triples);
        }
        QuestionSubgraphs { by_question, edges }
    }

    /// Edges held.
    pub fn len(&self) -> usize {
        self.edges
    }

    /// Whether no edge is held.
    pub fn is_empty(&self) -> bool {
        self.edges == 0
    }

    /// The edges of `q`'s subgraph within its hop count (capped by `max_hops`), at most
    /// `max_edges` (nearest hops first, row order within a hop), with their segment ids.
    pub fn for_question(
        &self,
        q: &Question,
        max_hops: u32,
        max_edges: usize,
    ) -> (Vec<Triple>, Vec<KgIds>) {
        let Some(g) = self.by_question.get(&q.id) else {
            return (Vec::new(), Vec::new());
        };
        let hops = question_hops(q, max_hops);
        let mut keep: Vec<usize> = (0..g.hops.len()).filter(|&i| g.hops[i] <= hops).collect();
        if keep.len() > max_edges {
            keep.sort_by_key(|&i| (g.hops[i], i));
            keep.truncate(max_edges);
            keep.sort_unstable();
        }
        (
            keep.iter().map(|&i| g.triples[i].clone()).collect(),
            keep.iter().map(|&i| g.ids[i]).collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_hseq::KgEncoder;

    fn row(q: &str, s: &str, r: &str, o: &str, hop: u32) -> SubgraphEdge {
        SubgraphEdge {
            id: format!("{q}{s}{r}{o}"),
            question_id: q.into(),
            subject: s.into(),
            relation: r.into(),
            object: o.into(),
            object_kind: "entity".into(),
            hop,
            subject_name: None,
            object_name: Some(format!("{o} name")),
            triple_id: format!("{:032x}", hop as u128 * 7 + s.len() as u128),
            source: "freebase".into(),
        }
    }

    fn question(id: &str, level: Option<&str>) -> Question {
        Question {
            id: id.into(),
            level: level.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn edges_by_question_and_hop_with_the_stage_segment_ids() {
        let rows = vec![
            row("q1", "m.a", "r1", "m.b", 1),
            row("q2", "m.x", "r1", "m.y", 1),
            row("q1", "m.b", "r2", "m.c", 2),
            row("q1", "m.a", "r3", "m.d", 1),
        ];
        let sg = QuestionSubgraphs::new(rows.clone());
        assert_eq!(sg.len(), 4);
        // What the subgraph stage writes as q1's segments: its edges encoded in row order.
        let q1: Vec<&SubgraphEdge> = rows.iter().filter(|r| r.question_id == "q1").collect();
        let mut enc = KgEncoder::new();
        let stage_ids: Vec<String> = q1
            .iter()
            .map(|r| enc.push(&r.edge_triple()).pop().unwrap().id)
            .collect();

        let (t, ids) = sg.for_question(&question("q1", Some("2-hop")), 3, 100);
        assert_eq!(
            t.iter().map(|t| t.object.as_str()).collect::<Vec<_>>(),
            ["m.b", "m.c", "m.d"]
        );
        let got: Vec<String> = ids.iter().map(|i| format!("{:032x}", i.triplet)).collect();
        assert_eq!(got, stage_ids);
        assert_eq!(t[0].object_name.as_deref(), Some("m.b name"));

        // A 1-hop question keeps the hop-1 edges, with the same ids as before.
        let (t1, ids1) = sg.for_question(&question("q1", Some("1-hop")), 3, 100);
        assert_eq!(
            t1.iter().map(|t| t.object.as_str()).collect::<Vec<_>>(),
            ["m.b", "m.d"]
        );
        assert_eq!(ids1[1].triplet, ids[2].triplet);
        // The cap keeps the nearest hops first, in row order.
        let (t2, _) = sg.for_question(&question("q1", None), 3, 2);
        assert_eq!(
            t2.iter().map(|t| t.object.as_str()).collect::<Vec<_>>(),
            ["m.b", "m.d"]
        );
        assert!(sg.for_question(&question("q9", None), 3, 100).0.is_empty());
    }
}
