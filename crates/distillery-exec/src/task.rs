//! A run as a graph of tasks: the unit the coordinator hands to workers.
//!
//! [`plan_tasks`] turns a pipeline into tasks: one `ingest/<tag>` per input file (level 0),
//! then per stage (level 1, 2, ...) either one `stage/<name>` task or, for stages that work
//! shard by shard (`hseq`), one `stage/<name>/shard-NNNNN` per output shard. A level starts
//! when every task of the levels below it committed, and its tasks read what those wrote
//! ([`inputs_below`]): a barrier per stage rather than an edge per task pair, so a job of
//! 100,000 tasks plans in linear time and space.
//!
//! [`run_task`] runs one task, writing only under the directory it is given (the attempt's
//! own directory), and returns a [`TaskOutput`]: the parts and files it wrote, its summary and
//! its counts. Nothing is shared between attempts, so any number of attempts of one task may
//! run at once; the one whose commit record is created first is the task's output.
//!
//! [`check_bad_ratio`] is the gate between ingest and the stages, and [`publish_job`] turns
//! the committed outputs of every task into the output: the run summary and manifest built
//! from them, files moved into place, the manifest last. Publishing can be repeated after a
//! crash part-way: a file already moved is recognised by its size.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Instant, SystemTime};

use distillery_core::TableKind;
use distillery_core::spec::{Pipeline, StageKind, StageOptions};
use distillery_core::summary::{ManifestFile, RunSummary, StageSummary};
use serde::{Deserialize, Serialize};

use crate::error::ExecError;
use crate::parts::{WrittenPart, parse_part_name};
use crate::plan::{Plan, plan, primary_table};
use crate::publish::{build_manifest, publish_from};
use crate::run::{ProgressMode, RunOutcome, StageOutput, ingest_file, rfc3339};
use crate::sink::QUARANTINE_EXAMPLES;
use crate::store::Location;

/// What a task does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TaskKind {
    /// Read one planned input file (by its index in [`Plan::files`]) into sharded parts.
    Ingest { file: usize },
    /// Run a stage (by its index in the pipeline's stages), all of it or one shard of it.
    Stage { stage: usize, shard: Option<u32> },
}

/// One task of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDef {
    /// `ingest/<tag>`, `stage/<name>` or `stage/<name>/shard-NNNNN`.
    pub id: String,
    pub kind: TaskKind,
    /// 0 for ingest, 1 + the stage's index for stage tasks: every task of the lower levels
    /// commits before this one starts, and this one reads their outputs.
    pub level: u32,
    /// GPUs the worker must have.
    pub gpus: u32,
    /// The group whose durations are compared to spot stragglers: `ingest` or the stage name.
    pub group: String,
}

impl TaskDef {
    /// Whether this is an ingest task (the bad-record gate waits for all of them).
    pub fn is_ingest(&self) -> bool {
        matches!(self.kind, TaskKind::Ingest { .. })
    }
}

/// A planned job: the files and the tasks.
#[derive(Debug, Clone)]
pub struct JobPlan {
    pub plan: Plan,
    pub tasks: Vec<TaskDef>,
}

/// Ingest counts of one file, for the bad-record gate and the summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IngestCounts {
    /// Rows of the format's primary table (pages, questions, edges).
    pub primary: u64,
    pub quarantined: u64,
    pub quarantine_by_reason: BTreeMap<String, u64>,
    /// The file's first quarantined records, described (where and why), for the gate's error.
    #[serde(default)]
    pub quarantine_examples: Vec<String>,
}

/// What one task attempt wrote, as recorded in its commit record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskOutput {
    /// Table parts, each under the attempt's directory (`base`).
    pub parts: Vec<WrittenPart>,
    /// Other files (paths relative to the attempt's directory, which are their output paths).
    pub files: Vec<ManifestFile>,
    /// The attempt's directory, relative to the output location.
    pub dir: String,
    /// This task's share of its stage's summary (`ingest/<input>` for ingest tasks).
    pub summary: StageSummary,
    pub ingest: Option<IngestCounts>,
}

impl TaskOutput {
    /// Rows plus bytes written, for progress reports.
    pub fn records(&self) -> u64 {
        self.summary.records_out
    }
}

/// Whether a stage kind runs shard by shard (one task per output shard).
fn sharded(kind: StageKind) -> bool {
    kind == StageKind::Hseq
}

