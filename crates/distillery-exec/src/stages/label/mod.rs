//! The `label` stage: teacher-free training data from the staged QA inputs.
//!
//! For each input the stage names (`inputs`, default all) that is a QA dataset, in the order
//! the stage names them:
//!
//! 1. the input's staged `documents` and `tables` parts (all shards of all its files) are read
//!    into id → record maps: the question contexts (`parallelism` parts read and decoded at
//!    once, inserted in part order), when the first question needs them. **Memory bound:
//!    about `context_memory_bytes` (default 1 GiB) of contexts**, against an estimate: an
//!    input whose contexts are estimated above it is labelled in groups of consecutive
//!    questions, each group's maps holding only what its questions cite, routed to it through
//!    spill parts ([`route`], which also holds a hash of every cited id and the
//!    spill parts' write buffers); the groups and inputs are labelled one after the other and
//!    each one's maps are dropped, once all its chunks are consumed, before the next is read;
//! 2. when `kb` names a KB input, its staged `triples` are read once into a
//!    [`distillery_label::sh::KbIndex`] (**memory bound: the whole KB**); when it names a
//!    `subgraph` stage, the task's shard of its `subgraphs` rows is read into a
//!    [`distillery_label::subgraphs::QuestionSubgraphs`] (**memory bound: the subgraphs of
//!    the task's questions**) and a question's edges are its subgraph's. Either way every question
//!    with topic entities gets the k-hop neighbourhood of them (`hops` from the question's
//!    level `"2-hop"`, capped by `max_hops`; at most [`KB_MAX_EDGES`] edges; the first hop
//!    from the side of its edges the question type puts the entity on,
//!    [`distillery_label::sh::start_side`]);
//! 3. the input's `questions` parts are streamed in part order (file tag, then shard) and
//!    labelled in chunks of [`CHUNK`] questions on blocking threads, `parallelism` chunks
//!    labelling at once (a fair semaphore: chunks start in order) and up to
//!    [`QUEUED_CHUNKS_PER_LANE`] × `parallelism` chunks queued or labelled ahead of the
//!    consumer, results consumed in chunk order (so the output does not depend on timing). A
//!    context id with no record is skipped and its question counted in
//!    `questions_missing_context`. In flight: [`QUEUED_CHUNKS_PER_LANE`] × `parallelism` ×
//!    [`CHUNK`] questions with their labels and samples; buffered for Parquet: up to
//!    `run.batch_size` rows per table (samples also flush at 8 MiB of message text), handed
//!    to the writer task of the question part (it builds, encodes and compresses them while
//!    the labelling goes on). **Memory bound for writing: the batch buffering, two queued and
//!    the one being encoded (at most 4 × 8 MiB of message text), plus 256 MiB of row groups in
//!    progress.**
//!
//! The stage runs as one task per shard of the questions (`run.shards`; see
//! [`crate::task::Partitioning::Questions`]): a task reads its shard's `questions` parts and
//! every `documents`, `tables` and knowledge-base part, and writes its questions' rows into
//! parts of the question part's tag and shard, so tasks never write the same part. What a
//! chunk produced is consumed in order, streaming (no list of all samples is held):
//!
//! - one [`LabelRecord`] per question and method into the `labels` table;
//! - the samples: `split` by question id hash (`validation_share`); samples touching an
//!   evaluation question dropped ([`Decontaminator`]); the rest into the `sft` table and
//!   into the task's `sft/train.jsonl` / `sft/validation.jsonl` (one JSON object a line, see
//!   [`jsonl_line`]), each with a line in the task's ledger ([`crate::kit::sft_merge`]);
//! - at the end the task stages its JSONL files, its ledger and its report counts for the
//!   stage's merge task ([`merge_stage`]), which removes exact duplicates (same messages)
//!   across all tasks by a rule that does not depend on the task count, writes the stage's
//!   `sft/train.jsonl` / `sft/validation.jsonl`, `sft/dataset_info.json` (LLaMA-Factory
//!   sharegpt entries `distillery_train`, `distillery_validation` for the non-empty splits,
//!   file names relative to `sft/`) and `label_report.json` ([`distillery_label::report`]
//!   over every label record). The report is counted as the stage goes: each chunk counts
//!   its label records against their questions into a [`ReportBuilder`] on the labelling
//!   thread, and the consumer adds those counts up, so **the report's memory is a set of
//!   counts per (dataset, method, question type)**, not per question; each label record is
//!   scored against its own question.
//!
//! With `verify`, the SFT method's positives are also judged by the teacher ([`verify`]) and
//! labelled as one more method, `<method>+verify`, whose trajectories become the samples;
//! counters `verify.candidates`, `verify.confirmed`, `verify.rejected`, `verify.invalid` and
//! `llm.*`.
//!
//! Summary counters: `questions`, `questions_missing_context`, `labels.<method>`,
//! `positives.<method>` (positive segments), `low_confidence.<method>`,
//! `sufficient.<method>`, `samples.<task>`, `samples.train`, `samples.validation`,
//! `duplicates_removed`, `decontaminated`, `context_groups` (groups of questions labelled,
//! over all inputs and shard tasks: one per input and task whose contexts fit the budget), `context_rows_spilled`
//! (context rows copied into spill parts, once per citing group), `decontaminate.questions` (evaluation questions
//! loaded), and `phase_us.<phase>`: the CPU time (microseconds, all threads) the stage spent in
//! each [`Phase`] (`read`, `hseq`, `label`, `samples`, `write`), so a run says which phase its
//! time went to. They add up to the CPU time the process used while the stage ran: reading the
//! contexts and `write` (the rest) are measured on the process's clock, so on a worker that
//! runs other tasks at the same time they include those tasks' CPU. The per-question phases
//! are monotonic-clock laps (`read` in `label_chunk`, the others in `label_question`), each
//! multiplied by the chunk's CPU-to-wall ratio on its labelling thread (whose CPU clock is
//! read twice a chunk); what the laps leave of that thread's CPU goes to `write`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use distillery_core::cpu::{Lap, WallLap, process_time};
use distillery_core::schema::{from_batch, sft_batch, to_batch};
use distillery_core::spec::{Pipeline, StageSpec};
use distillery_core::summary::{ManifestFile, StageSummary};
use distillery_core::{
    Document, LabelRecord, Question, SftSample, SubgraphEdge, Table, TableKind, Triple,
};
use distillery_label::report::ReportBuilder;
use distillery_label::sh::{KbIndex, KgIds, kg_ids};
use distillery_label::subgraphs::QuestionSubgraphs;
use distillery_label::{LabelOptions, Labeller, Phases, QuestionContext};
use futures::StreamExt;
use futures::stream::FuturesOrdered;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio_util::task::AbortOnDropHandle;
use tracing::{info, warn};

use crate::error::ExecError;
use crate::kit::jsonl::{JsonlLines, TextFile, content_hash, sample_split};
use crate::kit::sft_merge::{self, LedgerWriter};
use crate::parts::{PART_BUFFER_BYTES, PartWriters, WrittenPart, part_name, read_part};
use crate::run::StageOutput;
use crate::stages::RunCx;
use crate::store::Location;
use crate::task::ShardOutput;
use route::{Groups, Routes};

mod check;
pub mod route;
mod verify;

pub use check::Label;

