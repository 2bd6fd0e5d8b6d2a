//! The teacher's Prometheus metrics of this process: request latency per endpoint and
//! outcome, cache lookup latency per result, calls and tokens. They are process-wide (every
//! client and cache of a worker adds to them) and reach an exporter through [`register`].

use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = [(&'static str, &'static str); 2];
type Label = [(&'static str, &'static str); 1];

struct Metrics {
    request_seconds: Family<Labels, Histogram>,
    cache_lookup_seconds: Family<Label, Histogram>,
    requests: Family<Labels, Counter>,
    prompt_tokens: Counter,
    completion_tokens: Counter,
    concurrency: Family<[(&'static str, String); 1], Gauge>,
}

fn request_buckets() -> Histogram {
    // 5 ms to about 20 minutes, each 2.5x the last.
    Histogram::new(exponential_buckets(0.005, 2.5, 14))
}

fn lookup_buckets() -> Histogram {
    // 50 µs to about 10 s.
    Histogram::new(exponential_buckets(0.00005, 3.0, 12))
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| Metrics {
    request_seconds: Family::new_with_constructor(request_buckets as fn() -> Histogram),
    cache_lookup_seconds: Family::new_with_constructor(lookup_buckets as fn() -> Histogram),
    requests: Family::default(),
    prompt_tokens: Counter::default(),
    completion_tokens: Counter::default(),
    concurrency: Family::default(),
});

/// Adds the teacher metrics to `registry` (they keep counting for the whole process).
pub fn register(registry: &mut Registry) {
    let m = &*METRICS;
    registry.register(
        "distillery_teacher_request_seconds",
        "latency of each HTTP request to the teacher server, by endpoint and outcome",
        m.request_seconds.clone(),
    );
    registry.register(
        "distillery_teacher_requests",
        "HTTP requests to the teacher server, by endpoint and outcome",
        m.requests.clone(),
    );
    registry.register(
        "distillery_teacher_cache_lookup_seconds",
        "latency of response cache lookups, by result",
        m.cache_lookup_seconds.clone(),
    );
    registry.register(
        "distillery_teacher_prompt_tokens",
        "prompt tokens the teacher read",
        m.prompt_tokens.clone(),
    );
    registry.register(
        "distillery_teacher_concurrency",
        "requests the client lets in flight to each teacher server now (its pace)",
        m.concurrency.clone(),
    );
    registry.register(
        "distillery_teacher_completion_tokens",
        "completion tokens the teacher wrote",
        m.completion_tokens.clone(),
    );
}

const ENDPOINTS: [&str; 6] = [
    "chat",
    "completions",
    "embeddings",
    "models",
    "tokenize",
    "other",
];
const OUTCOMES: [&str; 5] = ["ok", "429", "5xx", "4xx", "transport"];

/// The request histogram and counter of each endpoint and outcome, taken from their
/// families at first use (a request then takes no family lock nor label hashing).
#[allow(clippy::type_complexity)]
static REQUESTS: [[OnceLock<(Histogram, Counter)>; 5]; 6] =
    [const { [const { OnceLock::new() }; 5] }; 6];

/// One HTTP request to `endpoint` took `d`; `outcome` is `ok`, an HTTP status class
/// (`429`, `5xx`, `4xx`) or `transport`.
pub(crate) fn request(endpoint: &'static str, outcome: &'static str, d: Duration) {
    let e = ENDPOINTS.iter().position(|x| *x == endpoint);
    let o = OUTCOMES.iter().position(|x| *x == outcome);
    let (Some(e), Some(o)) = (e, o) else {
        let l = [("endpoint", endpoint), ("outcome", outcome)];
        let m = &*METRICS;
        m.request_seconds.get_or_create(&l).observe(d.as_secs_f64());
        m.requests.get_or_create(&l).inc();
        return;
    };
    let (h, c) = REQUESTS[e][o].get_or_init(|| {
        let l = [("endpoint", endpoint), ("outcome", outcome)];
        let m = &*METRICS;
        (
            m.request_seconds.get_or_create(&l).clone(),
            m.requests.get_or_create(&l).clone(),
        )
    });
    h.observe(d.as_secs_f64());
    c.inc();
}

/// The gauge of the pace's limit for the server at `base_url` (a client keeps it).
pub(crate) fn concurrency_gauge(base_url: &str) -> Gauge {
    METRICS
        .concurrency
        .get_or_create(&[("server", base_url.to_string())])
        .clone()
}

/// Tokens of one answer.
pub(crate) fn tokens(prompt: u64, completion: u64) {
    METRICS.prompt_tokens.inc_by(prompt);
    METRICS.completion_tokens.inc_by(completion);
}

/// What a cache lookup found.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lookup {
    Hit,
    Miss,
    Error,
}

/// The lookup histograms, one per result, taken from their family once (a lookup from
/// memory is too quick for a family's lock and label hashing on every call).
static LOOKUPS: LazyLock<[Histogram; 3]> = LazyLock::new(|| {
    ["hit", "miss", "error"].map(|r| {
        METRICS
            .cache_lookup_seconds
            .get_or_create(&[("result", r)])
            .clone()
    })
});

/// One cache lookup took `d`.
pub(crate) fn lookup(result: Lookup, d: Duration) {
    LOOKUPS[result as usize].observe(d.as_secs_f64());
}

/// The endpoint label of a request URL.
pub(crate) fn endpoint_of(url: &str) -> &'static str {
    let path = url.split('?').next().unwrap_or(url);
    if path.ends_with("/chat/completions") {
        "chat"
    } else if path.ends_with("/completions") {
        "completions"
    } else if path.ends_with("/embeddings") {
        "embeddings"
    } else if path.ends_with("/models") {
        "models"
    } else if path.ends_with("/tokenize") {
        "tokenize"
    } else {
        "other"
    }
}

/// The outcome label of an HTTP status.
pub(crate) fn outcome_of(status: u16) -> &'static str {
    match status {
        200..=299 => "ok",
        429 => "429",
        500..=599 => "5xx",
        _ => "4xx",
    }
}
