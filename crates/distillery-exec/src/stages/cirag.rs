//! The `cirag` stage: CIRAG teacher trajectories (see `distillery-distill::cirag`) over the
//! questions of the stage's QA inputs, distilled into student SFT samples.
//!
//! 1. The corpus: a built index when `index` names one (an `index` stage listed before this
//!    one, or an index root), read through `retrieval` (bm25, dense or hybrid); else the
//!    staged `documents` of `corpus` (default: the stage's inputs), cut into paragraph
//!    passages and indexed with BM25 (tantivy, in memory: **memory bound: the corpus's
//!    passages**). Candidate facts are reranked by embedding similarity with `rerank` (the
//!    paper's bge-small), else by shared words.
//! 2. The questions of each input, in part order, capped by `max_questions`, run
//!    `llm.max_concurrency` at a time; results are consumed in question order, so outputs do
//!    not depend on timing. Every teacher call (the triples of retrieved passages, each
//!    integration step, the final answer) goes through the response cache: a rerun makes no
//!    call, and a run stopped by the budget resumes mid-trajectory.
//! 3. Per trajectory, one line of `<stage>/trajectories.jsonl` (every step's query, candidate
//!    facts with provenance, thought, kept facts, next query; how it ended; answer and F1).
//!    A kept trajectory (final answer F1 ≥ `min_f1`) gives one sample per step (task
//!    `cirag_integration`): split by question id hash, written to the `sft` table in the
//!    shard of its question's part (`sft/part-SSSSS-INPUT@STAGE-NNNN.parquet`),
//!    `<stage>/train.jsonl`, `<stage>/validation.jsonl` (the label stage's JSONL line form)
//!    and `<stage>/dataset_info.json` (LLaMA-Factory). A teacher answer that does not parse
//!    ends the trajectory; it goes to `quarantine` (`llm_invalid_answer`).
//! 4. With `cascade` (default), a kept trajectory also runs CIRAG's adaptive cascade
//!    ([`distillery_distill::cascade`]): the teacher answers from its core triples, then their
//!    sentences, then their passages, until it does not refuse. When the chosen level's
//!    answer reaches `min_f1`, each level asked is one `cirag_generation` sample (refusals
//!    included) in the same files; the trajectory's line gets the levels and the choice.
//!
//! The stage runs as one task per shard of its questions (one when `max_questions` caps
//! it), each indexing the whole corpus, and a merge task: exact duplicates removed across the
//! tasks ([`crate::kit::sft_out::merge_stage`]) and the trajectory fragments joined in part
//! order, so the outputs are the same for any task count (the SFT JSONL as a set of lines, in
//! task order).
//!
//! Counters: `questions`, `trajectories.kept`, `trajectories.wrong_answer`,
//! `trajectories.invalid`, `trajectories.no_evidence`, `steps`, `facts.candidates`,
//! `facts.kept`, `facts.not_candidates`, `cascade.<g>` and `cascade.<g>.<dataset>` (the
//! chosen granularity `triples`, `sentences`, `passages`, or `default` when every level
//! refused, `invalid`: the paper's Figure 3), `cascade.wrong_answer`, `cascade.samples`,
//! `samples.train`, `samples.validation`, `duplicates_removed`, and the `llm.*` counters of
//! the `triples` stage.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use distillery_core::id::stable_id;
use distillery_core::schema::{from_batch, to_batch};
use distillery_core::spec::{Pipeline, StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, Message, QuarantineRecord, Question, SftSample, TableKind};
use distillery_distill::DistillError;
use distillery_distill::cascade::{
    Cascade, CascadeEnd, CascadePrompts, CascadeRunner, TASK_GENERATION,
};
use distillery_distill::cirag::{
    Cirag as CiragLoop, Config, Corpus, End, Fut, Prompts, Retriever, Trajectory, step_messages,
};
use distillery_index::search::Retrieval;
use distillery_triples::{Passage, TriplesOptions, Unit, passages};
use futures::StreamExt;
use serde_json::json;
use tracing::info;

use crate::contract::options::{QuestionCap, SftSplit};
use crate::contract::{
    Declared, MergeCx, Partitioning, RunCx, SideFile, Stage, StageFuture, StageOutput, stage_tag,
};
use crate::error::ExecError;
use crate::kit::contexts::parts_of;
use crate::kit::embedding::{self, EmbeddingOptions};
use crate::kit::fragments::{Fragments, concat};
use crate::kit::retrieval::{IndexRetriever, check_index, index_root};
use crate::kit::sft_out::{SftOut, merge_stage};
use crate::kit::teacher::{Teacher, teacher_name};
use crate::parts::{PartWriters, WrittenPart, read_part_rows};
use serde::{Deserialize, Serialize};

