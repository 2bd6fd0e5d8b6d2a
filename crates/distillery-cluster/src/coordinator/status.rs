//! What the coordinator shows: a job's status and progress (`GetJob`, `ListJobs`,
//! `distillery status`), its final record, and the Prometheus metrics. Every string the state
//! types are shown by (job, task and attempt states, error kinds) is mapped here, once: the
//! protocol and the final records keep these exact words.

use super::job::{AttemptState, JobRt, Phase, TaskRt, TaskState};
use super::{CoordinatorService, Inner};
use crate::pb;
use crate::state::FinalRecord;
use distillery_core::summary::RunSummary;

impl Phase {
    /// The phase in words, for messages and logs.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Phase::Ingesting => "ingesting",
            Phase::Stages => "running its stages",
            Phase::Publishing { .. } => "publishing",
            Phase::Published { .. } => "published",
            Phase::GateFailed { .. } => "stopped by its bad-record gate",
            Phase::Failed { .. } => "failed",
            Phase::Cancelled => "cancelled",
        }
    }

    /// The job's state in the protocol: every live phase is running.
    pub(crate) fn job_state(&self) -> pb::JobState {
        match self {
            Phase::Ingesting | Phase::Stages | Phase::Publishing { .. } => pb::JobState::Running,
            Phase::Published { .. } => pb::JobState::Succeeded,
            Phase::GateFailed { .. } | Phase::Failed { .. } => pb::JobState::Failed,
            Phase::Cancelled => pb::JobState::Cancelled,
        }
    }

    /// The kind of error the job ended with (unspecified while it runs).
    pub(crate) fn error_kind(&self) -> pb::ErrorKind {
        match self {
            Phase::Failed { kind, .. } => *kind,
            Phase::GateFailed { .. } => pb::ErrorKind::Fatal,
            _ => pb::ErrorKind::Unspecified,
        }
    }

    /// The error the job ended with (empty while it runs, and once it succeeded).
    pub(crate) fn error(&self) -> &str {
        match self {
            Phase::Failed { report, .. } => report,
            Phase::GateFailed { error } => error,
            Phase::Cancelled => "cancelled",
            _ => "",
        }
    }

    /// The run summary of a published job, as JSON (empty otherwise).
    pub(crate) fn summary_json(&self) -> &str {
        match self {
            Phase::Published { summary_json } => summary_json,
            _ => "",
        }
    }
}

impl TaskState {
    /// The task state's word in progress reports and metrics.
    pub(crate) fn name(self) -> &'static str {
        match self {
            TaskState::Blocked => "blocked",
            TaskState::Ready => "ready",
            TaskState::Running => "running",
            TaskState::Committed => "committed",
        }
    }
}

impl AttemptState {
    /// The attempt's outcome in reports.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            AttemptState::Running => "running",
            AttemptState::Committed => "committed",
            AttemptState::Failed { .. } => "failed",
            AttemptState::Expired { .. } => "expired",
            AttemptState::Abandoned => "abandoned",
            AttemptState::GivenBack { .. } => "given back",
        }
    }
}

/// An error kind's word, in final records and attempt errors.
pub(crate) fn kind_name(k: pb::ErrorKind) -> &'static str {
    match k {
        pb::ErrorKind::Shutdown => "shutdown",
        pb::ErrorKind::Retryable => "retryable",
        pb::ErrorKind::Fatal => "fatal",
        pb::ErrorKind::Budget => "budget",
        pb::ErrorKind::Unspecified => "",
    }
}

/// The error kind a final record names.
fn kind_of(s: &str) -> pb::ErrorKind {
    match s {
        "retryable" => pb::ErrorKind::Retryable,
        "fatal" => pb::ErrorKind::Fatal,
        "budget" => pb::ErrorKind::Budget,
        _ => pb::ErrorKind::Unspecified,
    }
}

/// A job state's word, in final records and metrics.
pub(crate) fn job_state_name(s: pb::JobState) -> &'static str {
    match s {
        pb::JobState::Running => "running",
        pb::JobState::Succeeded => "succeeded",
        pb::JobState::Cancelled => "cancelled",
        _ => "failed",
    }
}

/// The job state a final record names.
fn job_state_of(s: &str) -> pb::JobState {
    match s {
        "succeeded" => pb::JobState::Succeeded,
        "cancelled" => pb::JobState::Cancelled,
        _ => pb::JobState::Failed,
    }
}

/// How an ended job ended, as recorded.
pub(crate) fn final_record(job: &JobRt) -> FinalRecord {
    FinalRecord {
        job_id: job.record.job_id.clone(),
        pipeline: job.p.name.clone(),
        output: job.p.output.clone(),
        state: job_state_name(job.phase.job_state()).to_string(),
        error_kind: kind_name(job.phase.error_kind()).to_string(),
        error: job.phase.error().to_string(),
        summary_json: job.phase.summary_json().to_string(),
        tasks_total: job.tasks.len() as u32,
    }
}

