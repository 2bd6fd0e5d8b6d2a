//! A run as a graph of tasks: the unit the coordinator hands to workers.
//!
//! [`plan_tasks`] turns a pipeline into tasks: one `ingest/<tag>` per input file (level 0),
//! then per stage the tasks its [`Partitioning`] asks for: one `stage/<name>` task, or one
//! `stage/<name>/shard-NNNNN` per shard (`run.shards`), followed for stages that cut their
//! questions by shard by one `stage/<name>/merge` task on the level above. A level starts
//! when every task of the levels below it committed, and its tasks read what those wrote
//! ([`inputs_below`], cut to a task's shard by [`task_inputs`], or found by shard in a
//! [`LevelInputs`] built once per level): a barrier per level rather
//! than an edge per task pair, so a job of 100,000 tasks plans in linear time and space.
//!
//! [`run_task`] runs one task, writing only under the directory it is given (the attempt's
//! own directory), and returns a [`TaskOutput`]: the parts and files it wrote, the files it
//! staged for its stage's merge task, its summary and its counts. Nothing is shared between
//! attempts, so any number of attempts of one task may run at once; the one whose commit
//! record is created first is the task's output.
//!
//! [`check_bad_ratio`] is the gate between ingest and the stages, and [`publish_job`] turns
//! the committed outputs of every task into the output: the run summary and manifest built
//! from them, files moved into place, the manifest last. Publishing can be repeated after a
//! crash part-way: a file already moved is recognised by its size.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use distillery_core::TableKind;
use distillery_core::spec::{Pipeline, StageSpec};
use distillery_core::summary::{ManifestFile, RunSummary, StageSummary, TaskRun};
use serde::{Deserialize, Serialize};

pub use crate::contract::{
    AdoptedFile, IngestCounts, Partitioning, SPENT_COST, SPENT_TOKENS, ShardOutput, TaskOutput,
};

use crate::contract::{MergeCx, RunCx};
use crate::error::ExecError;
use crate::parts::WrittenPart;
use crate::plan::{Plan, PlannedFile, SideFile, plan, primary_tables};
use crate::publish::{build_manifest, publish_from};
use crate::run::{ProgressMode, RunOutcome, ingest_file, rfc3339};
use crate::sink::QUARANTINE_EXAMPLES;
use crate::stages::stage_of;
use crate::store::Location;

/// What a task does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TaskKind {
    /// Read one planned input file (by its index in [`Plan::files`]) into sharded parts.
    Ingest { file: usize },
    /// Run a stage (by its index in the pipeline's stages), all of it or one shard of it.
    Stage { stage: usize, shard: Option<u32> },
    /// Join what the shard tasks of a stage staged for it (see [`Partitioning::Questions`]).
    Merge { stage: usize },
}

/// How a stage is cut into tasks (its module says), and into how many: its `tasks`, else
/// `run.shards`, at most what the stage allows (1 for [`Partitioning::Whole`]).
pub fn partitioning(p: &Pipeline, spec: &StageSpec) -> (Partitioning, u32) {
    let Ok(stage) = stage_of(spec) else {
        return (Partitioning::Whole, 1);
    };
    let how = stage.partitioning();
    let n = match how {
        Partitioning::Whole => 1,
        _ => {
            let wanted = spec.tasks.unwrap_or(p.run.shards).max(1);
            stage
                .max_tasks(spec)
                .map_or(wanted, |m| wanted.min(m.max(1)))
        }
    };
    (how, n)
}

/// One task of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDef {
    /// `ingest/<tag>`, `stage/<name>` or `stage/<name>/shard-NNNNN`.
    pub id: String,
    pub kind: TaskKind,
    /// 0 for ingest; each stage takes the next level, and its merge task the one after: every
    /// task of the lower levels commits before this one starts, and this one reads their
    /// outputs.
    pub level: u32,
    /// GPUs the worker must have.
    pub gpus: u32,
    /// The group whose durations are compared to spot stragglers: `ingest` or the stage name.
    pub group: String,
    /// For an ingest task, the file (or byte range) it reads, as the coordinator planned it:
    /// workers read what was planned and never resolve the input globs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PlannedFile>,
    /// For a stage task, the files its stage reads besides the inputs, as planned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side: Vec<SideFile>,
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

/// Plans a pipeline into tasks.
pub fn plan_tasks(p: &Pipeline) -> Result<JobPlan, ExecError> {
    Ok(tasks_of(plan(p)?))
}

