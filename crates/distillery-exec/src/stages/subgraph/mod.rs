//! The `subgraph` stage: for every question of its QA inputs, the k-hop neighbourhood of its
//! topic entities in the knowledge graph of the input named by `kg`, as Hydra (seed 004)
//! explores Freebase and Wikidata, without a SPARQL server.
//!
//! A task takes one shard of the questions and walks all of their topic entities at once
//! ([`walk`]): one pass over the KG's `triples` parts per hop (its entity edges; the
//! `literals` parts too with the `literals` option), each edge looked up in the
//! frontier of every question, so the KG is read `hops` times whatever the number of
//! questions, never once per entity. Edges are followed in both directions, level by level:
//! a question's subgraph holds every edge that touches a node within `hops - 1` hops of one of
//! its topic entities. Hydra's filter is the default: relations `type.object.type`,
//! `type.object.name`, `common.*`, `freebase.*` and `*sameAs*` are not followed, `g.` nodes
//! are not reached (Hydra keeps `m.` entities), and literal objects are left out (`literals`
//! keeps them as leaves). Keys match across Freebase's `m.0abc` and FB15k's `/m/0abc`.
//!
//! With `index` (an `index` stage with `kinds` holding `kg`, or an index root), a task walks
//! that KG adjacency index instead ([`indexed`]): each pass reads only the edge runs of its
//! frontier's nodes (read in place from the index's mapped `adjacency.bin`), so its cost follows
//! the neighbourhoods walked, not the KG, and splitting the questions over more tasks adds no
//! scans of the graph. The rows and counters are the scan's (tested against it and against an
//! independent BFS); the index keeps one edge per (subject, relation, object, source).
//!
//! With `merge`, more KG inputs are walked with `kg` as one graph, an entity with a `same_as`
//! edge (default Wikidata's Freebase id, `P646`) being the node it names ([`crate::kit::same_as`]).
//!
//! With `max_nodes`, a subgraph over the cap gets Hydra's reduction: the nodes within `D` hops
//! of every topic entity and the edges between them, `D` from `hops` down to 1, the first that
//! fits ([`walk::reduce`]).
//!
//! Outputs, per question part (tag `<input>@<stage>`, the question's shard):
//! - `subgraphs`: one row per (question, edge): `question_id` (the question's record id),
//!   `subject`, `relation`, `object` (the KG's own keys), `hop`, names, the edge's `triple_id`
//!   and `source` dataset;
//! - `segments` (with `segments = true`): the HSEQ KG segments of each subgraph (a `subgraph`
//!   root per subject run, a `triplet` per edge), the triples' `source` set to the question id;
//! - `<stage>/questions.jsonl`: one line per question: topic entities found in the graph and
//!   kept after the reduction, their Wikipedia page titles (`topic_wikipedia`, from a Wikidata
//!   KG's sitelinks) and, with `wikipedia` naming a MediaWiki input, those pages' ids
//!   (`topic_wikipedia_ids`, [`pages`]), nodes, edges,
//!   `connect_hop` (the smallest `D` at which one node is within `D` hops of every topic entity),
//!   the reduction depth, and how many gold answers the subgraph holds (by key or name).
//!
//! Counters: `questions`, `questions.without_topic`, `topics`, `topics.missing` (not in the
//! graph: no edge the filter keeps),
//! `edges`, `nodes`, `questions.reduced`, `questions.over_cap`, `answers`, `answers.covered`,
//! `questions.answer_covered`, `kg.edges_scanned`, `kg.passes`, `kg.aliases` (keys merged
//! into another; like the `kg.` counters, summed over the tasks that have questions, and
//! `kg.passes` and `kg.edges_scanned` over an index walk's batches),
//! `topics.wikipedia_ids`,
//! `segments`.
//!
//! **Memory:** a task holds one batch of `walk_batch` questions at a time with the nodes their
//! walks reached and the edges they kept (an index walk also the key, kind and name of each
//! node its passes read), its outputs written before the next batch: a task's memory follows
//! its largest batch's neighbourhoods, not its question count. An index walk batches 128
//! questions by default at no extra read of the graph; a scan walks all of a task's questions
//! at once by default, since each batch streams the KG `hops` times (more `tasks` split it
//! the same way).