/// Questions labelled by one blocking task.
pub const CHUNK: usize = 8;
/// Chunks queued per labelling lane (`parallelism` lanes run at once): the labelled chunks
/// wait for the consumer while it writes, so the lanes keep labelling through the consumer's
/// bursts (compressing an 8 MiB page of prompt text takes tens of milliseconds; a chunk labels
/// in a few). At most this many × `parallelism` × [`CHUNK`] questions' results are held.
pub const QUEUED_CHUNKS_PER_LANE: usize = 16;
/// Cap on the KB edges of one question's neighbourhood.
pub const KB_MAX_EDGES: usize = 2000;
pub use crate::kit::decontam::{Decontaminator, MIN_CONTAINED_WORDS};

/// The files the stage writes besides its tables, relative to the output root.
pub const TRAIN_JSONL: &str = "sft/train.jsonl";
pub const VALIDATION_JSONL: &str = "sft/validation.jsonl";
pub const DATASET_INFO: &str = "sft/dataset_info.json";
pub const LABEL_REPORT: &str = "label_report.json";
/// A shard task's report counts, staged for the merge task.
const REPORT_COUNTS: &str = "_merge/label-report-counts.json";

/// The phases of the stage whose CPU time the summary reports (`phase_us.<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading and decoding the staged contexts (documents, tables, KB triples), turning the
    /// question batches into records, and gathering each question's context records (the KB
    /// neighbourhood included).
    Read,
    /// Building each question's S_h, its candidate stream and the per-segment work the methods
    /// share (`positives::Prepared`).
    Hseq,
    /// The weak positives of every method and their trajectories.
    Label,
    /// Rendering the SFT samples (iteration-agent prompts, HANRAG samples).
    Samples,
    /// Everything else the stage did: content hashes, decontamination, JSONL lines,
    /// deduplication, the Parquet parts (building, encoding, compressing, uploading), the
    /// JSONL files, the report, loading the labeller, the Parquet decoding of the question
    /// parts (it runs inside the stream's polls), and the runtime's own work.
    Write,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Read => "read",
            Phase::Hseq => "hseq",
            Phase::Label => "label",
            Phase::Samples => "samples",
            Phase::Write => "write",
        }
    }
}

/// The phases measured directly; [`Phase::Write`] is the rest.
const MEASURED: [Phase; 4] = [Phase::Read, Phase::Hseq, Phase::Label, Phase::Samples];

/// CPU time spent in each of the [`MEASURED`] phases, summed over the stage's threads (shared
/// by its tasks); [`Phase::Write`] is what the process used besides.
#[derive(Debug)]
struct PhaseClock {
    /// The process's CPU time when the stage started.
    started: Duration,
    /// Per phase of [`MEASURED`], in its order.
    nanos: [AtomicU64; MEASURED.len()],
}

impl PhaseClock {
    fn new() -> PhaseClock {
        PhaseClock {
            started: process_time(),
            nanos: Default::default(),
        }
    }

    /// Adds CPU time to one of the [`MEASURED`] phases ([`Phase::Write`] is the rest).
    fn add(&self, phase: Phase, d: Duration) {
        debug_assert!(phase != Phase::Write, "write is not measured directly");
        let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if let Some(i) = MEASURED.iter().position(|&p| p == phase) {
            self.nanos[i].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The phases of [`Labeller::label_question`].
    fn add_question(&self, p: &Phases) {
        self.add(Phase::Hseq, p.hseq);
        self.add(Phase::Label, p.label);
        self.add(Phase::Samples, p.samples);
    }

    /// Adds `phase_us.<name>` counters to `s`: the [`MEASURED`] phases, and as `write` the rest
    /// of the CPU time the process used since the stage started.
    fn report(&self, s: &mut StageSummary) {
        self.report_of(process_time().saturating_sub(self.started), s);
    }

    /// [`PhaseClock::report`] for a process CPU time of `total` (never below the phases
    /// measured: `write` is then zero).
    fn report_of(&self, total: Duration, s: &mut StageSummary) {
        let mut measured = 0u64;
        for (p, n) in MEASURED.iter().zip(&self.nanos) {
            let nanos = n.load(Ordering::Relaxed);
            measured = measured.saturating_add(nanos);
            s.add(&format!("phase_us.{}", p.name()), nanos / 1_000);
        }
        let total = u64::try_from(total.as_nanos()).unwrap_or(u64::MAX);
        let rest = total.saturating_sub(measured);
        s.add(&format!("phase_us.{}", Phase::Write.name()), rest / 1_000);
    }
}

/// Runs the label stage over the parts staged so far.
pub async fn run_stage(cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (p, stage, out, staging, parts) = (cx.pipeline, cx.stage, cx.out, cx.dir, cx.parts);
    let (upstream, parallelism, side) = (cx.upstream, cx.parallelism, cx.side);
    let opts: &LabelOptions = crate::stages::options(stage)?;
    let started = Instant::now();
    let clock = Arc::new(PhaseClock::new());
    let (o, hash) = (opts.clone(), p.hash.clone());
    let mut labeller = tokio::task::spawn_blocking(move || Labeller::new(o, &hash))
        .await
        .map_err(task_err)??;
    if let Some(planner) = &opts.plans {
        let plans = read_plans(out, upstream, planner).await?;
        labeller.guidance = labeller.guidance.with_plans(plans);
    }
    let verifier = if opts.verify {
        let (llm, teacher) = crate::kit::teacher::Teacher::for_task(&cx)?;
        let v = Arc::new(verify::TeacherVerifier::new(
            llm,
            teacher,
            opts.templates.as_deref(),
        )?);
        labeller = labeller.with_verifier(v.clone());
        Some(v)
    } else {
        None
    };
    let mut outputs = Outputs::new(out.clone(), staging, p.run.batch_size);
    outputs.summary.stage = stage.name.clone();
    // Every documented counter is in the summary, zero or not.
    for c in [
        "questions",
        "questions_missing_context",
        "samples.train",
        "samples.validation",
        "duplicates_removed",
        "decontaminated",
        "context_groups",
        "context_rows_spilled",
    ] {
        outputs.summary.add(c, 0);
    }
    for m in labeller.method_names() {
        for c in ["labels", "positives", "low_confidence", "sufficient"] {
            outputs.summary.add(&format!("{c}.{m}"), 0);
        }
    }

    let decon =
        crate::kit::decontam::load(&opts.decontaminate, &opts.decontaminate_formats, side).await?;
    // Every shard task loads the same files: the merge task counts them once.
    outputs
        .ledger
        .once("decontaminate.questions", decon.len() as u64);

    let kb = match &opts.kb {
        Some(name) => {
            let cpu = process_time();
            let from_stage = p.input(name).is_none();
            let (kb, bytes) = if from_stage {
                let (sg, bytes) = load_subgraphs(out, parts, name, parallelism).await?;
                (Kb::Subgraphs(Arc::new(sg)), bytes)
            } else {
                let (kb, bytes) = load_kb(out, parts, name, parallelism).await?;
                (Kb::Whole(Arc::new(kb)), bytes)
            };
            clock.add(Phase::Read, process_time().saturating_sub(cpu));
            outputs.summary.bytes_in += bytes;
            info!(stage = %stage.name, kb = %name, from_stage, edges = kb.len(), "knowledge base loaded");
            Some(kb)
        }
        None => None,
    };
    let env = Env {
        clock: clock.clone(),
        labeller: Arc::new(labeller),
        kb,
        decon: Arc::new(decon),
        validation_share: opts.validation_share,
        max_hops: opts.max_hops,
        context_memory: opts.context_memory_bytes,
        verifier: verifier.clone(),
    };
    let mut done: HashSet<&str> = HashSet::new();
    for name in &stage.inputs {
        let Some(input) = p.input(name) else {
            continue;
        };
        if !input.format.is_qa() || !done.insert(name.as_str()) {
            continue;
        }
        label_input(&env, out, staging, parts, name, parallelism, &mut outputs).await?;
    }
    let mut output = outputs.finish().await?;
    if let Some(v) = &verifier {
        v.count(&mut output.summary);
    }
    clock.report(&mut output.summary);
    output.summary.seconds = started.elapsed().as_secs_f64();
    info!(
        stage = %stage.name,
        pipeline = %p.name,
        questions = output.summary.records_in,
        records = output.summary.records_out,
        "label done"
    );
    Ok(output)
}

fn task_err(e: tokio::task::JoinError) -> ExecError {
    ExecError::Task(e.to_string())
}

/// What every labelling task shares.
#[derive(Clone)]
struct Env {
    clock: Arc<PhaseClock>,
    labeller: Arc<Labeller>,
    kb: Option<Kb>,
    decon: Arc<Decontaminator>,
    validation_share: f64,
    max_hops: u32,
    /// `context_memory_bytes`: the contexts' budget per input.
    context_memory: u64,
    /// The teacher confirming positives (`verify`).
    verifier: Option<Arc<verify::TeacherVerifier>>,
}

/// One input's question contexts.
struct Contexts {
    documents: Records<Document>,
    tables: Records<Table>,
}

/// Records by id. The records lie in a vector sized once from the parts' row counts and the
/// hash table holds indexes into it: a table of whole records (a `Document` is 352 bytes
/// before its text) runs at most 7/8 full and doubles, so it held up to as many bytes again in
/// empty slots, and twice that while it grew.
struct Records<T> {
    index: HashMap<String, usize>,
    rows: Vec<T>,
}

impl<T> Records<T> {
    fn with_capacity(n: usize) -> Records<T> {
        Records {
            index: HashMap::with_capacity(n),
            rows: Vec::with_capacity(n),
        }
    }

    /// Adds a record; a later record with the same id replaces the earlier one.
    fn insert(&mut self, id: String, r: T) {
        match self.index.entry(id) {
            std::collections::hash_map::Entry::Occupied(e) => self.rows[*e.get()] = r,
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(self.rows.len());
                self.rows.push(r);
            }
        }
    }

    fn get(&self, id: &str) -> Option<&T> {
        self.index.get(id).map(|&i| &self.rows[i])
    }

    fn len(&self) -> usize {
        self.rows.len()
    }
}

/// The rows of some parts (their manifest counts), as a capacity.
fn rows_of(parts: &[(String, &WrittenPart)]) -> usize {
    parts.iter().map(|(_, p)| p.rows as usize).sum()
}

/// The staged parts of one input's table, in part order: file tag, then shard.
fn parts_of<'a>(
    parts: &'a [WrittenPart],
    table: TableKind,
    input: &str,
) -> Vec<(String, &'a WrittenPart)> {
    let mut v: Vec<(String, u32, &WrittenPart)> = parts
        .iter()
        .filter(|p| p.table == table)
        .filter_map(|p| {
            let id = p.id()?;
            (id.input == input).then_some((id.tag, id.shard, p))
        })
        .collect();
    v.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    v.into_iter().map(|(tag, _, p)| (tag, p)).collect()
}

