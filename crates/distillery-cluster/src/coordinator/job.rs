//! A job's runtime state as a typed state machine: the job's [`Phase`] (one variant per
//! phase, carrying its data, changed only by transitions that take the old phase), each
//! task's [`TaskState`] and each attempt's [`AttemptState`]; the levels released as the
//! levels below them commit, and the bad-record gate between ingest and the stages.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use distillery_core::spec::Pipeline;
use distillery_exec::ExecError;
use distillery_exec::store::{Location, open_location};
use distillery_exec::task::{
    JobPlan, LevelInputs, TaskDef, TaskKind, TaskOutput, check_bad_ratio, inputs_below,
    upstream_outputs,
};

use crate::ClusterError;
use crate::pb;
use crate::state::{CommitRecord, JobRecord};

/// Where a job is. A job starts [`Phase::Ingesting`]; the transitions below take the old
/// phase and return the new one, or refuse ([`Illegal`]) with the old phase given back:
///
/// - `Ingesting` → `Stages` ([`Phase::pass_gate`]) or `GateFailed` ([`Phase::fail_gate`]);
/// - `Stages` → `Publishing` ([`Phase::start_publishing`]) → `Publishing` with one more try
///   ([`Phase::retry_publishing`]) → `Published` ([`Phase::published`]);
/// - any live phase → `Failed` ([`Phase::fail`]); `Ingesting` or `Stages` → `Cancelled`
///   ([`Phase::cancel`]), never once publishing started;
/// - the ended phases (`Published`, `GateFailed`, `Failed`, `Cancelled`) go nowhere.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Phase {
    /// The ingest tasks run; the bad-record gate waits for every one of them to commit.
    Ingesting,
    /// The bad-record gate passed: the stages run, each level released once the levels
    /// below it committed.
    Stages,
    /// Every task committed: the output is being published, after `tries` failed tries.
    /// No cancelling any more, and a failure keeps the staging (the committed files).
    Publishing { tries: u32 },
    /// Published (ended): the run summary, as JSON.
    Published { summary_json: String },
    /// The bad-record gate stopped the job (ended): its staging keeps the quarantine parts.
    GateFailed { error: String },
    /// Failed (ended): why, with a report naming the task and its attempts where a task gave
    /// up. `staging_kept`: publishing had started, so the committed files stay for a later
    /// attempt.
    Failed {
        kind: pb::ErrorKind,
        report: String,
        staging_kept: bool,
    },
    /// Cancelled (ended).
    Cancelled,
}

/// A transition a phase does not allow; `from` is the phase as it was.
#[derive(Debug)]
pub(crate) struct Illegal {
    pub(crate) from: Phase,
    pub(crate) to: &'static str,
}

impl std::fmt::Display for Illegal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a job {} cannot be {}", self.from.name(), self.to)
    }
}

impl std::error::Error for Illegal {}

impl Phase {
    fn refuse(self, to: &'static str) -> Result<Phase, Illegal> {
        Err(Illegal { from: self, to })
    }

    /// The bad-record gate passed: the stages may start.
    pub(crate) fn pass_gate(self) -> Result<Phase, Illegal> {
        match self {
            Phase::Ingesting => Ok(Phase::Stages),
            p => p.refuse("gated"),
        }
    }

    /// The bad-record gate stopped the job.
    pub(crate) fn fail_gate(self, error: String) -> Result<Phase, Illegal> {
        match self {
            Phase::Ingesting => Ok(Phase::GateFailed { error }),
            p => p.refuse("stopped by the gate"),
        }
    }

    /// Every task committed: publishing starts.
    pub(crate) fn start_publishing(self) -> Result<Phase, Illegal> {
        match self {
            Phase::Stages => Ok(Phase::Publishing { tries: 0 }),
            p => p.refuse("published"),
        }
    }

    /// A try at publishing failed and another one follows.
    pub(crate) fn retry_publishing(self) -> Result<Phase, Illegal> {
        match self {
            Phase::Publishing { tries } => Ok(Phase::Publishing { tries: tries + 1 }),
            p => p.refuse("published again"),
        }
    }