fn default_answer_tokens() -> u32 {
    512
}
fn default_top_k() -> u32 {
    10
}
fn default_candidates() -> u32 {
    30
}
fn default_cirag_steps() -> u32 {
    4
}
fn default_min_f1() -> f64 {
    0.5
}
fn yes() -> bool {
    true
}

/// `cirag` stage options (CIRAG paper 003, 3.3-3.5: K, N, L; formats.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CiragOptions {
    /// Inputs whose documents form the retrieval corpus (default: the stage's inputs).
    #[serde(default)]
    pub corpus: Vec<String>,
    /// Passages retrieved per step (K).
    #[serde(default = "default_top_k")]
    pub top_k: u32,
    /// Candidate facts shown per step after reranking (N).
    #[serde(default = "default_candidates")]
    pub candidates: u32,
    /// Steps per trajectory at most (L).
    #[serde(default = "default_cirag_steps")]
    pub max_steps: u32,
    /// Trajectories whose final answer's best token F1 against the gold is below this are
    /// filtered out (1.0: exact match only).
    #[serde(default = "default_min_f1")]
    pub min_f1: f64,
    /// Run CIRAG's adaptive cascade on each kept trajectory (ACMG: its triples, then their
    /// sentences, then their passages, until the teacher does not answer `Unanswerable`) and
    /// write its generation samples (task `cirag_generation`), one per level asked, when the
    /// chosen level's answer reaches `min_f1`. Templates `cascade_system.txt`,
    /// `cascade_user.txt` are replaced from `templates`.
    #[serde(default = "yes")]
    pub cascade: bool,
    /// At most this many questions, in part order (see [`QuestionCap`]).
    #[serde(flatten)]
    pub cap: QuestionCap,
    /// `max_tokens` of each teacher answer.
    #[serde(default = "default_answer_tokens")]
    pub max_tokens: u32,
    /// Directory of templates replacing the built-in CIRAG prompts.
    #[serde(default)]
    pub templates: Option<String>,
    /// Directory of templates replacing the built-in triple extraction prompts.
    #[serde(default)]
    pub triple_templates: Option<String>,
    /// The validation split and the decontamination (`validation_share`, `decontaminate`,
    /// `decontaminate_formats`: see [`SftSplit`]).
    #[serde(flatten)]
    pub split: SftSplit,
    /// A built index to retrieve from instead of indexing `corpus` in memory: the name of an
    /// `index` stage listed before this one (the version it built in this job), or an index
    /// root (path or URL; the version `CURRENT` names when the task starts, unless
    /// `index_version` names one).
    #[serde(default)]
    pub index: Option<String>,
    /// The version of the index root `index` to read.
    #[serde(default)]
    pub index_version: Option<String>,
    /// How `index` answers a query: `bm25`, `dense` or `hybrid` (reciprocal-rank fusion of
    /// the two); dense and hybrid need a version with a dense index.
    #[serde(default)]
    pub retrieval: Retrieval,
    /// An embedding model (`model`, or `server` for an embeddings endpoint) ranking the
    /// candidate facts by cosine similarity to the query, as CIRAG does with bge-small.
    /// Default: by the words they share with the query. Its `cache` is not used.
    #[serde(default)]
    pub rerank: Option<EmbeddingOptions>,
}

impl Default for CiragOptions {
    fn default() -> Self {
        toml::Value::Table(toml::Table::new())
            .try_into()
            .expect("all cirag options have defaults")
    }
}

/// The `cirag` stage.
pub struct Cirag;

impl Stage for Cirag {
    type Options = CiragOptions;