/// Reads every row of some staged parts of one table, handing them to `each` in part order.
/// Up to `parallelism` parts are read at once, each on a task of its own (decompression on
/// the runtime's workers, decoding on blocking threads), so reading contexts uses the cores
/// the labelling will; the rows of those parts are held until their turn.
async fn read_rows<T: serde::de::DeserializeOwned + Send + 'static>(
    out: &Location,
    table: TableKind,
    parts: &[(String, &WrittenPart)],
    parallelism: usize,
    mut each: impl FnMut(T),
) -> Result<u64, ExecError> {
    let keep = |batches: Vec<Vec<T>>| batches;
    read_parts(out, table, parts, parallelism, keep, |batches| {
        batches.into_iter().flatten().for_each(&mut each)
    })
    .await
}

/// [`read_rows`] a part at a time: each part's rows (a `Vec` a decoded batch) go through
/// `then` on the part's blocking thread, and what it makes reaches `each`, in part order.
async fn read_parts<T, U>(
    out: &Location,
    table: TableKind,
    parts: &[(String, &WrittenPart)],
    parallelism: usize,
    then: impl Fn(Vec<Vec<T>>) -> U + Clone + Send + 'static,
    mut each: impl FnMut(U),
) -> Result<u64, ExecError>
where
    T: serde::de::DeserializeOwned + Send + 'static,
    U: Send + 'static,
{
    // Owned arguments, so that the stream below holds no closure over borrowed parts (its
    // future then stays `Send` for any lifetime, as a boxed stage future must be).
    let args: Vec<(Location, String)> = parts
        .iter()
        .map(|(_, part)| (out.clone(), part.path()))
        .collect();
    let reads = args.into_iter().map(|(out, path)| {
        let then = then.clone();
        // Aborted when dropped: a failed read or a cancelled stage stops the other reads.
        AbortOnDropHandle::new(tokio::spawn(async move {
            let mut rows = Vec::new();
            let mut stream = Box::pin(read_part(&out, &path).await?);
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                let decoded = tokio::task::spawn_blocking(move || from_batch::<T>(table, &batch))
                    .await
                    .map_err(task_err)??;
                rows.push(decoded);
            }
            tokio::task::spawn_blocking(move || then(rows))
                .await
                .map_err(task_err)
        }))
    });
    let mut reads = futures::stream::iter(reads).buffered(parallelism.max(1));
    while let Some(made) = reads.next().await {
        each(made.map_err(task_err)??);
    }
    Ok(parts.iter().map(|(_, p)| p.bytes).sum())
}

/// The plans of the planner stage `planner` (its `plans.jsonl`, as committed by the task that
/// wrote it), by question id.
async fn read_plans(
    out: &Location,
    upstream: &[ShardOutput],
    planner: &str,
) -> Result<HashMap<String, distillery_label::guidance::Plan>, ExecError> {
    use tokio::io::AsyncBufReadExt;
    let file = format!("{planner}/plans.jsonl");
    let Some(dir) = crate::kit::contexts::published(upstream, &file) else {
        return Err(ExecError::Task(format!(
            "`plans = \"{planner}\"`: no task below this one published {file}"
        )));
    };
    let path = format!("{dir}/{file}");
    let mut lines = out.reader(&path).await?.lines();
    let mut plans = HashMap::new();
    let bad = |e: String| ExecError::Task(format!("{}: {e}", out.show(&path)));
    while let Some(line) = lines.next_line().await.map_err(|e| bad(e.to_string()))? {
        let v: Value = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        if let (Some(id), Some(plan)) = (v["question_id"].as_str(), v["plan"].as_str()) {
            let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            let plan = distillery_label::guidance::Plan {
                text: plan.to_string(),
                teacher: field("teacher"),
                entry: field("cache_entry"),
            };
            plans.insert(id.to_string(), plan);
        }
    }
    Ok(plans)
}

/// Where questions' KB edges come from (the `kb` option).
#[derive(Clone)]
enum Kb {
    /// A KB input, whole in memory.
    Whole(Arc<KbIndex>),
    /// A `subgraph` stage's rows of the task's questions.
    Subgraphs(Arc<QuestionSubgraphs>),
}

impl Kb {
    fn len(&self) -> usize {
        match self {
            Kb::Whole(kb) => kb.len(),
            Kb::Subgraphs(sg) => sg.len(),
        }
    }
}

