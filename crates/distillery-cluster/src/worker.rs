//! A worker: registers, pulls tasks (the pull is its heartbeat), runs each in its own
//! attempt directory, reports the output manifest, and repeats. On shutdown (SIGTERM) it stops
//! pulling, lets running tasks finish within the grace period, gives back the rest as
//! retryable failures, and returns.
//!
//! Fault injection for tests and drills (`DISTILLERY_FAULTS`, comma-separated):
//! `delay:<task-id-prefix>:<ms>` holds a matching task that long before it reports;
//! `fail:<task-id-prefix>` fails matching tasks with a retryable error;
//! `mute:<task-id-prefix>:<ms>` stops heartbeats that long once a matching task starts (a
//! network partition or a stalled process, while the task itself goes on).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use distillery_core::retry::RetryPolicy;
use distillery_core::spec::Pipeline;
use distillery_exec::ExecError;
use distillery_exec::parts::WrittenPart;
use distillery_exec::run::ProgressMode;
use distillery_exec::store::open_location;
use distillery_exec::task::{ShardOutput, TaskDef, TaskOutput, run_task};
use tokio::sync::{Notify, watch};
use tracing::{Instrument, info, info_span, warn};

use crate::client::Client;
use crate::coordinator::error_kind;
use crate::metrics::{Stage, StageLabel};
use crate::{ClusterError, PROTOCOL_VERSION, pb};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// Injected faults (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Faults {
    pub delay: Vec<(String, Duration)>,
    pub fail: Vec<String>,
    pub mute: Vec<(String, Duration)>,
}

impl Faults {
    /// Parses `DISTILLERY_FAULTS`.
    pub fn from_env() -> Result<Faults, ClusterError> {
        match std::env::var("DISTILLERY_FAULTS") {
            Ok(s) => Faults::parse(&s),
            Err(_) => Ok(Faults::default()),
        }
    }

    pub fn parse(s: &str) -> Result<Faults, ClusterError> {
        let mut f = Faults::default();
        for item in s.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = || ClusterError::Config(format!("DISTILLERY_FAULTS: bad item `{item}`"));
            let mut it = item.split(':');
            match it.next() {
                Some(kind @ ("delay" | "mute")) => {
                    let prefix = it.next().ok_or_else(bad)?.to_string();
                    let ms: u64 = it.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
                    let v = if kind == "delay" {
                        &mut f.delay
                    } else {
                        &mut f.mute
                    };
                    v.push((prefix, Duration::from_millis(ms)));
                }
                Some("fail") => f.fail.push(it.next().ok_or_else(bad)?.to_string()),
                _ => return Err(bad()),
            }
        }
        Ok(f)
    }
}

/// Worker settings.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub coordinator: String,
    pub worker_id: String,
    pub slots: u32,
    pub gpus: u32,
    pub memory_bytes: u64,
    pub labels: HashMap<String, String>,
    /// Threads a task may use (the label and hseq stages' parallelism).
    pub parallelism: usize,
    /// How long running tasks may take to finish after shutdown is asked for.
    pub grace: Duration,
    pub mode: ProgressMode,
    pub faults: Faults,
}

struct Running {
    job: String,
    task: String,
    abort: tokio::task::AbortHandle,
    /// Dropping it stops the attempt's work (see [`execute_on_own_thread`]).
    _cancel: tokio::sync::oneshot::Sender<()>,
    /// The work is done and its result is being reported: an abandon request that crosses
    /// the report (the coordinator already committed it) is ignored, not a cancellation.
    reporting: bool,
}

/// What a worker exports on `/metrics`: its attempts by outcome, what committed attempts
/// wrote per stage and how long they ran, and the teacher client's metrics of this process
/// (`distillery_llm::telemetry`).
pub struct WorkerMetrics {
    registry: prometheus_client::registry::Registry,
    outcomes: Family<[(&'static str, &'static str); 1], Counter>,
    records: Family<Stage, Counter>,
    bytes: Family<Stage, Counter>,
    seconds: Family<Stage, Histogram>,
    running: Gauge,
    /// Set once registered: the worker's `/readyz`.
    pub registered: Arc<AtomicBool>,
}

