//! The `[llm]` section: the teacher server, its prices and the run's spending limits.

use serde::{Deserialize, Serialize};

fn default_concurrency() -> usize {
    64
}
fn default_min_concurrency() -> usize {
    1
}
fn default_timeout() -> u64 {
    120
}
fn default_retries() -> u32 {
    6
}

/// How the teacher client paces its requests.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum PaceSpec {
    /// Between `min_concurrency` and `max_concurrency` requests in flight, set by the client
    /// from the server's answers per second, refusals (429, 5xx) and timeouts.
    #[default]
    Adaptive,
    /// Always `max_concurrency` requests in flight.
    Fixed,
}

/// Prices per million tokens (any currency; the summary's cost is in the same unit).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceSpec {
    #[serde(default)]
    pub input_per_million: f64,
    #[serde(default)]
    pub output_per_million: f64,
}

/// Spending limits of one run. At a limit the run stops cleanly, publishes nothing, and a
/// later run resumes: every answer already received is in the cache.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetSpec {
    /// Prompt + completion tokens spent by this run's calls (cache hits are free).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Cost by `[llm.price]`.
    #[serde(default)]
    pub max_cost: Option<f64>,
}

/// The `[llm]` section: the OpenAI-compatible server the teacher stages call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmSpec {
    /// API root, e.g. `http://vllm:8000/v1`.
    pub base_url: String,
    /// The served model name.
    pub model: String,
    /// Environment variable holding the API key (none: no `Authorization` header).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The model's revision (weights version): part of every cache key.
    #[serde(default)]
    pub model_revision: String,
    /// Requests in flight at once, at most (per worker process): the upper bound of the
    /// adaptive pace, or the fixed number with `pace = "fixed"`.
    #[serde(default = "default_concurrency")]
    pub max_concurrency: usize,
    /// The fewest requests in flight the adaptive pace goes down to.
    #[serde(default = "default_min_concurrency")]
    pub min_concurrency: usize,
    /// `adaptive` (the client climbs to the throughput the server gives and backs off on
    /// 429, 5xx and timeouts) or `fixed`.
    #[serde(default)]
    pub pace: PaceSpec,
    /// Per-request timeout, seconds.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Retries after the first attempt (429, 5xx, timeouts, broken answers).
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// Sampling seed sent with every request.
    #[serde(default)]
    pub seed: Option<u64>,
    /// The model's context length in tokens (prompt + answer). Default: what the server
    /// says (`max_model_len` of vLLM's `GET /v1/models`); set it for servers that do not
    /// say, or to keep prompts shorter. A passage whose prompts would not fit is cut into
    /// pieces that do (the triple extraction of `triples`, `cirag` and `ras`); with neither,
    /// passages are sent whole and one the server refuses is quarantined. A refusal is kept
    /// in the cache with the context it was refused under, and asked again once the context
    /// is longer.
    #[serde(default)]
    pub context_tokens: Option<u64>,
    /// Where the response cache lives (path or URL). Default: `llm-cache` beside the
    /// output, so every pipeline writing next to it shares one cache.
    #[serde(default)]
    pub cache: Option<String>,
    #[serde(default)]
    pub price: PriceSpec,
    #[serde(default)]
    pub budget: BudgetSpec,
}

impl LlmSpec {
    /// The cache location: `cache`, else `llm-cache` in the directory holding `output`.
    pub fn cache_location(&self, output: &str) -> String {
        if let Some(c) = &self.cache {
            return c.clone();
        }
        let trimmed = output.trim_end_matches('/');
        let (scheme, path) = match trimmed.split_once("://") {
            Some((s, rest)) => (format!("{s}://"), rest),
            None => (String::new(), trimmed),
        };
        match path.rsplit_once('/') {
            Some((parent, _)) => format!("{scheme}{parent}/llm-cache"),
            // A bucket root: inside the bucket.
            None if !scheme.is_empty() => format!("{scheme}{path}/llm-cache"),
            None => "llm-cache".to_string(),
        }
    }
}
