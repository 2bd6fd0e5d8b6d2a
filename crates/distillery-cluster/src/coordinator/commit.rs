//! Commits: accepting an attempt's output. A completion is checked (generation, job, attempt,
//! lease), then the task's commit record is created in the state store only if absent, so
//! exactly one attempt per task wins; the winner is applied to the job in memory (losing
//! copies abandoned, the next level released, the gate run, publishing started).

use std::time::Instant;

use distillery_exec::store::Location;
use distillery_exec::task::{TaskOutput, attempt_dir};
use tonic::Status;
use tracing::{info, warn};

use super::CoordinatorService;
use super::job::{AttemptState, Phase, TaskState};
use super::schedule::{abandon, push_ready_tasks};
use crate::pb;
use crate::state::CommitRecord;

impl CoordinatorService {
    /// Removes a fenced attempt's files.
    fn clean_attempt(&self, out: Location, dir: String) {
        tokio::spawn(async move {
            match out.list(&dir).await {
                Ok(files) => {
                    for (rel, _) in files {
                        let _ = out.delete(&rel).await;
                    }
                }
                Err(e) => warn!(dir = %dir, error = %e, "cannot clean a fenced attempt"),
            }
        });
    }

    pub(super) async fn complete_inner(
        &self,
        req: pb::CompleteTaskRequest,
    ) -> Result<pb::CompleteTaskResponse, Status> {
        let output: TaskOutput = serde_json::from_str(&req.output_json)
            .map_err(|e| Status::invalid_argument(format!("bad output manifest: {e}")))?;
        if req.attempt_id.is_empty() || req.task_id.is_empty() {
            return Err(Status::invalid_argument("empty task or attempt id"));
        }
        if output.dir != attempt_dir(&req.job_id, &req.task_id, &req.attempt_id) {
            return Err(Status::invalid_argument(
                "output written outside the attempt's directory",
            ));
        }
        // The commit and the in-memory update run detached from the request, so a client
        // that goes away mid-call cannot split them.
        let svc = self.clone();
        tokio::spawn(async move { svc.complete_detached(req, output).await })
            .await
            .map_err(|e| Status::internal(format!("commit task: {e}")))?
    }

    fn refused(&self, req: &pb::CompleteTaskRequest, reason: String) -> pb::CompleteTaskResponse {
        self.telemetry.commits_refused.inc();
        warn!(job = %req.job_id, task = %req.task_id, attempt = %req.attempt_id, reason = %reason, "completion refused");
        pb::CompleteTaskResponse {
            accepted: false,
            reason,
        }
    }

    fn accepted() -> pb::CompleteTaskResponse {
        pb::CompleteTaskResponse {
            accepted: true,
            reason: String::new(),
        }
    }

    async fn complete_detached(
        &self,
        req: pb::CompleteTaskRequest,
        output: TaskOutput,
    ) -> Result<pb::CompleteTaskResponse, Status> {
        // Validate under the lock, commit outside it. Files are removed only for attempts
        // known here and not committed: a completion from another generation may be the
        // winner whose record the reloaded job reads.
        let out = {
            let mut guard = self.lock();
            let inner = &mut *guard;
            if req.generation != self.generation {
                drop(guard);
                let reason = format!(
                    "stale generation {} (now {})",
                    req.generation, self.generation
                );
                return Ok(self.refused(&req, reason));
            }
            let Some(job) = inner.jobs.get_mut(&req.job_id) else {
                drop(guard);
                return Ok(self.refused(&req, "unknown or ended job".into()));
            };
            let Some(&t) = job.by_id.get(&req.task_id) else {
                return Err(Status::invalid_argument("unknown task"));
            };
            let out = job.out.clone();
            let running = job.phase.is_live();
            let task = &mut job.tasks[t];
            let Some(a) = task.attempts.iter_mut().find(|a| a.id == req.attempt_id) else {
                drop(guard);
                return Ok(self.refused(&req, "unknown attempt".into()));
            };
            // A retried report of the commit that already won.
            if a.state == AttemptState::Committed {
                return Ok(Self::accepted());
            }
            let dir = output.dir.clone();
            let reason = if !running {
                Some("the job is not running".to_string())
            } else if a.state != AttemptState::Running {
                Some(format!("attempt is {}", a.state.name()))
            } else if a.deadline < Instant::now() {
                Some("lease expired".to_string())
            } else if task.state == TaskState::Committed {
                Some("another attempt committed first".to_string())
            } else {
                None
            };
            if let Some(reason) = reason {
                drop(guard);
                self.clean_attempt(out, dir);
                return Ok(self.refused(&req, reason));
            }
            out
        };
        let rec = CommitRecord {
            task_id: req.task_id.clone(),
            attempt_id: req.attempt_id.clone(),
            worker_id: req.worker_id.clone(),
            output,
        };
        let winner = match self.state.commit(&req.job_id, &rec).await {
            Err(e) => {
                return Err(Status::unavailable(format!(
                    "cannot write the commit record: {e}"
                )));
            }
            Ok(None) => rec.clone(),
            Ok(Some(w)) => w,
        };
        let won = winner.attempt_id == req.attempt_id;
        if self.apply_commit(&req.job_id, winner) {
            self.spawn_publish(req.job_id.clone());
        }
        if won {
            info!(job = %req.job_id, task = %req.task_id, attempt = %req.attempt_id, worker = %req.worker_id, "task committed");
            Ok(Self::accepted())
        } else {
            self.clean_attempt(out, rec.output.dir.clone());
            Ok(self.refused(&req, "another attempt committed first".into()))
        }
    }

    /// Applies a task's commit record to the job in memory (once): the winner committed,
    /// other running attempts abandoned, the next level released (the bad-record gate failing
    /// ends the job here). Returns whether the job's last task committed: publish it now.
    fn apply_commit(&self, job_id: &str, rec: CommitRecord) -> bool {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(job) = inner.jobs.get_mut(job_id) else {
            return false;
        };
        let Some(&t) = job.by_id.get(&rec.task_id) else {
            return false;
        };
        if job.tasks[t].state == TaskState::Committed {
            return false;
        }
        self.telemetry.commits.inc();
        let now = Instant::now();
        let group = job.tasks[t].def.group.clone();
        for a in &mut job.tasks[t].attempts {
            if a.id == rec.attempt_id {
                a.end(AttemptState::Committed);
                let secs = now.duration_since(a.started).as_secs_f64();
                self.telemetry.committed(&group, &rec.output.summary, secs);
                job.durations.entry(group.clone()).or_default().push(secs);
                if let Some(w) = inner.workers.get_mut(&a.worker) {
                    w.attempts.remove(&a.id);
                }
                inner.running.remove(&a.id);
            } else if a.state == AttemptState::Running {
                // The losing copy of a straggler: stop it.
                abandon(&mut inner.running, &mut inner.workers, a);
            }
        }
        job.mark_committed(t, rec.output);
        match job.advance() {
            Err(e) => {
                self.end_locked(inner, job_id, |p| p.fail_gate(e.to_string()));
                false
            }
            Ok(ready) => {
                let publish = job.left == 0 && job.phase == Phase::Stages;
                push_ready_tasks(inner, job_id, ready);
                publish
            }
        }
    }
}