/// Plans a pipeline into tasks.
pub fn plan_tasks(p: &Pipeline) -> Result<JobPlan, ExecError> {
    let plan = plan(p)?;
    let mut tasks = Vec::new();
    for (i, f) in plan.files.iter().enumerate() {
        tasks.push(TaskDef {
            id: format!("ingest/{}", f.tag),
            kind: TaskKind::Ingest { file: i },
            level: 0,
            gpus: 0,
            group: "ingest".to_string(),
        });
    }
    for (i, s) in p.stages.iter().enumerate() {
        let shards: Vec<Option<u32>> = if sharded(s.kind) {
            (0..p.run.shards.max(1)).map(Some).collect()
        } else {
            vec![None]
        };
        for shard in shards {
            let id = match shard {
                Some(n) => format!("stage/{}/shard-{n:05}", s.name),
                None => format!("stage/{}", s.name),
            };
            tasks.push(TaskDef {
                id,
                kind: TaskKind::Stage { stage: i, shard },
                level: i as u32 + 1,
                gpus: s.gpus,
                group: s.name.clone(),
            });
        }
    }
    Ok(JobPlan { plan, tasks })
}

/// Where an attempt writes, relative to the output location.
pub fn attempt_dir(job: &str, task: &str, attempt: &str) -> String {
    format!(
        "{}/attempts/{}/{attempt}",
        crate::publish::staging_dir(job),
        task.replace('/', ".")
    )
}

/// Runs one task, writing only under `dir`. `inputs` are the parts committed by the lower
/// levels (ignored by ingest tasks).
#[allow(clippy::too_many_arguments)]
pub async fn run_task(
    p: &Pipeline,
    plan: &Plan,
    task: &TaskDef,
    out: &Location,
    dir: &str,
    inputs: &[WrittenPart],
    parallelism: usize,
    mode: ProgressMode,
) -> Result<TaskOutput, ExecError> {
    match &task.kind {
        TaskKind::Ingest { file } => {
            let file = plan
                .files
                .get(*file)
                .ok_or_else(|| ExecError::Task(format!("{}: no such planned file", task.id)))?
                .clone();
            let input = p
                .input(&file.input)
                .ok_or_else(|| ExecError::Task(format!("{}: no input {}", task.id, file.input)))?
                .clone();
            let r = ingest_file(file, input, p, out.clone(), dir.to_string(), mode).await?;
            let mut s = StageSummary::new(&format!("ingest/{}", r.file.input));
            let (good, bad) = (r.counts.good(), r.counts.quarantined());
            s.records_in = good + bad;
            s.records_out = good;
            s.quarantined = bad;
            s.bytes_in = r.bytes_in;
            s.bytes_out = r.parts.iter().map(|p| p.bytes).sum();
            s.seconds = r.seconds;
            s.add("files", 1);
            for (t, n) in &r.counts.rows {
                if *t != TableKind::Quarantine {
                    s.add(&format!("rows.{}", t.name()), *n);
                }
            }
            for (reason, n) in &r.counts.quarantine_reasons {
                s.add(&format!("quarantine.{reason}"), *n);
            }
            Ok(TaskOutput {
                ingest: Some(IngestCounts {
                    primary: r
                        .counts
                        .rows
                        .get(&primary_table(r.file.format))
                        .copied()
                        .unwrap_or(0),
                    quarantined: bad,
                    quarantine_by_reason: r.counts.quarantine_reasons.clone(),
                    quarantine_examples: r.counts.quarantine_examples.clone(),
                }),
                parts: r.parts,
                files: Vec::new(),
                dir: dir.to_string(),
                summary: s,
            })
        }
        TaskKind::Stage { stage, shard } => {
            let stage = p
                .stages
                .get(*stage)
                .ok_or_else(|| ExecError::Task(format!("{}: no such stage", task.id)))?;
            let selected: Vec<WrittenPart> = match shard {
                Some(n) => shard_parts(inputs, *n),
                None => inputs.to_vec(),
            };
            let parts = &selected;
            let output: StageOutput = match &stage.options {
                StageOptions::Hseq(_) => {
                    crate::hseq_stage::run_stage(p, stage, out, dir, parts, parallelism).await?
                }
                StageOptions::Label(_) => {
                    crate::label_stage::run_stage(p, stage, out, dir, parts, parallelism).await?
                }
                StageOptions::Triples(_) => {
                    crate::triples_stage::run_stage(p, stage, out, dir, parts).await?
                }
                StageOptions::Cirag(_) => {
                    crate::cirag_stage::run_stage(p, stage, out, dir, parts).await?
                }
                StageOptions::Planner(_) => {
                    crate::planner_stage::run_stage(p, stage, out, dir, parts).await?
                }
                StageOptions::Relevance(_) => {
                    crate::relevance_stage::run_stage(p, stage, out, dir, parts).await?
                }
                StageOptions::Ras(_) => {
                    crate::ras_stage::run_stage(p, stage, out, dir, parts).await?
                }
            };
            Ok(TaskOutput {
                parts: output.parts,
                files: output.files,
                dir: dir.to_string(),
                summary: output.summary,
                ingest: None,
            })
        }
    }
}