    fn kind(&self) -> &'static str {
        "cirag"
    }

    fn uses_llm(&self) -> bool {
        true
    }

    fn check(&self, o: &mut CiragOptions, cx: &mut StageCheck<'_, '_>) {
        let inputs = cx.inputs;
        for name in &o.corpus {
            if !inputs.iter().any(|i| &i.name == name) {
                cx.error("corpus", format!("`{name}` names no input"));
            }
        }
        if o.top_k == 0 || o.candidates == 0 || o.max_steps == 0 || o.max_tokens == 0 {
            cx.error(
                "top_k",
                "`top_k`, `candidates`, `max_steps` and `max_tokens` must be at least 1",
            );
        }
        if !(0.0..=1.0).contains(&o.min_f1) {
            cx.error("min_f1", "`min_f1` must be in [0, 1]");
        }
        match &o.index {
            None if o.retrieval != Retrieval::Bm25 || o.index_version.is_some() => cx.error(
                "retrieval",
                "`retrieval` and `index_version` need `index` (a built index)",
            ),
            Some(_) if !o.corpus.is_empty() => cx.error(
                "corpus",
                "give `corpus` (indexed in memory) or `index` (a built index), not both",
            ),
            Some(name) => check_index(cx, name, o.index_version.is_some()),
            None => {}
        }
        if let Some(e) = &o.rerank {
            for problem in e.problems(EmbeddingOptions::stage_gpus(cx)) {
                cx.error("rerank", problem);
            }
        }
        crate::kit::decontam::check(cx, &o.split);
    }

    fn resolve(&self, o: &CiragOptions, stage: &StageSpec) -> Result<Vec<SideFile>, Vec<String>> {
        crate::kit::decontam::resolve(stage, &o.split)
    }

    fn outputs(&self, _o: &CiragOptions, stage: &StageSpec) -> Declared {
        crate::kit::sft_out::sft_declared(&stage.name, &["trajectories.jsonl"])
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Questions
    }

    fn merges(&self) -> bool {
        true
    }

    fn max_tasks(&self, o: &CiragOptions) -> Option<u32> {
        o.cap.max_tasks()
    }

    fn run<'a>(&'a self, o: &'a CiragOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run_stage(o, cx))
    }

    fn merge<'a>(&'a self, _o: &'a CiragOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(async move {
            let name = format!("{}/{TRAJECTORIES}", cx.stage.name);
            let trajectories = concat(cx.out, cx.dir, cx.shards, &name).await?;
            merge_stage(&cx, &cx.stage.name, vec![trajectories]).await
        })
    }
}

/// Every trajectory, one JSON line each, under the stage's directory.
const TRAJECTORIES: &str = "trajectories.jsonl";

fn distill_err(e: DistillError) -> ExecError {
    match e {
        DistillError::Budget(why) => ExecError::Budget(why),
        DistillError::Llm(e) => ExecError::Llm(e),
        DistillError::Extract(e) => ExecError::Extract(e),
        DistillError::Index(e) => ExecError::Index(e),
        other => ExecError::Task(other.to_string()),
    }
}