/// Reads the `subgraphs` parts the `subgraph` stage `stage` wrote for the task's questions
/// (a task of this stage is given its shard's only), in part order.
async fn load_subgraphs(
    out: &Location,
    parts: &[WrittenPart],
    stage: &str,
    parallelism: usize,
) -> Result<(QuestionSubgraphs, u64), ExecError> {
    let mut sg_parts: Vec<(String, u32, &WrittenPart)> = parts
        .iter()
        .filter(|p| p.table == TableKind::Subgraphs)
        .filter_map(|p| {
            let id = p.id()?;
            (id.stage.as_deref() == Some(stage)).then_some((id.tag, id.shard, p))
        })
        .collect();
    sg_parts.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let sg_parts: Vec<(String, &WrittenPart)> =
        sg_parts.into_iter().map(|(t, _, p)| (t, p)).collect();
    let mut rows: Vec<SubgraphEdge> = Vec::with_capacity(rows_of(&sg_parts));
    let bytes = read_rows(out, TableKind::Subgraphs, &sg_parts, parallelism, |r| {
        rows.push(r)
    })
    .await?;
    let sg = tokio::task::spawn_blocking(move || QuestionSubgraphs::new(rows))
        .await
        .map_err(task_err)?;
    Ok((sg, bytes))
}

/// Reads a KB input's staged triples and literals into an index (the whole KB is held in memory), up to
/// `parallelism` parts at once: each part's edges get the segment ids the HSEQ stage gives
/// them ([`kg_ids`], on the part's thread), so the samples' segment ids join the `segments`
/// table.
async fn load_kb(
    out: &Location,
    parts: &[WrittenPart],
    input: &str,
    parallelism: usize,
) -> Result<(KbIndex, u64), ExecError> {
    let mut read: Vec<(Vec<Triple>, Vec<KgIds>)> = Vec::new();
    let mut bytes = 0;
    for table in TableKind::KG_EDGES {
        let kb_parts = parts_of(parts, table, input);
        let with_ids = |batches: Vec<Vec<Triple>>| {
            let rows: Vec<Triple> = batches.into_iter().flatten().collect();
            let ids = kg_ids(&rows);
            (rows, ids)
        };
        bytes += read_parts(out, table, &kb_parts, parallelism, with_ids, |p| {
            read.push(p)
        })
        .await?;
    }
    let kb = tokio::task::spawn_blocking(move || KbIndex::from_parts(read))
        .await
        .map_err(task_err)?;
    Ok((kb, bytes))
}

/// Reads some staged (or spilled) `documents` and `tables` parts into memory; returns them
/// with the bytes of the parts read.
async fn load_contexts(
    out: &Location,
    docs: &[(String, &WrittenPart)],
    tables: &[(String, &WrittenPart)],
    parallelism: usize,
) -> Result<(Contexts, u64), ExecError> {
    let mut ctx = Contexts {
        documents: Records::with_capacity(rows_of(docs)),
        tables: Records::with_capacity(rows_of(tables)),
    };
    let mut bytes = read_rows(
        out,
        TableKind::Documents,
        docs,
        parallelism,
        |d: Document| {
            ctx.documents.insert(d.id.clone(), d);
        },
    )
    .await?;
    bytes += read_rows(out, TableKind::Tables, tables, parallelism, |t: Table| {
        ctx.tables.insert(t.id.clone(), t);
    })
    .await?;
    Ok((ctx, bytes))
}

/// The labelling lanes of one input: chunks in flight, consumed in the order queued.
struct Lanes {
    lanes: usize,
    permits: Arc<Semaphore>,
    inflight: FuturesOrdered<AbortOnDropHandle<Result<ChunkResult, ExecError>>>,
}

impl Lanes {
    fn new(parallelism: usize) -> Lanes {
        let lanes = parallelism.max(1);
        Lanes {
            lanes,
            permits: Arc::new(Semaphore::new(lanes)),
            inflight: FuturesOrdered::new(),
        }
    }

    /// Queues a chunk for labelling against `ctx`; while [`QUEUED_CHUNKS_PER_LANE`] chunks a
    /// lane are queued, consumes the oldest.
    async fn push(
        &mut self,
        env: &Env,
        ctx: &Arc<Contexts>,
        chunk: Vec<Question>,
        outputs: &mut Outputs,
    ) -> Result<(), ExecError> {
        let (env, ctx, permits) = (env.clone(), ctx.clone(), self.permits.clone());
        self.inflight
            .push_back(AbortOnDropHandle::new(tokio::spawn(async move {
                // Fair (FIFO): chunks start in the order they were queued.
                let _lane = permits
                    .acquire_owned()
                    .await
                    .map_err(|e| ExecError::Task(e.to_string()))?;
                tokio::task::spawn_blocking(move || {
                    let r = label_chunk(&env, &ctx, chunk);
                    match env.verifier.as_ref().and_then(|v| v.take_error()) {
                        Some(e) => Err(e),
                        None => Ok(r),
                    }
                })
                .await
                .map_err(task_err)?
            })));
        while self.inflight.len() >= self.lanes * QUEUED_CHUNKS_PER_LANE {
            let r = self.inflight.next().await.expect("tasks in flight");
            outputs.consume(r.map_err(task_err)??).await?;
        }
        Ok(())
    }

    /// Consumes every chunk in flight.
    async fn drain(&mut self, outputs: &mut Outputs) -> Result<(), ExecError> {
        while let Some(r) = self.inflight.next().await {
            outputs.consume(r.map_err(task_err)??).await?;
        }
        Ok(())
    }
}

/// Labels one QA input: its contexts into memory (whole, or per group of questions when they
/// are estimated above the budget, see [`route`]), then its questions streamed in
/// part order.
#[allow(clippy::too_many_arguments)]
async fn label_input(
    env: &Env,
    out: &Location,
    staging: &str,
    parts: &[WrittenPart],
    input: &str,
    parallelism: usize,
    outputs: &mut Outputs,
) -> Result<(), ExecError> {
    let started = Instant::now();
    let before = outputs.summary.records_in;
    let docs = parts_of(parts, TableKind::Documents, input);
    let tables = parts_of(parts, TableKind::Tables, input);
    let questions = parts_of(parts, TableKind::Questions, input);
    let estimate = route::estimate(out, &docs, &tables).await?;
    let n_questions = rows_of(&questions) as u64;
    let groups = Groups::plan(estimate, env.context_memory, n_questions);
    outputs
        .summary
        .add("context_groups", u64::from(groups.count));
    let routed = estimate > env.context_memory && n_questions > 0;
    let dir = route::spill_dir(staging, input);
    let result = async {
        let mut spilled = if routed {
            let cpu = process_time();
            let routes = Routes::of_questions(out, &questions, groups).await?;
            let wave = route::groups_per_wave(env.context_memory);
            let s =
                route::spill(out, staging, input, &docs, &tables, &routes, groups, wave).await?;
            env.clock
                .add(Phase::Read, process_time().saturating_sub(cpu));
            outputs.summary.bytes_in += s.bytes_in;
            outputs.summary.add("context_rows_spilled", s.rows_out);
            info!(
                input,
                estimate_bytes = estimate,
                budget_bytes = env.context_memory,
                groups = groups.count,
                questions_per_group = groups.size,
                groups_per_wave = wave,
                cited_documents = routes.documents.len(),
                cited_tables = routes.tables.len(),
                rows_spilled = s.rows_out,
                seconds = started.elapsed().as_secs_f64(),
                "contexts routed to groups of questions"
            );
            Some(s)
        } else {
            None
        };
        label_groups(
            env,
            out,
            (&docs, &tables, &questions),
            groups,
            spilled.as_mut(),
            parallelism,
            outputs,
        )
        .await
    }
    .await;
    if routed {
        // Whatever the labelling's outcome: the spill parts left (all of them when it failed).
        let removed = route::remove_spill_dir(out, &dir).await;
        match (&result, removed) {
            (Ok(()), Err(e)) => return Err(e),
            (Err(_), Err(e)) => {
                warn!(input, error = %e, "spill parts not removed (the staging directory goes with the run)")
            }
            (_, Ok(())) => {}
        }
    }
    result?;
    let n = outputs.summary.records_in - before;
    let secs = started.elapsed().as_secs_f64();
    info!(
        input,
        questions = n,
        seconds = secs,
        per_second = n as f64 / secs.max(1e-9),
        contexts_estimate_bytes = estimate,
        context_groups = groups.count,
        "input labelled"
    );
    Ok(())
}