mod emit;
mod ids;
mod indexed;
mod pages;
pub mod walk;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, AsArray, StringArray};
use distillery_core::schema::from_batch;
use distillery_core::spec::{Format, StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Question, TableKind};
use distillery_index::version;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio_util::task::AbortOnDropHandle;
use tracing::{debug, info};

use self::emit::Emit;
use self::walk::{EdgeKey, EdgeRef, Filter, Pattern, Walk, canon};
use crate::contract::{Declared, MergeCx, Partitioning, RunCx, Stage, StageFuture, StageOutput};
use crate::error::ExecError;
use crate::kit::contexts::{parts_of, question_tags};
use crate::kit::fragments::{Fragments, concat};
use crate::kit::retrieval::{cache_dir, check_index, index_root};
use crate::kit::same_as::{Aliases, read_aliases};
use crate::parts::{WrittenPart, read_part_columns, read_part_rows};
use crate::store::Location;

fn default_hops() -> u32 {
    3
}
fn default_drop_relations() -> Vec<String> {
    [
        "type.object.type",
        "type.object.name",
        "common.*",
        "freebase.*",
        "*sameAs*",
    ]
    .map(String::from)
    .to_vec()
}
fn default_drop_entities() -> Vec<String> {
    vec!["g.*".to_string()]
}
fn yes() -> bool {
    true
}
fn default_same_as() -> Vec<String> {
    vec!["P646".to_string()]
}

/// `subgraph` stage options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubgraphOptions {
    /// The name of the knowledge graph input (freebase, wikidata, fb15k or metaqa-kb): its
    /// `triples` are walked (and its `literals` with `literals`), its `entities` name the nodes.
    /// Optional with `index`, which then is the graph.
    #[serde(default)]
    pub kg: Option<String>,
    /// Edges touching a node within `hops - 1` hops of a topic entity are kept (1 to 6).
    #[serde(default = "default_hops")]
    pub hops: u32,
    /// Hydra's reduction past this many nodes per question (none: every subgraph whole).
    #[serde(default)]
    pub max_nodes: Option<u64>,
    /// Relations never followed, in Freebase's dotted form (FB15k's `/a/b/c` is matched as
    /// `a.b.c`): `x` exact, `x*` prefix, `*x` suffix, `*x*` substring. Default: Hydra's.
    #[serde(default = "default_drop_relations")]
    pub drop_relations: Vec<String>,
    /// Nodes never reached (same patterns, on keys in the dotted form). Default: `g.*`, as
    /// Hydra keeps only `m.` Freebase entities.
    #[serde(default = "default_drop_entities")]
    pub drop_entities: Vec<String>,
    /// Keep edges to literal and IRI objects (the KG's `literals` table), as leaves.
    #[serde(default)]
    pub literals: bool,
    /// Also write each subgraph as HSEQ KG segments.
    #[serde(default = "yes")]
    pub segments: bool,
    /// More knowledge graph inputs walked with `kg` as one graph (Hydra merges Wikidata into
    /// Freebase): an entity with a `same_as` edge is the node that edge names, so a Wikidata
    /// entity with a Freebase id (`P646`) and that Freebase entity are one node, written under
    /// the Freebase key; each row keeps its edge's `source`.
    #[serde(default)]
    pub merge: Vec<String>,
    /// With `merge`: relations whose object is another key of the subject (`/m/0abc` or
    /// `m.0abc`); the first such edge of an entity, in part and row order, is taken.
    #[serde(default = "default_same_as")]
    pub same_as: Vec<String>,
    /// A MediaWiki input whose page ids the topic entities' Wikipedia titles (a Wikidata KG's
    /// sitelinks) resolve to, one redirect followed: `topic_wikipedia_ids` in the questions
    /// file.
    #[serde(default)]
    pub wikipedia: Option<String>,
    /// Walk a built KG adjacency index instead of scanning `kg`'s parts: the name of an
    /// `index` stage listed before this one with `kinds` holding `kg` (the version it built in
    /// this job), or an index root (path or URL; its `CURRENT` version unless
    /// `index_version` names one). Each pass then reads only its frontier's edges. The
    /// index's own `same_as` merges graphs; with `merge` naming the merged inputs, their
    /// `same_as` edges key the topic entities as the index keys them (a Wikidata QID as its
    /// Freebase mid). `kg` and `merge` still name the inputs whose entities give the topic
    /// entities' Wikipedia titles.
    #[serde(default)]
    pub index: Option<String>,
    /// The version of the index root `index` to read.
    #[serde(default)]
    pub index_version: Option<String>,
    /// The questions walked together: a task holds one batch's neighbourhoods at a time,
    /// written before the next batch. With `index`, default 128: batches cost no extra reads
    /// of the graph beyond the nodes they share. A scan walks all of a task's questions at
    /// once by default; with `walk_batch`, each batch scans the KG `hops` times more, so
    /// memory is bounded at that cost.
    #[serde(default)]
    pub walk_batch: Option<usize>,
}