/// Runs one task of the stage: the questions of its shard, over the whole corpus.
pub async fn run_stage(opts: &CiragOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (p, stage, out, staging, parts) = (cx.pipeline, cx.stage, cx.out, cx.dir, cx.parts);
    let started = Instant::now();
    let (llm, teacher) = Teacher::for_task(&cx)?;
    // The triples of retrieved passages are asked exactly as a `triples` stage with the same
    // `max_tokens` and templates asks them, so its cached answers are reused.
    let triple_opts = TriplesOptions {
        max_tokens: opts.max_tokens,
        templates: opts.triple_templates.clone(),
        ..TriplesOptions::default()
    };
    let extractor = teacher.extractor(
        llm,
        &triple_opts,
        distillery_triples::prompt::Prompts::load(opts.triple_templates.as_deref())?,
    );
    let prompts = Prompts::load(opts.templates.as_deref()).map_err(distill_err)?;
    let cirag = CiragLoop::new(
        teacher.client.clone(),
        teacher.cache.clone(),
        extractor,
        prompts.clone(),
        Config {
            top_k: opts.top_k as usize,
            candidates: opts.candidates as usize,
            max_steps: opts.max_steps as usize,
            min_f1: opts.min_f1,
            max_tokens: opts.max_tokens,
            seed: llm.seed,
            model_revision: llm.model_revision.clone(),
        },
    );
    let cirag = match &opts.rerank {
        Some(e) => cirag.with_reranker(embedding::open(e).await?),
        None => cirag,
    };
    let cascade = CascadeRunner::new(
        teacher.client.clone(),
        teacher.cache.clone(),
        CascadePrompts::load(opts.templates.as_deref()).map_err(distill_err)?,
        opts.max_tokens,
        llm.seed,
        llm.model_revision.clone(),
    );
    let mut summary = StageSummary::with_counters(
        &stage.name,
        &[
            "questions",
            "trajectories.kept",
            "trajectories.wrong_answer",
            "trajectories.invalid",
            "trajectories.no_evidence",
            "steps",
            "facts.candidates",
            "facts.kept",
            "facts.not_candidates",
            "cascade.triples",
            "cascade.sentences",
            "cascade.passages",
            "cascade.default",
            "cascade.invalid",
            "cascade.wrong_answer",
            "cascade.samples",
            "samples.train",
            "samples.validation",
            "duplicates_removed",
            "llm.quarantined",
        ],
    );

    // --- the corpus ---
    let (corpus, corpus_size, corpus_bytes, index_version) =
        open_corpus(&cx, opts, &stage.name).await?;

    // --- the questions ---
    let dir = stage.name.clone();
    let mut w = Writers {
        trajectories: Fragments::new(out, staging, &format!("{dir}/{TRAJECTORIES}")),
    };
    let mut sft = SftOut::new(out, staging, &dir, opts.split.validation_share).decontaminated_by(
        crate::kit::decontam::load(
            &opts.split.decontaminate,
            &opts.split.decontaminate_formats,
            cx.side,
        )
        .await?,
    );
    // Every task indexes (or opens) the whole corpus: counted once, by the merge.
    sft.shared("corpus.passages", corpus_size);
    sft.shared_bytes_in(corpus_bytes);
    let budget_fn = || teacher.budget.exhausted(teacher.client.stats());
    let mut params = json!({
        "top_k": opts.top_k, "candidates": opts.candidates, "max_steps": opts.max_steps,
        "min_f1": opts.min_f1, "teacher": llm.model,
    });
    if let Some(v) = &index_version {
        params["index_version"] = json!(v);
        params["retrieval"] = json!(opts.retrieval);
    }
    if let Some(e) = &opts.rerank {
        params["rerank"] = json!(e.model);
    }
    let params = params.to_string();
    let teacher_label = teacher_name(llm);
    let mut written: Vec<WrittenPart> = Vec::new();
    let mut left = opts.cap.budget();
    let mut by_tag: BTreeMap<String, Vec<(u32, &WrittenPart)>> = BTreeMap::new();
    for (tag, shard, part) in parts_of(parts, TableKind::Questions, &stage.inputs) {
        by_tag.entry(tag).or_default().push((shard, part));
    }
    'tags: for (tag, tag_parts) in by_tag {
        let mut pw = PartWriters::new(out.clone(), staging, &stage_tag(&tag, &stage.name));
        for (shard, part) in tag_parts {
            summary.bytes_in += part.bytes;
            let mut stream = Box::pin(read_part_rows(out, &part.path(), 256).await?);
            while let Some(batch) = stream.next().await {
                if left == 0 {
                    written.extend(pw.finish().await?);
                    break 'tags;
                }
                let mut questions: Vec<Question> = from_batch(TableKind::Questions, &batch?)?;
                questions.truncate(left.min(questions.len() as u64) as usize);
                left -= questions.len() as u64;
                let results: Vec<(Question, Result<Ran, DistillError>)> =
                    futures::stream::iter(questions)
                        .map(|q| {
                            let (cirag, cascade, corpus, budget_fn) =
                                (&cirag, &cascade, corpus.clone(), &budget_fn);
                            async move {
                                let r = run_question(
                                    &q,
                                    cirag,
                                    cascade,
                                    opts.cascade,
                                    corpus.as_ref(),
                                    budget_fn,
                                )
                                .await;
                                (q, r)
                            }
                        })
                        .buffered(llm.max_concurrency.max(1))
                        .collect()
                        .await;
                let mut bad: Vec<QuarantineRecord> = Vec::new();
                for (q, r) in results {
                    let (t, cascaded) = r.map_err(distill_err)?;
                    summary.records_in += 1;
                    summary.add("questions", 1);
                    w.trajectory(&tag, shard, &q, &t, cascaded.as_ref()).await?;
                    if let Some(c) = &cascaded {
                        let lineage = Lineage {
                            params: &params,
                            runner: &cascade,
                            p,
                            teacher: &teacher_label,
                        };
                        for s in
                            cascade_samples(&q, c, opts.min_f1, &lineage, &mut summary, &mut bad)
                        {
                            sft.add(s, &q.question, pw.tag(), shard).await?;
                        }
                    }
                    summary.add("steps", t.steps.len() as u64);
                    for s in &t.steps {
                        summary.add("facts.candidates", s.candidates.len() as u64);
                        summary.add("facts.kept", s.kept.len() as u64);
                        summary.add("facts.not_candidates", u64::from(s.dropped));
                    }
                    match &t.end {
                        End::Kept { .. } => {
                            summary.add("trajectories.kept", 1);
                            for (i, step) in t.steps.iter().enumerate() {
                                let mut s = sample(
                                    &q,
                                    &t,
                                    i,
                                    step,
                                    &prompts,
                                    &cirag,
                                    &params,
                                    (p, &teacher_label),
                                );
                                s.revisions = distillery_core::revisions_of(&s.segment_ids, |d| {
                                    corpus.revision(d)
                                });
                                sft.add(s, &q.question, pw.tag(), shard).await?;
                            }
                        }
                        End::WrongAnswer { .. } => summary.add("trajectories.wrong_answer", 1),
                        End::NoEvidence => summary.add("trajectories.no_evidence", 1),
                        End::Invalid {
                            template,
                            raw,
                            reason,
                        } => {
                            summary.add("trajectories.invalid", 1);
                            summary.add("llm.quarantined", 1);
                            summary.quarantined += 1;
                            bad.push(QuarantineRecord {
                                id: stable_id(&[&q.id, template, &t.steps.len().to_string()]),
                                dataset: "cirag".into(),
                                source: q.id.clone(),
                                record: Some(t.steps.len() as u64),
                                reason: "llm_invalid_answer".into(),
                                detail: format!("{template}: {reason}"),
                                excerpt: raw.chars().take(512).collect(),
                                ..Default::default()
                            });
                        }
                    }
                }
                sft.flush(&mut pw).await?;
                if !bad.is_empty() {
                    pw.write(
                        TableKind::Quarantine,
                        shard,
                        &to_batch(TableKind::Quarantine, &bad)?,
                    )
                    .await?;
                }
            }
        }
        written.extend(pw.finish().await?);
    }

    let mut files = sft.finish(&mut summary).await?;
    files.extend(w.trajectories.finish().await?);
    Ok(teacher.finish_shard(summary, written, files, started))
}