/// The staged `documents`, `tables` and `questions` parts of one input.
type InputParts<'a, 'b> = (
    &'b [(String, &'a WrittenPart)],
    &'b [(String, &'a WrittenPart)],
    &'b [(String, &'a WrittenPart)],
);

/// Labels the questions of one input group after group: each group's contexts are read when
/// its first question comes (the input's whole contexts when there is one group, else its
/// spill parts), after every chunk of the group before was consumed and its contexts dropped.
async fn label_groups(
    env: &Env,
    out: &Location,
    (docs, tables, questions): InputParts<'_, '_>,
    groups: Groups,
    mut spilled: Option<&mut route::Spilled>,
    parallelism: usize,
    outputs: &mut Outputs,
) -> Result<(), ExecError> {
    let started = Instant::now();
    let mut lanes = Lanes::new(parallelism);
    let mut ctx: Option<Arc<Contexts>> = None;
    let mut group: Option<u32> = None;
    let mut position = 0u64;
    for (tag, part) in questions {
        if outputs.part() != Some((tag.as_str(), part.shard)) {
            lanes.drain(outputs).await?;
            outputs.start_tag(tag, part.shard).await?;
        }
        outputs.summary.bytes_in += part.bytes;
        let mut stream = Box::pin(read_part(out, &part.path()).await?);
        while let Some(batch) = stream.next().await {
            let mut lap = Lap::start();
            let batch: Vec<Question> = from_batch(TableKind::Questions, &batch?)?;
            env.clock.add(Phase::Read, lap.lap());
            let mut chunk = Vec::with_capacity(CHUNK);
            for q in batch {
                let g = groups.of(position);
                position += 1;
                if group != Some(g) {
                    if let Some(c) = &ctx
                        && !chunk.is_empty()
                    {
                        lanes
                            .push(env, c, std::mem::take(&mut chunk), outputs)
                            .await?;
                    }
                    lanes.drain(outputs).await?;
                    // The group before's contexts go before the next group's are read.
                    drop(ctx.take());
                    if let (Some(s), Some(done)) = (spilled.as_deref_mut(), group) {
                        s.remove(out, done).await?;
                    }
                    let cpu = process_time();
                    let (c, bytes) = match spilled.as_deref() {
                        Some(s) => {
                            let d = s.parts(g, TableKind::Documents);
                            let t = s.parts(g, TableKind::Tables);
                            load_contexts(out, &d, &t, parallelism).await?
                        }
                        None => {
                            let (c, bytes) = load_contexts(out, docs, tables, parallelism).await?;
                            outputs.summary.bytes_in += bytes;
                            (c, bytes)
                        }
                    };
                    env.clock
                        .add(Phase::Read, process_time().saturating_sub(cpu));
                    info!(
                        group = g,
                        groups = groups.count,
                        documents = c.documents.len(),
                        tables = c.tables.len(),
                        bytes,
                        seconds = started.elapsed().as_secs_f64(),
                        "contexts read"
                    );
                    ctx = Some(Arc::new(c));
                    group = Some(g);
                }
                chunk.push(q);
                if chunk.len() == CHUNK {
                    let c = ctx.as_ref().expect("contexts read above");
                    lanes
                        .push(env, c, std::mem::take(&mut chunk), outputs)
                        .await?;
                }
            }
            if let Some(c) = &ctx
                && !chunk.is_empty()
            {
                lanes.push(env, c, chunk, outputs).await?;
            }
        }
    }
    lanes.drain(outputs).await?;
    outputs.finish_tag().await
}

/// A sample made ready on a labelling thread: its split set, its content hash and
/// contamination checked, its JSONL line rendered.
struct Prepared {
    sample: SftSample,
    hash: u128,
    contaminated: bool,
    line: String,
}

/// What one chunk of questions produced.
#[derive(Default)]
struct ChunkResult {
    questions: u64,
    missing_context: u64,
    labels: Vec<LabelRecord>,
    samples: Vec<Prepared>,
    /// The chunk's label records counted for the report.
    report: ReportBuilder,
}

/// Labels a chunk of questions (on a blocking thread).
fn label_chunk(env: &Env, ctx: &Contexts, questions: Vec<Question>) -> ChunkResult {
    let mut r = ChunkResult::default();
    let mut lines = JsonlLines::default();
    // The thread's CPU clock is read twice a chunk (a system call each); the phases inside
    // are timed with monotonic-clock laps, turned into CPU time by the chunk's ratio.
    let (mut cpu, wall) = (Lap::start(), Instant::now());
    let (mut read, mut phases) = (Duration::ZERO, Phases::default());
    for q in &questions {
        let mut lap = WallLap::start();
        r.questions += 1;
        let mut missing = false;
        let documents: Vec<&Document> = q
            .context_documents
            .iter()
            .filter_map(|id| {
                let d = ctx.documents.get(id);
                missing |= d.is_none();
                d
            })
            .collect();
        let tables: Vec<&Table> = q
            .context_tables
            .iter()
            .filter_map(|id| {
                let t = ctx.tables.get(id);
                missing |= t.is_none();
                t
            })
            .collect();
        if missing {
            r.missing_context += 1;
        }
        let (triples, kg_ids) = match &env.kb {
            Some(Kb::Whole(kb)) if !q.topic_entities.is_empty() => {
                kb.for_question_with_ids(q, env.max_hops, KB_MAX_EDGES)
            }
            Some(Kb::Subgraphs(sg)) => sg.for_question(q, env.max_hops, KB_MAX_EDGES),
            _ => (Vec::new(), Vec::new()),
        };
        read += lap.lap();
        let out = env.labeller.label_question(&QuestionContext {
            question: q,
            documents: &documents,
            tables: &tables,
            triples: &triples,
            kg_ids: &kg_ids,
        });
        phases += out.phases;
        r.report.add_question(q, &out.labels);
        r.labels.extend(out.labels);
        for mut sample in out.samples {
            sample.split = sample_split(&sample, env.validation_share).to_string();
            let hash = content_hash(&sample);
            let contaminated = env.decon.touches(&q.question, &sample);
            let line = lines.line(&sample);
            r.samples.push(Prepared {
                sample,
                hash,
                contaminated,
                line,
            });
        }
    }
    let (read, phases) = to_cpu(cpu.lap(), wall.elapsed(), read, phases);
    env.clock.add(Phase::Read, read);
    env.clock.add_question(&phases);
    r
}

