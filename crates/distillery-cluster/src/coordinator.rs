//! The coordinator: plans submitted jobs into tasks, hands them to workers that pull, keeps
//! leases, retries with backoff, relaunches stragglers, commits exactly one attempt per task
//! through the state store, and publishes a job's output when its last task commits.
//!
//! In memory it holds only what it can rebuild: a restarted coordinator reloads every
//! unfinished job from the state store ([`crate::state`]) and carries on; workers re-register
//! when their next pull is refused as coming from an older generation.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use distillery_core::spec::Pipeline;
use distillery_core::{ErrorKind as Kind, HasKind};
use distillery_exec::ExecError;
use distillery_exec::lock::OutputLock;
use distillery_exec::store::{Location, open_location};
use distillery_exec::task::{
    JobPlan, TaskDef, TaskKind, TaskOutput, attempt_dir, check_bad_ratio, inputs_below, plan_tasks,
    publish_job, task_inputs, upstream_outputs,
};
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};
use tracing::{info, warn};

use crate::metrics::Text;
use crate::pb;
use crate::state::{CommitRecord, FinalRecord, JobRecord, StateStore};
use crate::{ClusterError, PROTOCOL_VERSION};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TState {
    Blocked,
    Ready,
    Running,
    Committed,
}

#[derive(Debug)]
struct AttemptRt {
    id: String,
    worker: String,
    started: Instant,
    deadline: Instant,
    outcome: &'static str,
    error: String,
}

#[derive(Debug)]
struct TaskRt {
    def: TaskDef,
    state: TState,
    attempts: Vec<AttemptRt>,
    speculated: bool,
}

impl TaskRt {
    fn running(&self) -> usize {
        self.attempts
            .iter()
            .filter(|a| a.outcome == "running")
            .count()
    }
}

struct JobRt {
    record: JobRecord,
    p: Arc<Pipeline>,
    plan: Arc<JobPlan>,
    out: Location,
    tasks: Vec<TaskRt>,
    by_id: HashMap<String, usize>,
    /// Task indexes per level, and how many of each level are not committed yet.
    by_level: Vec<Vec<usize>>,
    level_left: Vec<usize>,
    /// Levels up to this one are released (their tasks may run).
    released: usize,
    /// The bad-record gate passed (every ingest task committed and the ratio is fine).
    gate_ok: bool,
    /// The bad-record gate stopped the job: its staging keeps the quarantine parts.
    gate_failed: bool,
    /// Publishing started: no cancelling any more, and staging is kept if it fails.
    publishing: bool,
    /// What the tasks of a (level, shard) read, as JSON, built once when first handed out
    /// (`u32::MAX`: unsharded).
    inputs_json: HashMap<(u32, u32), Arc<str>>,
    committed: BTreeMap<String, TaskOutput>,
    left: usize,
    state: pb::JobState,
    error_kind: pb::ErrorKind,
    error: String,
    summary_json: String,
    started: SystemTime,
    durations: HashMap<String, Vec<f64>>,
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
}

/// Counters exported on `/metrics`.
#[derive(Default)]
struct Counters {
    /// Records and bytes written by committed tasks, per stage (cumulative).
    stage: Mutex<BTreeMap<String, (u64, u64)>>,
    lease_expiries: AtomicU64,
    retries: AtomicU64,
    commits: AtomicU64,
    commits_refused: AtomicU64,
    stragglers: AtomicU64,
    pulls: AtomicU64,
}

/// The coordinator service (cheap to clone; all clones share state).
#[derive(Clone)]
pub struct CoordinatorService {
    inner: Arc<Mutex<Inner>>,
    state: StateStore,
    cfg: Arc<CoordinatorConfig>,
    generation: u64,
    counters: Arc<Counters>,
    ready: Arc<AtomicBool>,
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

/// Stops a running attempt: its lease is dropped and its worker told to abandon it.
fn abandon(
    running: &mut HashMap<String, (String, usize)>,
    workers: &mut HashMap<String, WorkerRt>,
    a: &mut AttemptRt,
) {
    a.outcome = "abandoned";
    running.remove(&a.id);
    if let Some(w) = workers.get_mut(&a.worker) {
        w.attempts.remove(&a.id);
        w.abandon.push(a.id.clone());
    }
}

/// Marks an attempt given back by a shutting-down worker.
fn a_given_back(task: &mut TaskRt, attempt: &str) {
    if let Some(a) = task.attempts.iter_mut().find(|a| a.id == attempt) {
        a.outcome = "given back";
    }
}

fn kind_name(k: pb::ErrorKind) -> &'static str {
    match k {
        pb::ErrorKind::Shutdown => "shutdown",
        pb::ErrorKind::Retryable => "retryable",
        pb::ErrorKind::Fatal => "fatal",
        pb::ErrorKind::Budget => "budget",
        pb::ErrorKind::Unspecified => "",
    }
}