/// Questions walked together over an index when `walk_batch` is not given.
const DEFAULT_WALK_BATCH: usize = 128;

impl SubgraphOptions {
    /// The KG inputs walked: `kg`, then `merge`.
    fn graphs(&self) -> Vec<String> {
        self.kg.iter().chain(&self.merge).cloned().collect()
    }
}

impl SubgraphOptions {
    fn filter(&self) -> Result<Filter, Vec<String>> {
        let mut errors = Vec::new();
        let mut parse = |v: &[String]| -> Vec<Pattern> {
            v.iter()
                .filter_map(|p| Pattern::parse(p).map_err(|e| errors.push(e)).ok())
                .collect()
        };
        let f = Filter {
            drop_relations: parse(&self.drop_relations),
            drop_entities: parse(&self.drop_entities),
            literals: self.literals,
        };
        if errors.is_empty() {
            Ok(f)
        } else {
            Err(errors)
        }
    }
}

/// The file of per-question lines.
fn questions_file(stage: &str) -> String {
    format!("{stage}/questions.jsonl")
}

type FastMap<K, V> = foldhash::HashMap<K, V>;
type FastSet<K> = foldhash::HashSet<K>;

/// The `subgraph` stage.
pub struct SubgraphStage;

impl Stage for SubgraphStage {
    type Options = SubgraphOptions;

    fn kind(&self) -> &'static str {
        "subgraph"
    }

    fn check(&self, o: &mut SubgraphOptions, cx: &mut StageCheck<'_, '_>) {
        if !(1..=6).contains(&o.hops) {
            cx.error("hops", "`hops` must be 1 to 6");
        }
        if o.max_nodes == Some(0) {
            cx.error("max_nodes", "`max_nodes` must be at least 1");
        }
        if let Err(errors) = o.filter() {
            for e in errors {
                cx.error("drop_relations", e);
            }
        }
        if o.kg.is_none() && o.index.is_none() {
            cx.error(
                "kg",
                "give `kg` (a KG input to scan) or `index` (a built KG index to walk)",
            );
        }
        for (n, g) in o.graphs().iter().enumerate() {
            let field = if n == 0 && o.kg.is_some() {
                "kg"
            } else {
                "merge"
            };
            match cx.inputs.iter().find(|i| &i.name == g) {
                None => cx.error(field, format!("`{g}` names no input")),
                Some(i) if i.format.is_qa() || i.format == Format::MediaWiki => {
                    let message = format!("`{g}` is a {} input, not a knowledge graph", i.format);
                    cx.error(field, message)
                }
                _ if o.graphs()[..n].contains(g) => {
                    cx.error(field, format!("`{g}` is named twice"));
                }
                _ => {}
            }
        }
        if o.walk_batch == Some(0) {
            cx.error("walk_batch", "`walk_batch` must be at least 1");
        }
        match &o.index {
            None if o.index_version.is_some() => cx.error(
                "index_version",
                "`index_version` needs `index` (a built index)",
            ),
            Some(name) => check_index(cx, name, o.index_version.is_some()),
            None => {}
        }
        if let Some(w) = &o.wikipedia {
            match cx.inputs.iter().find(|i| &i.name == w) {
                None => cx.error("wikipedia", format!("`{w}` names no input")),
                Some(i) if i.format != Format::MediaWiki => {
                    let message = format!("`{w}` is a {} input, not a MediaWiki dump", i.format);
                    cx.error("wikipedia", message)
                }
                _ => {}
            }
        }
        let graphs = o.graphs();
        let not_qa: Vec<String> = cx
            .stage_inputs
            .iter()
            .filter(|i| {
                !i.format.is_qa()
                    && !graphs.contains(&i.name)
                    && Some(&i.name) != o.wikipedia.as_ref()
            })
            .map(|i| format!("`{}` ({})", i.name, i.format))
            .collect();
        if !not_qa.is_empty() {
            cx.error(
                "",
                format!(
                    "the stage's inputs must be question sets: {}",
                    not_qa.join(", ")
                ),
            );
        }
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Questions
    }

    fn merges(&self) -> bool {
        true
    }

    fn outputs(&self, o: &SubgraphOptions, stage: &StageSpec) -> Declared {
        let mut tables = vec![TableKind::Subgraphs];
        if o.segments {
            tables.push(TableKind::Segments);
        }
        Declared {
            tables,
            files: vec![questions_file(&stage.name)],
        }
    }

    fn run<'a>(&'a self, o: &'a SubgraphOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run_stage(o, cx))
    }

    fn merge<'a>(&'a self, _o: &'a SubgraphOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(async move {
            let started = Instant::now();
            let name = questions_file(&cx.stage.name);
            let file = concat(cx.out, cx.dir, cx.shards, &name).await?;
            let mut summary = StageSummary::new(&cx.stage.name);
            summary.bytes_out = file.bytes;
            summary.seconds = started.elapsed().as_secs_f64();
            Ok(StageOutput {
                summary,
                files: vec![file],
                ..Default::default()
            })
        })
    }
}

