//! The coordinator's Prometheus metrics, in a `prometheus-client` registry: counters and
//! histograms updated where things happen, and the gauges read from the job state at each
//! scrape (a [`Collector`]).

use std::collections::BTreeMap;
use std::sync::{Mutex, Weak};

use distillery_core::summary::StageSummary;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Inner;
use super::job::TaskState;
use crate::metrics::{Stage, StageLabel, encode};

/// Everything the coordinator counts.
#[derive(Debug)]
pub(crate) struct Telemetry {
    registry: Registry,
    pub(crate) lease_expiries: Counter,
    pub(crate) retries: Counter,
    pub(crate) commits: Counter,
    pub(crate) commits_refused: Counter,
    pub(crate) stragglers: Counter,
    pub(crate) pulls: Counter,
    records_in: Family<Stage, Counter>,
    records_out: Family<Stage, Counter>,
    bytes_in: Family<Stage, Counter>,
    bytes_out: Family<Stage, Counter>,
    quarantined: Family<Stage, Counter>,
    teacher_calls: Family<Stage, Counter>,
    cache_hits: Family<Stage, Counter>,
    tokens_in: Family<Stage, Counter>,
    tokens_out: Family<Stage, Counter>,
    task_seconds: Family<Stage, Histogram>,
    queue_wait: Family<Stage, Histogram>,
}

/// Buckets from 10 ms to about 3 hours, each 3x the last.
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 3.0, 13))
}

impl Telemetry {
    /// The metrics, the job-state gauges reading `inner` (held weakly: the registry does not
    /// keep a dropped coordinator's state alive).
    pub(crate) fn new(inner: Weak<Mutex<Inner>>, generation: u64) -> Telemetry {
        let mut registry = Registry::default();
        let counter = |r: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            r.register(name, help, c.clone());
            c
        };
        let family = |r: &mut Registry, name: &str, help: &str| {
            let f = Family::<Stage, Counter>::default();
            r.register(name, help, f.clone());
            f
        };
        let histogram = |r: &mut Registry, name: &str, help: &str| {
            let f = Family::<Stage, Histogram>::new_with_constructor(
                seconds_histogram as fn() -> Histogram,
            );
            r.register(name, help, f.clone());
            f
        };
        let r = &mut registry;
        let t = Telemetry {
            lease_expiries: counter(
                r,
                "distillery_coordinator_lease_expiries",
                "leases that expired without a heartbeat",
            ),
            retries: counter(
                r,
                "distillery_coordinator_task_retries",
                "tasks queued again after a failed or expired attempt",
            ),
            commits: counter(r, "distillery_coordinator_commits", "task commits"),
            commits_refused: counter(
                r,
                "distillery_coordinator_commits_refused",
                "completions refused (expired lease, stale generation, lost race)",
            ),
            stragglers: counter(
                r,
                "distillery_coordinator_straggler_copies",
                "copies launched for slow tasks",
            ),
            pulls: counter(
                r,
                "distillery_coordinator_pulls",
                "worker pulls (heartbeats)",
            ),
            records_in: family(
                r,
                "distillery_stage_records_in",
                "records read by committed tasks per stage",
            ),
            records_out: family(
                r,
                "distillery_stage_records",
                "records written by committed tasks per stage",
            ),
            bytes_in: family(
                r,
                "distillery_stage_bytes_in",
                "bytes read by committed tasks per stage",
            ),
            bytes_out: family(
                r,
                "distillery_stage_bytes",
                "bytes written by committed tasks per stage",
            ),
            quarantined: family(
                r,
                "distillery_stage_quarantined",
                "records sent to quarantine by committed tasks per stage",
            ),
            teacher_calls: family(
                r,
                "distillery_stage_teacher_calls",
                "teacher requests sent by committed tasks per stage (cache misses)",
            ),
            cache_hits: family(
                r,
                "distillery_stage_teacher_cache_hits",
                "teacher answers found in the response cache per stage",
            ),
            tokens_in: family(
                r,
                "distillery_stage_teacher_prompt_tokens",
                "prompt tokens the teacher read per stage",
            ),
            tokens_out: family(
                r,
                "distillery_stage_teacher_completion_tokens",
                "completion tokens the teacher wrote per stage",
            ),
            task_seconds: histogram(
                r,
                "distillery_stage_task_seconds",
                "wall seconds of committed attempts per stage",
            ),
            queue_wait: histogram(
                r,
                "distillery_stage_queue_wait_seconds",
                "seconds a task waited between ready and leased per stage",
            ),
            registry: Registry::default(),
        };
        registry.register_collector(Box::new(StateGauges { inner, generation }));
        Telemetry { registry, ..t }
    }

    /// The Prometheus text (format 0.0.4).
    pub(crate) fn render(&self) -> String {
        encode(&self.registry)
    }

    /// A committed task: its share of its stage's counts and its attempt's seconds.
    pub(crate) fn committed(&self, stage: &str, s: &StageSummary, seconds: f64) {
        let l = Stage::of(stage);
        let c = |k: &str| s.counters.get(k).copied().unwrap_or(0);
        self.records_in.get_or_create(&l).inc_by(s.records_in);
        self.records_out.get_or_create(&l).inc_by(s.records_out);
        self.bytes_in.get_or_create(&l).inc_by(s.bytes_in);
        self.bytes_out.get_or_create(&l).inc_by(s.bytes_out);
        self.quarantined.get_or_create(&l).inc_by(s.quarantined);
        for (f, k) in [
            (&self.teacher_calls, "llm.calls"),
            (&self.cache_hits, "llm.cache_hits"),
            (&self.tokens_in, "llm.tokens_in"),
            (&self.tokens_out, "llm.tokens_out"),
        ] {
            if c(k) > 0 {
                f.get_or_create(&l).inc_by(c(k));
            }
        }
        self.task_seconds.get_or_create(&l).observe(seconds);
    }

    /// A task leased after waiting `seconds` in the queue.
    pub(crate) fn leased(&self, stage: &str, seconds: f64) {
        self.queue_wait
            .get_or_create(&Stage::of(stage))
            .observe(seconds);
    }
}