/// The tasks of a plan: one ingest task per planned file (or byte range), then each
/// stage's tasks on a level of their own.
pub fn tasks_of(plan: Plan) -> JobPlan {
    let p = &plan.pipeline;
    let mut tasks = Vec::new();
    for (i, f) in plan.files.iter().enumerate() {
        tasks.push(TaskDef {
            id: format!("ingest/{}", f.tag),
            kind: TaskKind::Ingest { file: i },
            level: 0,
            gpus: 0,
            group: "ingest".to_string(),
            file: Some(f.clone()),
            side: Vec::new(),
        });
    }
    let mut level = 0u32;
    for (i, s) in p.stages.iter().enumerate() {
        level += 1;
        let (how, count) = partitioning(p, s);
        let side = plan.side.get(&s.name).cloned().unwrap_or_default();
        let shards: Vec<Option<u32>> = match how {
            Partitioning::Whole => vec![None],
            Partitioning::Shards | Partitioning::Questions => (0..count).map(Some).collect(),
        };
        for shard in shards {
            let id = match shard {
                Some(n) => format!("stage/{}/shard-{n:05}", s.name),
                None => format!("stage/{}", s.name),
            };
            tasks.push(TaskDef {
                id,
                kind: TaskKind::Stage { stage: i, shard },
                level,
                gpus: s.gpus,
                group: s.name.clone(),
                file: None,
                side: side.clone(),
            });
        }
        if how != Partitioning::Whole && stage_of(s).is_ok_and(|st| st.merges()) {
            level += 1;
            tasks.push(TaskDef {
                id: format!("stage/{}/merge", s.name),
                kind: TaskKind::Merge { stage: i },
                level,
                gpus: 0,
                group: s.name.clone(),
                file: None,
                side: Vec::new(),
            });
        }
    }
    JobPlan { plan, tasks }
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
/// levels (ignored by ingest tasks), `upstream` the committed outputs it reads besides them
/// ([`upstream_outputs`]).
#[allow(clippy::too_many_arguments)]
pub async fn run_task(
    p: &Pipeline,
    task: &TaskDef,
    out: &Location,
    dir: &str,
    inputs: &[WrittenPart],
    upstream: &[ShardOutput],
    parallelism: usize,
    mode: ProgressMode,
) -> Result<TaskOutput, ExecError> {
    match &task.kind {
        TaskKind::Ingest { .. } => {
            let file = task
                .file
                .clone()
                .ok_or_else(|| ExecError::Task(format!("{}: no planned file", task.id)))?;
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
            // A file read as byte ranges counts once, with its first range.
            if r.file.range.is_none_or(|range| range.start == 0) {
                s.add("files", 1);
            }
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
                    primary: primary_tables(r.file.format)
                        .iter()
                        .filter_map(|t| r.counts.rows.get(t))
                        .sum(),
                    quarantined: bad,
                    quarantine_by_reason: r.counts.quarantine_reasons.clone(),
                    quarantine_examples: r.counts.quarantine_examples.clone(),
                }),
                parts: r.parts,
                files: Vec::new(),
                dir: dir.to_string(),
                summary: s,
                ..Default::default()
            })
        }
        TaskKind::Stage { stage, shard } => {
            let stage = p
                .stages
                .get(*stage)
                .ok_or_else(|| ExecError::Task(format!("{}: no such stage", task.id)))?;
            let selected = task_inputs(p, task, inputs);
            let cx = RunCx {
                pipeline: p,
                stage,
                out,
                dir,
                parts: &selected,
                upstream,
                parallelism,
                side: &task.side,
                shard: *shard,
            };
            Ok(stage_of(stage)?.run(cx).await?.into_task(dir))
        }
        TaskKind::Merge { stage } => {
            let stage = p
                .stages
                .get(*stage)
                .ok_or_else(|| ExecError::Task(format!("{}: no such stage", task.id)))?;
            let cx = MergeCx {
                pipeline: p,
                stage,
                out,
                dir,
                shards: upstream,
            };
            Ok(stage_of(stage)?.merge(cx).await?.into_task(dir))
        }
    }
}

/// The parts the tasks of `level` read: everything committed by the tasks of lower levels,
/// in path order. A part a later task staged under the same path (a merge task rewriting a
/// shard task's part) replaces the earlier one.
pub fn inputs_below(
    level: u32,
    tasks: &[TaskDef],
    committed: &BTreeMap<String, TaskOutput>,
) -> Vec<WrittenPart> {
    let mut parts: BTreeMap<String, WrittenPart> = BTreeMap::new();
    for o in tasks
        .iter()
        .filter(|t| t.level < level)
        .filter_map(|t| committed.get(&t.id))
    {
        for w in &o.parts {
            parts.insert(w.rel.clone(), w.clone());
        }
    }
    parts.into_values().collect()
}

