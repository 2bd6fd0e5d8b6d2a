//! The `index` stage: the staged corpus of its inputs as a new version of an index root —
//! passages, BM25 (tantivy), dense vectors (usearch) and a KG adjacency index, any subset —
//! switched in at once through the root's `CURRENT` (see [`distillery_index::version`]).
//!
//! Passages come from the inputs' documents (unit `paragraph` or `sentence`), their HSEQ
//! segments (`segment`, after an `hseq` stage) or their triples (`triple`); the KG from every
//! `triples` and `literals` part of the inputs, read or extracted, named and aliased by their
//! `entities`; with `same_as` the inputs' graphs are merged into one ([`crate::kit::same_as`]).
//! With `corpus`, passages and KG come from a corpus root instead ([`crate::kit::corpus_feed`]):
//! the passages of the pages changed since the corpus version the index was built from, the
//! KG carried on from the previous version with the Wikidata pages changed since. With `incremental = true` the build diffs
//! its passages against the version `CURRENT` names and rebuilds only what changed. A build
//! whose input and settings equal those of `CURRENT`'s version (its fingerprint) keeps that
//! version (`versions.kept`), so a rerun writes nothing new.
//!
//! The root is not part of the job's output: the version is switched in when the task ends,
//! not when the job publishes (a version is whole on its own). The output gets
//! `indexes/<stage>.json`: the version's manifest and its root. One task builds the index
//! (`shards` cut the index, not the task).

use std::time::Instant;

use distillery_core::spec::{Pipeline, StageCheck, StageSpec};
use distillery_core::summary::{ManifestFile, StageSummary};
use distillery_core::{Document, Entity, Record, Segment, TableKind, Triple};
use distillery_index::build::{BuildSpec, Built, Spool, build};
use distillery_index::cache::EmbeddingCache;
use distillery_index::kg::{self, KgBuilder, KgEdge};
use distillery_index::passage::{self, Unit};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::contract::{Declared, Reads, RunCx, Stage, StageFuture, StageOutput};
use crate::error::ExecError;
use crate::kit::corpus_feed::Feed;
use crate::kit::embedding::{self, EmbeddingOptions};
use crate::kit::retrieval::root_of;
use crate::kit::rows::{each_row, input_parts};
use crate::kit::same_as::{Aliases, canon, read_aliases};
use crate::parts::WrittenPart;
use crate::store::open_location;

/// An index kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// BM25 with tantivy.
    Bm25,
    /// Embeddings and a usearch HNSW index.
    Dense,
    /// The triples as an adjacency index.
    Kg,
}

/// Options of an `index` stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IndexOptions {
    /// The indexes to build, any of `bm25`, `dense` and `kg`; one version holds them all.
    #[serde(default = "default_kinds")]
    pub kinds: Vec<IndexKind>,
    /// The index root (path or URL). Default: `<output>/index`.
    #[serde(default)]
    pub root: Option<String>,
    /// What a passage is: `paragraph`, `sentence`, `segment` (HSEQ segments) or `triple`.
    #[serde(default)]
    pub unit: Unit,
    /// Build from the version `CURRENT` names: diff passages by id and content hash, embed
    /// only new content, rebuild only the shards that changed, apply deletes.
    #[serde(default)]
    pub incremental: bool,
    /// Shards of the BM25 and dense indexes, by passage id (at least; see
    /// `max_shard_passages`). A shard's passages and vectors are held in memory while it is
    /// built. An incremental build keeps the previous count, or builds in full when the
    /// count changes.
    #[serde(default = "default_shards")]
    pub shards: u32,
    /// Passages per shard past which the build doubles its shards (up to 64), when `shards`
    /// is a power of two (1, 2, 4, ... 64; other counts stay fixed); 0: never.
    #[serde(default = "default_max_shard_passages")]
    pub max_shard_passages: u64,
    /// Versions kept under the root (the current one always is).
    #[serde(default = "default_keep")]
    pub keep_versions: usize,
    /// The embedding model of a `dense` index.
    #[serde(default)]
    pub embedding: Option<EmbeddingOptions>,
    /// Relations whose object is another key of the subject (Wikidata's Freebase id, `P646`):
    /// with one, the KG index takes its inputs' graphs as one, as Hydra merges Wikidata into
    /// Freebase: an entity with such an edge (its first, in part and row order) is written
    /// under the key the edge names (`Q22` as `m.06q1r`), its names and aliases too, so both
    /// graphs' edges meet at one node, each keeping its `source`; every key is then written in
    /// Freebase's dotted form (FB15k's `/m/x` as `m.x`). Empty (the default): no merge, keys
    /// as the inputs write them.
    #[serde(default)]
    pub same_as: Vec<String>,
    /// A corpus root (path or URL, written by a `corpus` stage) whose current version the
    /// passages come from instead of the inputs' documents (units `paragraph` and
    /// `sentence`; `segment` reads the segments of a corpus stage with `segments`). With `incremental`, a build from an index made from an earlier version of
    /// the corpus reads only the pages changed since; one made from the current version is
    /// kept as it is. A `kg` index is built from the corpus's Wikidata pages (kept by a
    /// `mediawiki` input's `entity_documents`): the previous graph carried on with the pages
    /// changed since, or every page when there is no previous graph.
    #[serde(default)]
    pub corpus: Option<String>,
}

