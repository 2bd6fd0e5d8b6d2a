//! The distributed runtime: one pipeline file runs on a laptop or on a cluster of workers,
//! survives workers and the coordinator dying mid-job, and publishes outputs identical to a
//! fault-free run.
//!
//! - [`coordinator`]: plans jobs into tasks (`distillery_exec::task`), hands them to workers
//!   that pull (the pull is also heartbeat and status report), expires leases, retries with
//!   backoff, launches copies of stragglers, and publishes a job when its last task commits;
//! - [`state`]: the durable state in the object store — job records, one commit record per
//!   task created only if absent (exactly one attempt wins), the coordinator generation;
//! - [`worker`]: registers, pulls, runs tasks with `distillery_exec::task::run_task` into
//!   attempt-scoped directories, reports, and drains on SIGTERM;
//! - [`local`]: the embedded cluster behind `distillery run`: a coordinator and a worker on
//!   loopback, through the same gRPC code;
//! - [`auth`]: the shared token on every call; [`metrics`]: Prometheus `/metrics`,
//!   `/healthz`, `/readyz`; [`http`]: the HTTP port serving them and the coordinator's job
//!   pages.
//!
//! The protocol is `proto/distillery/v1/cluster.proto`, compiled in `build.rs` with a
//! vendored protoc.
//!
//! Dependencies: `tonic` + `prost` + `tonic-prost` (gRPC and its messages; `tls-ring` for
//! optional TLS), `object_store` (create-if-absent commit records), `tokio` (the
//! runtime), `tokio-util` (`TaskTracker`: what ended jobs
//! still do in the background, awaited before an embedded run exits), `serde`/`serde_json` (records and the task
//! payloads inside messages), `fastrand` (ids and backoff jitter), `tracing`,
//! `thiserror`, `subtle` (the token compared in constant time), `getrandom` (the embedded
//! cluster's token from the operating system's random source), `tempfile` (the embedded run's
//! private state directory, removed on every exit path), `axum` + `hyper` + `hyper-util` (the
//! HTTP port: a router on hyper's HTTP/1 server, for its connection cap and header read
//! timeout; all three already compiled through tonic), `prometheus-client` (the metrics and
//! their text format), `quick-xml` (HTML escaping on the job pages), `distillery-llm` (the
//! teacher metrics a worker exports).

pub mod auth;
pub mod client;
pub mod coordinator;
pub mod http;
pub mod local;
pub mod metrics;
pub mod state;
pub mod worker;

/// Generated protocol types and services.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("distillery.v1");
}

/// The protocol version checked at registration. 2: a stage task carries the files its
/// stage reads besides the inputs (`TaskDef::side`), which a worker of version 1 would
/// ignore.
pub const PROTOCOL_VERSION: u32 = 2;

/// The largest gRPC message either side sends or accepts, set explicitly on the coordinator's
/// server and on every client (tonic's default is 4 MiB): a task carries its pipeline text
/// (at most [`distillery_core::spec::MAX_PIPELINE_BYTES`]) and its planned files.
pub const MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Errors of the cluster runtime.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Bad configuration (token, addresses, TLS files).
    #[error("{0}")]
    Config(String),
    /// A submitted pipeline that cannot run (parse errors, missing inputs).
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Exec(#[from] distillery_exec::ExecError),
    #[error("state store: {0}")]
    State(String),
    #[error("coordinator {addr}: {message}")]
    Rpc { addr: String, message: String },
    #[error("transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// A job that ended without succeeding.
    #[error("{message}")]
    JobFailed {
        job: String,
        kind: pb::ErrorKind,
        message: String,
    },
}

impl distillery_core::HasKind for ClusterError {
    fn kind(&self) -> distillery_core::ErrorKind {
        use distillery_core::ErrorKind;
        match self {
            ClusterError::Exec(e) => e.kind(),
            ClusterError::Rpc { .. } | ClusterError::Transport(_) | ClusterError::State(_) => {
                ErrorKind::Retryable
            }
            _ => ErrorKind::Fatal,
        }
    }
}