/// The final record of a job that never ran (it could not be started or resumed): failed,
/// fatally, with no tasks.
pub(crate) fn unstarted_final(
    job_id: String,
    pipeline: String,
    output: String,
    error: String,
) -> FinalRecord {
    FinalRecord {
        job_id,
        pipeline,
        output,
        state: job_state_name(pb::JobState::Failed).to_string(),
        error_kind: kind_name(pb::ErrorKind::Fatal).to_string(),
        error,
        summary_json: String::new(),
        tasks_total: 0,
    }
}

/// Failed tasks listed in a status at most (the job's error names the one that ended it).
const MAX_FAILURES: usize = 1000;

/// Task rows a status holds at most, whatever the page asked for: a page of them stays far
/// below the gRPC message limit (about 100 bytes a row).
pub const MAX_TASK_PAGE: u32 = 50_000;

/// Which of a job's tasks (in plan order across its stages) a status lists.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TaskPage {
    pub offset: u32,
    pub limit: u32,
}

impl TaskPage {
    /// No task rows: the per-stage counts only.
    pub(crate) const NONE: TaskPage = TaskPage {
        offset: 0,
        limit: 0,
    };

    /// The page a request asks for, its limit cut to [`MAX_TASK_PAGE`].
    pub(crate) fn of(req: &pb::GetJobRequest) -> TaskPage {
        TaskPage {
            offset: req.task_offset,
            limit: req.task_limit.min(MAX_TASK_PAGE),
        }
    }

    fn holds(self, i: usize) -> bool {
        i >= self.offset as usize && i < self.offset as usize + self.limit as usize
    }

    /// The offset of the page after this one, 0 when this one ends the `total` tasks.
    fn next(self, total: usize) -> u32 {
        let end = self.offset as usize + self.limit as usize;
        if self.limit > 0 && end < total {
            end as u32
        } else {
            0
        }
    }
}

/// A published summary without its per-task lists (what a status carries), and the summary
/// whole (`None` when there is none or it does not parse: then the text is kept as it is).
fn brief_summary(json: &str) -> (String, Option<RunSummary>) {
    match serde_json::from_str::<RunSummary>(json) {
        Ok(full) => {
            let mut brief = full.clone();
            for st in &mut brief.stages {
                st.tasks.clear();
            }
            let text = serde_json::to_string(&brief).expect("summary serializes");
            (text, Some(full))
        }
        Err(_) => (json.to_string(), None),
    }
}

fn attempt_reports(t: &TaskRt) -> Vec<pb::AttemptReport> {
    t.attempts
        .iter()
        .map(|a| pb::AttemptReport {
            attempt_id: a.id.clone(),
            worker_id: a.worker.clone(),
            outcome: a.state.name().to_string(),
            error: a.state.error().to_string(),
        })
        .collect()
}