fn default_kinds() -> Vec<IndexKind> {
    vec![IndexKind::Bm25]
}

fn default_shards() -> u32 {
    1
}

fn default_max_shard_passages() -> u64 {
    1_000_000
}

fn default_keep() -> usize {
    3
}

/// The `index` stage.
pub struct IndexStage;

impl Stage for IndexStage {
    type Options = IndexOptions;

    fn kind(&self) -> &'static str {
        "index"
    }

    fn check(&self, o: &mut IndexOptions, cx: &mut StageCheck<'_, '_>) {
        if o.kinds.is_empty() {
            cx.error("kinds", "name at least one of `bm25`, `dense`, `kg`");
        }
        let needs_passages = o.kinds.iter().any(|k| *k != IndexKind::Kg);
        if o.kinds.contains(&IndexKind::Dense) && o.embedding.is_none() {
            cx.error(
                "embedding",
                "a `dense` index needs `embedding = { model = ... }`",
            );
        }
        if let Some(e) = &o.embedding {
            let gpus = EmbeddingOptions::stage_gpus(cx);
            for problem in e.problems(gpus) {
                cx.error("embedding", problem);
            }
        }
        if o.shards == 0 || o.shards > 4096 {
            cx.error("shards", "`shards` must be in 1..=4096");
        }
        if o.keep_versions == 0 {
            cx.error("keep_versions", "`keep_versions` must be at least 1");
        }
        if !o.same_as.is_empty() && !o.kinds.contains(&IndexKind::Kg) {
            cx.error(
                "same_as",
                "`same_as` merges the graphs of a `kg` index: add `kg` to `kinds`",
            );
        }
        if o.corpus.is_some() {
            if o.unit == Unit::Triple {
                cx.error(
                    "corpus",
                    "a corpus gives documents and segments: use unit `paragraph`, `sentence` \
                     or `segment` (a corpus stage with `segments`)",
                );
            }
            if !o.same_as.is_empty() {
                cx.error(
                    "same_as",
                    "`same_as` merges KG inputs' graphs; a corpus-fed KG holds one wiki's",
                );
            }
        }
        if !needs_passages && o.incremental && o.corpus.is_none() {
            cx.error("incremental", "a KG-only index is always built in full");
        }
    }

    fn outputs(&self, _o: &IndexOptions, stage: &StageSpec) -> Declared {
        Declared {
            tables: Vec::new(),
            files: vec![format!("indexes/{}.json", stage.name)],
        }
    }

    fn reads<'a>(
        &'a self,
        o: &'a IndexOptions,
        _stage: &'a StageSpec,
        _pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, Result<Reads, ExecError>> {
        Box::pin(async move {
            // A corpus-fed index reads the corpus root, not its inputs' tables.
            Ok(match o.corpus {
                Some(_) => Reads::Nothing,
                None => Reads::All,
            })
        })
    }

    fn run<'a>(&'a self, o: &'a IndexOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run(o, cx))
    }
}