/// A question's trajectory and, when it was kept and the cascade is on, its cascade.
type Ran = (Trajectory, Option<Cascade>);

async fn run_question(
    q: &Question,
    cirag: &CiragLoop,
    cascade: &CascadeRunner,
    cascade_on: bool,
    corpus: &dyn Retriever,
    budget: &(dyn Fn() -> Option<String> + Sync),
) -> Result<Ran, DistillError> {
    let t = cirag.run(q, corpus, budget).await?;
    let c = if cascade_on && matches!(t.end, End::Kept { .. }) {
        Some(cascade.run(q, &t.steps, budget).await?)
    } else {
        None
    };
    Ok((t, c))
}

/// What the samples of a cascade name as their origin.
struct Lineage<'a> {
    params: &'a str,
    runner: &'a CascadeRunner,
    p: &'a Pipeline,
    /// [`teacher_name`].
    teacher: &'a str,
}

/// The generation samples of a cascade (one per level asked) when its chosen level's answer
/// reaches `min_f1`; its outcome counted, an unparsed answer quarantined.
fn cascade_samples(
    q: &Question,
    c: &Cascade,
    min_f1: f64,
    l: &Lineage<'_>,
    summary: &mut StageSummary,
    bad: &mut Vec<QuarantineRecord>,
) -> Vec<SftSample> {
    // Figure 3 of the paper: the chosen granularity, in all and per dataset.
    summary.add(&format!("cascade.{}", c.outcome()), 1);
    summary.add(&format!("cascade.{}.{}", c.outcome(), q.dataset), 1);
    match &c.end {
        CascadeEnd::Answered { f1, .. } if *f1 >= min_f1 => {}
        CascadeEnd::Answered { .. } => {
            summary.add("cascade.wrong_answer", 1);
            return Vec::new();
        }
        CascadeEnd::Default => return Vec::new(),
        CascadeEnd::Invalid { raw, reason } => {
            summary.add("llm.quarantined", 1);
            summary.quarantined += 1;
            bad.push(QuarantineRecord {
                id: stable_id(&[&q.id, "cirag-cascade", &c.levels.len().to_string()]),
                dataset: "cirag".into(),
                source: q.id.clone(),
                record: Some(c.levels.len() as u64),
                reason: "llm_invalid_answer".into(),
                detail: format!("cirag-cascade: {reason}"),
                excerpt: raw.chars().take(512).collect(),
                ..Default::default()
            });
            return Vec::new();
        }
    }
    let (tid, tver) = l.runner.template();
    let chars = |s: &str| s.chars().count().div_ceil(4) as u32;
    let n = c.levels.len() as u32;
    c.levels
        .iter()
        .enumerate()
        .map(|(i, level)| {
            let target = level.generation.render();
            let messages = vec![
                Message {
                    role: "system".into(),
                    content: level.system.clone(),
                },
                Message {
                    role: "user".into(),
                    content: level.user.clone(),
                },
                Message {
                    role: "assistant".into(),
                    content: target.clone(),
                },
            ];
            summary.add("cascade.samples", 1);
            let mut params: serde_json::Value =
                serde_json::from_str(l.params).unwrap_or_else(|_| json!({}));
            params["granularity"] = json!(level.granularity.name());
            SftSample {
                id: stable_id(&[&q.id, TASK_GENERATION, level.granularity.name(), &target]),
                task: TASK_GENERATION.into(),
                prompt_tokens: chars(&messages[0].content) + chars(&messages[1].content),
                target_tokens: chars(&target),
                messages,
                weight: 1.0,
                split: String::new(),
                dataset: q.dataset.clone(),
                question_id: q.id.clone(),
                segment_ids: Vec::new(),
                revisions: Vec::new(),
                method: "cirag".into(),
                params: params.to_string(),
                template_id: tid.to_string(),
                template_version: tver.to_string(),
                pipeline_hash: l.p.hash.clone(),
                step: Some(i as u32 + 1),
                steps: Some(n),
                sufficient: Some(!level.generation.refused()),
                teacher: Some(l.teacher.to_string()),
                cache_entries: vec![level.entry.clone()],
            }
        })
        .collect()
}