impl Default for WorkerMetrics {
    fn default() -> Self {
        let mut registry = prometheus_client::registry::Registry::default();
        let outcomes = Family::default();
        registry.register(
            "distillery_worker_tasks",
            "attempts finished by outcome",
            outcomes.clone(),
        );
        let running = Gauge::default();
        registry.register(
            "distillery_worker_running_tasks",
            "attempts running now",
            running.clone(),
        );
        let records = Family::default();
        registry.register(
            "distillery_worker_records",
            "records written per stage",
            records.clone(),
        );
        let bytes = Family::default();
        registry.register(
            "distillery_worker_bytes",
            "bytes written per stage",
            bytes.clone(),
        );
        let seconds = Family::<Stage, Histogram>::new_with_constructor(
            task_seconds_histogram as fn() -> Histogram,
        );
        registry.register(
            "distillery_worker_task_seconds",
            "wall seconds of the attempts this worker committed, per stage",
            seconds.clone(),
        );
        distillery_llm::telemetry::register(&mut registry);
        WorkerMetrics {
            registry,
            outcomes,
            records,
            bytes,
            seconds,
            running,
            registered: Arc::default(),
        }
    }
}

fn task_seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 3.0, 13))
}

impl WorkerMetrics {
    fn outcome(&self, o: &'static str) {
        self.outcomes.get_or_create(&[("outcome", o)]).inc();
    }

    fn committed(&self, stage: &str, records: u64, bytes: u64, seconds: f64) {
        let l = Stage::of(stage);
        self.records.get_or_create(&l).inc_by(records);
        self.bytes.get_or_create(&l).inc_by(bytes);
        self.seconds.get_or_create(&l).observe(seconds);
    }

    /// The Prometheus text.
    pub fn render(&self) -> String {
        crate::metrics::encode(&self.registry)
    }
}

/// Registering again after the coordinator went away (every worker at once when it
/// restarts, hence the jitter), and reporting a completion through a broken connection.
const REGISTER_RETRY: RetryPolicy =
    RetryPolicy::new(Duration::from_millis(200), Duration::from_secs(5));
const REPORT_RETRY: RetryPolicy =
    RetryPolicy::new(Duration::from_millis(200), Duration::from_secs(3));

type Muted = Arc<Mutex<Option<Instant>>>;
type Plans = Arc<Mutex<HashMap<String, Arc<Pipeline>>>>;