/// A triple as a KG edge, its keys through `key` (`same_as` merging).
fn push_edge(
    kg: &mut KgBuilder,
    key: &impl Fn(&str) -> String,
    t: Triple,
) -> Result<(), ExecError> {
    let entity = t.object_kind == "entity";
    kg.push(KgEdge {
        subject: key(&t.subject),
        relation: t.predicate,
        object: if entity { key(&t.object) } else { t.object },
        object_kind: t.object_kind,
        subject_name: t.subject_name,
        object_name: t.object_name,
        source: t.dataset,
    })
    .map_err(ExecError::from)
}

/// The name and aliases of an entity.
fn push_names(
    kg: &mut KgBuilder,
    key: &impl Fn(&str) -> String,
    e: &Entity,
) -> Result<(), ExecError> {
    let k = key(&e.key);
    if let Some(label) = &e.label {
        kg.name(&k, label)?;
    }
    e.aliases.iter().try_for_each(|a| kg.alias(&k, a))?;
    Ok(())
}

fn parts(cx: &RunCx<'_>, table: TableKind) -> Vec<WrittenPart> {
    input_parts(cx, table)
}

async fn run(o: &IndexOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let root_url = o
        .root
        .clone()
        .unwrap_or_else(|| format!("{}/index", cx.pipeline.output.trim_end_matches('/')));
    let root_loc = open_location(&root_url, true)?;
    crate::claim::claim(&root_loc, crate::claim::Owned::IndexRoot).await?;
    let root = root_of(root_loc);
    // Private (0700), uniquely named, removed when dropped (an error or a panic too); one
    // left by a killed process is swept by the next `distillery run` (its pid is in the name).
    let scratch = tempfile::Builder::new()
        .prefix(&format!("distillery-index-{}-", std::process::id()))
        .tempdir()
        .map_err(|e| ExecError::Task(format!("cannot make a scratch directory: {e}")))?;
    let has = |k: IndexKind| o.kinds.contains(&k);
    let mut spool = Spool::new(
        &scratch.path().join("spool"),
        o.shards,
        o.max_shard_passages > 0,
    );
    let mut summary = StageSummary::new(&cx.stage.name);
    let (mut records_in, mut bytes_in) = (0u64, 0u64);
    let feed = match &o.corpus {
        Some(url) => Some(Feed::open(url, &root).await?),
        None => None,
    };
    let mut removed = None;
    if let Some(f) = &feed
        && !(o.incremental && f.unchanged())
    {
        let filled = f.fill(&mut spool, o.unit, o.incremental).await?;
        records_in += filled.documents;
        bytes_in += filled.bytes;
        removed = filled.removed;
    }
    let mut push = |p| spool.push(p).map_err(ExecError::from);
    if feed.is_none() && (has(IndexKind::Bm25) || has(IndexKind::Dense)) {
        bytes_in += match o.unit {
            Unit::Paragraph | Unit::Sentence => {
                let ps = parts(&cx, TableKind::Documents);
                each_row(cx.out, TableKind::Documents, &ps, |d: Document| {
                    records_in += 1;
                    passage::of_document(&d, o.unit)
                        .into_iter()
                        .try_for_each(&mut push)
                })
                .await?
            }
            Unit::Segment => {
                let ps = parts(&cx, TableKind::Segments);
                each_row(cx.out, TableKind::Segments, &ps, |s: Segment| {
                    records_in += 1;
                    passage::of_segment_titled(&s).map_or(Ok(()), &mut push)
                })
                .await?
            }
            Unit::Triple => {
                let mut bytes = 0;
                for table in TableKind::KG_EDGES {
                    let ps = parts(&cx, table);
                    bytes += each_row(cx.out, table, &ps, |t: Triple| {
                        records_in += 1;
                        push(passage::of_triple(&t))
                    })
                    .await?;
                }
                bytes
            }
        };
    }
    let mut merged = 0;
    let mut kg_carried = None;
    let mut kg_wikis = Vec::new();
    let kept = feed
        .as_ref()
        .is_some_and(|f| o.incremental && f.unchanged());
    let edges = if has(IndexKind::Kg) && !kept {
        let mut kg = KgBuilder::new(&scratch.path().join("build").join("kg"), kg::SORT_MEMORY)?;
        let aliases = if o.same_as.is_empty() {
            Aliases::default()
        } else {
            let paths: Vec<String> = TableKind::KG_EDGES
                .iter()
                .flat_map(|&t| parts(&cx, t))
                .map(|p| p.path())
                .collect();
            read_aliases(cx.out, &paths, &o.same_as, cx.parallelism).await?
        };
        merged = aliases.len() as u64;
        // Merging compares keys in canonical form (FB15k's `/m/x` is Freebase's `m.x`, the
        // form alias targets take); without `same_as` keys stay as the inputs write them.
        let merging = !o.same_as.is_empty();
        let key = |k: &str| -> String {
            match merging {
                true => canon(aliases.key(k)).into_owned(),
                false => k.to_string(),
            }
        };
        match &feed {
            // A corpus-fed KG: the previous one carried on with the pages changed since, or
            // every live Wikidata page of the corpus.
            Some(f) => {
                let filled = f
                    .fill_kg(&root, &mut kg, scratch.path(), &mut |kg, r| match r {
                        Record::Triple(t) | Record::Literal(t) => push_edge(kg, &key, t),
                        Record::Entity(e) => push_names(kg, &key, &e),
                        _ => Ok(()),
                    })
                    .await?;
                records_in += filled.documents;
                bytes_in += filled.bytes;
                kg_carried = filled.carried;
                kg_wikis = filled.wikis;
            }
            None => {
                for table in TableKind::KG_EDGES {
                    let ps = parts(&cx, table);
                    bytes_in += each_row(cx.out, table, &ps, |t: Triple| {
                        records_in += 1;
                        push_edge(&mut kg, &key, t)
                    })
                    .await?;
                }
                // Names and aliases the KG inputs give apart from their edges (Freebase's
                // `type.object.name` and `common.topic.alias`, Wikidata's labels and aliases).
                let ps = parts(&cx, TableKind::Entities);
                bytes_in += each_row(cx.out, TableKind::Entities, &ps, |e: Entity| {
                    push_names(&mut kg, &key, &e)
                })
                .await?;
            }
        }
        Some(kg)
    } else {
        None
    };
    let embedder = match (&o.embedding, has(IndexKind::Dense)) {
        (Some(e), true) => Some(embedding::open(e).await?),
        _ => None,
    };
    let cache = match (&embedder, &o.embedding) {
        (Some(e), Some(opts)) => {
            let at = opts
                .cache
                .clone()
                .unwrap_or_else(|| format!("{}/embedding-cache", root_url.trim_end_matches('/')));
            Some(EmbeddingCache::new(
                root_of(open_location(&at, true)?),
                e.model(),
            ))
        }
        _ => None,
    };
    let mut spec = BuildSpec {
        bm25: has(IndexKind::Bm25),
        dense: has(IndexKind::Dense),
        kg: has(IndexKind::Kg),
        unit: o.unit,
        shards: o.shards,
        max_shard_passages: o.max_shard_passages,
        incremental: o.incremental,
        keep_versions: o.keep_versions,
        pipeline_hash: cx.pipeline.hash.clone(),
        source: format!("{} ({})", cx.pipeline.output, cx.stage.name),
        scratch: scratch.path().join("build"),
        batch: o.embedding.as_ref().map_or(32, |e| e.batch),
        delta: removed,
        kg_wikis,
        corpus: feed.as_ref().map(|f| f.current.version.clone()),
    };
    let embedder = embedder
        .as_deref()
        .map(|e| e as &dyn distillery_index::dense::Embedder);
    let built = match &feed {
        // The index already holds the corpus's current version: nothing to build.
        Some(f) if o.incremental && f.unchanged() => {
            let Some(v) = distillery_index::version::current(&root).await? else {
                return Err(ExecError::Task("index root lost its CURRENT".into()));
            };
            let Some(m) = distillery_index::version::manifest(&root, &v).await? else {
                return Err(ExecError::Task(format!(
                    "index version {v} has no manifest"
                )));
            };
            tracing::info!(stage = %cx.stage.name, corpus = %f.current.version, "corpus unchanged since the index's version; kept");
            Built {
                duplicates: m.duplicates,
                conflicting: m.conflicting,
                manifest: m,
                pruned: Vec::new(),
                reused: true,
            }
        }
        _ => match build(&root, &spec, spool, edges, embedder, cache.as_ref()).await {
            // No version of this shape to apply the changes to: every passage of the corpus.
            Err(distillery_index::IndexError::NeedsFull(why)) => {
                let f = feed.as_ref().expect("only a corpus feed builds a delta");
                tracing::info!(stage = %cx.stage.name, reason = %why, "building from the whole corpus");
                let mut spool = Spool::new(
                    &scratch.path().join("spool-full"),
                    o.shards,
                    o.max_shard_passages > 0,
                );
                let filled = f.fill(&mut spool, o.unit, false).await?;
                records_in = filled.documents;
                bytes_in = filled.bytes;
                spec.delta = None;
                build(&root, &spec, spool, None, embedder, cache.as_ref()).await?
            }
            r => r?,
        },
    };
    let m = &built.manifest;
    summary.records_in = records_in;
    summary.bytes_in = bytes_in;
    summary.records_out = m.passages;
    let c = &mut summary.counters;
    // A kept version changed nothing: every passage and shard is reused.
    let changes = if built.reused {
        distillery_index::version::Changes {
            unchanged: m.passages,
            ..Default::default()
        }
    } else {
        m.changes.clone()
    };
    let (rebuilt, reused) = if built.reused {
        (0, m.shards)
    } else {
        (m.shards_rebuilt, m.shards_reused)
    };
    let fresh = |n: u64| if built.reused { 0 } else { n };
    for (k, v) in [
        ("passages", m.passages),
        ("passages.added", changes.added),
        ("passages.changed", changes.changed),
        ("passages.deleted", changes.deleted),
        ("passages.unchanged", changes.unchanged),
        ("passages.duplicate", built.duplicates),
        ("passages.conflicting", built.conflicting),
        ("shards.rebuilt", u64::from(rebuilt)),
        ("shards.reused", u64::from(reused)),
        ("embeddings.computed", fresh(m.embedded)),
        ("embeddings.reused", fresh(m.embeddings_reused)),
        ("embeddings.cached", fresh(m.embeddings_cached)),
        ("versions.kept", u64::from(built.reused)),
        ("kg.nodes", m.kg.as_ref().map_or(0, |k| k.nodes)),
        ("kg.edges", m.kg.as_ref().map_or(0, |k| k.edges)),
        ("kg.aliases", merged),
        ("kg.edges.carried", kg_carried.unwrap_or(0)),
        ("versions.pruned", built.pruned.len() as u64),
    ] {
        if v > 0 || k == "passages" {
            c.insert(k.to_string(), v);
        }
    }
    let rel = format!("indexes/{}.json", cx.stage.name);
    let body = serde_json::to_vec_pretty(&serde_json::json!({
        "root": root.display,
        "version": m.version,
        "manifest": m,
    }))
    .map_err(|e| ExecError::Task(e.to_string()))?;
    let bytes = body.len() as u64;
    cx.out.write(&format!("{}/{rel}", cx.dir), body).await?;
    summary.bytes_out = m.files.iter().map(|f| f.bytes).sum();
    summary.seconds = started.elapsed().as_secs_f64();
    tracing::info!(stage = %cx.stage.name, version = %m.version, root = %root.display, "index built");
    Ok(StageOutput {
        summary,
        files: vec![ManifestFile {
            path: rel,
            rows: 1,
            bytes,
        }],
        ..Default::default()
    })
}
