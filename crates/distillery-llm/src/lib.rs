//! The teacher side of Distillery: an OpenAI-compatible client and the LLM response cache.
//!
//! - [`client`]: chat completions (and text completions, `ChatRequest::prompt`) against any
//!   OpenAI-compatible server (vLLM in production):
//!   a concurrency limit per client, a per-request timeout, retries with exponential backoff
//!   and full jitter on 429 (honouring `Retry-After`), 5xx, connection errors, timeouts and
//!   broken bodies; structured output through `response_format` (`json_schema` or
//!   `json_object`; vLLM silently ignores the old `guided_json` field, so it is never sent);
//!   token accounting from `usage`; the model's context length (`max_model_len` of
//!   `GET /models`, or configured) and prompt token counts (vLLM's `/tokenize`). The API
//!   key is read from an environment variable and never printed (`Debug` shows `***`).
//! - [`cache`]: every answer is stored through object_store under a key made of the template
//!   id and version, a hash of the rendered request, the model id and revision, the decoding
//!   parameters and the output schema version. The raw text is kept with the parsed value and
//!   the parser version, so a parser upgrade re-parses cached answers without calling the
//!   server; an answer the parser rejects is kept as raw text only (never as a result) and
//!   reported as [`cache::Outcome::Invalid`] for quarantine; a request the server refuses as
//!   it is (400, 413, 422) is kept as refused, so a rerun gets the same error without a call.
//!   Entries are created with create-if-not-exists, so many workers can share one cache;
//!   [`ResponseCache::pack`] (`distillery cache pack`) later gathers them into packs, many
//!   entries with an index per object, held in memory by a reader, so a warm lookup opens
//!   no object (the one-object-per-entry layout is still read).
//! - [`pace`]: how many requests a client keeps in flight: fixed, or adaptive (it climbs the
//!   server's throughput curve and backs off on 429, 5xx and timeouts);
//! - [`telemetry`]: Prometheus histograms of request and cache lookup latency, calls and
//!   tokens, registered by the worker's exporter.
//!
//! Dependencies: `reqwest` (the HTTP client; rustls, the same build object_store already
//! uses), `fastrand` (backoff jitter, pack names), `object_store` (the cache's storage: local
//! disk, S3, GCS), `twox-hash` (the checksums of packs), `tokio` (semaphore, timers),
//! `serde_json` (request and response bodies), `prometheus-client` ([`telemetry`]). The
//! client and cache bench (`examples/bench_client.rs`) runs on `tikv-jemallocator` (a
//! dev-dependency), the allocator the binary ships with.

pub mod cache;
pub mod client;
pub mod pace;
mod pack;
pub mod telemetry;

pub use cache::{
    CacheEntry, CacheKey, CacheStats, Outcome, PackReport, Parser, Rejected, ResponseCache, Source,
    cached_chat,
};
pub use client::{
    Budget, ChatMessage, ChatRequest, ChatResponse, Client, ClientStats, LlmConfig, Price,
    ResponseFormat, Secret, Usage,
};

use distillery_core::{ErrorKind, HasKind};

/// Errors of the client and the cache.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// Bad configuration (a missing API key variable, a bad URL).
    #[error("llm configuration: {0}")]
    Config(String),
    /// The request did not get an HTTP answer (connection refused or dropped, timeout).
    #[error("llm request to {url}: {message}")]
    Transport { url: String, message: String },
    /// The server answered with an error status.
    #[error("llm server {url} answered {status}: {message}")]
    Http {
        url: String,
        status: u16,
        message: String,
        /// `Retry-After`, in seconds, when the server sent one.
        retry_after: Option<f64>,
    },
    /// A success status with a body that is not an OpenAI chat completion (truncated, not
    /// JSON, no choices).
    #[error("llm server {url} sent a bad response: {message}")]
    BadResponse { url: String, message: String },
    /// The cache's object store failed.
    #[error("llm cache {path}: {message}")]
    Cache { path: String, message: String },
}

impl LlmError {
    /// The server refused this one request as it is (400 bad request, such as a prompt longer
    /// than the model's context; 413; 422): asking again cannot help, but other requests can
    /// still succeed, so a stage quarantines the item instead of failing the job. Auth errors
    /// and unknown models (401, 403, 404) stay job failures.
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            LlmError::Http {
                status: 400 | 413 | 422,
                ..
            }
        )
    }
}

impl HasKind for LlmError {
    fn kind(&self) -> ErrorKind {
        match self {
            LlmError::Config(_) => ErrorKind::Fatal,
            LlmError::Transport { .. } | LlmError::BadResponse { .. } | LlmError::Cache { .. } => {
                ErrorKind::Retryable
            }
            LlmError::Http { status, .. } => {
                if *status == 429 || *status >= 500 {
                    ErrorKind::Retryable
                } else {
                    ErrorKind::Fatal
                }
            }
        }
    }
}