/// A question as the walk needs it.
struct Q {
    id: String,
    question_id: String,
    dataset: String,
    /// The topic entities as walked (merged keys, see [`crate::kit::same_as`]).
    topics: Vec<String>,
    /// The topic entities as the question gives them.
    given: Vec<String>,
    answers: Vec<String>,
    /// The part it came from: its tag and shard name the outputs.
    tag: String,
    shard: u32,
}

/// An edge some question kept.
/// Strings are shared: an index walk hands out its node keys and names, not copies.
struct EdgeRow {
    id: String,
    dataset: Arc<str>,
    subject: Arc<str>,
    predicate: Arc<str>,
    object: Arc<str>,
    object_kind: Arc<str>,
    subject_name: Option<Arc<str>>,
    object_name: Option<Arc<str>>,
}

/// The columns of `triples` a pass reads, in the table's order.
const SCAN_COLUMNS: [&str; 4] = ["subject", "predicate", "object", "object_kind"];
/// The columns read once, after the passes, for the edges some question took.
const DETAIL_COLUMNS: [&str; 4] = ["id", "dataset", "subject_name", "object_name"];

fn strings<'b>(
    batch: &'b arrow::record_batch::RecordBatch,
    name: &str,
) -> Result<&'b StringArray, ExecError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>())
        .ok_or_else(|| ExecError::Task(format!("KG part without a string `{name}` column")))
}

fn opt(a: &StringArray, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.value(i).to_string())
}

