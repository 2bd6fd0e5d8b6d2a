//! The question's hierarchical sequence S_h (HSEQ paper 000, 2.3 and 3.1).
//!
//! [`build_sh`] linearizes a question's context with the `distillery-hseq` adapters:
//! documents (HotpotQA/2Wiki/MuSiQue context paragraphs, TAT-QA paragraphs, HybridQA linked
//! passages) with [`encode_document_unsealed`] (no integrity hashes: S_h lives in memory
//! only), tables (HybridQA, TAT-QA) with [`encode_table`], KB
//! edges (MetaQA) with [`encode_kg`]. The segments are concatenated and sorted into the
//! stream order ρ ([`sort_stream`]), so containers come first (`document`, `table`,
//! `subgraph`, `section`), then `paragraph ≺ table_row ≺ sentence ≺ triplet`, and every
//! parent precedes its children. A document or table listed twice in the context is encoded
//! once (segment ids must stay unique).
//!
//! [`KbIndex`] answers MetaQA-style k-hop neighbourhood queries over a KB held in memory:
//! [`KbIndex::neighbourhood`] runs a breadth-first search from the topic entities over both
//! edge directions and returns the edges it reached (nearest hops first when the cap bites),
//! in the KB's own order so subject runs stay together for the KG encoder. Where the question
//! type tells on which side of its edges the topic entity stands ([`start_side`]: MetaQA), the
//! first hop takes only the edges with it on that side, so a film and a genre of the same name
//! are not mixed.
//! [`question_hops`] reads the hop count from the question's `level` (`"2-hop"`), capped by
//! the `max_hops` option.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

use distillery_core::{Question, Segment, Triple};
use distillery_hseq::HseqOptions;
use distillery_hseq::{KgEncoder, encode_document_unsealed, encode_kg, encode_table, sort_stream};

use crate::QuestionContext;

/// Default cap on the edges of one question's KB neighbourhood.
pub const DEFAULT_MAX_EDGES: usize = 256;

/// Builds S_h for a question: its context documents, tables and KB edges, encoded and sorted
/// into the stream order ρ (parents before children).
pub fn build_sh(ctx: &QuestionContext<'_>, opts: &HseqOptions) -> Vec<Segment> {
    // A document gives its root, sections, paragraphs (and gaps between them) and sentences:
    // reserved at once, so the segments are not moved again and again as the stream grows.
    let mut out = Vec::with_capacity(
        ctx.documents
            .iter()
            .map(|d| 1 + d.sections.len() + 2 * d.paragraphs.len() + d.sentences.len())
            .sum(),
    );
    let mut seen_sources: HashSet<&str> = HashSet::new();
    for d in ctx.documents {
        if seen_sources.insert(d.id.as_str()) {
            out.extend(encode_document_unsealed(d, opts));
        }
    }
    for t in ctx.tables {
        if seen_sources.insert(t.id.as_str()) {
            out.extend(encode_table(t, opts));
        }
    }
    if !ctx.triples.is_empty() {
        match ctx.kg_ids.len() == ctx.triples.len() {
            true => out.extend(encode_kg_as(ctx.triples, ctx.kg_ids)),
            false => out.extend(encode_kg(ctx.triples)),
        }
    }
    // Defensive: a segment id must appear once (ids derive from the source ids).
    let mut ids = HashSet::with_capacity(out.len());
    let keep: Vec<bool> = out.iter().map(|s| ids.insert(s.id.as_str())).collect();
    if keep.contains(&false) {
        let mut keep = keep.into_iter();
        out.retain(|_| keep.next().unwrap_or(true));
    }
    sort_stream(&mut out);
    out
}

/// The ids a KB edge's segments have in the `segments` table: the `triplet`'s id and `ord`
/// and its `subgraph` root's id, as the HSEQ stage gave them encoding the whole KB part the
/// edge is in ([`kg_ids`]). Ids are 32 hex digits, held as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KgIds {
    pub root: u128,
    pub triplet: u128,
    pub ord: u32,
}

fn id_number(id: &str) -> u128 {
    u128::from_str_radix(id, 16).expect("stable ids are 32 hex digits")
}