/// The corpus trajectories retrieve from: (retriever, passages, bytes read, the index
/// version when it is a built index).
async fn open_corpus(
    cx: &RunCx<'_>,
    opts: &CiragOptions,
    stage: &str,
) -> Result<(Arc<dyn Retriever>, u64, u64, Option<String>), ExecError> {
    if let Some(index) = &opts.index {
        let (root, version) = index_root(cx, index, opts.index_version.as_deref()).await?;
        let r = IndexRetriever::open(&root, version.as_deref(), opts.retrieval).await?;
        let (version, passages) = (r.version().to_string(), r.passages());
        info!(stage, index = %root.display, version = %version, passages, "cirag reads a built index");
        return Ok((Arc::new(r), passages, 0, Some(version)));
    }
    let corpus_inputs = if opts.corpus.is_empty() {
        cx.stage.inputs.clone()
    } else {
        opts.corpus.clone()
    };
    let mut corpus_passages: Vec<Passage> = Vec::new();
    let mut seen_docs: HashSet<String> = HashSet::new();
    let mut revisions: HashMap<String, String> = HashMap::new();
    let mut corpus_bytes = 0;
    for (_, _, part) in parts_of(cx.parts, TableKind::Documents, &corpus_inputs) {
        corpus_bytes += part.bytes;
        let mut stream = Box::pin(read_part_rows(cx.out, &part.path(), 256).await?);
        while let Some(batch) = stream.next().await {
            for d in from_batch::<Document>(TableKind::Documents, &batch?)? {
                if seen_docs.insert(d.id.clone()) {
                    let rev = d.revision_id.map(|r| r.to_string());
                    let r = distillery_core::page_revision(&d.uri, d.page_id, rev.as_deref());
                    for ps in passages(&d, Unit::Paragraph) {
                        if ps.text.chars().count() < 20 {
                            continue;
                        }
                        if !r.is_empty() {
                            revisions.insert(ps.document_id.clone(), r.clone());
                        }
                        corpus_passages.push(ps);
                    }
                }
            }
        }
    }
    let n_passages = corpus_passages.len() as u64;
    let corpus = tokio::task::spawn_blocking(move || Corpus::new(corpus_passages))
        .await
        .map_err(|e| ExecError::Task(e.to_string()))?
        .map_err(distill_err)?;
    info!(stage, passages = n_passages, "cirag corpus indexed");
    let corpus = Revised { corpus, revisions };
    Ok((Arc::new(corpus), n_passages, corpus_bytes, None))
}