/// Runs one task of the stage: the questions of its shard.
pub async fn run_stage(opts: &SubgraphOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (stage, out, staging, parts) = (cx.stage, cx.out, cx.dir, cx.parts);
    let filter = opts
        .filter()
        .map_err(|e| ExecError::Task(format!("stage `{}`: {}", stage.name, e.join("; "))))?;
    let started = Instant::now();
    let mut summary = StageSummary::with_counters(
        &stage.name,
        &[
            "questions",
            "questions.without_topic",
            "topics",
            "topics.missing",
            "edges",
            "nodes",
            "questions.reduced",
            "questions.over_cap",
            "answers",
            "answers.covered",
            "questions.answer_covered",
            "kg.edges_scanned",
            "kg.passes",
            "kg.aliases",
            "topics.wikipedia_ids",
            "segments",
        ],
    );

    let graphs = opts.graphs();
    // Edges to values (`literals`) are walked only when the stage keeps them as leaves.
    let mut kg_parts = parts_of(parts, TableKind::Triples, &graphs);
    let literal_parts = parts_of(parts, TableKind::Literals, &graphs);
    let mut questions = read_questions(out, parts, &stage.inputs, &mut summary).await?;
    // A task without questions reads no KG part at all.
    let aliases = if opts.merge.is_empty() || questions.is_empty() {
        Aliases::default()
    } else {
        // A `same_as` edge may be either kind: Wikidata's P646 is a string value.
        let paths: Vec<String> = kg_parts
            .iter()
            .chain(&literal_parts)
            .map(|(_, _, p)| p.path())
            .collect();
        read_aliases(out, &paths, &opts.same_as, cx.parallelism).await?
    };
    if opts.literals {
        kg_parts.extend(literal_parts);
    }
    summary.add("kg.aliases", aliases.len() as u64);
    let aliases = Arc::new(aliases);
    for q in questions.iter_mut().filter(|_| !aliases.is_empty()) {
        for t in &mut q.topics {
            if let Some(to) = Some(aliases.key(t)).filter(|k| k != t) {
                *t = to.to_string();
            }
        }
    }
    let sitelinks: Vec<String> = (cx.pipeline.inputs.iter())
        .filter(|i| i.format == Format::Wikidata && graphs.contains(&i.name))
        .map(|i| i.name.clone())
        .collect();
    let graphs = Graphs {
        all: &graphs,
        sitelinks: &sitelinks,
        scanned: opts.index.is_none(),
    };
    let mut emit = Emit {
        opts,
        stage: &stage.name,
        out,
        staging,
        labels: Labels::default(),
        page_ids: HashMap::new(),
        by_tag: BTreeMap::new(),
        lines: Fragments::new(out, staging, &questions_file(&stage.name)),
    };
    let filter = Arc::new(filter);
    let (mut walk_seconds, mut reached) = (0.0, 0);
    // A task without questions opens no index.
    if let Some(index) = opts.index.as_ref().filter(|_| !questions.is_empty()) {
        // An index walk's labels depend on the topic entities only: read once.
        let none = FastMap::default();
        let found =
            labels_and_pages(opts, &cx, graphs, &aliases, &none, &questions, &mut summary).await?;
        (emit.labels, emit.page_ids) = found;
        let dir = open_index(&cx, opts, index).await?;
        let batch = opts.walk_batch.unwrap_or(DEFAULT_WALK_BATCH);
        // Each batch's rows reuse the memory of the last one's.
        let mut spare = indexed::IndexRows::default();
        for chunk in questions.chunks(batch) {
            let t = Instant::now();
            let topics: Vec<Vec<String>> = chunk.iter().map(|q| q.topics.clone()).collect();
            let walk = Walk::new(&topics, opts.hops, &filter);
            let (walk, rows, read, passes) =
                walk_index(dir.clone(), walk, spare, filter.clone()).await?;
            summary.add("kg.passes", passes);
            summary.add("kg.edges_scanned", read.edges);
            (walk_seconds, reached) = (
                walk_seconds + t.elapsed().as_secs_f64(),
                reached + walk.reached(),
            );
            emit.questions(chunk, &walk, &rows, &mut summary).await?;
            spare = rows;
        }
    } else {
        // A scan walks all of a task's questions at once unless `walk_batch` splits them;
        // each batch then scans the KG `hops` times.
        let batch = opts.walk_batch.unwrap_or(usize::MAX);
        for chunk in questions.chunks(batch) {
            let t = Instant::now();
            let topics: Vec<Vec<String>> = chunk.iter().map(|q| q.topics.clone()).collect();
            let mut walk = Walk::new(&topics, opts.hops, &filter);
            let mut rows: FastMap<EdgeKey, EdgeRow> = FastMap::default();
            while walk.next_pass() {
                summary.add("kg.passes", 1);
                if walk.hop() == 1 {
                    summary.bytes_in += kg_parts.iter().map(|(_, _, p)| p.bytes).sum::<u64>();
                }
                scan_pass(
                    &cx,
                    &kg_parts,
                    &mut walk,
                    &filter,
                    &aliases,
                    &mut rows,
                    &mut summary,
                )
                .await?;
            }
            (walk_seconds, reached) = (
                walk_seconds + t.elapsed().as_secs_f64(),
                reached + walk.reached(),
            );
            let paths: Vec<String> = kg_parts.iter().map(|(_, _, p)| p.path()).collect();
            fetch_details(out, &paths, &mut rows, cx.parallelism).await?;
            let found =
                labels_and_pages(opts, &cx, graphs, &aliases, &rows, chunk, &mut summary).await?;
            (emit.labels, emit.page_ids) = found;
            emit.questions(chunk, &walk, &rows, &mut summary).await?;
        }
    }
    let (written, lines) = emit.finish().await?;
    summary.bytes_out = written.iter().map(|w| w.bytes).sum();
    summary.seconds = started.elapsed().as_secs_f64();
    info!(
        stage = %stage.name,
        questions = summary.records_in,
        edges = summary.records_out,
        reached,
        walk_seconds,
        "subgraphs done"
    );
    Ok(StageOutput {
        summary,
        parts: written,
        intermediate: lines.finish().await?,
        ..Default::default()
    })
}