    /// The output is published.
    pub(crate) fn published(self, summary_json: String) -> Result<Phase, Illegal> {
        match self {
            Phase::Publishing { .. } => Ok(Phase::Published { summary_json }),
            p => p.refuse("published"),
        }
    }

    /// The job fails; one being published keeps its staging.
    pub(crate) fn fail(self, kind: pb::ErrorKind, report: String) -> Result<Phase, Illegal> {
        match self {
            Phase::Ingesting | Phase::Stages => Ok(Phase::Failed {
                kind,
                report,
                staging_kept: false,
            }),
            Phase::Publishing { .. } => Ok(Phase::Failed {
                kind,
                report,
                staging_kept: true,
            }),
            p => p.refuse("failed"),
        }
    }

    /// The job is cancelled: only before publishing started.
    pub(crate) fn cancel(self) -> Result<Phase, Illegal> {
        match self {
            Phase::Ingesting | Phase::Stages => Ok(Phase::Cancelled),
            p => p.refuse("cancelled"),
        }
    }

    /// Whether the job still runs (publishing included).
    pub(crate) fn is_live(&self) -> bool {
        matches!(
            self,
            Phase::Ingesting | Phase::Stages | Phase::Publishing { .. }
        )
    }
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskState {
    /// Waiting for the levels below it.
    Blocked,
    /// Queued for a worker (or waiting out a retry's backoff).
    Ready,
    /// An attempt runs (or more, with a straggler's copy).
    Running,
    /// An attempt's commit record won.
    Committed,
}

/// How an attempt stands or ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttemptState {
    /// Holding a lease.
    Running,
    /// Its commit record won.
    Committed,
    /// The worker reported an error.
    Failed { error: String },
    /// The lease ran out without a heartbeat.
    Expired { error: String },
    /// Stopped by the coordinator: another attempt committed, or the job ended.
    Abandoned,
    /// Given back by a worker shutting down: not the task's fault, not counted as a try.
    GivenBack { error: String },
}

impl AttemptState {
    /// The error it ended with (empty when none).
    pub(crate) fn error(&self) -> &str {
        match self {
            AttemptState::Failed { error }
            | AttemptState::Expired { error }
            | AttemptState::GivenBack { error } => error,
            _ => "",
        }
    }
}

#[derive(Debug)]
pub(crate) struct AttemptRt {
    pub(crate) id: String,
    pub(crate) worker: String,
    pub(crate) started: Instant,
    pub(crate) deadline: Instant,
    pub(crate) state: AttemptState,
    /// Wall-clock start and end (Unix milliseconds; `ended_ms` 0 while it runs): the job
    /// page's timeline.
    pub(crate) started_ms: i64,
    pub(crate) ended_ms: i64,
}

impl AttemptRt {
    /// The attempt stops running, in `state`.
    pub(crate) fn end(&mut self, state: AttemptState) {
        self.state = state;
        self.ended_ms = super::now_ms();
    }
}

#[derive(Debug)]
pub(crate) struct TaskRt {
    pub(crate) def: TaskDef,
    pub(crate) state: TaskState,
    pub(crate) attempts: Vec<AttemptRt>,
    pub(crate) speculated: bool,
    /// Since when it waits for a worker (set when it turns ready, taken when leased).
    pub(crate) ready_at: Option<Instant>,
}

impl TaskRt {
    /// Attempts running now.
    pub(crate) fn running(&self) -> usize {
        self.attempts
            .iter()
            .filter(|a| a.state == AttemptState::Running)
            .count()
    }
}

