//! Scheduling: the ready queues, pulls (which hand out tasks and renew leases), lease expiry,
//! retries with backoff after a failed or expired attempt, and copies of stragglers.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use distillery_exec::task::attempt_dir;
use tonic::Status;
use tracing::{info, warn};

use super::job::{AttemptRt, AttemptState, JobRt, TaskState, task_report};
use super::status::kind_name;
use super::{CoordinatorService, Inner, WorkerRt, now_ms};
use crate::pb;

/// Queues a ready task (a speculative copy goes first).
pub(super) fn push_ready(inner: &mut Inner, job: &str, t: usize, spec: bool, gpus: u32) {
    let q = if gpus > 0 {
        &mut inner.ready_gpu
    } else {
        &mut inner.ready_cpu
    };
    if spec {
        q.push_front((job.to_string(), t, true));
    } else {
        q.push_back((job.to_string(), t, false));
    }
    inner.wake.notify_waiters();
}

/// Queues the tasks of a job made ready.
pub(super) fn push_ready_tasks(inner: &mut Inner, job_id: &str, ready: Vec<usize>) {
    let Some(job) = inner.jobs.get(job_id) else {
        return;
    };
    let ready: Vec<(usize, u32)> = ready
        .into_iter()
        .filter(|&i| job.tasks[i].state == TaskState::Ready)
        .map(|i| (i, job.tasks[i].def.gpus))
        .collect();
    for (i, gpus) in ready {
        push_ready(inner, job_id, i, false, gpus);
    }
}

/// Stops a running attempt: its lease is dropped and its worker told to abandon it.
pub(super) fn abandon(
    running: &mut HashMap<String, (String, usize)>,
    workers: &mut HashMap<String, WorkerRt>,
    a: &mut AttemptRt,
) {
    a.end(AttemptState::Abandoned);
    running.remove(&a.id);
    if let Some(w) = workers.get_mut(&a.worker) {
        w.attempts.remove(&a.id);
        w.abandon.push(a.id.clone());
    }
}