/// The [`Labels`] of `rows` and of the questions' topic entities ([`node_labels`]), and the
/// page ids of the topics' Wikipedia titles with `wikipedia` naming a MediaWiki input.
async fn labels_and_pages(
    opts: &SubgraphOptions,
    cx: &RunCx<'_>,
    graphs: Graphs<'_>,
    aliases: &Aliases,
    rows: &FastMap<EdgeKey, EdgeRow>,
    questions: &[Q],
    summary: &mut StageSummary,
) -> Result<(Labels, HashMap<String, i64>), ExecError> {
    let (out, parts) = (cx.out, cx.parts);
    let labels = node_labels(out, parts, graphs, aliases, rows, questions, summary).await?;
    let page_ids = match &opts.wikipedia {
        Some(w) => {
            let titles = labels.wikipedia.values().cloned();
            pages::page_ids(out, parts, w, titles, summary).await?
        }
        None => HashMap::new(),
    };
    Ok((labels, page_ids))
}

/// One pass of the scan: every KG part read against a snapshot of the frontier, in
/// parallel; the edges that touch it are then taken in part and row order, so the result is
/// deterministic.
async fn scan_pass(
    cx: &RunCx<'_>,
    kg_parts: &[(String, u32, &WrittenPart)],
    walk: &mut Walk,
    filter: &Arc<Filter>,
    aliases: &Arc<Aliases>,
    rows: &mut FastMap<EdgeKey, EdgeRow>,
    summary: &mut StageSummary,
) -> Result<(), ExecError> {
    let shared = (
        cx.out.clone(),
        Arc::new(walk.frontier_keys()),
        filter.clone(),
        aliases.clone(),
    );
    let paths: Vec<(usize, String)> = kg_parts
        .iter()
        .enumerate()
        .map(|(n, (_, _, part))| (n, part.path()))
        .collect();
    let scans = paths.into_iter().map(move |(n, path)| {
        let (out, frontier, filter, aliases) = shared.clone();
        AbortOnDropHandle::new(tokio::spawn(async move {
            scan_part(&out, &path, n, &frontier, &filter, &aliases).await
        }))
    });
    let mut scans = futures::stream::iter(scans).buffered(cx.parallelism.max(1));
    while let Some(scan) = scans.next().await {
        let (hits, scanned) =
            scan.map_err(|e| ExecError::Task(format!("subgraph scan: {e}")))??;
        summary.add("kg.edges_scanned", scanned);
        for (at, row) in hits {
            let e = EdgeRef {
                subject: &row.subject,
                object: &row.object,
                object_is_node: &*row.object_kind == "entity",
            };
            if walk.visit(at, e, filter) {
                rows.entry(at).or_insert(row);
            }
        }
    }
    Ok(())
}

/// The `kg` directory of the KG index version `index` names, opened (downloaded once when
/// remote).
async fn open_index(
    cx: &RunCx<'_>,
    opts: &SubgraphOptions,
    index: &str,
) -> Result<std::path::PathBuf, ExecError> {
    let (root, version) = index_root(cx, index, opts.index_version.as_deref()).await?;
    let opened = version::open(&root, version.as_deref(), &cache_dir()).await?;
    if opened.manifest.kg.is_none() {
        return Err(ExecError::Task(format!(
            "stage `{}`: {} version {} has no KG index (build it with kinds = [\"kg\"])",
            cx.stage.name, root.display, opened.manifest.version
        )));
    }
    info!(stage = %cx.stage.name, index = %root.display, version = %opened.manifest.version, "subgraph walks a built kg index");
    Ok(opened.dir.join("kg"))
}

