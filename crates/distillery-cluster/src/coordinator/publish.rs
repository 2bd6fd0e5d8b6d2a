//! How a job ends: publishing once its last task committed (retried on retryable errors),
//! or failing (a task giving up, the bad-record gate, publishing) or being cancelled, with
//! the cleanup each ending asks for: running attempts abandoned, the final record written,
//! the staging removed (all of it, all but the quarantine parts, or none), the output lock
//! given back.

use std::time::Duration;

use distillery_core::{ErrorKind as Kind, HasKind};
use distillery_exec::store::Location;
use distillery_exec::task::publish_job;
use tracing::{debug, info, warn};

use super::job::{AttemptState, Illegal, Phase};
use super::schedule::abandon;
use super::status::final_record;
use super::{CoordinatorService, Inner, error_kind};
use crate::pb;
use crate::state::FinalRecord;

/// What becomes of an ended job's staging.
enum Staging {
    Removed,
    /// The bad-record gate stopped the job: the quarantined records are kept for the user.
    RemovedButQuarantine,
    /// Publishing had started: the committed files stay for a later attempt.
    Kept,
}

impl CoordinatorService {
    /// Gives a job's output lock back; a failure is logged (the output is complete or
    /// withdrawn either way, and this coordinator takes the locks of its ended jobs over).
    pub(super) async fn give_back_lock(&self, out: &Location, job_id: &str) {
        let _serial = self.output_locks.lock().await;
        if let Err(e) = distillery_exec::lock::release(out, job_id).await {
            warn!(job = %job_id, error = %e, "cannot give back the output lock");
        }
    }

    /// Fails a job (see [`Self::end_job`]).
    pub(super) fn fail_job(&self, job_id: &str, kind: pb::ErrorKind, error: String) {
        self.end_job(job_id, |p| p.fail(kind, error));
    }

    /// Cancels a job, unless it is being published or ended already.
    pub(super) fn cancel(&self, job_id: &str) {
        self.end_job(job_id, Phase::cancel);
    }

    /// Ends a job by the transition `to` (to an ended phase); see [`Self::end_locked`].
    pub(super) fn end_job(&self, job_id: &str, to: impl FnOnce(Phase) -> Result<Phase, Illegal>) {
        let mut guard = self.lock();
        self.end_locked(&mut guard, job_id, to);
    }

    /// Ends a job by the transition `to`, under the lock: its running attempts are abandoned,
    /// and in the background how it ended is recorded, its staging removed as its phase says
    /// and its output lock given back. Nothing happens when the job's phase refuses (ended
    /// already, or being published and not failing) or the job is not here.
    pub(super) fn end_locked(
        &self,
        inner: &mut Inner,
        job_id: &str,
        to: impl FnOnce(Phase) -> Result<Phase, Illegal>,
    ) {
        let Some(job) = inner.jobs.get_mut(job_id) else {
            return;
        };
        if let Err(e) = job.step(to) {
            debug!(job = %job_id, "{e}");
            return;
        }
        debug_assert!(!job.phase.is_live(), "{:?} is not an ending", job.phase);
        for t in &mut job.tasks {
            for a in &mut t.attempts {
                if a.state == AttemptState::Running {
                    abandon(&mut inner.running, &mut inner.workers, a);
                }
            }
        }
        let staging = match &job.phase {
            Phase::Failed {
                staging_kept: true, ..
            } => Staging::Kept,
            Phase::GateFailed { .. } => Staging::RemovedButQuarantine,
            _ => Staging::Removed,
        };
        match &job.phase {
            Phase::Failed { report: error, .. } | Phase::GateFailed { error } => {
                warn!(job = %job_id, error = %error, "job failed")
            }
            _ => info!(job = %job_id, "job cancelled"),
        }
        let fin = final_record(job);
        let out = job.out.clone();
        let svc = self.clone();
        let id = job_id.to_string();
        // Tracked before the lock goes: whoever sees the job ended can wait for this.
        self.after_jobs.spawn(async move {
            // How the job ended is recorded first: a coordinator restarting in between must
            // not resume it.
            svc.record_final(fin).await;
            let removed = match staging {
                Staging::Kept => Ok(()),
                Staging::RemovedButQuarantine => {
                    distillery_exec::publish::remove_staging_but_quarantine(&out, &id).await
                }
                Staging::Removed => distillery_exec::publish::remove_staging(&out, &id).await,
            };
            if let Err(e) = removed {
                warn!(job = %id, error = %e, "cannot remove the job's staging");
            }
            svc.give_back_lock(&out, &id).await;
        });
    }

    /// Writes a job's final record (retrying until the store takes it), then keeps only that
    /// record in memory.
    pub(super) async fn record_final(&self, fin: FinalRecord) {
        let mut delay = Duration::from_millis(100);
        while let Err(e) = self.state.put_final(&fin).await {
            warn!(job = %fin.job_id, error = %e, "cannot record how the job ended, retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(10));
        }
        let mut inner = self.lock();
        inner.jobs.remove(&fin.job_id);
        inner.finals.insert(fin.job_id.clone(), fin);
    }

    /// Publishes a job whose every task committed (retried on retryable errors).
    pub(super) fn spawn_publish(&self, job_id: String) {
        let svc = self.clone();
        tokio::spawn(async move {
            let mut next: fn(Phase) -> Result<Phase, Illegal> = Phase::start_publishing;
            loop {
                let Some((p, plan, out, committed, started, tries)) = ({
                    let mut inner = svc.lock();
                    inner.jobs.get_mut(&job_id).and_then(|j| {
                        j.step(next).ok()?;
                        let Phase::Publishing { tries } = j.phase else {
                            unreachable!("stepped to publishing");
                        };
                        Some((
                            j.p.clone(),
                            j.plan.clone(),
                            j.out.clone(),
                            j.committed.clone(),
                            j.started,
                            tries,
                        ))
                    })
                }) else {
                    return;
                };
                match publish_job(&p, &plan, &job_id, &out, &committed, started).await {
                    Ok(outcome) => {
                        // Before the job reads as succeeded: whoever waits for it may write
                        // into the output next.
                        svc.give_back_lock(&out, &job_id).await;
                        let summary_json =
                            serde_json::to_string(&outcome.summary).unwrap_or_default();
                        let fin = {
                            let mut inner = svc.lock();
                            let Some(job) = inner.jobs.get_mut(&job_id) else {
                                return;
                            };
                            if job.step(|p| p.published(summary_json)).is_err() {
                                return;
                            }
                            final_record(job)
                        };
                        info!(job = %job_id, output = %outcome.output, "job published");
                        svc.record_final(fin).await;
                        return;
                    }
                    Err(e) if e.kind() == Kind::Retryable && tries < 5 => {
                        let tries = tries + 1;
                        warn!(job = %job_id, error = %e, tries, "publishing failed, retrying");
                        tokio::time::sleep(svc.cfg.backoff * 2u32.pow(tries)).await;
                        next = Phase::retry_publishing;
                    }
                    Err(e) => {
                        svc.fail_job(&job_id, error_kind(&e), format!("publishing: {e}"));
                        return;
                    }
                }
            }
        });
    }
}