fn id_text(n: u128) -> String {
    format!("{n:032x}")
}

/// The segment ids of one KB part's edges, in order: what a fresh [`KgEncoder`] gives them
/// encoding the part, as the HSEQ stage does.
pub fn kg_ids(part: &[Triple]) -> Vec<KgIds> {
    let mut enc = KgEncoder::new();
    part.iter()
        .map(|t| {
            let triplet = enc.push(t).pop().expect("a triplet per edge");
            let root = enc.current_root().expect("a run is open");
            KgIds {
                root: id_number(root),
                triplet: id_number(&triplet.id),
                ord: triplet.ord,
            }
        })
        .collect()
}

/// Encodes some edges of a KB with the segment ids the HSEQ stage gave them ([`KgIds`]): each
/// edge's `triplet` under its own `subgraph` root, so a question's segment ids are rows of
/// the output's `segments` table (encoding the edges alone would number them by their place
/// among the question's edges, not the KB's).
fn encode_kg_as(triples: &[Triple], ids: &[KgIds]) -> Vec<Segment> {
    let mut enc = KgEncoder::new();
    let mut out = Vec::with_capacity(2 * triples.len());
    let (mut root, mut root_seg): (Option<u128>, Option<Segment>) = (None, None);
    for (t, g) in triples.iter().zip(ids) {
        let mut segs = enc.push(t);
        let mut triplet = segs.pop().expect("a triplet per edge");
        if let Some(r) = segs.pop() {
            root_seg = Some(r);
        }
        let root_id = id_text(g.root);
        if root != Some(g.root) {
            let mut r = root_seg.clone().expect("the first edge starts a root");
            r.id = root_id.clone();
            r.source_id = root_id.clone();
            out.push(r);
            root = Some(g.root);
        }
        triplet.id = id_text(g.triplet);
        triplet.ord = g.ord;
        triplet.parent = Some(root_id.clone());
        triplet.source_id = root_id;
        out.push(triplet);
    }
    out
}

/// The hop count of a question from its `level` (`"1-hop"`, `"2-hop"`, `"3-hop"`), capped by
/// `max_hops`; `max_hops` when the level does not name one.
pub fn question_hops(q: &Question, max_hops: u32) -> u32 {
    q.level
        .as_deref()
        .and_then(|l| l.trim().strip_suffix("-hop"))
        .and_then(|n| n.trim().parse::<u32>().ok())
        .map_or(max_hops, |h| h.min(max_hops))
}

/// Which edges of a start node the first hop of a neighbourhood takes (later hops take both
/// directions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StartSide {
    /// Every edge touching the start node.
    #[default]
    Both,
    /// The edges whose subject the start node is.
    Subject,
    /// The edges whose object the start node is.
    Object,
}

impl StartSide {
    /// Whether `node` stands on this side of edge `t` (an edge touching it, for `Both`).
    fn holds(self, t: &Triple, node: &str) -> bool {
        match self {
            StartSide::Both => true,
            StartSide::Subject => t.subject == node,
            StartSide::Object => t.object == node,
        }
    }
}

/// The side of its KB edges a question's topic entity stands on, where the question says.
///
/// MetaQA's question types name the path from the topic entity's kind (`movie_to_director`,
/// `actor_to_movie_to_year`, `tag_to_movie`), and every edge of its KB has a film as its
/// subject. So a `movie_…` question's topic entity is a subject, and any other kind's an
/// object. Its KB names entities by string: the film `Romance` and the genre `Romance` are
/// one node, and the side keeps the one the question asks about (a genre's thousands of
/// `has_genre` edges would otherwise crowd a film's own edges out of the capped
/// neighbourhood). [`StartSide::Both`] for other datasets and for questions without a type.
pub fn start_side(q: &Question) -> StartSide {
    if q.dataset != "metaqa" {
        return StartSide::Both;
    }
    match q
        .question_type
        .as_deref()
        .and_then(|t| t.trim().split_once("_to_"))
    {
        Some((kind, _)) if kind.eq_ignore_ascii_case("movie") => StartSide::Subject,
        Some((kind, _)) if !kind.is_empty() => StartSide::Object,
        _ => StartSide::Both,
    }
}

