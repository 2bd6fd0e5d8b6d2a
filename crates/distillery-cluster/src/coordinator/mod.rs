//! The coordinator: plans submitted jobs into tasks, hands them to workers that pull, keeps
//! leases, retries with backoff, relaunches stragglers, commits exactly one attempt per task
//! through the state store, and publishes a job's output when its last task commits.
//!
//! In memory it holds only what it can rebuild: a restarted coordinator reloads every
//! unfinished job from the state store ([`crate::state`]) and carries on; workers re-register
//! when their next pull is refused as coming from an older generation.
//!
//! This file holds the service type, its settings and its start; the rest is one file each:
//!
//! - `job`: a job's runtime state as a typed state machine (`Phase`, `TaskState`,
//!   `AttemptState`), its levels and the bad-record gate;
//! - `submit`: a submitted job checked, planned, its output locked, recorded and queued;
//! - `schedule`: the ready queues, pulls and leases, retries with backoff, stragglers;
//! - `commit`: commit records, accepting an attempt's output;
//! - `publish`: publishing, and ending a job (failed, stopped by the gate, cancelled) with
//!   its cleanup;
//! - `status`: job status, final records and metrics, and the words every state is shown by;
//! - `telemetry`: the Prometheus metrics (counters, histograms, gauges read at a scrape);
//! - `page`: the job pages (`/`, `/jobs/<id>`) on the HTTP port;
//! - `service`: the tonic service;
//! - `recover`: a restart: unfinished jobs rebuilt from their records and the files planned
//!   when they were submitted.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use distillery_core::{ErrorKind as Kind, HasKind};
use distillery_exec::ExecError;
use tokio_util::task::TaskTracker;
use tracing::info;

use crate::ClusterError;
use crate::pb;
use crate::state::{FinalRecord, StateStore};

mod commit;
mod job;
mod page;
mod publish;
mod recover;
mod schedule;
mod service;
mod status;
mod submit;
mod telemetry;
#[cfg(test)]
mod tests;

use job::JobRt;

/// Coordinator settings.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// A lease lasts this long without a heartbeat.
    pub lease: Duration,
    /// How often workers pull.
    pub heartbeat: Duration,
    /// Attempts of a task before the job fails.
    pub max_attempts: u32,
    /// First retry delay; doubled per failed attempt, capped at 30 s.
    pub backoff: Duration,
    /// A running attempt slower than this factor times the median duration of its stage's
    /// finished tasks gets a copy on a free worker (0: never).
    pub straggler_factor: f64,
    /// ...and only once it has run at least this long.
    pub straggler_min: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            lease: Duration::from_secs(15),
            heartbeat: Duration::from_secs(1),
            max_attempts: 4,
            backoff: Duration::from_millis(500),
            straggler_factor: 4.0,
            straggler_min: Duration::from_secs(30),
        }
    }
}

struct WorkerRt {
    caps: pb::Capabilities,
    last_seen: Instant,
    last_seen_ms: i64,
    draining: bool,
    attempts: HashSet<String>,
    abandon: Vec<String>,
}

#[derive(Default)]
struct Inner {
    workers: HashMap<String, WorkerRt>,
    jobs: BTreeMap<String, JobRt>,
    finals: BTreeMap<String, FinalRecord>,
    /// Tasks ready to run (job, task, speculative copy): those any worker may take, and those
    /// that need GPUs (so a CPU worker's pull never scans them).
    ready_cpu: VecDeque<(String, usize, bool)>,
    ready_gpu: VecDeque<(String, usize, bool)>,
    /// Retries waiting out their backoff: (due, job, task).
    delayed: Vec<(Instant, String, usize)>,
    /// attempt id → (job, task index)
    running: HashMap<String, (String, usize)>,
    next_attempt: u64,
    /// Notified whenever a task is queued: wakes the pulls held for tasks (long polls).
    wake: Arc<tokio::sync::Notify>,
}

/// The coordinator service (cheap to clone; all clones share state).
#[derive(Clone)]
pub struct CoordinatorService {
    inner: Arc<Mutex<Inner>>,
    state: StateStore,
    cfg: Arc<CoordinatorConfig>,
    generation: u64,
    telemetry: Arc<telemetry::Telemetry>,
    ready: Arc<AtomicBool>,
    /// Set once the process is stopping its own worker: held pulls end at once.
    pulls_released: Arc<AtomicBool>,
    /// What failed or cancelled jobs still do in the background (their final record, their
    /// staging removed): an embedded run waits for it before its process exits.
    after_jobs: TaskTracker,
    /// Held while an output lock is taken or given back: the lock of a job that ended is
    /// taken over by the next job, which must not race that job's own release (a read, then
    /// a delete) into deleting the new holder's lock.
    output_locks: Arc<tokio::sync::Mutex<()>>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The gRPC error kind of an executor error.
pub fn error_kind(e: &ExecError) -> pb::ErrorKind {
    match e {
        ExecError::Budget(_) => pb::ErrorKind::Budget,
        e if e.kind() == Kind::Retryable => pb::ErrorKind::Retryable,
        _ => pb::ErrorKind::Fatal,
    }
}

impl CoordinatorService {
    /// Waits until what failed or cancelled jobs do in the background is done (their final
    /// records written, their staging removed).
    pub async fn after_jobs_done(&self) {
        self.after_jobs.close();
        self.after_jobs.wait().await;
        self.after_jobs.reopen();
    }

    /// Opens the state store, starts a new generation and reloads unfinished jobs.
    pub async fn start(
        state_url: &str,
        cfg: CoordinatorConfig,
    ) -> Result<CoordinatorService, ClusterError> {
        let state = StateStore::open(state_url)?;
        let generation = state.next_generation().await?;
        let inner = Arc::new(Mutex::new(Inner::default()));
        let svc = CoordinatorService {
            telemetry: Arc::new(telemetry::Telemetry::new(
                Arc::downgrade(&inner),
                generation,
            )),
            inner,
            state,
            cfg: Arc::new(cfg),
            generation,
            ready: Arc::new(AtomicBool::new(false)),
            pulls_released: Arc::new(AtomicBool::new(false)),
            after_jobs: TaskTracker::new(),
            output_locks: Arc::default(),
        };
        svc.recover().await?;
        info!(state = %svc.state.display(), generation, "coordinator started");
        svc.ready.store(true, Ordering::SeqCst);
        // Publish jobs whose every task had committed before a restart.
        let ids: Vec<String> = svc
            .lock()
            .jobs
            .iter()
            .filter(|(_, j)| j.left == 0 && j.phase.is_live())
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            svc.spawn_publish(id);
        }
        Ok(svc)
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the state is loaded (readiness).
    pub fn ready_flag(&self) -> Arc<AtomicBool> {
        self.ready.clone()
    }

    /// Ends every pull held for tasks now and answers later ones at once. An embedded run
    /// whose job has ended stops its worker without waiting out a long poll (a heartbeat).
    pub fn release_pulls(&self) {
        self.pulls_released.store(true, Ordering::SeqCst);
        self.lock().wake.notify_waiters();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}
