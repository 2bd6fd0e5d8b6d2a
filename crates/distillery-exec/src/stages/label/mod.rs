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
//! [`crate::contract::Partitioning::Questions`]): a task reads its shard's `questions` parts and
//! every `documents`, `tables` and knowledge-base part, and writes its questions' rows into
//! parts of the question part's tag and shard, so tasks never write the same part. What a
//! chunk produced is consumed in order, streaming (no list of all samples is held):
//!
//! - one [`distillery_core::LabelRecord`] per question and method into the `labels` table;
//! - the samples: `split` by question id hash (`validation_share`); samples touching an
//!   evaluation question dropped ([`Decontaminator`]); the rest into the `sft` table and
//!   into the task's `sft/train.jsonl` / `sft/validation.jsonl` (one JSON object a line, see
//!   [`crate::kit::jsonl::jsonl_line`]), each with a line in the task's ledger ([`crate::kit::sft_merge`]);
//! - at the end the task stages its JSONL files, its ledger and its report counts for the
//!   stage's merge task ([`merge_stage`]), which removes exact duplicates (same messages)
//!   across all tasks by a rule that does not depend on the task count, writes the stage's
//!   `sft/train.jsonl` / `sft/validation.jsonl`, `sft/dataset_info.json` (LLaMA-Factory
//!   sharegpt entries `distillery_train`, `distillery_validation` for the non-empty splits,
//!   file names relative to `sft/`) and `label_report.json` ([`distillery_label::report`]
//!   over every label record). The report is counted as the stage goes: each chunk counts
//!   its label records against their questions into a [`distillery_label::report::ReportBuilder`] on the labelling
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
//!
//! The files, one job each:
//!
//! - `mod.rs`: this overview, the stage's constants and its run entry point ([`run_stage`]:
//!   the labeller, the decontaminator and the KB loaded, then each QA input labelled);
//! - `check.rs`: the stage's entry in the registry ([`Label`]): its options, their checks,
//!   its outputs and tasks;
//! - `inputs.rs`: reading the staged (or spilled) contexts into id → record maps, a KB
//!   input's triples or a `subgraph` stage's rows, and a planner stage's plans;
//! - `route.rs` ([`route`]): the contexts' estimate, the groups of questions and the spill
//!   parts routing each group's cited contexts to it;
//! - `groups.rs`: labelling one input group of questions after group, its questions
//!   streamed in part order into the lanes;
//! - `lanes.rs`: the labelling lanes (chunks labelled on blocking threads, results
//!   consumed in chunk order) and the labelling of one chunk;
//! - `verify.rs`: the teacher judging the SFT method's positives (`verify`);
//! - `clock.rs`: the CPU time per [`Phase`] (`phase_us.<phase>`);
//! - `outputs.rs`: a shard task's outputs, consumed in chunk order (Parquet batches,
//!   JSONL files, ledger, counters, report counts) and staged for the merge task;
//! - `writers.rs`: the Parquet writer task of one shard;
//! - `merge.rs`: the merge task ([`merge_stage`]);
//! - `tests.rs`: the unit tests.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use distillery_core::cpu::process_time;
use distillery_label::{LabelOptions, Labeller};
use tracing::info;

use crate::contract::{RunCx, StageOutput};
use crate::error::ExecError;
use clock::PhaseClock;
use groups::label_input;
use inputs::{Kb, load_kb, load_subgraphs, read_plans};
use outputs::Outputs;

mod check;
mod clock;
mod groups;
mod inputs;
mod lanes;
mod merge;
mod outputs;
pub mod route;
#[cfg(test)]
mod tests;
mod verify;
mod writers;

pub use check::Label;
pub use clock::Phase;
pub use merge::merge_stage;

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

/// Runs the label stage over the parts staged so far.
pub async fn run_stage(opts: &LabelOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (p, stage, out, staging, parts) = (cx.pipeline, cx.stage, cx.out, cx.dir, cx.parts);
    let (upstream, parallelism, side) = (cx.upstream, cx.parallelism, cx.side);
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

    let decon = crate::kit::decontam::load(
        &opts.split.decontaminate,
        &opts.split.decontaminate_formats,
        side,
    )
    .await?;
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
        validation_share: opts.split.validation_share,
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