/// Runs a worker until `shutdown` turns true and its tasks are done (or the grace period
/// ends).
pub async fn run_worker(
    cfg: WorkerConfig,
    mut client: Client,
    mut shutdown: watch::Receiver<bool>,
    metrics: Arc<WorkerMetrics>,
) -> Result<(), ClusterError> {
    let running: Arc<Mutex<HashMap<String, Running>>> = Arc::new(Mutex::new(HashMap::new()));
    let plans: Plans = Arc::new(Mutex::new(HashMap::new()));
    let wake = Arc::new(Notify::new());
    let muted: Muted = Arc::new(Mutex::new(None));
    let mut drain_started: Option<Instant> = None;
    let mut backoff = REGISTER_RETRY.delays();
    'register: loop {
        let reg = loop {
            if *shutdown.borrow() {
                let started = *drain_started.get_or_insert_with(Instant::now);
                let idle = running.lock().map(|r| r.is_empty()).unwrap_or(true);
                if idle || started.elapsed() > cfg.grace {
                    // The coordinator is unreachable: abandon what is left, its leases expire.
                    for (_, r) in running.lock().unwrap_or_else(|e| e.into_inner()).drain() {
                        r.abort.abort();
                    }
                    return Ok(());
                }
            }
            let req = pb::RegisterWorkerRequest {
                protocol_version: PROTOCOL_VERSION,
                worker_id: cfg.worker_id.clone(),
                capabilities: Some(pb::Capabilities {
                    slots: cfg.slots,
                    gpus: cfg.gpus,
                    memory_bytes: cfg.memory_bytes,
                    labels: cfg.labels.clone(),
                }),
            };
            match client.register_worker(req).await {
                Ok(r) => break r.into_inner(),
                Err(s) if s.code() == tonic::Code::Unauthenticated => {
                    return Err(crate::client::rpc_err(&cfg.coordinator, s));
                }
                Err(s) if s.code() == tonic::Code::FailedPrecondition => {
                    return Err(crate::client::rpc_err(&cfg.coordinator, s));
                }
                Err(s) => {
                    warn!(coordinator = %cfg.coordinator, error = %s.message(), "cannot register, retrying");
                    tokio::time::sleep(backoff.next_delay(None)).await;
                }
            }
        };
        metrics.registered.store(true, Ordering::SeqCst);
        backoff = REGISTER_RETRY.delays();
        let generation = reg.generation;
        let heartbeat = Duration::from_millis(u64::from(reg.heartbeat_ms.max(10)));
        info!(worker = %cfg.worker_id, generation, "registered");
        loop {
            let draining = *shutdown.borrow();
            if draining {
                let started = *drain_started.get_or_insert_with(|| {
                    info!(worker = %cfg.worker_id, grace_s = cfg.grace.as_secs_f64(), "shutdown asked: draining");
                    Instant::now()
                });
                let left = running.lock().map(|r| r.len()).unwrap_or(0);
                if left == 0 {
                    info!(worker = %cfg.worker_id, "drained");
                    return Ok(());
                }
                if started.elapsed() > cfg.grace {
                    give_back(&cfg, &mut client, &running, generation).await;
                    return Ok(());
                }
            }
            let mute_left = muted
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .and_then(|until| until.checked_duration_since(Instant::now()));
            if let Some(left) = mute_left {
                tokio::time::sleep(left.min(heartbeat)).await;
                continue;
            }
            let (snapshot, free) = {
                let r = running.lock().unwrap_or_else(|e| e.into_inner());
                let snap: Vec<pb::AttemptProgress> = r
                    .iter()
                    .map(|(a, t)| pb::AttemptProgress {
                        job_id: t.job.clone(),
                        task_id: t.task.clone(),
                        attempt_id: a.clone(),
                        records: 0,
                        bytes: 0,
                    })
                    .collect();
                let free = cfg.slots.saturating_sub(r.len() as u32);
                (snap, free)
            };
            let free = if draining { 0 } else { free };
            let req = pb::PullRequest {
                worker_id: cfg.worker_id.clone(),
                generation,
                free_slots: free,
                running: snapshot,
                draining,
                // With a free slot, the coordinator holds the pull until a task is ready
                // (at most a heartbeat): a new level reaches idle workers at once.
                wait_ms: if free > 0 {
                    heartbeat.as_millis() as u32
                } else {
                    0
                },
            };
            let pulled = Instant::now();
            let mut got_tasks = false;
            match client.pull(req).await {
                Ok(resp) => {
                    let resp = resp.into_inner();
                    got_tasks = !resp.tasks.is_empty();
                    for a in resp.abandon_attempts {
                        let removed = {
                            let mut r = running.lock().unwrap_or_else(|e| e.into_inner());
                            match r.get(&a) {
                                Some(x) if !x.reporting => r.remove(&a),
                                _ => None,
                            }
                        };
                        if let Some(r) = removed {
                            warn!(attempt = %a, task = %r.task, "abandoning attempt");
                            r.abort.abort();
                            metrics.outcome("abandoned");
                            metrics.running.dec();
                        }
                    }
                    for t in resp.tasks {
                        if let Some((_, d)) = cfg
                            .faults
                            .mute
                            .iter()
                            .find(|(p, _)| t.task_id.starts_with(p.as_str()))
                        {
                            warn!(task = %t.task_id, mute_ms = d.as_millis() as u64, "injected heartbeat stall");
                            *muted.lock().unwrap_or_else(|e| e.into_inner()) =
                                Some(Instant::now() + *d);
                        }
                        spawn_task(&cfg, &client, &running, &plans, &metrics, &wake, t);
                    }
                }
                Err(s) if s.code() == tonic::Code::FailedPrecondition => {
                    warn!(error = %s.message(), "coordinator asks to register again");
                    continue 'register;
                }
                Err(s) => {
                    warn!(coordinator = %cfg.coordinator, error = %s.message(), "pull failed");
                }
            }
            // Pull again at once while slots are free and the last pull either brought
            // tasks or was held by the coordinator (a long poll that timed out): the next one
            // is held in turn, so an idle worker sends one pull a heartbeat. A pull answered
            // at once with nothing (a coordinator without long polls) waits a heartbeat.
            let free_now = cfg
                .slots
                .saturating_sub(running.lock().unwrap_or_else(|e| e.into_inner()).len() as u32);
            let held = pulled.elapsed() >= heartbeat / 2;
            if !draining && free_now > 0 && (got_tasks || held) {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(heartbeat) => {}
                _ = wake.notified() => {}
                _ = shutdown.changed(), if !draining => {}
            }
        }
    }
}