/// The gauges read from the job state at each scrape.
struct StateGauges {
    inner: Weak<Mutex<Inner>>,
    generation: u64,
}

impl std::fmt::Debug for StateGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateGauges")
            .field("generation", &self.generation)
            .finish()
    }
}

/// A gauge with one sample per value of the label `key`.
fn gauges(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    key: &str,
    values: &BTreeMap<&str, i64>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, ConstGauge::new(0i64).metric_type())?;
    for (val, v) in values {
        ConstGauge::new(*v).encode(m.encode_family(&[(key, *val)])?)?;
    }
    Ok(())
}

/// A gauge without labels.
fn gauge(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: i64,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(v);
    g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for StateGauges {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(inner) = self.inner.upgrade() else {
            return Ok(());
        };
        let inner = inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut by_state: BTreeMap<&str, i64> = [
            TaskState::Blocked,
            TaskState::Ready,
            TaskState::Running,
            TaskState::Committed,
        ]
        .into_iter()
        .map(|s| (s.name(), 0))
        .collect();
        let mut jobs: BTreeMap<&str, i64> = BTreeMap::new();
        for f in inner.finals.values() {
            *jobs.entry(f.state.as_str()).or_default() += 1;
        }
        for job in inner.jobs.values() {
            *jobs
                .entry(super::status::job_state_name(job.phase.job_state()))
                .or_default() += 1;
            for t in &job.tasks {
                *by_state.entry(t.state.name()).or_default() += 1;
            }
        }
        gauges(
            &mut enc,
            "distillery_coordinator_tasks",
            "tasks of unfinished and recent jobs by state",
            "state",
            &by_state,
        )?;
        gauges(
            &mut enc,
            "distillery_coordinator_jobs",
            "jobs by state",
            "state",
            &jobs,
        )?;
        let plain: [(&str, &str, usize); 4] = [
            (
                "distillery_coordinator_queue_depth",
                "tasks ready and waiting for a worker",
                inner.ready_cpu.len() + inner.ready_gpu.len(),
            ),
            (
                "distillery_coordinator_retry_queue_depth",
                "tasks waiting out a retry backoff",
                inner.delayed.len(),
            ),
            (
                "distillery_coordinator_workers",
                "registered workers",
                inner.workers.len(),
            ),
            (
                "distillery_coordinator_running_attempts",
                "attempts holding a lease",
                inner.running.len(),
            ),
        ];
        for (name, help, v) in plain {
            gauge(&mut enc, name, help, v as i64)?;
        }
        gauge(
            &mut enc,
            "distillery_coordinator_generation",
            "this coordinator's generation",
            self.generation as i64,
        )
    }
}