/// The walk of one batch of questions over the KG index in `dir`: the walk, the edges its
/// questions took, what it read and its passes.
async fn walk_index(
    dir: std::path::PathBuf,
    mut walk: Walk,
    mut rows: indexed::IndexRows,
    filter: Arc<Filter>,
) -> Result<(Walk, indexed::IndexRows, indexed::Read, u64), ExecError> {
    let task = tokio::task::spawn_blocking(move || {
        rows.clear();
        let mut graph = indexed::IndexGraph::open(&dir)?;
        graph.find(&mut walk, &filter)?;
        let mut passes = 0;
        while walk.next_pass() {
            passes += 1;
            graph.pass(&mut walk, &filter, &mut rows)?;
        }
        graph.finish(&mut rows);
        Ok::<_, ExecError>((walk, rows, graph.read(), passes))
    });
    let walked = AbortOnDropHandle::new(task)
        .await
        .map_err(|e| ExecError::Task(format!("subgraph walk: {e}")))??;
    let read = walked.2;
    debug!(
        edges_read = read.edges,
        nodes_read = read.nodes,
        "kg index walked"
    );
    Ok(walked)
}

/// One pass over one KG part: the edges the filter keeps that touch the frontier, each named
/// by (part number, row), and the number of rows read. Only the columns a walk needs are
/// decoded; [`fetch_details`] fills in the rest for the edges taken.
async fn scan_part(
    out: &Location,
    path: &str,
    n: usize,
    frontier: &foldhash::HashSet<Box<str>>,
    filter: &Filter,
    aliases: &Aliases,
) -> Result<(Vec<(EdgeKey, EdgeRow)>, u64), ExecError> {
    let mut hits = Vec::new();
    let mut row = 0usize;
    let mut stream = Box::pin(read_part_columns(out, path, &SCAN_COLUMNS).await?);
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let [s, p, o, kind] = SCAN_COLUMNS.map(|c| strings(&batch, c));
        let (s, p, o, kind) = (s?, p?, o?, kind?);
        for i in 0..batch.num_rows() {
            if !filter.keeps_edge(p.value(i), kind.value(i)) {
                continue;
            }
            let entity = kind.value(i) == "entity";
            let subject = aliases.key(s.value(i));
            let object = if entity {
                aliases.key(o.value(i))
            } else {
                o.value(i)
            };
            let touches = frontier.contains(canon(subject).as_ref())
                || (entity && frontier.contains(canon(object).as_ref()));
            if touches {
                hits.push((
                    (((n << 32) | (row + i)) as EdgeKey),
                    EdgeRow {
                        id: String::new(),
                        dataset: "".into(),
                        subject: subject.into(),
                        predicate: p.value(i).into(),
                        object: object.into(),
                        object_kind: kind.value(i).into(),
                        subject_name: None,
                        object_name: None,
                    },
                ));
            }
        }
        row += batch.num_rows();
    }
    Ok((hits, row as u64))
}

/// The id, dataset and names of the edges taken, one read of those columns of each part
/// that holds one, parts in parallel.
async fn fetch_details(
    out: &Location,
    paths: &[String],
    rows: &mut FastMap<EdgeKey, EdgeRow>,
    parallelism: usize,
) -> Result<(), ExecError> {
    type Detail = (EdgeKey, String, String, Option<String>, Option<String>);
    let mut wanted: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &at in rows.keys() {
        let (part, row) = ((at >> 32) as usize, (at & 0xffff_ffff) as usize);
        wanted.entry(part).or_default().push(row);
    }
    let jobs = wanted.into_iter().map(|(n, mut want)| {
        want.sort_unstable();
        let (out, path) = (out.clone(), paths[n].clone());
        AbortOnDropHandle::new(tokio::spawn(async move {
            let mut got: Vec<Detail> = Vec::with_capacity(want.len());
            let (mut row, mut next) = (0usize, 0usize);
            let mut stream = Box::pin(read_part_columns(&out, &path, &DETAIL_COLUMNS).await?);
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                let [id, dataset, sn, on] = DETAIL_COLUMNS.map(|c| strings(&batch, c));
                let (id, dataset, sn, on) = (id?, dataset?, sn?, on?);
                while next < want.len() && want[next] < row + batch.num_rows() {
                    let i = want[next] - row;
                    let v = (id.value(i).to_string(), dataset.value(i).to_string());
                    let at = ((n << 32) | want[next]) as EdgeKey;
                    got.push((at, v.0, v.1, opt(sn, i), opt(on, i)));
                    next += 1;
                }
                row += batch.num_rows();
            }
            Ok::<_, ExecError>(got)
        }))
    });
    let mut jobs = futures::stream::iter(jobs).buffered(parallelism.max(1));
    while let Some(got) = jobs.next().await {
        let got = got.map_err(|e| ExecError::Task(format!("subgraph details: {e}")))??;
        for (at, id, dataset, sn, on) in got {
            let r = rows.get_mut(&at).expect("a row taken by the walk");
            (r.id, r.dataset) = (id, dataset.into());
            (r.subject_name, r.object_name) = (sn.map(Into::into), on.map(Into::into));
        }
    }
    Ok(())
}