pub(crate) struct JobRt {
    pub(crate) record: JobRecord,
    pub(crate) p: Arc<Pipeline>,
    pub(crate) plan: Arc<JobPlan>,
    pub(crate) out: Location,
    pub(crate) tasks: Vec<TaskRt>,
    pub(crate) by_id: HashMap<String, usize>,
    /// Task indexes per level, and how many of each level are not committed yet.
    pub(crate) by_level: Vec<Vec<usize>>,
    pub(crate) level_left: Vec<usize>,
    /// Levels up to this one are released (their tasks may run).
    pub(crate) released: usize,
    pub(crate) phase: Phase,
    /// What the tasks of a (level, shard) read, as JSON, built once when first handed out
    /// (`u32::MAX`: unsharded).
    pub(crate) inputs_json: HashMap<(u32, u32), Arc<str>>,
    /// The parts below each level that has dispatched a task, indexed by shard.
    pub(crate) level_inputs: HashMap<u32, LevelInputs>,
    /// What the stage tasks of a level read besides their parts ([`upstream_outputs`]), as
    /// sent, by level.
    pub(crate) shards_json: HashMap<u32, Arc<str>>,
    /// The published summary without its per-task lists, as a status carries it (made once).
    pub(crate) brief_summary: std::sync::OnceLock<String>,
    pub(crate) committed: BTreeMap<String, TaskOutput>,
    /// Tasks not committed yet.
    pub(crate) left: usize,
    pub(crate) started: SystemTime,
    /// Durations of committed attempts per straggler group.
    pub(crate) durations: HashMap<String, Vec<f64>>,
}