/// A KB in memory, indexed by node for k-hop neighbourhoods.
///
/// A node is named by a triple's `subject` / `object` key and also by its
/// `subject_name` / `object_name` when the triple has one; lookups ignore case (MetaQA
/// questions and KB lines do not always agree on case), unless a node's key is the name
/// exactly as given: then only the nodes so keyed are taken. With a [`StartSide`], only the
/// nodes with an edge on that side are looked at first.
#[derive(Debug, Default)]
pub struct KbIndex {
    triples: Vec<Triple>,
    /// Each triple's segment ids (empty when built by [`KbIndex::new`]).
    ids: Vec<KgIds>,
    /// Lower-cased node key or name → node key.
    names: HashMap<String, Vec<String>>,
    /// Node key → indices of the triples touching it (as subject or object), ascending.
    edges: HashMap<String, Vec<usize>>,
}

impl KbIndex {
    /// Indexes the triples (kept in the given order, which is the output order).
    pub fn new(triples: Vec<Triple>) -> KbIndex {
        let mut names: HashMap<String, Vec<String>> = HashMap::new();
        let mut edges: HashMap<String, Vec<usize>> = HashMap::new();
        let mut add_name = |name: &str, key: &str| {
            if name.is_empty() {
                return;
            }
            let v = names.entry(name.to_lowercase()).or_default();
            if !v.iter().any(|k| k == key) {
                v.push(key.to_string());
            }
        };
        for (i, t) in triples.iter().enumerate() {
            add_name(&t.subject, &t.subject);
            if let Some(n) = &t.subject_name {
                add_name(n, &t.subject);
            }
            add_name(&t.object, &t.object);
            if let Some(n) = &t.object_name {
                add_name(n, &t.object);
            }
            edges.entry(t.subject.clone()).or_default().push(i);
            if t.object != t.subject {
                edges.entry(t.object.clone()).or_default().push(i);
            }
        }
        KbIndex {
            triples,
            ids: Vec::new(),
            names,
            edges,
        }
    }

    /// Indexes the triples of a KB input's parts, in part order, with each triple's segment
    /// ids ([`kg_ids`] of its part). Memory: the triples, plus 48 bytes of ids an edge.
    pub fn from_parts(parts: Vec<(Vec<Triple>, Vec<KgIds>)>) -> KbIndex {
        let mut ids = Vec::with_capacity(parts.iter().map(|(_, i)| i.len()).sum());
        let mut triples = Vec::with_capacity(ids.capacity());
        for (t, i) in parts {
            assert_eq!(t.len(), i.len(), "one KgIds per triple");
            triples.extend(t);
            ids.extend(i);
        }
        let mut kb = KbIndex::new(triples);
        kb.ids = ids;
        kb
    }

    /// Number of triples held.
    pub fn len(&self) -> usize {
        self.triples.len()
    }

    /// True when no triple is held.
    pub fn is_empty(&self) -> bool {
        self.triples.is_empty()
    }

    /// Whether an entity (key or name, any ASCII case) is a node of the KB.
    pub fn contains(&self, entity: &str) -> bool {
        self.names.contains_key(&entity.trim().to_lowercase())
    }

    /// The edges within `hops` hops of the entities, both directions.
    ///
    /// Breadth-first: hop 1 takes every edge touching a start node (in KB order, start nodes
    /// in the given order), hop 2 every new edge touching a node reached by hop 1, and so on.
    /// At most `max_edges` edges are taken, nearest hops first, so the cap drops the far edges.
    /// The result is in KB order (the order given to [`KbIndex::new`]), deterministic, without
    /// duplicates. Unknown entities are ignored; no known entity gives an empty result.
    pub fn neighbourhood(&self, entities: &[String], hops: u32, max_edges: usize) -> Vec<Triple> {
        self.neighbourhood_with_ids(entities, StartSide::Both, hops, max_edges)
            .0
    }