impl CoordinatorService {
    /// A job's status: its progress per stage and task, its failed attempts and the workers,
    /// or how it ended once only its final record is left.
    pub(super) fn status_of(
        &self,
        inner: &Inner,
        job_id: &str,
        page: TaskPage,
    ) -> Option<pb::JobStatus> {
        let workers: Vec<pb::WorkerStatus> = {
            let mut v: Vec<pb::WorkerStatus> = inner
                .workers
                .iter()
                .map(|(id, w)| pb::WorkerStatus {
                    worker_id: id.clone(),
                    slots: w.caps.slots,
                    gpus: w.caps.gpus,
                    running: w.attempts.len() as u32,
                    last_seen_ms: w.last_seen_ms,
                    draining: w.draining,
                })
                .collect();
            v.sort_by(|a, b| a.worker_id.cmp(&b.worker_id));
            v
        };
        if let Some(job) = inner.jobs.get(job_id) {
            let mut stages: Vec<pb::StageProgress> = Vec::new();
            let mut failures = Vec::new();
            for (i, t) in job.tasks.iter().enumerate() {
                if stages.last().is_none_or(|s| s.stage != t.def.group) {
                    stages.push(pb::StageProgress {
                        stage: t.def.group.clone(),
                        ..Default::default()
                    });
                }
                let s = stages.last_mut().expect("pushed");
                s.tasks += 1;
                let mut task = pb::TaskProgress {
                    task: t.def.id.clone(),
                    state: t.state.name().to_string(),
                    worker: t
                        .attempts
                        .last()
                        .map(|a| a.worker.clone())
                        .unwrap_or_default(),
                    attempts: t.attempts.len() as u32,
                    ..Default::default()
                };
                match t.state {
                    TaskState::Committed => {
                        s.done += 1;
                        if let Some(o) = job.committed.get(&t.def.id) {
                            s.records += o.summary.records_out;
                            s.bytes += o.summary.bytes_out;
                            task.records_out = o.summary.records_out;
                            task.seconds = o.summary.seconds;
                            // The committed attempt's own record (it outlives a restart).
                            if !o.worker.is_empty() {
                                task.worker = o.worker.clone();
                                task.attempts = task.attempts.max(o.attempt);
                            }
                        }
                    }
                    TaskState::Running => s.running += 1,
                    _ => {}
                }
                if page.holds(i) {
                    s.task_list.push(task);
                }
                if failures.len() < MAX_FAILURES
                    && t.attempts.iter().any(|a| {
                        matches!(
                            a.state,
                            AttemptState::Failed { .. } | AttemptState::Expired { .. }
                        )
                    })
                {
                    failures.push(pb::TaskReport {
                        task_id: t.def.id.clone(),
                        state: t.state.name().to_string(),
                        attempts: attempt_reports(t),
                    });
                }
            }
            let done = stages.iter().map(|s| s.done).sum();
            return Some(pb::JobStatus {
                job_id: job_id.to_string(),
                pipeline: job.p.name.clone(),
                output: job.p.output.clone(),
                state: job.phase.job_state() as i32,
                error_kind: job.phase.error_kind() as i32,
                error: job.phase.error().to_string(),
                stages,
                failures,
                workers,
                tasks_total: job.tasks.len() as u32,
                tasks_done: done,
                summary_json: match &job.phase {
                    Phase::Published { summary_json } => job
                        .brief_summary
                        .get_or_init(|| brief_summary(summary_json).0)
                        .clone(),
                    _ => String::new(),
                },
                task_next: page.next(job.tasks.len()),
            });
        }
        inner.finals.get(job_id).map(|f| {
            // A job known only by its final record: its stages and tasks from the published
            // summary (none for a job that failed).
            let (summary_json, summary) = brief_summary(&f.summary_json);
            let mut i = 0;
            let stages = summary
                .map(|s| s.stages)
                .unwrap_or_default()
                .into_iter()
                .map(|st| {
                    let mut task_list = Vec::new();
                    for t in &st.tasks {
                        if page.holds(i) {
                            task_list.push(pb::TaskProgress {
                                task: t.task.clone(),
                                state: TaskState::Committed.name().to_string(),
                                worker: t.worker.clone(),
                                attempts: t.attempts,
                                records_out: t.records_out,
                                seconds: t.seconds,
                            });
                        }
                        i += 1;
                    }
                    pb::StageProgress {
                        stage: st.stage,
                        tasks: st.tasks.len() as u32,
                        done: st.tasks.len() as u32,
                        running: 0,
                        records: st.records_out,
                        bytes: st.bytes_out,
                        task_list,
                    }
                })
                .collect();
            pb::JobStatus {
                job_id: f.job_id.clone(),
                pipeline: f.pipeline.clone(),
                output: f.output.clone(),
                state: job_state_of(&f.state) as i32,
                error_kind: kind_of(&f.error_kind) as i32,
                error: f.error.clone(),
                stages,
                workers,
                tasks_total: f.tasks_total,
                tasks_done: if f.state == "succeeded" {
                    f.tasks_total
                } else {
                    0
                },
                summary_json,
                task_next: page.next(i),
                ..Default::default()
            }
        })
    }

    /// The Prometheus text of the coordinator's metrics.
    pub fn metrics(&self) -> String {
        self.telemetry.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_shown_stay_the_same() {
        let attempts = [
            (AttemptState::Running, "running"),
            (AttemptState::Committed, "committed"),
            (AttemptState::Failed { error: "e".into() }, "failed"),
            (AttemptState::Expired { error: "e".into() }, "expired"),
            (AttemptState::Abandoned, "abandoned"),
            (AttemptState::GivenBack { error: "e".into() }, "given back"),
        ];
        for (a, name) in attempts {
            assert_eq!(a.name(), name);
        }
        for s in ["succeeded", "cancelled", "failed"] {
            assert_eq!(job_state_name(job_state_of(s)), s);
        }
        for k in ["retryable", "fatal", "budget", ""] {
            assert_eq!(kind_name(kind_of(k)), k);
        }
        let cancelled = Phase::Cancelled;
        assert_eq!(cancelled.job_state(), pb::JobState::Cancelled);
        assert_eq!(cancelled.error(), "cancelled");
        assert_eq!(cancelled.error_kind(), pb::ErrorKind::Unspecified);
        let gate = Phase::GateFailed {
            error: "bad".into(),
        };
        assert_eq!(
            (gate.job_state(), gate.error_kind(), gate.error()),
            (pb::JobState::Failed, pb::ErrorKind::Fatal, "bad")
        );
    }
}