impl JobRt {
    /// A job's runtime state from its record and plan, every task blocked; the plan must
    /// still have the tasks the record lists.
    pub(crate) fn new(rec: JobRecord, p: Pipeline, plan: JobPlan) -> Result<JobRt, ClusterError> {
        let ids: Vec<String> = plan.tasks.iter().map(|t| t.id.clone()).collect();
        if !rec.task_ids.is_empty() && ids != rec.task_ids {
            return Err(ClusterError::Config(format!(
                "job {}: its inputs changed since it was submitted ({} tasks planned now, {} then)",
                rec.job_id,
                ids.len(),
                rec.task_ids.len()
            )));
        }
        let out = open_location(&p.output, true)?;
        let by_id: HashMap<String, usize> = ids
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i))
            .collect();
        let levels = plan
            .tasks
            .iter()
            .map(|t| t.level as usize + 1)
            .max()
            .unwrap_or(1);
        let mut by_level = vec![Vec::new(); levels];
        let mut tasks = Vec::with_capacity(plan.tasks.len());
        for (i, t) in plan.tasks.iter().enumerate() {
            by_level[t.level as usize].push(i);
            tasks.push(TaskRt {
                def: t.clone(),
                state: TaskState::Blocked,
                attempts: Vec::new(),
                speculated: false,
                ready_at: None,
            });
        }
        let level_left = by_level.iter().map(Vec::len).collect();
        let started = UNIX_EPOCH + Duration::from_millis(rec.submitted_at_ms.max(0) as u64);
        Ok(JobRt {
            left: tasks.len(),
            by_level,
            level_left,
            released: 0,
            phase: Phase::Ingesting,
            inputs_json: HashMap::new(),
            level_inputs: HashMap::new(),
            shards_json: HashMap::new(),
            brief_summary: std::sync::OnceLock::new(),
            record: rec,
            p: Arc::new(p),
            plan: Arc::new(plan),
            out,
            tasks,
            by_id,
            committed: BTreeMap::new(),
            started,
            durations: HashMap::new(),
        })
    }

    pub(crate) fn id(&self) -> &str {
        &self.record.job_id
    }

    /// Moves the job to the phase `to` makes of its phase; refused, the phase stays.
    pub(crate) fn step(
        &mut self,
        to: impl FnOnce(Phase) -> Result<Phase, Illegal>,
    ) -> Result<(), Illegal> {
        let old = std::mem::replace(&mut self.phase, Phase::Ingesting);
        match to(old) {
            Ok(new) => {
                self.phase = new;
                Ok(())
            }
            Err(e) => {
                self.phase = e.from.clone();
                Err(e)
            }
        }
    }

    /// Marks the tasks of reloaded commit records committed (a restart) and the ingest level
    /// ready; returns the ingest tasks still to run.
    pub(crate) fn start(&mut self, commits: Vec<CommitRecord>) -> Vec<usize> {
        for c in commits {
            if let Some(&i) = self.by_id.get(&c.task_id)
                && self.tasks[i].state != TaskState::Committed
            {
                self.mark_committed(i, c.output);
            }
        }
        for &i in &self.by_level[0] {
            if self.tasks[i].state == TaskState::Blocked {
                self.tasks[i].state = TaskState::Ready;
                self.tasks[i].ready_at = Some(Instant::now());
            }
        }
        self.by_level[0].clone()
    }

    /// Marks a task committed with its output.
    pub(crate) fn mark_committed(&mut self, t: usize, output: TaskOutput) {
        self.tasks[t].state = TaskState::Committed;
        self.left -= 1;
        self.level_left[self.tasks[t].def.level as usize] -= 1;
        self.committed.insert(self.tasks[t].def.id.clone(), output);
    }

    /// Releases the levels whose lower levels all committed; the bad-record gate runs once
    /// the ingest level is done, before anything above it starts. Returns the tasks made
    /// ready, or the gate's error (the caller ends the job with [`Phase::fail_gate`]).
    pub(crate) fn advance(&mut self) -> Result<Vec<usize>, ExecError> {
        let mut ready = Vec::new();
        if self.phase == Phase::Ingesting {
            if self.level_left[0] > 0 {
                return Ok(ready);
            }
            self.gate_check()?;
            self.step(Phase::pass_gate)
                .expect("an ingesting job passes its gate");
        }
        if self.phase != Phase::Stages {
            return Ok(ready);
        }
        while self.released + 1 < self.by_level.len()
            && self.level_left[..=self.released].iter().all(|&n| n == 0)
        {
            self.released += 1;
            for &i in &self.by_level[self.released] {
                if self.tasks[i].state == TaskState::Blocked {
                    self.tasks[i].state = TaskState::Ready;
                    self.tasks[i].ready_at = Some(Instant::now());
                    ready.push(i);
                }
            }
        }
        Ok(ready)
    }

    /// The bad-record gate, once every ingest task committed.
    fn gate_check(&self) -> Result<(), ExecError> {
        let ingest: Vec<&TaskOutput> = self
            .tasks
            .iter()
            .filter(|t| t.def.is_ingest())
            .filter_map(|t| self.committed.get(&t.def.id))
            .collect();
        check_bad_ratio(&self.p, &self.out, self.id(), &ingest)
    }

    /// What a task reads, as the JSON sent with it: the outputs of the levels below it, cut
    /// to its shard as its stage's partitioning says ([`task_inputs`]), built and serialized
    /// once per level and shard.
    pub(crate) fn task_inputs_json(&mut self, t: usize) -> Arc<str> {
        let level = self.tasks[t].def.level;
        let shard = match self.tasks[t].def.kind {
            TaskKind::Stage { shard: Some(n), .. } => n,
            _ => u32::MAX,
        };
        if let Some(v) = self.inputs_json.get(&(level, shard)) {
            return v.clone();
        }
        // The parts below a level, indexed by shard once: every task of the level looks its
        // own up instead of rebuilding the list from every committed task (quadratic in the
        // tasks of a job).
        let below = self.level_inputs.entry(level).or_insert_with(|| {
            let all = if level == 0 {
                Vec::new()
            } else {
                inputs_below(level, &self.plan.tasks, &self.committed)
            };
            LevelInputs::new(all)
        });
        let parts = below.for_task(&self.p, &self.tasks[t].def);
        let v: Arc<str> = serde_json::to_string(&parts)
            .expect("parts serialize")
            .into();
        self.inputs_json.insert((level, shard), v.clone());
        v
    }

    /// What a task reads besides its parts ([`upstream_outputs`]: a merge task its stage's
    /// shard tasks' committed outputs, a stage task the files published below it), as JSON;
    /// empty when there is nothing.
    pub(crate) fn task_shards_json(&mut self, t: usize) -> Arc<str> {
        let def = &self.tasks[t].def;
        // A stage task's are those of every stage task below its level: the same for the
        // whole level, so built once (a pass over every task per dispatch is quadratic).
        let per_level = matches!(def.kind, TaskKind::Stage { .. }).then_some(def.level);
        if let Some(v) = per_level.and_then(|l| self.shards_json.get(&l)) {
            return v.clone();
        }
        let shards = upstream_outputs(&self.plan.tasks, def, &self.committed).unwrap_or_default();
        let v: Arc<str> = match shards.is_empty() {
            true => "".into(),
            false => serde_json::to_string(&shards)
                .expect("outputs serialize")
                .into(),
        };
        if let Some(l) = per_level {
            self.shards_json.insert(l, v.clone());
        }
        v
    }
}