/// The parts the tasks of `level` read: everything committed by the tasks of lower levels,
/// in path order.
pub fn inputs_below(
    level: u32,
    tasks: &[TaskDef],
    committed: &BTreeMap<String, TaskOutput>,
) -> Vec<WrittenPart> {
    let mut parts: Vec<WrittenPart> = tasks
        .iter()
        .filter(|t| t.level < level)
        .filter_map(|t| committed.get(&t.id))
        .flat_map(|o| o.parts.iter().cloned())
        .collect();
    parts.sort_by(|a, b| a.rel.cmp(&b.rel));
    parts
}

/// The parts of one shard (a sharded stage task reads only its own shard's parts).
pub fn shard_parts(parts: &[WrittenPart], shard: u32) -> Vec<WrittenPart> {
    parts
        .iter()
        .filter(|w| parse_part_name(&w.rel).is_some_and(|(_, s, _)| s == shard))
        .cloned()
        .collect()
}

/// The bad-record gate after ingest: quarantined records against the primary records of the
/// inputs (pages, questions, edges), not the context documents they also yield.
pub fn check_bad_ratio(
    p: &Pipeline,
    out: &Location,
    job: &str,
    ingest: &[&TaskOutput],
) -> Result<(), ExecError> {
    let mut by_reason: BTreeMap<String, u64> = BTreeMap::new();
    let (mut good, mut bad) = (0u64, 0u64);
    for o in ingest {
        if let Some(c) = &o.ingest {
            good += c.primary;
            bad += c.quarantined;
            for (r, n) in &c.quarantine_by_reason {
                *by_reason.entry(r.clone()).or_default() += n;
            }
        }
    }
    let total = good + bad;
    if total > 0 && bad as f64 / total as f64 > p.run.max_bad_ratio {
        let reasons: Vec<String> = by_reason.iter().map(|(r, n)| format!("{r}: {n}")).collect();
        let dirs: BTreeSet<&str> = ingest
            .iter()
            .filter(|o| o.ingest.as_ref().is_some_and(|c| c.quarantined > 0))
            .map(|o| o.dir.as_str())
            .collect();
        let places: Vec<String> = dirs
            .iter()
            .map(|d| out.show(&format!("{d}/quarantine/")))
            .collect();
        let examples: Vec<&str> = ingest
            .iter()
            .filter_map(|o| o.ingest.as_ref())
            .flat_map(|c| &c.quarantine_examples)
            .map(String::as_str)
            .take(QUARANTINE_EXAMPLES)
            .collect();
        return Err(ExecError::BadRatio(format!(
            "{bad} of {total} records are bad ({:.2}%), above run.max_bad_ratio = {} ({}); \
             the first: {}; nothing was published; all quarantined records are kept in {} \
             (job {job}; a run into this output a day later removes them)",
            100.0 * bad as f64 / total as f64,
            p.run.max_bad_ratio,
            reasons.join(", "),
            examples.join("; "),
            places.join(", ")
        )));
    }
    Ok(())
}