/// The grace period ended: running attempts are stopped and reported as retryable failures so
/// the coordinator reschedules them at once.
async fn give_back(
    cfg: &WorkerConfig,
    client: &mut Client,
    running: &Arc<Mutex<HashMap<String, Running>>>,
    generation: u64,
) {
    let all: Vec<(String, Running)> = running
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
        .collect();
    for (attempt, r) in all {
        r.abort.abort();
        warn!(attempt = %attempt, task = %r.task, "grace period over: giving the task back");
        let _ = client
            .fail_task(pb::FailTaskRequest {
                worker_id: cfg.worker_id.clone(),
                job_id: r.job,
                task_id: r.task,
                attempt_id: attempt,
                generation,
                kind: pb::ErrorKind::Shutdown as i32,
                message: "the worker shut down before the task finished".into(),
            })
            .await;
    }
}

fn spawn_task(
    cfg: &WorkerConfig,
    client: &Client,
    running: &Arc<Mutex<HashMap<String, Running>>>,
    plans: &Plans,
    metrics: &Arc<WorkerMetrics>,
    wake: &Arc<Notify>,
    t: pb::Task,
) {
    let span = info_span!("task", job = %t.job_id, task = %t.task_id, attempt = %t.attempt_id);
    let (cfg, mut client, running2, plans, metrics2, wake) = (
        cfg.clone(),
        client.clone(),
        running.clone(),
        plans.clone(),
        metrics.clone(),
        wake.clone(),
    );
    let attempt = t.attempt_id.clone();
    let (job, task_id) = (t.job_id.clone(), t.task_id.clone());
    let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel::<()>();
    // Registered before the task starts, so the next pull lists it.
    let mut guard = running.lock().unwrap_or_else(|e| e.into_inner());
    let handle = tokio::spawn(
        async move {
            info!("task started");
            let started = Instant::now();
            let Some(result) = execute_on_own_thread(&cfg, &plans, &t, cancel_rx).await else {
                return;
            };
            // Abandoned meanwhile: nothing to report.
            match running2
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(&t.attempt_id)
            {
                Some(r) => r.reporting = true,
                None => return,
            }
            match result {
                Ok(output) => {
                    let (stage, records, bytes) = (
                        output.summary.stage.clone(),
                        output.summary.records_out,
                        output.summary.bytes_out,
                    );
                    let req = pb::CompleteTaskRequest {
                        worker_id: cfg.worker_id.clone(),
                        job_id: t.job_id.clone(),
                        task_id: t.task_id.clone(),
                        attempt_id: t.attempt_id.clone(),
                        generation: t.generation,
                        output_json: serde_json::to_string(&output).expect("output serializes"),
                    };
                    match report(&mut client, req).await {
                        Some(true) => {
                            info!(
                                seconds = started.elapsed().as_secs_f64(),
                                records, "task committed"
                            );
                            metrics2.outcome("committed");
                            metrics2.committed(
                                &stage,
                                records,
                                bytes,
                                started.elapsed().as_secs_f64(),
                            );
                        }
                        Some(false) => metrics2.outcome("refused"),
                        None => metrics2.outcome("unreported"),
                    }
                }
                Err(e) => {
                    let kind = error_kind(&e);
                    warn!(error = %e, "task failed");
                    metrics2.outcome("failed");
                    let _ = client
                        .fail_task(pb::FailTaskRequest {
                            worker_id: cfg.worker_id.clone(),
                            job_id: t.job_id.clone(),
                            task_id: t.task_id.clone(),
                            attempt_id: t.attempt_id.clone(),
                            generation: t.generation,
                            kind: kind as i32,
                            message: e.to_string(),
                        })
                        .await;
                }
            }
            running2
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&t.attempt_id);
            metrics2.running.dec();
            wake.notify_one();
        }
        .instrument(span),
    );
    metrics.running.inc();
    guard.insert(
        attempt,
        Running {
            reporting: false,
            job,
            task: task_id,
            abort: handle.abort_handle(),
            _cancel: cancel_tx,
        },
    );
}