/// The parts one task reads of those written below it, by its stage's [`Partitioning`]: all
/// of them, its shard's, or its shard's questions and everything else.
pub fn task_inputs(p: &Pipeline, task: &TaskDef, parts: &[WrittenPart]) -> Vec<WrittenPart> {
    let TaskKind::Stage {
        stage,
        shard: Some(n),
    } = task.kind
    else {
        return parts.to_vec();
    };
    let Some(spec) = p.stages.get(stage) else {
        return parts.to_vec();
    };
    let (how, count) = partitioning(p, spec);
    let mine = |w: &WrittenPart| w.shard % count == n;
    parts
        .iter()
        .filter(|w| match how {
            Partitioning::Whole => true,
            Partitioning::Shards => mine(w),
            Partitioning::Questions => !w.table.spec().by_question || mine(w),
        })
        .cloned()
        .collect()
}

/// The parts below one level, indexed once by shard so that each task of the level finds its
/// own ([`task_inputs`]'s answer, in the same path order) without a pass over every part: a
/// level of `n` tasks over `m` parts costs `O(m + n)` lookups, not `O(n * m)`.
#[derive(Debug, Default)]
pub struct LevelInputs {
    /// Every part below the level, in path order.
    parts: Vec<WrittenPart>,
    /// Positions in `parts` by the part's shard: every table, and only `questions` and
    /// `subgraphs` (what a questions-partitioned task reads of its shard alone).
    by_shard: std::collections::HashMap<u32, Vec<usize>>,
    question_by_shard: std::collections::HashMap<u32, Vec<usize>>,
    /// Positions of the parts every questions-partitioned task reads whole.
    shared: Vec<usize>,
    max_shard: u32,
}

impl LevelInputs {
    /// The index of `parts` (in path order, as [`inputs_below`] gives them).
    pub fn new(parts: Vec<WrittenPart>) -> LevelInputs {
        let mut l = LevelInputs::default();
        for (i, w) in parts.iter().enumerate() {
            l.by_shard.entry(w.shard).or_default().push(i);
            if w.table.spec().by_question {
                l.question_by_shard.entry(w.shard).or_default().push(i);
            } else {
                l.shared.push(i);
            }
            l.max_shard = l.max_shard.max(w.shard);
        }
        l.parts = parts;
        l
    }

    /// What `task` reads: [`task_inputs`] of the level's parts.
    pub fn for_task(&self, p: &Pipeline, task: &TaskDef) -> Vec<WrittenPart> {
        let TaskKind::Stage {
            stage,
            shard: Some(n),
        } = task.kind
        else {
            return self.parts.clone();
        };
        let Some(spec) = p.stages.get(stage) else {
            return self.parts.clone();
        };
        let (how, count) = partitioning(p, spec);
        // The shards `s` with `s % count == n`.
        let mine = (n as u64..=self.max_shard as u64)
            .step_by(count.max(1) as usize)
            .map(|s| s as u32);
        let mut at: Vec<usize> = match how {
            Partitioning::Whole => return self.parts.clone(),
            Partitioning::Shards => mine
                .filter_map(|s| self.by_shard.get(&s))
                .flatten()
                .copied()
                .collect(),
            Partitioning::Questions => mine
                .filter_map(|s| self.question_by_shard.get(&s))
                .flatten()
                .chain(&self.shared)
                .copied()
                .collect(),
        };
        at.sort_unstable();
        at.into_iter().map(|i| self.parts[i].clone()).collect()
    }
}