/// The CPU time of monotonic-clock laps taken on one thread over an interval of `wall` in which
/// the thread used `cpu`: each lap times the CPU-to-wall ratio (at most 1, as a thread runs on
/// one core at a time; 1 when no time passed), so a thread that lost its core part of the
/// time has that part taken off its laps in proportion to their lengths. The laps stay within
/// `cpu`; what they leave of it (the thread's untimed work) is counted with `write`.
fn to_cpu(cpu: Duration, wall: Duration, read: Duration, phases: Phases) -> (Duration, Phases) {
    let ratio = if wall.is_zero() {
        1.0
    } else {
        (cpu.as_secs_f64() / wall.as_secs_f64()).min(1.0)
    };
    (read.mul_f64(ratio), phases.scaled(ratio))
}

/// Message bytes of SFT samples buffered per shard before a Parquet batch is written, whatever
/// `run.batch_size` says: samples carry whole prompts (kilobytes each), so a row cap alone
/// would buffer hundreds of megabytes across the shards.
const SAMPLE_BUFFER_BYTES: usize = 8 << 20;

/// Rows for one shard's Parquet parts.
enum Rows {
    Labels(Vec<LabelRecord>),
    Samples(Vec<SftSample>),
}

/// Batches in a shard writer's queue: with [`SAMPLE_BUFFER_BYTES`] of samples a batch, at most
/// this many + 1 (the one being written) such batches per shard are held.
const SHARD_QUEUE: usize = 2;

/// The `labels` and `sft` parts of one shard of the current tag, written by a task of its own
/// (building the batch, encoding and compressing it), so the shards encode in parallel with
/// each other and with the labelling while the consumer moves on. Rows reach it in the order
/// they were sent.
struct ShardWriter {
    tx: tokio::sync::mpsc::Sender<Rows>,
    task: AbortOnDropHandle<Result<Vec<WrittenPart>, ExecError>>,
}

impl ShardWriter {
    fn spawn(mut writers: PartWriters, shard: u32) -> ShardWriter {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Rows>(SHARD_QUEUE);
        let task = AbortOnDropHandle::new(tokio::spawn(async move {
            while let Some(rows) = rx.recv().await {
                match rows {
                    Rows::Labels(r) => {
                        write_rows(&mut writers, TableKind::Labels, shard, &r).await?;
                    }
                    Rows::Samples(r) => write_sft_rows(&mut writers, shard, &r).await?,
                }
            }
            writers.finish().await
        }));
        ShardWriter { tx, task }
    }

    /// Queues rows (waits while the queue is full). When the task has stopped on an error,
    /// returns that error; the stage then fails, and the writer is not used again.
    async fn send(&mut self, rows: Rows) -> Result<(), ExecError> {
        if self.tx.send(rows).await.is_ok() {
            return Ok(());
        }
        match (&mut self.task).await {
            Ok(Err(e)) => Err(e),
            Ok(Ok(_)) => Err(ExecError::Task("shard writer stopped early".into())),
            Err(e) => Err(task_err(e)),
        }
    }

    /// Closes the queue and the shard's parts.
    async fn finish(self) -> Result<Vec<WrittenPart>, ExecError> {
        drop(self.tx);
        self.task.await.map_err(task_err)?
    }
}

/// The part writers of the current question part (tag and shard): its questions' label
/// records and samples go to parts of the same tag and shard.
struct TagWriters {
    tag: String,
    shard: u32,
    out: Location,
    staging: String,
    /// Bytes each shard's parts may buffer (row groups in progress): [`PART_BUFFER_BYTES`]
    /// over the shards.
    budget: usize,
    /// One writer per shard written so far.
    writers: BTreeMap<u32, ShardWriter>,
    labels: BTreeMap<u32, Vec<LabelRecord>>,
    samples: BTreeMap<u32, Vec<SftSample>>,
    /// Message bytes buffered per shard in `samples`.
    sample_bytes: BTreeMap<u32, usize>,
}

impl TagWriters {
    /// Queues rows for a shard's writer, started on first use.
    async fn send(&mut self, shard: u32, rows: Rows) -> Result<(), ExecError> {
        let w = match self.writers.entry(shard) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let parts = PartWriters::new(self.out.clone(), &self.staging, &self.tag)
                    .with_budget(self.budget);
                e.insert(ShardWriter::spawn(parts, shard))
            }
        };
        w.send(rows).await
    }
}

/// Everything the stage writes, consumed in order.
struct Outputs {
    out: Location,
    staging: String,
    batch_size: usize,
    summary: StageSummary,
    current: Option<TagWriters>,
    parts: Vec<WrittenPart>,
    /// Every sample written, for the merge task's duplicate removal.
    ledger: LedgerWriter,
    train: TextFile,
    validation: TextFile,
    /// The report's counts over every label record so far.
    report: ReportBuilder,
}

impl Outputs {
    fn new(out: Location, staging: &str, batch_size: usize) -> Outputs {
        Outputs {
            train: TextFile::new(&out, staging, TRAIN_JSONL),
            validation: TextFile::new(&out, staging, VALIDATION_JSONL),
            ledger: LedgerWriter::new(&out, staging),
            out,
            staging: staging.to_string(),
            batch_size: batch_size.max(1),
            summary: StageSummary::new("label"),
            current: None,
            parts: Vec::new(),
            report: ReportBuilder::default(),
        }
    }

    /// The tag and shard of the question part being labelled.
    fn part(&self) -> Option<(&str, u32)> {
        self.current.as_ref().map(|c| (c.tag.as_str(), c.shard))
    }

    async fn start_tag(&mut self, tag: &str, shard: u32) -> Result<(), ExecError> {
        self.finish_tag().await?;
        self.current = Some(TagWriters {
            tag: tag.to_string(),
            shard,
            out: self.out.clone(),
            staging: self.staging.clone(),
            budget: PART_BUFFER_BYTES,
            writers: BTreeMap::new(),
            labels: BTreeMap::new(),
            samples: BTreeMap::new(),
            sample_bytes: BTreeMap::new(),
        });
        Ok(())
    }

    /// Flushes the buffers of the current tag (in shard order) and closes its parts.
    async fn finish_tag(&mut self) -> Result<(), ExecError> {
        let Some(mut c) = self.current.take() else {
            return Ok(());
        };
        for (shard, rows) in std::mem::take(&mut c.labels) {
            c.send(shard, Rows::Labels(rows)).await?;
        }
        for (shard, rows) in std::mem::take(&mut c.samples) {
            c.send(shard, Rows::Samples(rows)).await?;
        }
        for w in std::mem::take(&mut c.writers).into_values() {
            self.parts.extend(w.finish().await?);
        }
        Ok(())
    }