/// Why a task gave up: the task, its attempts and their errors.
pub(crate) fn task_report(t: &TaskRt) -> String {
    let mut s = format!(
        "task {} failed after {} attempt(s):",
        t.def.id,
        t.attempts.len()
    );
    for a in &t.attempts {
        s.push_str(&format!(
            "\n  attempt {} on worker {}: {}: {}",
            a.id,
            a.worker,
            a.state.name(),
            a.state.error()
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(staging_kept: bool) -> Phase {
        Phase::Failed {
            kind: pb::ErrorKind::Fatal,
            report: "r".into(),
            staging_kept,
        }
    }

    #[test]
    fn phases_move_only_by_legal_transitions() {
        // The way through: ingest, the gate, the stages, publishing with a retry, published.
        let p = Phase::Ingesting.pass_gate().unwrap();
        assert_eq!(p, Phase::Stages);
        let p = p.start_publishing().unwrap();
        assert_eq!(p, Phase::Publishing { tries: 0 });
        let p = p.retry_publishing().unwrap();
        assert_eq!(p, Phase::Publishing { tries: 1 });
        let p = p.published("{}".into()).unwrap();
        assert!(!p.is_live());
        assert_eq!(
            p,
            Phase::Published {
                summary_json: "{}".into()
            }
        );

        // A job being published cannot be cancelled, and keeps its staging when it fails.
        let publishing = Phase::Publishing { tries: 2 };
        let e = publishing.clone().cancel().unwrap_err();
        assert_eq!(e.from, publishing, "the old phase comes back");
        assert_eq!(e.to_string(), "a job publishing cannot be cancelled");
        let f = publishing
            .fail(pb::ErrorKind::Retryable, "r".into())
            .unwrap();
        assert!(matches!(
            f,
            Phase::Failed {
                staging_kept: true,
                ..
            }
        ));
        assert_eq!(
            Phase::Stages
                .fail(pb::ErrorKind::Fatal, "r".into())
                .unwrap(),
            failed(false)
        );

        // The gate runs once, on an ingesting job only.
        assert!(Phase::Stages.pass_gate().is_err());
        assert!(Phase::Stages.fail_gate("bad".into()).is_err());
        let gate = Phase::Ingesting.fail_gate("bad".into()).unwrap();
        assert!(!gate.is_live());
        // Nothing publishes before the gate passed.
        assert!(Phase::Ingesting.start_publishing().is_err());
        assert!(Phase::Stages.published(String::new()).is_err());
        assert!(Phase::Stages.retry_publishing().is_err());

        // An ended job stays ended.
        for ended in [gate, failed(true), Phase::Cancelled, p] {
            assert!(
                ended
                    .clone()
                    .fail(pb::ErrorKind::Fatal, "x".into())
                    .is_err()
            );
            assert!(ended.clone().cancel().is_err());
            assert!(ended.clone().start_publishing().is_err());
            assert!(ended.clone().pass_gate().is_err());
        }
    }

    #[test]
    fn a_refused_step_leaves_the_job_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/quickstart");
        let text = format!(
            "version = 1\nname = \"t\"\noutput = \"{}\"\n\
             [[inputs]]\nname = \"kb\"\nformat = \"metaqa-kb\"\npaths = [\"{}\"]\n",
            tmp.path().join("out").display(),
            data.join("kb.txt").display()
        );
        let p = distillery_exec::stages::parse_pipeline("t.toml", &text, &[]).unwrap();
        let plan = distillery_exec::task::plan_tasks(&p).unwrap();
        let rec = JobRecord {
            job_id: "j".into(),
            pipeline_file: "t.toml".into(),
            pipeline_text: text.clone(),
            overrides: Vec::new(),
            submitted_at_ms: 0,
            task_ids: Vec::new(),
            files: None,
            side: None,
        };
        let mut job = JobRt::new(rec, p, plan).unwrap();
        job.step(Phase::cancel).unwrap();
        assert_eq!(job.phase, Phase::Cancelled);
        let e = job.step(Phase::start_publishing).unwrap_err();
        assert_eq!(e.to_string(), "a job cancelled cannot be published");
        assert_eq!(job.phase, Phase::Cancelled);
    }
}