/// Builds the run summary and manifest from every task's committed output and publishes
/// the output. `outputs` are in task order.
pub async fn publish_job(
    p: &Pipeline,
    jp: &JobPlan,
    job: &str,
    out: &Location,
    outputs: &BTreeMap<String, TaskOutput>,
    started: SystemTime,
) -> Result<RunOutcome, ExecError> {
    let mut stages: Vec<StageSummary> = Vec::new();
    let mut by_reason: BTreeMap<String, u64> = BTreeMap::new();
    let mut parts: Vec<WrittenPart> = Vec::new();
    let mut files: Vec<ManifestFile> = Vec::new();
    let mut sources: BTreeMap<String, (String, u64)> = BTreeMap::new();
    for input in &p.inputs {
        let mut s = StageSummary::new(&format!("ingest/{}", input.name));
        for t in jp.tasks.iter().filter(|t| t.is_ingest()) {
            let (TaskKind::Ingest { file }, Some(o)) = (&t.kind, outputs.get(&t.id)) else {
                continue;
            };
            if jp.plan.files[*file].input == input.name {
                s.merge(&o.summary);
                if let Some(c) = &o.ingest {
                    for (r, n) in &c.quarantine_by_reason {
                        *by_reason.entry(r.clone()).or_default() += n;
                    }
                }
            }
        }
        stages.push(s);
    }
    for stage in &p.stages {
        let mut s = StageSummary::new(&stage.name);
        for t in jp
            .tasks
            .iter()
            .filter(|t| t.group == stage.name && !t.is_ingest())
        {
            if let Some(o) = outputs.get(&t.id) {
                s.merge(&o.summary);
            }
        }
        stages.push(s);
    }
    for t in &jp.tasks {
        let Some(o) = outputs.get(&t.id) else {
            return Err(ExecError::Task(format!("{} has no committed output", t.id)));
        };
        for w in &o.parts {
            sources.insert(w.rel.clone(), (w.path(), w.bytes));
        }
        for f in &o.files {
            sources.insert(f.path.clone(), (format!("{}/{}", o.dir, f.path), f.bytes));
        }
        parts.extend(o.parts.iter().cloned());
        files.extend(o.files.iter().cloned());
    }
    let manifest = build_manifest(
        &p.name,
        &p.hash,
        job,
        p.run.shards,
        &jp.plan.tables,
        &parts,
        &files,
    );
    let now = SystemTime::now();
    let summary = RunSummary {
        pipeline: p.name.clone(),
        pipeline_hash: p.hash.clone(),
        run_id: job.to_string(),
        started_at: rfc3339(started),
        seconds: now
            .duration_since(started)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        stages,
        quarantine_by_reason: by_reason,
    };
    publish_from(out, job, &manifest, &summary, &sources).await?;
    Ok(RunOutcome {
        summary,
        manifest,
        output: p.output.clone(),
    })
}

/// Runs a whole job in this process, task after task in plan order (no coordinator): the
/// library path for embedding Distillery without a cluster. `distillery run` goes through
/// the coordinator instead (`distillery-cluster`), which runs these same functions on
/// workers.
pub async fn run_sequential(
    p: &Pipeline,
    job: &str,
    out: &Location,
    parallelism: usize,
    mode: ProgressMode,
) -> Result<RunOutcome, ExecError> {
    let started = SystemTime::now();
    let clock = Instant::now();
    let jp = plan_tasks(p)?;
    let mut committed: BTreeMap<String, TaskOutput> = BTreeMap::new();
    let mut gate_passed = false;
    let mut level_inputs: (u32, Vec<WrittenPart>) = (0, Vec::new());
    for t in &jp.tasks {
        if !t.is_ingest() && !gate_passed {
            let ingest: Vec<&TaskOutput> =
                committed.values().filter(|o| o.ingest.is_some()).collect();
            check_bad_ratio(p, out, job, &ingest)?;
            gate_passed = true;
        }
        let dir = attempt_dir(job, &t.id, "local");
        if t.level != level_inputs.0 {
            level_inputs = (t.level, inputs_below(t.level, &jp.tasks, &committed));
        }
        let o = run_task(
            p,
            &jp.plan,
            t,
            out,
            &dir,
            &level_inputs.1,
            parallelism,
            mode,
        )
        .await?;
        committed.insert(t.id.clone(), o);
    }
    if !gate_passed {
        let ingest: Vec<&TaskOutput> = committed.values().collect();
        check_bad_ratio(p, out, job, &ingest)?;
    }
    let outcome = publish_job(p, &jp, job, out, &committed, started).await?;
    tracing::info!(
        job,
        seconds = clock.elapsed().as_secs_f64(),
        "job published"
    );
    Ok(outcome)
}