    /// Takes what a chunk produced, in chunk order.
    async fn consume(&mut self, r: ChunkResult) -> Result<(), ExecError> {
        let s = &mut self.summary;
        s.records_in += r.questions;
        s.add("questions", r.questions);
        s.add("questions_missing_context", r.missing_context);
        let c = self
            .current
            .as_mut()
            .expect("a tag is open while questions are read");
        for l in r.labels {
            s.add(&format!("labels.{}", l.method), 1);
            let own = l
                .positives
                .iter()
                .filter(|p| !p.reason.starts_with("within:"));
            s.add(&format!("positives.{}", l.method), own.count() as u64);
            s.add(
                &format!("low_confidence.{}", l.method),
                u64::from(l.low_confidence),
            );
            s.add(&format!("sufficient.{}", l.method), u64::from(l.sufficient));
            s.records_out += 1;
            let shard = c.shard;
            let buf = c.labels.entry(shard).or_default();
            buf.push(l);
            if buf.len() >= self.batch_size {
                let rows = std::mem::take(buf);
                c.send(shard, Rows::Labels(rows)).await?;
            }
        }
        self.report.merge(r.report);
        for p in r.samples {
            if p.contaminated {
                s.add("decontaminated", 1);
                continue;
            }
            // Duplicates are removed, and the kept samples counted, by the merge task.
            let sample = p.sample;
            if sample.split == "validation" {
                self.validation.write(&p.line).await?;
            } else {
                self.train.write(&p.line).await?;
            }
            let shard = c.shard;
            self.ledger
                .add(&sample, p.hash, &part_name(TableKind::Sft, shard, &c.tag))
                .await?;
            let bytes = c.sample_bytes.entry(shard).or_default();
            *bytes += sample
                .messages
                .iter()
                .map(|m| m.content.len())
                .sum::<usize>();
            let full = *bytes >= SAMPLE_BUFFER_BYTES;
            let buf = c.samples.entry(shard).or_default();
            buf.push(sample);
            if buf.len() >= self.batch_size || full {
                c.sample_bytes.insert(shard, 0);
                let rows = std::mem::take(buf);
                c.send(shard, Rows::Samples(rows)).await?;
            }
        }
        Ok(())
    }

    /// Closes everything and stages, for the merge task, the JSONL files, the ledger of
    /// their samples and the report's counts.
    async fn finish(mut self) -> Result<StageOutput, ExecError> {
        self.finish_tag().await?;
        let mut intermediate = vec![self.train.finish().await?, self.validation.finish().await?];
        intermediate.extend(self.ledger.finish().await?);
        let report = serde_json::to_vec(&self.report).expect("report counts serialize");
        let n = report.len() as u64;
        intermediate.push(put(&self.out, &self.staging, REPORT_COUNTS, report, n).await?);
        let mut summary = self.summary;
        summary.bytes_out = self.parts.iter().map(|p| p.bytes).sum::<u64>();
        self.parts.sort_by(|a, b| a.rel.cmp(&b.rel));
        Ok(StageOutput {
            summary,
            parts: self.parts,
            intermediate,
            ..Default::default()
        })
    }
}

/// The merge task of a label stage: the shard tasks' SFT files joined
/// ([`crate::kit::sft_merge`]: duplicates removed across shards, `dataset_info.json`) and their
/// report counts added up into `label_report.json`.
pub async fn merge_stage(
    _p: &Pipeline,
    stage: &StageSpec,
    out: &Location,
    staging: &str,
    shards: &[ShardOutput],
) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let mut summary = StageSummary::new(&stage.name);
    let merged = sft_merge::merge_sft(out, staging, "sft", shards, &mut summary).await?;
    let mut report = ReportBuilder::default();
    for s in shards {
        let rel = format!("{}/{REPORT_COUNTS}", s.output.dir);
        let b = out.read(&rel).await?;
        let r: ReportBuilder = serde_json::from_slice(&b)
            .map_err(|e| ExecError::Task(format!("{}: {e}", out.show(&rel))))?;
        report.merge(r);
    }
    let report = pretty(&report.finish().to_json());
    let mut files = merged.files;
    let f = put(out, staging, LABEL_REPORT, report, 1).await?;
    summary.bytes_out += f.bytes;
    files.push(f);
    summary.seconds = started.elapsed().as_secs_f64();
    info!(
        stage = %stage.name,
        shards = shards.len(),
        samples = summary.records_out,
        duplicates = summary.counters.get("duplicates_removed").copied().unwrap_or(0),
        "label shards merged"
    );
    Ok(StageOutput {
        summary,
        parts: merged.parts,
        files,
        adopted: merged.adopted,
        ..Default::default()
    })
}

/// Stages a small file whole.
async fn put(
    out: &Location,
    staging: &str,
    rel: &str,
    data: Vec<u8>,
    rows: u64,
) -> Result<ManifestFile, ExecError> {
    let bytes = data.len() as u64;
    out.write(&format!("{staging}/{rel}"), data).await?;
    Ok(ManifestFile {
        path: rel.to_string(),
        rows,
        bytes,
    })
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("json values serialize");
    b.push(b'\n');
    b
}

async fn write_rows<T: serde::Serialize>(
    w: &mut PartWriters,
    table: TableKind,
    shard: u32,
    rows: &[T],
) -> Result<(), ExecError> {
    if rows.is_empty() {
        return Ok(());
    }
    let batch = to_batch(table, rows)?;
    w.write(table, shard, &batch).await
}