/// The committed outputs a task reads besides its parts, in plan order: for a merge task the
/// outputs of its stage's shard tasks (`None` when one of them has not committed); for a
/// stage task the files of the stage tasks below it (so a stage reads another's declared
/// output files from the object store, wherever that task ran); nothing for ingest.
pub fn upstream_outputs(
    tasks: &[TaskDef],
    task: &TaskDef,
    committed: &BTreeMap<String, TaskOutput>,
) -> Option<Vec<ShardOutput>> {
    let stage = match task.kind {
        TaskKind::Merge { stage } => stage,
        TaskKind::Ingest { .. } => return Some(Vec::new()),
        TaskKind::Stage { .. } => {
            // What a later stage may read: published files, and the teacher's spending (the
            // job-wide `[llm.budget]` is shared out from what is left).
            let below = tasks
                .iter()
                .filter(|t| t.level < task.level && !t.is_ingest())
                .filter_map(|t| committed.get(&t.id).map(|o| (t, o)))
                .filter(|(_, o)| {
                    !o.files.is_empty()
                        || !o.adopted.is_empty()
                        || o.summary.counters.contains_key(SPENT_TOKENS[0])
                })
                .map(|(t, o)| {
                    let mut summary = StageSummary::new(&o.summary.stage);
                    for k in SPENT_TOKENS.iter().chain(&[SPENT_COST]) {
                        if let Some(n) = o.summary.counters.get(*k) {
                            summary.add(k, *n);
                        }
                    }
                    ShardOutput {
                        task: t.id.clone(),
                        output: TaskOutput {
                            files: o.files.clone(),
                            adopted: o.adopted.clone(),
                            dir: o.dir.clone(),
                            summary,
                            ..Default::default()
                        },
                    }
                })
                .collect();
            return Some(below);
        }
    };
    tasks
        .iter()
        .filter(|t| matches!(t.kind, TaskKind::Stage { stage: s, .. } if s == stage))
        .map(|t| {
            committed.get(&t.id).map(|o| ShardOutput {
                task: t.id.clone(),
                output: o.clone(),
            })
        })
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
    let run_of = |t: &TaskDef, o: &TaskOutput| TaskRun {
        task: t.id.clone(),
        worker: o.worker.clone(),
        attempts: o.attempt,
        records_out: o.summary.records_out,
        seconds: o.summary.seconds,
        started_ms: o.started_ms,
    };
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
                s.tasks.push(run_of(t, o));
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
                s.tasks.push(run_of(t, o));
            }
        }
        stages.push(s);
    }
    // A part or file a later task stages under the same path (a merge task rewriting a shard
    // task's part) replaces the earlier one.
    let mut by_path: BTreeMap<String, WrittenPart> = BTreeMap::new();
    let mut file_by_path: BTreeMap<String, ManifestFile> = BTreeMap::new();
    for t in &jp.tasks {
        let Some(o) = outputs.get(&t.id) else {
            return Err(ExecError::Task(format!("{} has no committed output", t.id)));
        };
        for w in &o.parts {
            sources.insert(w.rel.clone(), (w.path(), w.bytes));
            by_path.insert(w.rel.clone(), w.clone());
        }
        for f in &o.files {
            sources.insert(f.path.clone(), (format!("{}/{}", o.dir, f.path), f.bytes));
            file_by_path.insert(f.path.clone(), f.clone());
        }
        for a in &o.adopted {
            let f = &a.file;
            sources.insert(f.path.clone(), (format!("{}/{}", a.dir, f.path), f.bytes));
            file_by_path.insert(f.path.clone(), f.clone());
        }
    }
    parts.extend(by_path.into_values());
    files.extend(file_by_path.into_values());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A level's index gives every task what a pass over all the parts gives it, in the same
    /// order, for tasks by shard, by shard of the questions (with fewer tasks than shards), and
    /// whole.
    #[test]
    fn level_inputs_answer_as_task_inputs() {
        let text = r#"
version = 1
name = "t"
output = "out/t"
[run]
shards = 8
[[inputs]]
name = "wiki"
format = "mediawiki"
paths = ["a.xml"]
[[inputs]]
name = "hp"
format = "hotpotqa"
paths = ["h.json"]
[[stages]]
kind = "hseq"
[[stages]]
kind = "label"
inputs = ["hp"]
tasks = 3
"#;
        let p = crate::stages::parse_pipeline("t.toml", text, &[]).unwrap();
        let tables = [
            TableKind::Documents,
            TableKind::Questions,
            TableKind::Segments,
            TableKind::Subgraphs,
            TableKind::Tables,
        ];
        let mut parts: Vec<WrittenPart> = (0..400u32)
            .map(|i| {
                let table = tables[(i as usize * 7 + 3) % tables.len()];
                let shard = (i * 13 + i / 5) % 8;
                WrittenPart {
                    table,
                    shard,
                    rel: format!("{}/part-{shard:05}-x-{i:04}.parquet", table.name()),
                    base: "b".into(),
                    rows: 1,
                    bytes: 1,
                }
            })
            .collect();
        parts.sort_by(|a, b| a.rel.cmp(&b.rel));
        let level = LevelInputs::new(parts.clone());
        let mut tasks: Vec<TaskDef> = (0..8)
            .map(|n| TaskDef {
                id: format!("stage/hseq/shard-{n:05}"),
                kind: TaskKind::Stage {
                    stage: 0,
                    shard: Some(n),
                },
                level: 1,
                gpus: 0,
                group: "hseq".into(),
                file: None,
                side: Vec::new(),
            })
            .collect();
        for n in 0..3 {
            tasks.push(TaskDef {
                id: format!("stage/label/shard-{n:05}"),
                kind: TaskKind::Stage {
                    stage: 1,
                    shard: Some(n),
                },
                group: "label".into(),
                ..tasks[0].clone()
            });
        }
        tasks.push(TaskDef {
            id: "stage/label/merge".into(),
            kind: TaskKind::Merge { stage: 1 },
            ..tasks[0].clone()
        });
        for t in &tasks {
            let want = task_inputs(&p, t, &parts);
            assert!(!want.is_empty(), "{}", t.id);
            assert_eq!(level.for_task(&p, t), want, "{}", t.id);
        }
    }
}