/// Reads the questions of the task's shard of every QA input, in part order.
async fn read_questions(
    out: &Location,
    parts: &[WrittenPart],
    inputs: &[String],
    summary: &mut StageSummary,
) -> Result<Vec<Q>, ExecError> {
    let mut v = Vec::new();
    for input in inputs {
        for (tag, qparts) in question_tags(parts, input) {
            for part in qparts {
                summary.bytes_in += part.bytes;
                let mut stream = Box::pin(read_part_rows(out, &part.path(), 1024).await?);
                while let Some(batch) = stream.next().await {
                    for q in from_batch::<Question>(TableKind::Questions, &batch?)? {
                        v.push(Q {
                            id: q.id,
                            question_id: q.question_id,
                            dataset: q.dataset,
                            topics: q.topic_entities.clone(),
                            given: q.topic_entities,
                            answers: q.answers,
                            tag: tag.clone(),
                            shard: part.shard,
                        });
                    }
                }
            }
        }
    }
    Ok(v)
}

/// What the KG's `entities` add: labels of the kept edges' nodes that the edges do not name,
/// and the Wikipedia page titles (Wikidata sitelinks) of the topic entities, by canonical key.
#[derive(Default)]
struct Labels {
    names: HashMap<String, String>,
    wikipedia: HashMap<String, String>,
}

/// The KG inputs [`node_labels`] may read.
#[derive(Clone, Copy)]
struct Graphs<'a> {
    all: &'a [String],
    /// Those with sitelinks (Wikidata inputs).
    sitelinks: &'a [String],
    /// Whether the walk was a scan (an index walk's rows carry the index's names: a node
    /// without one has none).
    scanned: bool,
}

/// Reads [`Labels`] from the KG's `entities`: of every graph when an edge lacks a name, else
/// only of the graphs with sitelinks (`sitelinks`, Wikidata inputs) for the topic entities'
/// titles; three columns of each part.
async fn node_labels(
    out: &Location,
    parts: &[WrittenPart],
    graphs: Graphs<'_>,
    aliases: &Aliases,
    rows: &FastMap<EdgeKey, EdgeRow>,
    questions: &[Q],
    summary: &mut StageSummary,
) -> Result<Labels, ExecError> {
    let mut want: HashSet<String> = HashSet::new();
    for r in rows
        .values()
        .filter(|_| graphs.scanned && !graphs.all.is_empty())
    {
        if r.subject_name.is_none() {
            want.insert(canon(&r.subject).into_owned());
        }
        if r.object_name.is_none() && &*r.object_kind == "entity" {
            want.insert(canon(&r.object).into_owned());
        }
    }
    let topics: HashSet<String> = questions
        .iter()
        .flat_map(|q| q.topics.iter().map(|t| canon(t).into_owned()))
        .collect();
    let mut labels = Labels::default();
    let read = if want.is_empty() {
        graphs.sitelinks
    } else {
        graphs.all
    };
    if (want.is_empty() && topics.is_empty()) || read.is_empty() {
        return Ok(labels);
    }
    const COLUMNS: [&str; 3] = ["key", "label", "wikipedia"];
    for (_, _, part) in parts_of(parts, TableKind::Entities, read) {
        summary.bytes_in += part.bytes;
        let mut stream = Box::pin(read_part_columns(out, &part.path(), &COLUMNS).await?);
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let [key, label, wikipedia] = COLUMNS.map(|c| strings(&batch, c));
            let (key, label, wikipedia) = (key?, label?, wikipedia?);
            for i in 0..batch.num_rows() {
                let key = canon(aliases.key(key.value(i)));
                if topics.contains(key.as_ref()) && wikipedia.is_valid(i) {
                    let title = wikipedia.value(i).to_string();
                    labels.wikipedia.entry(key.to_string()).or_insert(title);
                }
                if want.contains(key.as_ref()) && label.is_valid(i) {
                    let name = label.value(i).to_string();
                    labels.names.entry(key.into_owned()).or_insert(name);
                }
            }
        }
    }
    Ok(labels)
}