/// [`write_rows`] for SFT samples ([`sft_batch`]: buffers sized once, not grown).
async fn write_sft_rows(
    w: &mut PartWriters,
    shard: u32,
    rows: &[SftSample],
) -> Result<(), ExecError> {
    if rows.is_empty() {
        return Ok(());
    }
    w.write(TableKind::Sft, shard, &sft_batch(rows)?).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::jsonl::{dataset_info, jsonl_line, split_of};
    use distillery_core::Message;
    use serde_json::json;

    #[tokio::test]
    async fn a_task_without_the_planned_evaluation_files_fails() {
        let opts = LabelOptions {
            decontaminate: vec!["/evals/*.json".into()],
            ..LabelOptions::default()
        };
        let Err(e) =
            crate::kit::decontam::load(&opts.decontaminate, &opts.decontaminate_formats, &[]).await
        else {
            panic!("a task without its evaluation files ran");
        };
        assert!(e.to_string().contains("older coordinator"), "{e}");
        // Without `decontaminate`, no side file is needed.
        let none = crate::kit::decontam::load(&[], &[], &[]).await;
        assert_eq!(none.unwrap().len(), 0);
    }

    fn sample(user: &str) -> SftSample {
        SftSample {
            id: "s1".into(),
            task: "hseq_iteration".into(),
            messages: vec![
                Message {
                    role: "system".into(),
                    content: "Pick segments.".into(),
                },
                Message {
                    role: "user".into(),
                    content: user.into(),
                },
                Message {
                    role: "assistant".into(),
                    content: "{\"type\": \"select\"}".into(),
                },
            ],
            weight: 1.0,
            params: "{\"k\": 2, \"a\": [1]}".into(),
            step: Some(1),
            ..Default::default()
        }
    }

    /// A write that fails in a shard writer's task comes back from the stage's side: here
    /// the staging directory lies under a regular file, so closing the part fails.
    #[tokio::test]
    async fn shard_writer_errors_reach_the_consumer() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("blocker"), b"a file, not a directory").unwrap();
        let loc = crate::store::open_location(dir.path().to_str().unwrap(), false).unwrap();
        let parts = PartWriters::new(loc.clone(), "blocker/staging", "hotpot-0000");
        let rows = || {
            Rows::Labels(vec![LabelRecord {
                id: "l1".into(),
                ..Default::default()
            }])
        };
        let mut w = ShardWriter::spawn(parts, 3);
        w.send(rows()).await.unwrap();
        let err = w.finish().await.unwrap_err().to_string();
        assert!(
            err.contains("blocker/staging/labels/part-00003-hotpot-0000.parquet"),
            "{err}"
        );

        // The same rows in a writable place give one part with one row.
        let parts = PartWriters::new(loc, "ok", "hotpot-0000");
        let mut w = ShardWriter::spawn(parts, 3);
        w.send(rows()).await.unwrap();
        let written = w.finish().await.unwrap();
        assert_eq!(written.len(), 1);
        assert_eq!(written[0].rows, 1);
    }

    /// `write` is the process time the measured phases leave, never below zero.
    #[test]
    fn phase_clock_reports_the_rest_as_write() {
        let clock = PhaseClock::new();
        clock.add(Phase::Read, Duration::from_micros(100));
        clock.add(Phase::Hseq, Duration::from_micros(20));
        clock.add(Phase::Label, Duration::from_micros(30));
        clock.add(Phase::Label, Duration::from_micros(5));
        clock.add(Phase::Samples, Duration::from_micros(40));
        let mut s = StageSummary::new("label");
        clock.report_of(Duration::from_micros(1_000), &mut s);
        let us = |p: &str| s.counters[&format!("phase_us.{p}")];
        assert_eq!(
            [
                us("read"),
                us("hseq"),
                us("label"),
                us("samples"),
                us("write")
            ],
            [100, 20, 35, 40, 805]
        );
        let mut s = StageSummary::new("label");
        clock.report_of(Duration::from_micros(150), &mut s);
        assert_eq!(s.counters["phase_us.write"], 0);
        assert_eq!(s.counters["phase_us.samples"], 40);
    }

    /// A chunk's laps keep their proportions, get the thread's CPU time when it lost its core
    /// part of the time, and never add up to more than the CPU time of the chunk.
    #[test]
    fn laps_become_cpu_time_in_proportion() {
        let ms = Duration::from_millis;
        let laps = Phases {
            hseq: ms(8),
            label: ms(20),
            samples: ms(8),
        };
        let sum = |(read, p): (Duration, Phases)| read + p.hseq + p.label + p.samples;
        // 30 ms of CPU in 40 ms: every lap times 0.75.
        let (read, p) = to_cpu(ms(30), ms(40), ms(4), laps);
        assert_eq!(
            (read, p.hseq, p.label, p.samples),
            (ms(3), ms(6), ms(15), ms(6))
        );
        assert_eq!(sum((read, p)), ms(30));
        // Laps that leave part of the interval untimed leave it to `write`.
        assert_eq!(sum(to_cpu(ms(60), ms(80), ms(4), laps)), ms(30));
        // A CPU reading ahead of the wall clock never makes the laps longer.
        assert_eq!(sum(to_cpu(ms(41), ms(40), ms(4), laps)), ms(40));
        assert_eq!(sum(to_cpu(ms(1), Duration::ZERO, ms(4), laps)), ms(40));
    }

    #[test]
    fn decontamination_finds_questions_inside_prompts() {
        let mut d = Decontaminator::default();
        d.add("Which city hosted the 1992 Summer Olympics?");
        d.add("Who?");
        assert_eq!(d.len(), 2);
        let s = sample("### Question\nwhich CITY hosted the 1992 summer Olympics\n### Guidance");
        assert!(d.touches("unrelated question here", &s));
        assert!(!d.touches("unrelated", &sample("Which city hosted the 1996 Olympics?")));
        // Short questions only match the sample's own question, exactly.
        assert!(!d.touches("unrelated", &sample("who is it")));
        assert!(d.touches("Who", &sample("anything")));
        // Whole words only.
        assert!(!d.contained_in("xwhich city hosted the 1992 summer olympics"));
        assert!(!Decontaminator::default().touches("Who?", &s));
    }

    #[test]
    fn jsonl_lines_keep_key_order_and_params_as_an_object() {
        let line = jsonl_line(&sample("q"));
        assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "id",
                "messages",
                "weight",
                "task",
                "dataset",
                "question_id",
                "segment_ids",
                "method",
                "params",
                "template_id",
                "template_version",
                "pipeline_hash",
                "step",
                "steps",
                "sufficient",
                "prompt_tokens",
                "target_tokens",
                "teacher",
                "cache_entries",
                "revisions"
            ]
        );
        assert_eq!(v["params"]["k"], 2);
        assert_eq!(v["messages"][1]["role"], "user");
        assert!(v["steps"].is_null());
    }

    /// The line as `serde_json` writes the same object (the reference of [`JsonlLines`]).
    fn serde_line(s: &SftSample) -> String {
        let params = serde_json::from_str::<Value>(&s.params).unwrap_or_else(|_| json!(s.params));
        let mut v = serde_json::to_string(&json!({
            "id": s.id, "messages": s.messages, "weight": s.weight, "task": s.task,
            "dataset": s.dataset, "question_id": s.question_id, "segment_ids": s.segment_ids,
            "method": s.method, "params": params, "template_id": s.template_id,
            "template_version": s.template_version, "pipeline_hash": s.pipeline_hash,
            "step": s.step, "steps": s.steps, "sufficient": s.sufficient,
            "prompt_tokens": s.prompt_tokens, "target_tokens": s.target_tokens,
            "teacher": s.teacher, "cache_entries": s.cache_entries, "revisions": s.revisions,
        }))
        .unwrap();
        v.push('\n');
        v
    }

    #[test]
    fn jsonl_lines_are_what_serde_json_writes() {
        // Every byte below 0x80 and some above, in pseudo-random strings of every length up
        // to 40 (so escapes fall at every offset of the eight-byte words).
        let alphabet: Vec<char> = (0u8..0x80)
            .map(char::from)
            .chain("é€😀\u{2028}ÿ".chars())
            .collect();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut lines = JsonlLines::default();
        for n in 0..2000 {
            let len = n % 41;
            let text: String = (0..len)
                .map(|_| alphabet[next() as usize % alphabet.len()])
                .collect();
            let mut s = sample(&text);
            s.id = text.chars().rev().collect();
            s.segment_ids = vec![text.clone(), "p1".into()];
            s.weight = [1.0, 0.5, 1.0 / 3.0, 1e-7, f64::NAN][n % 5];
            s.step = (n % 3 > 0).then_some(n as u32);
            s.steps = (n % 4 > 0).then_some(3);
            s.sufficient = [None, Some(true), Some(false)][n % 3];
            s.teacher = (n % 2 == 1).then(|| format!("m\"{text}@r"));
            s.cache_entries = (0..n % 3).map(|k| format!("{k}{text}")).collect();
            s.revisions = (0..n % 3)
                .map(|k| format!("enwiki#{k}@{n}{text}"))
                .collect();
            s.params = match n % 4 {
                0 => "{\"k\": 2, \"a\": [1.5, \"x\\\"y\"], \"b\": {\"c\": null}}".into(),
                1 => "not json \u{1}".into(),
                2 => String::new(),
                _ => format!("{{\"n\":{n}}}"),
            };
            assert_eq!(lines.line(&s), serde_line(&s), "{text:?}");
            assert_eq!(jsonl_line(&s), serde_line(&s), "{text:?}");
        }
    }

    #[test]
    fn splits_follow_the_share_and_duplicates_hash_alike() {
        let n = 4000;
        let val = (0..n)
            .filter(|i| split_of(&format!("id{i}"), 0.1) == "validation")
            .count();
        assert!((300..500).contains(&val), "{val}");
        assert!((0..100).all(|i| split_of(&format!("id{i}"), 0.0) == "train"));
        let (a, mut b) = (sample("q"), sample("q"));
        b.id = "other".into();
        assert_eq!(content_hash(&a), content_hash(&b));
        assert_ne!(content_hash(&a), content_hash(&sample("q2")));
    }

    #[test]
    fn dataset_info_is_in_the_sharegpt_form() {
        let v = dataset_info(&[("train", "train.jsonl")]);
        let e = &v["distillery_train"];
        assert_eq!(e["file_name"], "train.jsonl");
        assert_eq!(e["formatting"], "sharegpt");
        assert_eq!(e["columns"]["messages"], "messages");
        assert_eq!(e["tags"]["assistant_tag"], "assistant");
        assert_eq!(e["tags"]["system_tag"], "system");
    }
}