/// Lets the leases of `attempts` expire now (their worker lost them).
pub(super) fn expire_now<'a>(inner: &mut Inner, attempts: impl IntoIterator<Item = &'a String>) {
    let now = Instant::now();
    for a in attempts {
        if let Some((job, t)) = inner.running.get(a)
            && let Some(j) = inner.jobs.get_mut(job)
            && let Some(at) = j.tasks[*t].attempts.iter_mut().find(|x| &x.id == a)
        {
            at.deadline = now;
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

impl CoordinatorService {
    /// Lease expiry, due retries and stragglers; run every 100 ms by [`Self::spawn_ticker`].
    pub fn tick(&self) {
        let now = Instant::now();
        let mut failed_jobs: Vec<(String, String)> = Vec::new();
        {
            let mut guard = self.lock();
            let inner = &mut *guard;
            // Leases.
            let expired: Vec<String> = inner
                .running
                .iter()
                .filter(|(id, (job, t))| {
                    inner.jobs.get(job).is_some_and(|j| {
                        j.tasks[*t]
                            .attempts
                            .iter()
                            .any(|a| &a.id == *id && a.deadline < now)
                    })
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in expired {
                let Some((job_id, t)) = inner.running.remove(&id) else {
                    continue;
                };
                self.telemetry.lease_expiries.inc();
                let job = inner.jobs.get_mut(&job_id).expect("running job");
                let task = &mut job.tasks[t];
                let a = task
                    .attempts
                    .iter_mut()
                    .find(|a| a.id == id)
                    .expect("attempt");
                a.end(AttemptState::Expired {
                    error: format!(
                        "lease expired: worker {} sent no heartbeat for {:.1} s",
                        a.worker,
                        self.cfg.lease.as_secs_f64()
                    ),
                });
                warn!(job = %job_id, task = %task.def.id, attempt = %id, worker = %a.worker, "lease expired");
                let worker = a.worker.clone();
                if let Some(w) = inner.workers.get_mut(&worker) {
                    w.attempts.remove(&id);
                    w.abandon.push(id.clone());
                }
                if let Some(e) = self.after_failure(job, t, &mut inner.delayed, now) {
                    failed_jobs.push((job_id, e));
                }
            }
            // Due retries.
            let mut i = 0;
            while i < inner.delayed.len() {
                if inner.delayed[i].0 <= now {
                    let (_, job, t) = inner.delayed.swap_remove(i);
                    let gpus = inner
                        .jobs
                        .get(&job)
                        .map(|j| j.tasks[t].def.gpus)
                        .unwrap_or(0);
                    push_ready(inner, &job, t, false, gpus);
                } else {
                    i += 1;
                }
            }
            // Stragglers: only attempts running now are looked at, and one median per stage.
            if self.cfg.straggler_factor > 0.0 {
                let mut medians: HashMap<(String, String), Option<f64>> = HashMap::new();
                let mut copies = Vec::new();
                for (id, (job_id, t)) in &inner.running {
                    let Some(job) = inner.jobs.get(job_id) else {
                        continue;
                    };
                    let task = &job.tasks[*t];
                    if task.speculated || task.state != TaskState::Running {
                        continue;
                    }
                    let Some(a) = task.attempts.iter().find(|a| &a.id == id) else {
                        continue;
                    };
                    let elapsed = now.duration_since(a.started);
                    if elapsed < self.cfg.straggler_min {
                        continue;
                    }
                    let median = *medians
                        .entry((job_id.clone(), task.def.group.clone()))
                        .or_insert_with(|| job.durations.get(&task.def.group).map(|d| median(d)));
                    if let Some(m) = median
                        && elapsed.as_secs_f64() > self.cfg.straggler_factor * m
                    {
                        info!(job = %job_id, task = %task.def.id, elapsed_s = elapsed.as_secs_f64(), median_s = m, "straggler: launching a copy");
                        copies.push((job_id.clone(), *t));
                    }
                }
                for (j, t) in copies {
                    let Some(job) = inner.jobs.get_mut(&j) else {
                        continue;
                    };
                    if job.tasks[t].speculated {
                        continue;
                    }
                    job.tasks[t].speculated = true;
                    let gpus = job.tasks[t].def.gpus;
                    self.telemetry.stragglers.inc();
                    push_ready(inner, &j, t, true, gpus);
                }
            }
            // Workers silent for three leases are gone.
            let lease = self.cfg.lease;
            inner.workers.retain(|_, w| {
                now.duration_since(w.last_seen) < lease * 3 || !w.attempts.is_empty()
            });
        }
        for (job, e) in failed_jobs {
            self.fail_job(&job, pb::ErrorKind::Retryable, e);
        }
    }

    /// After an attempt failed or expired: retry later, or give up with a report.
    fn after_failure(
        &self,
        job: &mut JobRt,
        t: usize,
        delayed: &mut Vec<(Instant, String, usize)>,
        now: Instant,
    ) -> Option<String> {
        let task = &mut job.tasks[t];
        if task.state != TaskState::Running || task.running() > 0 {
            return None;
        }
        let tries = task
            .attempts
            .iter()
            .filter(|a| !matches!(a.state, AttemptState::GivenBack { .. }))
            .count() as u32;
        if tries >= self.cfg.max_attempts {
            return Some(task_report(task));
        }
        self.telemetry.retries.inc();
        task.state = TaskState::Ready;
        task.ready_at = Some(now);
        task.speculated = false;
        let delay = (self.cfg.backoff * 2u32.saturating_pow(tries.saturating_sub(1)))
            .min(Duration::from_secs(30));
        delayed.push((now + delay, job.record.job_id.clone(), t));
        None
    }

    pub fn spawn_ticker(&self) -> tokio::task::JoinHandle<()> {
        let svc = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tick.tick().await;
                svc.tick();
            }
        })
    }

    pub(super) fn check_generation(&self, g: u64) -> Result<(), Status> {
        if g != self.generation {
            return Err(Status::failed_precondition(format!(
                "stale generation {g}: the coordinator restarted (generation {}); register again",
                self.generation
            )));
        }
        Ok(())
    }

    /// A worker's pull: its heartbeat (leases renewed, lost attempts expired), what it must
    /// abandon, and as many ready tasks as it has free slots.
    pub(super) fn pull_inner(&self, req: pb::PullRequest) -> Result<pb::PullResponse, Status> {
        self.telemetry.pulls.inc();
        self.check_generation(req.generation)?;
        let now = Instant::now();
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(w) = inner.workers.get_mut(&req.worker_id) else {
            return Err(Status::failed_precondition(format!(
                "unknown worker {}: register again",
                req.worker_id
            )));
        };
        w.last_seen = now;
        w.last_seen_ms = now_ms();
        w.draining = req.draining;
        let mut abandon = std::mem::take(&mut w.abandon);
        let listed: HashSet<&str> = req.running.iter().map(|r| r.attempt_id.as_str()).collect();
        // Renew the leases of the attempts the worker runs; anything else it runs is stale.
        let deadline = now + self.cfg.lease;
        for r in &req.running {
            let ok = match inner.running.get(&r.attempt_id) {
                Some((job, t)) => inner
                    .jobs
                    .get_mut(job)
                    .and_then(|j| {
                        j.tasks[*t]
                            .attempts
                            .iter_mut()
                            .find(|a| a.id == r.attempt_id)
                    })
                    .map(|a| a.deadline = deadline)
                    .is_some(),
                None => false,
            };
            if !ok && !abandon.contains(&r.attempt_id) {
                abandon.push(r.attempt_id.clone());
            }
        }
        // Attempts this worker should be running but no longer lists were lost (a restarted
        // worker with the same id): they expire at once.
        let w = inner.workers.get_mut(&req.worker_id).expect("checked");
        let lost: Vec<String> = w
            .attempts
            .iter()
            .filter(|a| !listed.contains(a.as_str()))
            .cloned()
            .collect();
        expire_now(inner, &lost);
        let w = inner.workers.get(&req.worker_id).expect("checked");
        let (gpus, draining) = (w.caps.gpus, w.draining);
        let mut tasks = Vec::new();
        if !draining {
            let mut skipped = Vec::new();
            let mut spec_skipped = Vec::new();
            while (tasks.len() as u32) < req.free_slots {
                let next = if gpus > 0 {
                    inner
                        .ready_gpu
                        .pop_front()
                        .or_else(|| inner.ready_cpu.pop_front())
                } else {
                    inner.ready_cpu.pop_front()
                };
                let Some((job_id, t, spec)) = next else {
                    break;
                };
                let Some(job) = inner.jobs.get_mut(&job_id) else {
                    continue;
                };
                if !job.phase.is_live() {
                    continue;
                }
                let task = &job.tasks[t];
                if spec {
                    if task.state != TaskState::Running || task.running() != 1 {
                        continue;
                    }
                    // Not on the worker already running the original: another may take it.
                    if task
                        .attempts
                        .iter()
                        .any(|a| a.state == AttemptState::Running && a.worker == req.worker_id)
                    {
                        spec_skipped.push((job_id, t, spec));
                        continue;
                    }
                } else if task.state != TaskState::Ready {
                    continue;
                }
                if task.def.gpus > gpus {
                    skipped.push((job_id, t, spec));
                    continue;
                }
                inner.next_attempt += 1;
                let attempt_id = format!("g{}-a{}", self.generation, inner.next_attempt);
                let inputs = job.task_inputs_json(t);
                let shards_json = job.task_shards_json(t);
                let task = &mut job.tasks[t];
                let dir = attempt_dir(&job_id, &task.def.id, &attempt_id);
                task.state = TaskState::Running;
                if let Some(at) = task.ready_at.take() {
                    let waited = now.saturating_duration_since(at).as_secs_f64();
                    self.telemetry.leased(&task.def.group, waited);
                }
                task.attempts.push(AttemptRt {
                    id: attempt_id.clone(),
                    worker: req.worker_id.clone(),
                    started: now,
                    deadline,
                    state: AttemptState::Running,
                    started_ms: now_ms(),
                    ended_ms: 0,
                });
                inner
                    .running
                    .insert(attempt_id.clone(), (job_id.clone(), t));
                tasks.push(pb::Task {
                    job_id: job_id.clone(),
                    task_id: task.def.id.clone(),
                    attempt_id,
                    attempt: task.attempts.len() as u32,
                    generation: self.generation,
                    lease_deadline_ms: now_ms() + self.cfg.lease.as_millis() as i64,
                    pipeline_file: job.record.pipeline_file.clone(),
                    pipeline_text: job.record.pipeline_text.clone(),
                    overrides: job.record.overrides.clone(),
                    task_json: serde_json::to_string(&task.def).expect("task serializes"),
                    inputs_json: inputs.to_string(),
                    dir,
                    shards_json: shards_json.to_string(),
                });
            }
            for s in skipped.into_iter().rev() {
                inner.ready_gpu.push_front(s);
            }
            for s in spec_skipped.into_iter().rev() {
                inner.ready_cpu.push_front(s);
            }
        }
        let w = inner.workers.get_mut(&req.worker_id).expect("checked");
        for t in &tasks {
            w.attempts.insert(t.attempt_id.clone());
        }
        Ok(pb::PullResponse {
            tasks,
            abandon_attempts: abandon,
            heartbeat_ms: self.cfg.heartbeat.as_millis() as u32,
        })
    }

    /// A failed attempt: given back by a worker shutting down (queued again, not counted),
    /// retried after a retryable error, or the job fails.
    pub(super) fn fail_inner(
        &self,
        req: pb::FailTaskRequest,
    ) -> Result<pb::FailTaskResponse, Status> {
        if req.generation != self.generation {
            return Ok(pb::FailTaskResponse {});
        }
        let kind = pb::ErrorKind::try_from(req.kind).unwrap_or(pb::ErrorKind::Fatal);
        let mut give_up = None;
        {
            let mut guard = self.lock();
            let inner = &mut *guard;
            let Some(job) = inner.jobs.get_mut(&req.job_id) else {
                return Ok(pb::FailTaskResponse {});
            };
            let Some(&t) = job.by_id.get(&req.task_id) else {
                return Ok(pb::FailTaskResponse {});
            };
            let Some(a) = job.tasks[t]
                .attempts
                .iter_mut()
                .find(|a| a.id == req.attempt_id && a.state == AttemptState::Running)
            else {
                return Ok(pb::FailTaskResponse {});
            };
            let error = format!("[{}] {}", kind_name(kind), req.message);
            warn!(job = %req.job_id, task = %req.task_id, attempt = %req.attempt_id, kind = kind_name(kind), error = %req.message, "attempt failed");
            a.end(if kind == pb::ErrorKind::Shutdown {
                AttemptState::GivenBack { error }
            } else {
                AttemptState::Failed { error }
            });
            inner.running.remove(&req.attempt_id);
            if let Some(w) = inner.workers.get_mut(&req.worker_id) {
                w.attempts.remove(&req.attempt_id);
            }
            if kind == pb::ErrorKind::Shutdown {
                // Given back by a worker shutting down: not the task's fault, not counted.
                if job.tasks[t].state == TaskState::Running && job.tasks[t].running() == 0 {
                    job.tasks[t].state = TaskState::Ready;
                    job.tasks[t].ready_at = Some(Instant::now());
                    job.tasks[t].speculated = false;
                    let gpus = job.tasks[t].def.gpus;
                    push_ready(inner, &req.job_id, t, false, gpus);
                }
            } else if kind == pb::ErrorKind::Retryable {
                if let Some(e) = self.after_failure(job, t, &mut inner.delayed, Instant::now()) {
                    give_up = Some((pb::ErrorKind::Retryable, e));
                }
            } else if kind == pb::ErrorKind::Budget {
                give_up = Some((kind, req.message.clone()));
            } else {
                give_up = Some((kind, task_report(&job.tasks[t])));
            }
        }
        if let Some((k, e)) = give_up {
            self.fail_job(&req.job_id, k, e);
        }
        Ok(pb::FailTaskResponse {})
    }
}