/// Reports a completion, retrying while the coordinator is unreachable (it may be
/// restarting). `Some(accepted)`, or `None` when it could not be reported at all.
async fn report(client: &mut Client, req: pb::CompleteTaskRequest) -> Option<bool> {
    let mut delays = REPORT_RETRY.delays();
    for _ in 0..30 {
        match client.complete_task(req.clone()).await {
            Ok(r) => {
                let r = r.into_inner();
                if !r.accepted {
                    warn!(reason = %r.reason, "completion refused");
                }
                return Some(r.accepted);
            }
            Err(s)
                if matches!(
                    s.code(),
                    tonic::Code::Unavailable
                        | tonic::Code::Unknown
                        | tonic::Code::Cancelled
                        | tonic::Code::DeadlineExceeded
                ) =>
            {
                warn!(error = %s.message(), "cannot report the completion, retrying");
                tokio::time::sleep(delays.next_delay(None)).await;
            }
            Err(s) => {
                warn!(error = %s.message(), "completion rejected");
                return Some(false);
            }
        }
    }
    None
}

/// Runs an attempt on a blocking thread of its own, driven by the runtime's handle: the
/// stages' futures borrow their pipeline across awaits in ways rustc cannot yet prove `Send`
/// for every lifetime, so they are not moved between threads. `None` when cancelled (the
/// attempt's `Running` entry, holding the sender, was dropped).
async fn execute_on_own_thread(
    cfg: &WorkerConfig,
    plans: &Plans,
    t: &pb::Task,
    cancel: tokio::sync::oneshot::Receiver<()>,
) -> Option<Result<TaskOutput, ExecError>> {
    let (cfg, plans, t) = (cfg.clone(), plans.clone(), t.clone());
    let handle = tokio::runtime::Handle::current();
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        let _enter = span.enter();
        handle.block_on(async move {
            tokio::select! {
                r = execute(&cfg, &plans, &t) => Some(r),
                _ = cancel => None,
            }
        })
    })
    .await
    .unwrap_or_else(|e| Some(Err(ExecError::Task(format!("task thread: {e}")))))
}

/// Runs one task attempt.
async fn execute(cfg: &WorkerConfig, plans: &Plans, t: &pb::Task) -> Result<TaskOutput, ExecError> {
    let def: TaskDef = serde_json::from_str(&t.task_json)
        .map_err(|e| ExecError::Task(format!("bad task definition: {e}")))?;
    let inputs: Vec<WrittenPart> = serde_json::from_str(&t.inputs_json)
        .map_err(|e| ExecError::Task(format!("bad task inputs: {e}")))?;
    let shards: Vec<ShardOutput> = if t.shards_json.is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(&t.shards_json)
            .map_err(|e| ExecError::Task(format!("bad shard outputs: {e}")))?
    };
    if cfg
        .faults
        .fail
        .iter()
        .any(|p| def.id.starts_with(p.as_str()))
    {
        return Err(ExecError::Task(format!("injected failure of {}", def.id)));
    }
    let cached = plans
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&t.job_id)
        .cloned();
    let p = match cached {
        Some(p) => p,
        None => {
            let p = distillery_exec::stages::parse_pipeline(
                &t.pipeline_file,
                &t.pipeline_text,
                &t.overrides,
            )
            .map_err(|e| ExecError::Inputs(e.to_string()))?;
            let p = Arc::new(p);
            plans
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(t.job_id.clone(), p.clone());
            p
        }
    };
    let out = open_location(&p.output, true)?;
    let started_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let mut output = run_task(
        &p,
        &def,
        &out,
        &t.dir,
        &inputs,
        &shards,
        cfg.parallelism,
        cfg.mode,
    )
    .await?;
    output.worker = cfg.worker_id.clone();
    output.started_ms = started_ms;
    output.attempt = t.attempt;
    for (prefix, d) in &cfg.faults.delay {
        if def.id.starts_with(prefix.as_str()) {
            info!(delay_ms = d.as_millis() as u64, "injected delay");
            tokio::time::sleep(*d).await;
        }
    }
    Ok(output)
}

/// A worker id: the host name (the pod name on Kubernetes) and a random suffix.
pub fn default_worker_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_string());
    let mut suffix = String::new();
    for _ in 0..6 {
        suffix.push(fastrand::lowercase());
    }
    format!("{host}-{}-{suffix}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse() {
        let f = Faults::parse("delay:ingest/:1500, fail:stage/label, mute:ingest/:10").unwrap();
        assert_eq!(
            f.mute,
            vec![("ingest/".to_string(), Duration::from_millis(10))]
        );
        assert_eq!(
            f.delay,
            vec![("ingest/".to_string(), Duration::from_millis(1500))]
        );
        assert_eq!(f.fail, vec!["stage/label".to_string()]);
        assert!(Faults::parse("delay:x").is_err());
        assert!(Faults::parse("explode:x").is_err());
    }
}