fn kind_of(s: &str) -> pb::ErrorKind {
    match s {
        "retryable" => pb::ErrorKind::Retryable,
        "fatal" => pb::ErrorKind::Fatal,
        "budget" => pb::ErrorKind::Budget,
        _ => pb::ErrorKind::Unspecified,
    }
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
        let svc = CoordinatorService {
            inner: Arc::new(Mutex::new(Inner::default())),
            state,
            cfg: Arc::new(cfg),
            generation,
            counters: Arc::new(Counters::default()),
            ready: Arc::new(AtomicBool::new(false)),
            after_jobs: TaskTracker::new(),
            output_locks: Arc::default(),
        };
        for (rec, fin) in svc.state.jobs().await? {
            match fin {
                Some(f) => {
                    svc.lock().finals.insert(f.job_id.clone(), f);
                }
                None => {
                    let commits = svc.state.commits(&rec.job_id).await?;
                    let id = rec.job_id.clone();
                    let (text, file) = (rec.pipeline_text.clone(), rec.pipeline_file.clone());
                    let overrides = rec.overrides.clone();
                    match svc.load_job(rec, commits, None) {
                        Ok(()) => {
                            info!(job = %id, "job resumed from the state store");
                            svc.retake_lock(&id).await;
                        }
                        Err(e) => {
                            warn!(job = %id, error = %e, "job cannot be resumed");
                            let p =
                                distillery_exec::stages::parse_pipeline(&file, &text, &overrides)
                                    .ok();
                            if let Some(out) = p
                                .as_ref()
                                .and_then(|p| open_location(&p.output, false).ok())
                            {
                                svc.give_back_lock(&out, &id).await;
                            }
                            let fin = FinalRecord {
                                job_id: id.clone(),
                                pipeline: p.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
                                output: p.map(|p| p.output).unwrap_or_default(),
                                state: "failed".into(),
                                error_kind: "fatal".into(),
                                error: format!("cannot be resumed: {e}"),
                                summary_json: String::new(),
                                tasks_total: 0,
                            };
                            svc.record_final(fin).await;
                        }
                    }
                }
            }
        }
        info!(state = %svc.state.display(), generation, "coordinator started");
        svc.ready.store(true, Ordering::SeqCst);
        // Publish jobs whose every task had committed before a restart.
        let ids: Vec<String> = svc
            .lock()
            .jobs
            .iter()
            .filter(|(_, j)| j.left == 0 && j.state == pb::JobState::Running)
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            svc.spawn_publish(id);
        }
        Ok(svc)
    }

    /// Takes a resumed job's output lock again, in this process's name (the lock names the
    /// process that submitted it, gone now); a lock another job took meanwhile fails the job.
    async fn retake_lock(&self, job_id: &str) {
        let Some((out, name)) = self
            .lock()
            .jobs
            .get(job_id)
            .filter(|j| j.state == pb::JobState::Running)
            .map(|j| (j.out.clone(), j.p.name.clone()))
        else {
            // Failed while loading (its bad-record gate): its lock is being given back.
            return;
        };
        let ended: BTreeSet<String> = self.lock().finals.keys().cloned().collect();
        let taken = {
            let _serial = self.output_locks.lock().await;
            let lock = OutputLock::new(job_id, &name);
            distillery_exec::lock::acquire(&out, &lock, |j| ended.contains(j)).await
        };
        if let Err(e) = taken {
            self.fail_job(job_id, error_kind(&e), format!("cannot be resumed: {e}"));
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Whether the state is loaded (readiness).
    pub fn ready_flag(&self) -> Arc<AtomicBool> {
        self.ready.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Builds a job's runtime state; `commits` are its tasks already committed.
    fn load_job(
        &self,
        rec: JobRecord,
        commits: Vec<CommitRecord>,
        planned: Option<(Pipeline, JobPlan)>,
    ) -> Result<(), ClusterError> {
        let (p, plan) = match planned {
            Some(v) => v,
            None => {
                let p = distillery_exec::stages::parse_pipeline(
                    &rec.pipeline_file,
                    &rec.pipeline_text,
                    &rec.overrides,
                )
                .map_err(|e| ClusterError::Config(e.to_string()))?;
                let plan = plan_tasks(&p)?;
                (p, plan)
            }
        };
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
                state: TState::Blocked,
                attempts: Vec::new(),
                speculated: false,
            });
        }
        let level_left = by_level.iter().map(Vec::len).collect();
        let mut job = JobRt {
            left: tasks.len(),
            by_level,
            level_left,
            released: 0,
            gate_ok: false,
            gate_failed: false,
            publishing: false,
            inputs_json: HashMap::new(),
            record: rec.clone(),
            p: Arc::new(p),
            plan: Arc::new(plan),
            out,
            tasks,
            by_id,
            committed: BTreeMap::new(),
            state: pb::JobState::Running,
            error_kind: pb::ErrorKind::Unspecified,
            error: String::new(),
            summary_json: String::new(),
            started: UNIX_EPOCH + Duration::from_millis(rec.submitted_at_ms.max(0) as u64),
            durations: HashMap::new(),
        };
        let mut inner = self.lock();
        for c in commits {
            if let Some(&i) = job.by_id.get(&c.task_id)
                && job.tasks[i].state != TState::Committed
            {
                mark_committed(&mut job, i, c.output);
            }
        }
        // Level 0, and every level whose lower levels all committed before a restart.
        for &i in &job.by_level[0] {
            if job.tasks[i].state == TState::Blocked {
                job.tasks[i].state = TState::Ready;
            }
        }
        let mut ready: Vec<usize> = job.by_level[0].clone();
        let gate = advance(&mut job).map(|r| ready.extend(r));
        let id = rec.job_id.clone();
        inner.jobs.insert(id.clone(), job);
        match gate {
            Err(e) => {
                drop(inner);
                self.fail_job(&id, pb::ErrorKind::Fatal, e.to_string());
            }
            Ok(()) => {
                let job = inner.jobs.get(&id).expect("inserted");
                let ready: Vec<usize> = ready
                    .into_iter()
                    .filter(|&i| job.tasks[i].state == TState::Ready)
                    .collect();
                let ready: Vec<(usize, u32)> = ready
                    .into_iter()
                    .map(|i| (i, job.tasks[i].def.gpus))
                    .collect();
                for (i, gpus) in ready {
                    push_ready(&mut inner, &id, i, false, gpus);
                }
            }
        }
        Ok(())
    }

    /// Submits a job: checked, planned, recorded in the state store, queued.
    pub async fn submit(
        &self,
        file: &str,
        text: &str,
        overrides: &[String],
    ) -> Result<String, ClusterError> {
        let p = distillery_exec::stages::parse_pipeline(file, text, overrides)
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let plan = plan_tasks(&p).map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let job_id = distillery_exec::run::new_run_id(&p.hash);
        // The output is the user's to fix (a file, a bad URL, another job's): an invalid job,
        // not an unavailable coordinator.
        let invalid = |e: distillery_exec::ExecError| match e.kind() {
            Kind::Fatal => ClusterError::Invalid(e.to_string()),
            Kind::Retryable => ClusterError::Exec(e),
        };
        let out = open_location(&p.output, true).map_err(invalid)?;
        // Jobs of this coordinator that ended (their lock may not be given back yet).
        let (running, ended): (Vec<String>, BTreeSet<String>) = {
            let inner = self.lock();
            (
                inner.jobs.keys().cloned().collect(),
                inner
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.state != pb::JobState::Running)
                    .map(|(id, _)| id.clone())
                    .chain(inner.finals.keys().cloned())
                    .collect(),
            )
        };
        let lock = OutputLock::new(&job_id, &p.name);
        {
            let _serial = self.output_locks.lock().await;
            distillery_exec::lock::acquire(&out, &lock, |j| ended.contains(j))
                .await
                .map_err(invalid)?;
        }
        let submitted = async {
            distillery_exec::publish::cleanup_stale_staging(&out, &job_id, &running).await?;
            let rec = JobRecord {
                job_id: job_id.clone(),
                pipeline_file: file.to_string(),
                pipeline_text: text.to_string(),
                overrides: overrides.to_vec(),
                submitted_at_ms: now_ms(),
                task_ids: plan.tasks.iter().map(|t| t.id.clone()).collect(),
            };
            self.state.put_job(&rec).await?;
            info!(job = %job_id, pipeline = %p.name, tasks = rec.task_ids.len(), "job submitted");
            let (name, output) = (p.name.clone(), p.output.clone());
            let loaded = self.load_job(rec, Vec::new(), Some((p, plan)));
            if let Err(e) = &loaded {
                // Recorded: a restart must not resume a job that never started.
                self.record_final(FinalRecord {
                    job_id: job_id.clone(),
                    pipeline: name,
                    output,
                    state: "failed".into(),
                    error_kind: "fatal".into(),
                    error: format!("cannot be started: {e}"),
                    summary_json: String::new(),
                    tasks_total: 0,
                })
                .await;
            }
            loaded
        };
        if let Err(e) = submitted.await {
            // Not started: the output is free again.
            self.give_back_lock(&out, &job_id).await;
            return Err(e);
        }
        Ok(job_id)
    }

    /// Gives a job's output lock back; a failure is logged (the output is complete or
    /// withdrawn either way, and this coordinator takes the locks of its ended jobs over).
    async fn give_back_lock(&self, out: &Location, job_id: &str) {
        let _serial = self.output_locks.lock().await;
        if let Err(e) = distillery_exec::lock::release(out, job_id).await {
            warn!(job = %job_id, error = %e, "cannot give back the output lock");
        }
    }

    /// Fails (or cancels) a job: running attempts are abandoned, its staging removed, and
    /// how it ended is recorded.
    fn fail_job(&self, job_id: &str, kind: pb::ErrorKind, error: String) {
        self.end_job(job_id, pb::JobState::Failed, kind, error);
    }

    fn end_job(&self, job_id: &str, state: pb::JobState, kind: pb::ErrorKind, error: String) {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(job) = inner.jobs.get_mut(job_id) else {
            return;
        };
        // A job being published can no longer be cancelled; one whose publishing failed
        // keeps its staging (the committed files) for a later attempt.
        if job.state != pb::JobState::Running
            || (job.publishing && state == pb::JobState::Cancelled)
        {
            return;
        }
        let keep_staging = job.publishing;
        let keep_quarantine = job.gate_failed;
        job.state = state;
        job.error_kind = kind;
        job.error = error.clone();
        for t in &mut job.tasks {
            for a in &mut t.attempts {
                if a.outcome == "running" {
                    abandon(&mut inner.running, &mut inner.workers, a);
                }
            }
        }
        let fin = final_record(job);
        let out = job.out.clone();
        match state {
            pb::JobState::Failed => warn!(job = %job_id, error = %error, "job failed"),
            _ => info!(job = %job_id, "job cancelled"),
        }
        let svc = self.clone();
        let id = job_id.to_string();
        // Tracked before the lock goes: whoever sees the job ended can wait for this.
        self.after_jobs.spawn(async move {
            // How the job ended is recorded first: a coordinator restarting in between must
            // not resume it.
            svc.record_final(fin).await;
            let removed = match (keep_staging, keep_quarantine) {
                (true, _) => Ok(()),
                (false, true) => {
                    distillery_exec::publish::remove_staging_but_quarantine(&out, &id).await
                }
                (false, false) => distillery_exec::publish::remove_staging(&out, &id).await,
            };
            if let Err(e) = removed {
                warn!(job = %id, error = %e, "cannot remove the job's staging");
            }
            svc.give_back_lock(&out, &id).await;
        });
        drop(guard);
    }

    /// Writes a job's final record (retrying until the store takes it), then keeps only that
    /// record in memory.
    async fn record_final(&self, fin: FinalRecord) {
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
    fn spawn_publish(&self, job_id: String) {
        let svc = self.clone();
        tokio::spawn(async move {
            let mut tries = 0u32;
            loop {
                let Some((p, plan, out, committed, started)) = ({
                    let mut inner = svc.lock();
                    inner.jobs.get_mut(&job_id).and_then(|j| {
                        (j.state == pb::JobState::Running).then(|| {
                            j.publishing = true;
                            (
                                j.p.clone(),
                                j.plan.clone(),
                                j.out.clone(),
                                j.committed.clone(),
                                j.started,
                            )
                        })
                    })
                }) else {
                    return;
                };
                match publish_job(&p, &plan, &job_id, &out, &committed, started).await {
                    Ok(outcome) => {
                        // Before the job reads as succeeded: whoever waits for it may write
                        // into the output next.
                        svc.give_back_lock(&out, &job_id).await;
                        let fin = {
                            let mut inner = svc.lock();
                            let Some(job) = inner.jobs.get_mut(&job_id) else {
                                return;
                            };
                            if job.state != pb::JobState::Running {
                                return;
                            }
                            job.state = pb::JobState::Succeeded;
                            job.summary_json =
                                serde_json::to_string(&outcome.summary).unwrap_or_default();
                            final_record(job)
                        };
                        info!(job = %job_id, output = %outcome.output, "job published");
                        svc.record_final(fin).await;
                        return;
                    }
                    Err(e) if e.kind() == Kind::Retryable && tries < 5 => {
                        tries += 1;
                        warn!(job = %job_id, error = %e, tries, "publishing failed, retrying");
                        tokio::time::sleep(svc.cfg.backoff * 2u32.pow(tries)).await;
                    }
                    Err(e) => {
                        svc.fail_job(&job_id, error_kind(&e), format!("publishing: {e}"));
                        return;
                    }
                }
            }
        });
    }

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
                self.counters.lease_expiries.fetch_add(1, Ordering::Relaxed);
                let job = inner.jobs.get_mut(&job_id).expect("running job");
                let task = &mut job.tasks[t];
                let a = task
                    .attempts
                    .iter_mut()
                    .find(|a| a.id == id)
                    .expect("attempt");
                a.outcome = "expired";
                a.error = format!(
                    "lease expired: worker {} sent no heartbeat for {:.1} s",
                    a.worker,
                    self.cfg.lease.as_secs_f64()
                );
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
                    if task.speculated || task.state != TState::Running {
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
                    self.counters.stragglers.fetch_add(1, Ordering::Relaxed);
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
        if task.state != TState::Running || task.running() > 0 {
            return None;
        }
        let tries = task
            .attempts
            .iter()
            .filter(|a| a.outcome != "given back")
            .count() as u32;
        if tries >= self.cfg.max_attempts {
            return Some(task_report(task));
        }
        self.counters.retries.fetch_add(1, Ordering::Relaxed);
        task.state = TState::Ready;
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

    fn check_generation(&self, g: u64) -> Result<(), Status> {
        if g != self.generation {
            return Err(Status::failed_precondition(format!(
                "stale generation {g}: the coordinator restarted (generation {}); register again",
                self.generation
            )));
        }
        Ok(())
    }

    fn pull_inner(&self, req: pb::PullRequest) -> Result<pb::PullResponse, Status> {
        self.counters.pulls.fetch_add(1, Ordering::Relaxed);
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
        for a in &lost {
            if let Some((job, t)) = inner.running.get(a)
                && let Some(j) = inner.jobs.get_mut(job)
                && let Some(at) = j.tasks[*t].attempts.iter_mut().find(|x| &x.id == a)
            {
                at.deadline = now;
            }
        }
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
                if job.state != pb::JobState::Running {
                    continue;
                }
                let task = &job.tasks[t];
                if spec {
                    if task.state != TState::Running || task.running() != 1 {
                        continue;
                    }
                    // Not on the worker already running the original: another may take it.
                    if task
                        .attempts
                        .iter()
                        .any(|a| a.outcome == "running" && a.worker == req.worker_id)
                    {
                        spec_skipped.push((job_id, t, spec));
                        continue;
                    }
                } else if task.state != TState::Ready {
                    continue;
                }
                if task.def.gpus > gpus {
                    skipped.push((job_id, t, spec));
                    continue;
                }
                inner.next_attempt += 1;
                let attempt_id = format!("g{}-a{}", self.generation, inner.next_attempt);
                let inputs = task_inputs_json(job, t);
                let shards_json = task_shards_json(job, t);
                let task = &mut job.tasks[t];
                let dir = attempt_dir(&job_id, &task.def.id, &attempt_id);
                task.state = TState::Running;
                task.attempts.push(AttemptRt {
                    id: attempt_id.clone(),
                    worker: req.worker_id.clone(),
                    started: now,
                    deadline,
                    outcome: "running",
                    error: String::new(),
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
                    shards_json,
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

    /// Removes a fenced attempt's files.
    fn clean_attempt(&self, out: Option<Location>, dir: String) {
        if let Some(out) = out {
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
    }

    async fn complete_inner(
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
        self.counters
            .commits_refused
            .fetch_add(1, Ordering::Relaxed);
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
            let running = job.state == pb::JobState::Running;
            let task = &mut job.tasks[t];
            let Some(a) = task.attempts.iter_mut().find(|a| a.id == req.attempt_id) else {
                drop(guard);
                return Ok(self.refused(&req, "unknown attempt".into()));
            };
            // A retried report of the commit that already won.
            if a.outcome == "committed" {
                return Ok(Self::accepted());
            }
            let dir = output.dir.clone();
            let reason = if !running {
                Some("the job is not running".to_string())
            } else if a.outcome != "running" {
                Some(format!("attempt is {}", a.outcome))
            } else if a.deadline < Instant::now() {
                Some("lease expired".to_string())
            } else if task.state == TState::Committed {
                Some("another attempt committed first".to_string())
            } else {
                None
            };
            if let Some(reason) = reason {
                drop(guard);
                self.clean_attempt(Some(out), dir);
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
        let (publish, gate_err) = self.apply_commit(&req.job_id, winner);
        if let Some(e) = gate_err {
            self.fail_job(&req.job_id, pb::ErrorKind::Fatal, e);
        } else if publish {
            self.spawn_publish(req.job_id.clone());
        }
        if won {
            info!(job = %req.job_id, task = %req.task_id, attempt = %req.attempt_id, worker = %req.worker_id, "task committed");
            Ok(Self::accepted())
        } else {
            self.clean_attempt(Some(out), rec.output.dir.clone());
            Ok(self.refused(&req, "another attempt committed first".into()))
        }
    }

    /// Applies a task's commit record to the job in memory (once): the winner committed, other
    /// running attempts abandoned, the next level released. Returns (publish now, gate error).
    fn apply_commit(&self, job_id: &str, rec: CommitRecord) -> (bool, Option<String>) {
        let mut guard = self.lock();
        let inner = &mut *guard;
        let Some(job) = inner.jobs.get_mut(job_id) else {
            return (false, None);
        };
        let Some(&t) = job.by_id.get(&rec.task_id) else {
            return (false, None);
        };
        if job.tasks[t].state == TState::Committed {
            return (false, None);
        }
        self.counters.commits.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let group = job.tasks[t].def.group.clone();
        for a in &mut job.tasks[t].attempts {
            if a.id == rec.attempt_id {
                a.outcome = "committed";
                let secs = now.duration_since(a.started).as_secs_f64();
                job.durations.entry(group.clone()).or_default().push(secs);
                if let Some(w) = inner.workers.get_mut(&a.worker) {
                    w.attempts.remove(&a.id);
                }
                inner.running.remove(&a.id);
            } else if a.outcome == "running" {
                // The losing copy of a straggler: stop it.
                abandon(&mut inner.running, &mut inner.workers, a);
            }
        }
        {
            let mut totals = self
                .counters
                .stage
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let e = totals.entry(group).or_default();
            e.0 += rec.output.summary.records_out;
            e.1 += rec.output.summary.bytes_out;
        }
        mark_committed(job, t, rec.output);
        match advance(job) {
            Err(e) => (false, Some(e.to_string())),
            Ok(ready) => {
                let ready: Vec<(usize, u32)> = ready
                    .into_iter()
                    .map(|i| (i, job.tasks[i].def.gpus))
                    .collect();
                let publish = job.left == 0;
                for (i, gpus) in ready {
                    push_ready(inner, job_id, i, false, gpus);
                }
                (publish, None)
            }
        }
    }

    fn fail_inner(&self, req: pb::FailTaskRequest) -> Result<pb::FailTaskResponse, Status> {
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
                .find(|a| a.id == req.attempt_id && a.outcome == "running")
            else {
                return Ok(pb::FailTaskResponse {});
            };
            a.outcome = "failed";
            a.error = format!("[{}] {}", kind_name(kind), req.message);
            warn!(job = %req.job_id, task = %req.task_id, attempt = %req.attempt_id, kind = kind_name(kind), error = %req.message, "attempt failed");
            inner.running.remove(&req.attempt_id);
            if let Some(w) = inner.workers.get_mut(&req.worker_id) {
                w.attempts.remove(&req.attempt_id);
            }
            if kind == pb::ErrorKind::Shutdown {
                // Given back by a worker shutting down: not the task's fault, not counted.
                a_given_back(&mut job.tasks[t], &req.attempt_id);
                if job.tasks[t].state == TState::Running && job.tasks[t].running() == 0 {
                    job.tasks[t].state = TState::Ready;
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

    fn status_of(&self, inner: &Inner, job_id: &str) -> Option<pb::JobStatus> {
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
            for t in &job.tasks {
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
                    state: format!("{:?}", t.state).to_lowercase(),
                    worker: t
                        .attempts
                        .last()
                        .map(|a| a.worker.clone())
                        .unwrap_or_default(),
                    attempts: t.attempts.len() as u32,
                    ..Default::default()
                };
                match t.state {
                    TState::Committed => {
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
                    TState::Running => s.running += 1,
                    _ => {}
                }
                s.task_list.push(task);
                if t.attempts
                    .iter()
                    .any(|a| a.outcome == "failed" || a.outcome == "expired")
                {
                    failures.push(pb::TaskReport {
                        task_id: t.def.id.clone(),
                        state: format!("{:?}", t.state).to_lowercase(),
                        attempts: attempt_reports(t),
                    });
                }
            }
            let done = stages.iter().map(|s| s.done).sum();
            return Some(pb::JobStatus {
                job_id: job_id.to_string(),
                pipeline: job.p.name.clone(),
                output: job.p.output.clone(),
                state: job.state as i32,
                error_kind: job.error_kind as i32,
                error: job.error.clone(),
                stages,
                failures,
                workers,
                tasks_total: job.tasks.len() as u32,
                tasks_done: done,
                summary_json: job.summary_json.clone(),
            });
        }
        inner.finals.get(job_id).map(|f| pb::JobStatus {
            job_id: f.job_id.clone(),
            pipeline: f.pipeline.clone(),
            output: f.output.clone(),
            state: match f.state.as_str() {
                "succeeded" => pb::JobState::Succeeded,
                "cancelled" => pb::JobState::Cancelled,
                _ => pb::JobState::Failed,
            } as i32,
            error_kind: kind_of(&f.error_kind) as i32,
            error: f.error.clone(),
            workers,
            tasks_total: f.tasks_total,
            tasks_done: if f.state == "succeeded" {
                f.tasks_total
            } else {
                0
            },
            summary_json: f.summary_json.clone(),
            ..Default::default()
        })
    }

    /// The Prometheus text of the coordinator's metrics.
    pub fn metrics(&self) -> String {
        let mut m = Text::default();
        let inner = self.lock();
        let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
        for s in ["blocked", "ready", "running", "committed"] {
            by_state.insert(s, 0);
        }
        let mut jobs: BTreeMap<&str, u64> = BTreeMap::new();
        for f in inner.finals.values() {
            *jobs.entry(f.state.as_str()).or_default() += 1;
        }
        for job in inner.jobs.values() {
            *jobs
                .entry(match job.state {
                    pb::JobState::Running => "running",
                    pb::JobState::Succeeded => "succeeded",
                    pb::JobState::Cancelled => "cancelled",
                    _ => "failed",
                })
                .or_default() += 1;
            for t in &job.tasks {
                let s = match t.state {
                    TState::Blocked => "blocked",
                    TState::Ready => "ready",
                    TState::Running => "running",
                    TState::Committed => "committed",
                };
                *by_state.entry(s).or_default() += 1;
            }
        }
        m.gauge_header(
            "distillery_coordinator_tasks",
            "tasks of unfinished and recent jobs by state",
        );
        for (s, n) in &by_state {
            m.sample("distillery_coordinator_tasks", &[("state", s)], *n as f64);
        }
        m.gauge_header("distillery_coordinator_jobs", "jobs by state");
        for (s, n) in &jobs {
            m.sample("distillery_coordinator_jobs", &[("state", s)], *n as f64);
        }
        m.gauge(
            "distillery_coordinator_queue_depth",
            "tasks ready and waiting for a worker",
            (inner.ready_cpu.len() + inner.ready_gpu.len()) as f64,
        );
        m.gauge(
            "distillery_coordinator_retry_queue_depth",
            "tasks waiting out a retry backoff",
            inner.delayed.len() as f64,
        );
        m.gauge(
            "distillery_coordinator_workers",
            "registered workers",
            inner.workers.len() as f64,
        );
        m.gauge(
            "distillery_coordinator_running_attempts",
            "attempts holding a lease",
            inner.running.len() as f64,
        );
        m.gauge(
            "distillery_coordinator_generation",
            "this coordinator's generation",
            self.generation as f64,
        );
        let c = &self.counters;
        m.counter(
            "distillery_coordinator_lease_expiries_total",
            "leases that expired without a heartbeat",
            c.lease_expiries.load(Ordering::Relaxed),
        );
        m.counter(
            "distillery_coordinator_task_retries_total",
            "tasks queued again after a failed or expired attempt",
            c.retries.load(Ordering::Relaxed),
        );
        m.counter(
            "distillery_coordinator_commits_total",
            "task commits",
            c.commits.load(Ordering::Relaxed),
        );
        m.counter(
            "distillery_coordinator_commits_refused_total",
            "completions refused (expired lease, stale generation, lost race)",
            c.commits_refused.load(Ordering::Relaxed),
        );
        m.counter(
            "distillery_coordinator_straggler_copies_total",
            "copies launched for slow tasks",
            c.stragglers.load(Ordering::Relaxed),
        );
        m.counter(
            "distillery_coordinator_pulls_total",
            "worker pulls (heartbeats)",
            c.pulls.load(Ordering::Relaxed),
        );
        let records = self
            .counters
            .stage
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        m.counter_header(
            "distillery_stage_records_total",
            "records written by committed tasks per stage",
        );
        for (s, (r, _)) in &records {
            m.sample("distillery_stage_records_total", &[("stage", s)], *r as f64);
        }
        m.counter_header(
            "distillery_stage_bytes_total",
            "bytes written by committed tasks per stage",
        );
        for (s, (_, b)) in &records {
            m.sample("distillery_stage_bytes_total", &[("stage", s)], *b as f64);
        }
        m.finish()
    }
}

/// Marks a task committed with its output.
fn mark_committed(job: &mut JobRt, t: usize, output: TaskOutput) {
    job.tasks[t].state = TState::Committed;
    job.left -= 1;
    job.level_left[job.tasks[t].def.level as usize] -= 1;
    job.committed.insert(job.tasks[t].def.id.clone(), output);
}

/// Releases the levels whose lower levels all committed; the bad-record gate runs once the
/// ingest level is done, before anything above it starts. Returns the tasks made ready.
fn advance(job: &mut JobRt) -> Result<Vec<usize>, ExecError> {
    let mut ready = Vec::new();
    if !job.gate_ok {
        if job.level_left[0] > 0 {
            return Ok(ready);
        }
        gate_check(job).inspect_err(|_| job.gate_failed = true)?;
        job.gate_ok = true;
    }
    while job.released + 1 < job.by_level.len()
        && job.level_left[..=job.released].iter().all(|&n| n == 0)
    {
        job.released += 1;
        for &i in &job.by_level[job.released] {
            if job.tasks[i].state == TState::Blocked {
                job.tasks[i].state = TState::Ready;
                ready.push(i);
            }
        }
    }
    Ok(ready)
}

/// What a task reads, as the JSON sent with it: the outputs of the levels below it, cut to
/// its shard as its stage's partitioning says ([`task_inputs`]), built and serialized once
/// per level and shard.
fn task_inputs_json(job: &mut JobRt, t: usize) -> Arc<str> {
    let level = job.tasks[t].def.level;
    let shard = match job.tasks[t].def.kind {
        TaskKind::Stage { shard: Some(n), .. } => n,
        _ => u32::MAX,
    };
    if let Some(v) = job.inputs_json.get(&(level, shard)) {
        return v.clone();
    }
    let all = if level == 0 {
        Vec::new()
    } else {
        inputs_below(level, &job.plan.tasks, &job.committed)
    };
    let parts = task_inputs(&job.p, &job.tasks[t].def, &all);
    let v: Arc<str> = serde_json::to_string(&parts)
        .expect("parts serialize")
        .into();
    job.inputs_json.insert((level, shard), v.clone());
    v
}

/// What a task reads besides its parts ([`upstream_outputs`]: a merge task its stage's shard
/// tasks' committed outputs, a stage task the files published below it), as JSON; empty
/// when there is nothing.
fn task_shards_json(job: &JobRt, t: usize) -> String {
    let def = &job.tasks[t].def;
    let shards = upstream_outputs(&job.plan.tasks, def, &job.committed).unwrap_or_default();
    if shards.is_empty() {
        return String::new();
    }
    serde_json::to_string(&shards).expect("outputs serialize")
}

/// Queues a ready task (a speculative copy goes first).
fn push_ready(inner: &mut Inner, job: &str, t: usize, spec: bool, gpus: u32) {
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
}

/// The bad-record gate, once every ingest task committed.
fn gate_check(job: &mut JobRt) -> Result<(), ExecError> {
    let ingest: Vec<&TaskOutput> = job
        .tasks
        .iter()
        .filter(|t| t.def.is_ingest())
        .filter_map(|t| job.committed.get(&t.def.id))
        .collect();
    check_bad_ratio(&job.p, &job.out, &job.record.job_id, &ingest)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

fn attempt_reports(t: &TaskRt) -> Vec<pb::AttemptReport> {
    t.attempts
        .iter()
        .map(|a| pb::AttemptReport {
            attempt_id: a.id.clone(),
            worker_id: a.worker.clone(),
            outcome: a.outcome.to_string(),
            error: a.error.clone(),
        })
        .collect()
}

/// Why a task gave up: the task, its attempts and their errors.
fn task_report(t: &TaskRt) -> String {
    let mut s = format!(
        "task {} failed after {} attempt(s):",
        t.def.id,
        t.attempts.len()
    );
    for a in &t.attempts {
        s.push_str(&format!(
            "\n  attempt {} on worker {}: {}: {}",
            a.id, a.worker, a.outcome, a.error
        ));
    }
    s
}

fn final_record(job: &JobRt) -> FinalRecord {
    FinalRecord {
        job_id: job.record.job_id.clone(),
        pipeline: job.p.name.clone(),
        output: job.p.output.clone(),
        state: match job.state {
            pb::JobState::Succeeded => "succeeded",
            pb::JobState::Cancelled => "cancelled",
            _ => "failed",
        }
        .to_string(),
        error_kind: kind_name(job.error_kind).to_string(),
        error: job.error.clone(),
        summary_json: job.summary_json.clone(),
        tasks_total: job.tasks.len() as u32,
    }
}

fn status_err(e: ClusterError) -> Status {
    match e {
        ClusterError::Invalid(m) => Status::invalid_argument(m),
        ClusterError::Config(m) => Status::failed_precondition(m),
        e => Status::unavailable(e.to_string()),
    }
}

#[tonic::async_trait]
impl pb::coordinator_server::Coordinator for CoordinatorService {
    async fn register_worker(
        &self,
        req: Request<pb::RegisterWorkerRequest>,
    ) -> Result<Response<pb::RegisterWorkerResponse>, Status> {
        let r = req.into_inner();
        if r.protocol_version != PROTOCOL_VERSION {
            return Err(Status::failed_precondition(format!(
                "protocol version {} is not {PROTOCOL_VERSION}: upgrade the worker",
                r.protocol_version
            )));
        }
        if r.worker_id.is_empty() {
            return Err(Status::invalid_argument("empty worker id"));
        }
        let caps = r.capabilities.unwrap_or_default();
        info!(worker = %r.worker_id, slots = caps.slots, gpus = caps.gpus, "worker registered");
        let mut inner = self.lock();
        let prev = inner.workers.insert(
            r.worker_id.clone(),
            WorkerRt {
                caps,
                last_seen: Instant::now(),
                last_seen_ms: now_ms(),
                draining: false,
                attempts: HashSet::new(),
                abandon: Vec::new(),
            },
        );
        // A worker registering again under its id lost what it ran.
        if let Some(prev) = prev {
            let now = Instant::now();
            for a in prev.attempts {
                if let Some((job, t)) = inner.running.get(&a).cloned()
                    && let Some(j) = inner.jobs.get_mut(&job)
                    && let Some(at) = j.tasks[t].attempts.iter_mut().find(|x| x.id == a)
                {
                    at.deadline = now;
                }
            }
        }
        Ok(Response::new(pb::RegisterWorkerResponse {
            protocol_version: PROTOCOL_VERSION,
            generation: self.generation,
            heartbeat_ms: self.cfg.heartbeat.as_millis() as u32,
            lease_ms: self.cfg.lease.as_millis() as u32,
        }))
    }

    async fn pull(
        &self,
        req: Request<pb::PullRequest>,
    ) -> Result<Response<pb::PullResponse>, Status> {
        self.pull_inner(req.into_inner()).map(Response::new)
    }

    async fn complete_task(
        &self,
        req: Request<pb::CompleteTaskRequest>,
    ) -> Result<Response<pb::CompleteTaskResponse>, Status> {
        self.complete_inner(req.into_inner())
            .await
            .map(Response::new)
    }

    async fn fail_task(
        &self,
        req: Request<pb::FailTaskRequest>,
    ) -> Result<Response<pb::FailTaskResponse>, Status> {
        self.fail_inner(req.into_inner()).map(Response::new)
    }

    async fn submit_job(
        &self,
        req: Request<pb::SubmitJobRequest>,
    ) -> Result<Response<pb::SubmitJobResponse>, Status> {
        let r = req.into_inner();
        let job_id = self
            .submit(&r.pipeline_file, &r.pipeline_text, &r.overrides)
            .await
            .map_err(status_err)?;
        Ok(Response::new(pb::SubmitJobResponse { job_id }))
    }

    async fn get_job(
        &self,
        req: Request<pb::GetJobRequest>,
    ) -> Result<Response<pb::JobStatus>, Status> {
        let id = req.into_inner().job_id;
        let inner = self.lock();
        self.status_of(&inner, &id)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("no job {id}")))
    }

    async fn cancel_job(
        &self,
        req: Request<pb::CancelJobRequest>,
    ) -> Result<Response<pb::JobStatus>, Status> {
        let id = req.into_inner().job_id;
        self.end_job(
            &id,
            pb::JobState::Cancelled,
            pb::ErrorKind::Unspecified,
            "cancelled".into(),
        );
        let inner = self.lock();
        self.status_of(&inner, &id)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("no job {id}")))
    }

    async fn list_jobs(
        &self,
        _req: Request<pb::ListJobsRequest>,
    ) -> Result<Response<pb::ListJobsResponse>, Status> {
        let inner = self.lock();
        let mut ids: Vec<&String> = inner.jobs.keys().chain(inner.finals.keys()).collect();
        ids.sort();
        ids.dedup();
        let jobs = ids
            .into_iter()
            .filter_map(|id| self.status_of(&inner, id))
            .collect();
        Ok(Response::new(pb::ListJobsResponse { jobs }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipeline(dir: &std::path::Path, gpus: u32) -> String {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/quickstart");
        format!(
            "version = 1\nname = \"t\"\noutput = \"{}\"\n[run]\nshards = 2\n\
             [[inputs]]\nname = \"hotpot\"\nformat = \"hotpotqa\"\npaths = [\"{}\"]\n\
             [[inputs]]\nname = \"kb\"\nformat = \"metaqa-kb\"\npaths = [\"{}\"]\n\
             [[stages]]\nkind = \"hseq\"\ngpus = {gpus}\n",
            dir.join("out").display(),
            data.join("hotpot.json").display(),
            data.join("kb.txt").display()
        )
    }

    async fn service(dir: &std::path::Path, cfg: CoordinatorConfig) -> CoordinatorService {
        CoordinatorService::start(&dir.join("state").display().to_string(), cfg)
            .await
            .unwrap()
    }

    fn register(svc: &CoordinatorService, id: &str, gpus: u32) {
        let mut inner = svc.lock();
        inner.workers.insert(
            id.to_string(),
            WorkerRt {
                caps: pb::Capabilities {
                    slots: 4,
                    gpus,
                    ..Default::default()
                },
                last_seen: Instant::now(),
                last_seen_ms: 0,
                draining: false,
                attempts: HashSet::new(),
                abandon: Vec::new(),
            },
        );
    }

    /// A pull by a worker that runs `running` (attempts it must list, or lose them).
    fn pull_running(
        svc: &CoordinatorService,
        id: &str,
        free: u32,
        running: &[pb::Task],
    ) -> Vec<pb::Task> {
        let running = running
            .iter()
            .map(|t| pb::AttemptProgress {
                job_id: t.job_id.clone(),
                task_id: t.task_id.clone(),
                attempt_id: t.attempt_id.clone(),
                records: 0,
                bytes: 0,
            })
            .collect();
        svc.pull_inner(pb::PullRequest {
            worker_id: id.to_string(),
            generation: svc.generation,
            free_slots: free,
            running,
            draining: false,
        })
        .unwrap()
        .tasks
    }

    fn pull(svc: &CoordinatorService, id: &str, free: u32) -> Vec<pb::Task> {
        svc.pull_inner(pb::PullRequest {
            worker_id: id.to_string(),
            generation: svc.generation,
            free_slots: free,
            running: Vec::new(),
            draining: false,
        })
        .unwrap()
        .tasks
    }

    async fn complete(
        svc: &CoordinatorService,
        id: &str,
        t: &pb::Task,
    ) -> pb::CompleteTaskResponse {
        let out = TaskOutput {
            dir: t.dir.clone(),
            ..Default::default()
        };
        svc.complete_inner(pb::CompleteTaskRequest {
            worker_id: id.to_string(),
            job_id: t.job_id.clone(),
            task_id: t.task_id.clone(),
            attempt_id: t.attempt_id.clone(),
            generation: t.generation,
            output_json: serde_json::to_string(&out).unwrap(),
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn a_stage_that_needs_a_gpu_goes_only_to_a_worker_with_one() {
        let tmp = tempfile::tempdir().unwrap();
        let svc = service(tmp.path(), CoordinatorConfig::default()).await;
        svc.submit("t.toml", &pipeline(tmp.path(), 1), &[])
            .await
            .unwrap();
        register(&svc, "cpu", 0);
        register(&svc, "gpu", 1);
        let ingest = pull(&svc, "cpu", 4);
        assert_eq!(
            ingest.len(),
            2,
            "the two ingest tasks, nothing above them yet"
        );
        assert!(pull_running(&svc, "cpu", 2, &ingest).is_empty());
        for t in &ingest {
            let r = complete(&svc, "cpu", t).await;
            assert!(r.accepted, "{}", r.reason);
        }
        assert!(pull(&svc, "cpu", 4).is_empty(), "hseq needs a GPU");
        let hseq = pull(&svc, "gpu", 4);
        let ids: Vec<&str> = hseq.iter().map(|t| t.task_id.as_str()).collect();
        assert_eq!(ids, ["stage/hseq/shard-00000", "stage/hseq/shard-00001"]);
    }

    #[tokio::test]
    async fn a_straggler_gets_a_copy_and_the_first_commit_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = CoordinatorConfig {
            straggler_factor: 2.0,
            straggler_min: Duration::from_millis(50),
            ..CoordinatorConfig::default()
        };
        let svc = service(tmp.path(), cfg).await;
        svc.submit("t.toml", &pipeline(tmp.path(), 0), &[])
            .await
            .unwrap();
        register(&svc, "a", 0);
        register(&svc, "b", 0);
        let first = pull(&svc, "a", 2);
        assert!(complete(&svc, "a", &first[0]).await.accepted);
        // The other ingest task runs on: after 4x the median it is copied to b.
        tokio::time::sleep(Duration::from_millis(120)).await;
        svc.tick();
        let copy = pull(&svc, "b", 1);
        assert_eq!(copy.len(), 1);
        assert_eq!(copy[0].task_id, first[1].task_id);
        assert_ne!(copy[0].attempt_id, first[1].attempt_id);
        assert!(complete(&svc, "b", &copy[0]).await.accepted);
        let late = complete(&svc, "a", &first[1]).await;
        assert!(!late.accepted);
        assert_eq!(late.reason, "attempt is abandoned");
        assert!(
            svc.metrics()
                .contains("distillery_coordinator_straggler_copies_total 1")
        );
    }

    #[tokio::test]
    async fn expired_leases_are_retried_then_the_job_fails_with_a_report() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = CoordinatorConfig {
            lease: Duration::from_millis(30),
            backoff: Duration::from_millis(1),
            max_attempts: 2,
            ..CoordinatorConfig::default()
        };
        let svc = service(tmp.path(), cfg).await;
        let job = svc
            .submit("t.toml", &pipeline(tmp.path(), 0), &[])
            .await
            .unwrap();
        register(&svc, "a", 0);
        for _ in 0..2 {
            assert_eq!(pull(&svc, "a", 2).len(), 2);
            tokio::time::sleep(Duration::from_millis(50)).await;
            svc.tick();
            tokio::time::sleep(Duration::from_millis(5)).await;
            svc.tick();
        }
        let inner = svc.lock();
        let st = svc.status_of(&inner, &job).unwrap();
        assert_eq!(st.state, pb::JobState::Failed as i32);
        assert!(
            st.error.contains("failed after 2 attempt(s)"),
            "{}",
            st.error
        );
        assert_eq!(st.error.matches("lease expired").count(), 2, "{}", st.error);
    }

    #[tokio::test]
    async fn one_job_writes_an_output_at_a_time() {
        let tmp = tempfile::tempdir().unwrap();
        let svc = service(tmp.path(), CoordinatorConfig::default()).await;
        let text = pipeline(tmp.path(), 0);
        let first = svc.submit("t.toml", &text, &[]).await.unwrap();
        let lock = tmp
            .path()
            .join("out")
            .join(distillery_exec::lock::LOCK_FILE);
        assert!(lock.exists());
        // A second job into the same output is refused as invalid, naming the holder.
        match svc.submit("t.toml", &text, &[]).await {
            Err(ClusterError::Invalid(m)) => {
                assert!(m.contains(&format!("in use by job {first}")), "{m}")
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(svc.lock().jobs.len(), 1, "the refused job was not recorded");
        // Once the first job ended the output is free, even before its lock is given back.
        svc.end_job(
            &first,
            pb::JobState::Cancelled,
            pb::ErrorKind::Fatal,
            "stop".into(),
        );
        let second = svc.submit("t.toml", &text, &[]).await.unwrap();
        let held: distillery_exec::lock::OutputLock =
            serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap();
        assert_eq!(held.job, second);
        // Ending it gives the lock back.
        svc.end_job(
            &second,
            pb::JobState::Cancelled,
            pb::ErrorKind::Fatal,
            "stop".into(),
        );
        svc.after_jobs_done().await;
        assert!(!lock.exists());
    }

    #[tokio::test]
    async fn a_restarted_coordinator_takes_the_locks_of_resumed_jobs_again() {
        let tmp = tempfile::tempdir().unwrap();
        let svc = service(tmp.path(), CoordinatorConfig::default()).await;
        let job = svc
            .submit("t.toml", &pipeline(tmp.path(), 0), &[])
            .await
            .unwrap();
        let lock = tmp
            .path()
            .join("out")
            .join(distillery_exec::lock::LOCK_FILE);
        let read = || -> distillery_exec::lock::OutputLock {
            serde_json::from_slice(&std::fs::read(&lock).unwrap()).unwrap()
        };
        // As if the coordinator had run in another pod: its process is gone with it.
        let mut before = read();
        before.host = "old-pod".into();
        std::fs::write(&lock, serde_json::to_vec(&before).unwrap()).unwrap();
        let svc2 = service(tmp.path(), CoordinatorConfig::default()).await;
        let now = read();
        assert_eq!(now.job, job);
        assert_ne!(
            now.host, "old-pod",
            "the resumed job holds it in this process's name"
        );
        assert_eq!(
            svc2.lock().jobs[&job].state,
            pb::JobState::Running,
            "resumed"
        );
        // Another job took the output while no coordinator ran: the resumed job fails.
        let mut other = read();
        other.job = "someone-else".into();
        other.host = "elsewhere".into();
        std::fs::write(&lock, serde_json::to_vec(&other).unwrap()).unwrap();
        let svc3 = service(tmp.path(), CoordinatorConfig::default()).await;
        let st = {
            let inner = svc3.lock();
            svc3.status_of(&inner, &job).unwrap()
        };
        assert_eq!(st.state, pb::JobState::Failed as i32);
        assert!(
            st.error.contains("in use by job someone-else"),
            "{}",
            st.error
        );
        svc3.after_jobs_done().await;
        assert_eq!(
            read().job,
            "someone-else",
            "another job's lock is left alone"
        );
    }

    #[tokio::test]
    async fn an_output_that_is_a_file_is_an_invalid_job() {
        let tmp = tempfile::tempdir().unwrap();
        let svc = service(tmp.path(), CoordinatorConfig::default()).await;
        std::fs::write(tmp.path().join("out"), b"a file").unwrap();
        match svc.submit("t.toml", &pipeline(tmp.path(), 0), &[]).await {
            Err(ClusterError::Invalid(m)) => assert!(m.contains("out: not a directory"), "{m}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_repeated_completion_is_accepted_and_committed_files_are_never_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let svc = service(tmp.path(), CoordinatorConfig::default()).await;
        svc.submit("t.toml", &pipeline(tmp.path(), 0), &[])
            .await
            .unwrap();
        register(&svc, "a", 0);
        let tasks = pull(&svc, "a", 2);
        let out = tmp.path().join("out");
        let marker = out.join(&tasks[0].dir).join("kept");
        std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
        std::fs::write(&marker, b"x").unwrap();
        assert!(complete(&svc, "a", &tasks[0]).await.accepted);
        // The answer was lost and the worker reports again: still accepted, one commit.
        assert!(complete(&svc, "a", &tasks[0]).await.accepted);
        assert!(
            svc.metrics()
                .contains("distillery_coordinator_commits_total 1")
        );
        // A coordinator restarted on the same state refuses the old generation's report but
        // leaves its files: the reloaded commit record points at them.
        let svc2 = service(tmp.path(), CoordinatorConfig::default()).await;
        let r = complete(&svc2, "a", &tasks[0]).await;
        assert!(!r.accepted);
        assert!(r.reason.starts_with("stale generation"), "{}", r.reason);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(marker.exists());
        let inner = svc2.lock();
        let job = inner.jobs.values().next().expect("resumed");
        assert_eq!(job.left, job.tasks.len() - 1, "the commit was reloaded");
    }
}