    /// [`KbIndex::neighbourhood`] whose first hop takes the start nodes' edges on `side`
    /// only, with the edges' segment ids (empty when the index has none: built by
    /// [`KbIndex::new`]).
    pub fn neighbourhood_with_ids(
        &self,
        entities: &[String],
        side: StartSide,
        hops: u32,
        max_edges: usize,
    ) -> (Vec<Triple>, Vec<KgIds>) {
        let reached = self.reach(entities, side, hops, max_edges);
        let ids = match self.ids.is_empty() {
            true => Vec::new(),
            false => reached.iter().map(|&i| self.ids[i]).collect(),
        };
        let triples = reached
            .into_iter()
            .map(|i| self.triples[i].clone())
            .collect();
        (triples, ids)
    }

    /// The indexes of the edges [`KbIndex::neighbourhood`] returns, ascending.
    fn reach(
        &self,
        entities: &[String],
        side: StartSide,
        hops: u32,
        max_edges: usize,
    ) -> Vec<usize> {
        let mut visited: HashSet<&str> = HashSet::new();
        let mut frontier: Vec<&str> = Vec::new();
        for e in entities {
            let e = e.trim();
            if let Some(keys) = self.names.get(&e.to_lowercase()) {
                // The nodes with an edge on the start side (all of them for `Both`); among
                // those, a node named exactly as given wins over those that differ in case
                // (MetaQA's movie `Ninja` over its tag `ninja`).
                let keys: Vec<&String> =
                    keys.iter().filter(|k| self.has_edge_on(k, side)).collect();
                let exact = keys.iter().any(|k| *k == e);
                for k in keys.into_iter().filter(|k| !exact || *k == e) {
                    if visited.insert(k.as_str()) {
                        frontier.push(k.as_str());
                    }
                }
            }
        }
        let mut taken: Vec<usize> = Vec::new();
        let mut taken_set: HashSet<usize> = HashSet::new();
        'hops: for hop in 0..hops {
            let mut next: Vec<&str> = Vec::new();
            for node in &frontier {
                let Some(ix) = self.edges.get(*node) else {
                    continue;
                };
                for &i in ix {
                    if taken_set.contains(&i) {
                        continue;
                    }
                    let t = &self.triples[i];
                    if hop == 0 && !side.holds(t, node) {
                        continue;
                    }
                    if taken.len() >= max_edges {
                        break 'hops;
                    }
                    taken_set.insert(i);
                    taken.push(i);
                    for other in [t.subject.as_str(), t.object.as_str()] {
                        if visited.insert(other) {
                            next.push(other);
                        }
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        taken.sort_unstable();
        taken
    }

    /// Whether node `key` has an edge on `side` (any edge for [`StartSide::Both`]).
    fn has_edge_on(&self, key: &str, side: StartSide) -> bool {
        self.edges
            .get(key)
            .is_some_and(|ix| ix.iter().any(|&i| side.holds(&self.triples[i], key)))
    }

    /// The neighbourhood of a question with the edges' segment ids: its topic entities,
    /// [`question_hops`] hops, the first one from the [`start_side`] of the question.
    pub fn for_question_with_ids(
        &self,
        q: &Question,
        max_hops: u32,
        max_edges: usize,
    ) -> (Vec<Triple>, Vec<KgIds>) {
        self.neighbourhood_with_ids(
            &q.topic_entities,
            start_side(q),
            question_hops(q, max_hops),
            max_edges,
        )
    }

    /// [`KbIndex::for_question_with_ids`] without the ids.
    pub fn for_question(&self, q: &Question, max_hops: u32, max_edges: usize) -> Vec<Triple> {
        self.for_question_with_ids(q, max_hops, max_edges).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, p: &str, o: &str) -> Triple {
        Triple {
            subject: s.into(),
            predicate: p.into(),
            object: o.into(),
            object_kind: "entity".into(),
            subject_name: Some(s.into()),
            object_name: Some(o.into()),
            ..Default::default()
        }
    }

    #[test]
    fn an_exact_name_wins_over_one_that_differs_in_case() {
        let kb = KbIndex::new(vec![
            t("Ninja Assassin", "has_tags", "ninja"),
            t("Ninja", "directed_by", "Dir N"),
        ]);
        let objects = |e: &str| -> Vec<String> {
            kb.neighbourhood(&[e.to_string()], 1, 10)
                .into_iter()
                .map(|t| t.object)
                .collect()
        };
        assert_eq!(objects("Ninja"), ["Dir N"]);
        assert_eq!(objects("ninja"), ["ninja"]);
        // No node keyed exactly so: every case counts, as before.
        assert_eq!(objects("NINJA"), ["ninja", "Dir N"]);
    }

    #[test]
    fn kb_edges_keep_the_segment_ids_of_their_part() {
        // Two parts, as the HSEQ stage encodes them; in the first, Film A's edges are two
        // runs (another subject's edge between them).
        let parts = vec![
            vec![
                t("Film A", "directed_by", "Dir X"),
                t("Film Z", "directed_by", "Dir Q"),
                t("Film A", "starred_actors", "Actor Y"),
                t("Film B", "starred_actors", "Actor Y"),
            ],
            vec![
                t("Film C", "directed_by", "Dir X"),
                t("Film C", "starred_actors", "Actor Y"),
            ],
        ];
        let table: Vec<Segment> = parts.iter().flat_map(|p| encode_kg(p)).collect();
        let by_id: HashMap<&str, &Segment> = table.iter().map(|s| (s.id.as_str(), s)).collect();
        let kb = KbIndex::from_parts(
            parts
                .into_iter()
                .map(|p| {
                    let ids = kg_ids(&p);
                    (p, ids)
                })
                .collect(),
        );
        // Two hops from Actor Y reach both of Film A's runs: adjacent among the question's
        // edges, they keep their two roots.
        let (edges, ids) =
            kb.neighbourhood_with_ids(&["Actor Y".to_string()], StartSide::Both, 2, 100);
        assert_eq!((edges.len(), ids.len()), (5, 5));
        let q = Question::default();
        let sh = |kg_ids: &[KgIds]| {
            build_sh(
                &QuestionContext {
                    question: &q,
                    documents: &[],
                    tables: &[],
                    triples: &edges,
                    kg_ids,
                },
                &HseqOptions::default(),
            )
        };
        let with = sh(&ids);
        assert_eq!(with.iter().filter(|s| s.level == "triplet").count(), 5);
        let roots: Vec<&str> = with
            .iter()
            .filter(|s| s.level == "subgraph")
            .map(|s| s.content.as_str())
            .collect();
        assert_eq!(roots, ["Film A", "Film A", "Film B", "Film C"]);
        for s in &with {
            let row = by_id
                .get(s.id.as_str())
                .unwrap_or_else(|| panic!("{} ({}) is no row of the table", s.id, s.content));
            assert_eq!(
                (&s.level, &s.parent, &s.content, s.ord, &s.uri),
                (&row.level, &row.parent, &row.content, row.ord, &row.uri)
            );
        }
        // Numbered among themselves, the edges get ids the table does not have.
        assert!(sh(&[]).iter().any(|s| !by_id.contains_key(s.id.as_str())));
        // An index built without parts has no ids to give.
        let plain = KbIndex::new(edges.clone());
        assert!(
            plain
                .neighbourhood_with_ids(&["Actor Y".to_string()], StartSide::Both, 1, 100)
                .1
                .is_empty()
        );
    }

    fn kb() -> KbIndex {
        KbIndex::new(vec![
            t("Film A", "directed_by", "Dir X"),
            t("Film A", "release_year", "1999"),
            t("Film B", "directed_by", "Dir X"),
            t("Film B", "starred_actors", "Actor Y"),
            t("Film C", "starred_actors", "Actor Y"),
            t("Film D", "directed_by", "Dir Z"),
        ])
    }

    #[test]
    fn hops_expand_both_directions() {
        let kb = kb();
        let one = kb.neighbourhood(&["film a".to_string()], 1, 100);
        assert_eq!(one.len(), 2);
        let two = kb.neighbourhood(&["Film A".to_string()], 2, 100);
        let preds: Vec<_> = two.iter().map(|t| t.subject.as_str()).collect();
        assert_eq!(preds, ["Film A", "Film A", "Film B"]);
        let three = kb.neighbourhood(&["Film A".to_string()], 3, 100);
        assert_eq!(three.len(), 4);
        assert!(
            three
                .iter()
                .all(|t| t.subject != "Film D" && t.subject != "Film C")
        );
        let four = kb.neighbourhood(&["Film A".to_string()], 4, 100);
        assert_eq!(four.len(), 5);
    }

    #[test]
    fn cap_keeps_nearest_and_unknown_is_empty() {
        let kb = kb();
        let capped = kb.neighbourhood(&["Film A".to_string()], 3, 3);
        assert_eq!(capped.len(), 3);
        assert_eq!(capped[2].subject, "Film B");
        assert!(kb.neighbourhood(&["Nope".to_string()], 3, 10).is_empty());
        assert!(kb.contains("dir x"));
    }

    #[test]
    fn a_metaqa_question_type_picks_the_side_of_the_first_hop() {
        // The film `Romance` and the genre `Romance`: one node, two entities.
        let kb = KbIndex::new(vec![
            t("A Cruel Romance", "has_genre", "Romance"),
            t("Romance", "directed_by", "Catherine Breillat"),
            t("Love Happens", "has_genre", "Romance"),
            t("Love Happens", "directed_by", "Brandon Camp"),
            t("Romance", "release_year", "1999"),
        ]);
        let q = |qtype: Option<&str>, level: &str| Question {
            dataset: "metaqa".into(),
            topic_entities: vec!["Romance".into()],
            question_type: qtype.map(str::to_string),
            level: Some(level.into()),
            ..Default::default()
        };
        let objects = |q: &Question| -> Vec<String> {
            kb.for_question(q, 3, 100)
                .into_iter()
                .map(|t| format!("{} {}", t.subject, t.object))
                .collect()
        };
        assert_eq!(
            objects(&q(Some("movie_to_director"), "1-hop")),
            ["Romance Catherine Breillat", "Romance 1999"]
        );
        assert_eq!(
            objects(&q(Some("genre_to_movie"), "1-hop")),
            ["A Cruel Romance Romance", "Love Happens Romance"]
        );
        // Later hops go both ways: the genre's films, then their other edges.
        assert_eq!(
            objects(&q(Some("genre_to_movie_to_director"), "2-hop")),
            [
                "A Cruel Romance Romance",
                "Love Happens Romance",
                "Love Happens Brandon Camp"
            ]
        );
        // The name as the question writes it is a film, but the question asks about the tag:
        // the tag, which differs in case, is the node on that side.
        let tags = KbIndex::new(vec![
            t("Dreams", "directed_by", "Akira Kurosawa"),
            t("Paprika", "has_tags", "dreams"),
        ]);
        let edges = |qtype: &str, entity: &str| -> Vec<String> {
            let mut question = q(Some(qtype), "1-hop");
            question.topic_entities = vec![entity.into()];
            tags.for_question(&question, 3, 100)
                .into_iter()
                .map(|t| format!("{} {}", t.subject, t.object))
                .collect()
        };
        assert_eq!(edges("tag_to_movie", "Dreams"), ["Paprika dreams"]);
        assert_eq!(
            edges("Movie_to_director", "dreams"),
            ["Dreams Akira Kurosawa"]
        );
        // No type, or another dataset: both sides, as before.
        assert_eq!(objects(&q(None, "1-hop")).len(), 4);
        let mut other = q(Some("movie_to_director"), "1-hop");
        other.dataset = "cwq".into();
        assert_eq!(start_side(&other), StartSide::Both);
        assert_eq!(objects(&other).len(), 4);
    }

    #[test]
    fn hops_from_level() {
        let mut q = Question {
            level: Some("2-hop".into()),
            ..Default::default()
        };
        assert_eq!(question_hops(&q, 3), 2);
        assert_eq!(question_hops(&q, 1), 1);
        q.level = None;
        assert_eq!(question_hops(&q, 3), 3);
    }
}