/// The in-memory corpus, with the page revision of each document it holds.
struct Revised {
    corpus: Corpus,
    revisions: HashMap<String, String>,
}

impl Retriever for Revised {
    fn retrieve<'a>(&'a self, query: &'a str, k: usize) -> Fut<'a, Vec<Passage>> {
        self.corpus.retrieve(query, k)
    }

    fn revision(&self, document_id: &str) -> String {
        self.revisions.get(document_id).cloned().unwrap_or_default()
    }
}

struct Writers {
    trajectories: Fragments,
}

impl Writers {
    async fn trajectory(
        &mut self,
        tag: &str,
        shard: u32,
        q: &Question,
        t: &Trajectory,
        cascade: Option<&Cascade>,
    ) -> Result<(), ExecError> {
        let (end, answer, f1) = match &t.end {
            End::Kept { answer, f1 } => ("kept", Some(answer.as_str()), Some(*f1)),
            End::WrongAnswer { answer, f1 } => ("wrong_answer", Some(answer.as_str()), Some(*f1)),
            End::Invalid { .. } => ("invalid", None, None),
            End::NoEvidence => ("no_evidence", None, None),
        };
        let steps: Vec<_> = t
            .steps
            .iter()
            .map(|s| {
                json!({
                    "query": s.query,
                    "candidates": s.candidates.iter().map(|f| json!({
                        "fact": f.text, "document_id": f.document_id,
                        "passage": f.passage, "sentence": f.sentence,
                    })).collect::<Vec<_>>(),
                    "thought": s.decision.thought,
                    "kept": s.kept,
                    "next": s.decision.next,
                })
            })
            .collect();
        let cascade = cascade.map(|c| {
            let f1 = match &c.end {
                CascadeEnd::Answered { f1, .. } => Some(*f1),
                _ => None,
            };
            json!({
                "levels": c.levels.iter().map(|l| json!({
                    "granularity": l.granularity.name(),
                    "thought": l.generation.thought,
                    "answer": l.generation.answer,
                    "refused": l.generation.refused(),
                })).collect::<Vec<_>>(),
                "chosen": c.outcome(),
                "f1": f1,
            })
        });
        let mut line = json!({
            "question_id": q.id, "dataset": q.dataset, "question": q.question,
            "answers": q.answers, "steps": steps, "end": end, "answer": answer, "f1": f1,
            "cascade": cascade,
        })
        .to_string();
        line.push('\n');
        self.trajectories.write(tag, shard, &line).await
    }
}

/// The student sample of step `i` of a kept trajectory.
#[allow(clippy::too_many_arguments)]
fn sample(
    q: &Question,
    t: &Trajectory,
    i: usize,
    step: &distillery_distill::cirag::Step,
    prompts: &Prompts,
    cirag: &CiragLoop,
    params: &str,
    (p, teacher): (&Pipeline, &str),
) -> SftSample {
    let messages: Vec<Message> = step_messages(prompts, step)
        .into_iter()
        .map(|(role, content)| Message { role, content })
        .collect();
    let mut docs: Vec<String> = Vec::new();
    for f in &step.candidates {
        if !docs.contains(&f.document_id) {
            docs.push(f.document_id.clone());
        }
    }
    let chars = |s: &str| s.chars().count().div_ceil(4) as u32;
    let prompt_tokens = messages[..2].iter().map(|m| chars(&m.content)).sum();
    let target_tokens = chars(&messages[2].content);
    let (tid, tver) = cirag.template();
    SftSample {
        id: stable_id(&[&q.id, "cirag", &(i + 1).to_string(), &messages[2].content]),
        task: "cirag_integration".into(),
        messages,
        weight: 1.0,
        split: String::new(),
        dataset: q.dataset.clone(),
        question_id: q.id.clone(),
        segment_ids: docs,
        // Filled from the retriever by the caller.
        revisions: Vec::new(),
        method: "cirag".into(),
        params: params.to_string(),
        template_id: tid.to_string(),
        template_version: tver.to_string(),
        pipeline_hash: p.hash.clone(),
        step: Some(i as u32 + 1),
        steps: Some(t.steps.len() as u32),
        sufficient: Some(step.decision.next.is_none()),
        prompt_tokens,
        target_tokens,
        teacher: Some(teacher.to_string()),
        cache_entries: vec![step.entry.clone()],
    }
}
