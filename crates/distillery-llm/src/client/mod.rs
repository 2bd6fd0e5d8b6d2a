//! An async client for the chat completions endpoint of an OpenAI-compatible server.
//!
//! [`Client::chat`] takes a slot of the client's pace (per client, that is per server and
//! worker: `max_concurrency` requests in flight, or with `adaptive` a limit the client sets
//! between `min_concurrency` and `max_concurrency` from the server's answers, see
//! [`crate::pace`]), posts the request and retries what may
//! succeed later: 429 and 5xx answers, connection errors, timeouts, and success answers whose
//! body is truncated or not a chat completion. The delay before a retry is `Retry-After` when
//! the server sent one (seconds or an HTTP date, capped at `backoff_max`), else the project's
//! one retry policy (`distillery_core::retry`: `backoff_base` doubling up to `backoff_max`,
//! with jitter). 4xx answers other than 429 are not retried. [`ClientStats`] counts calls, retries, failures and tokens.
//!
//! [`Client::context_tokens`] is the model's context length (prompt + answer tokens): the
//! configured one, else what the server's `GET /models` says (vLLM's `max_model_len`), asked
//! once per client; [`Client::count_tokens`] counts a chat's prompt tokens with vLLM's
//! `/tokenize`. Callers use both to keep a request within the context instead of having it
//! refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use distillery_core::HasKind;
use distillery_core::retry::{Delays, retry_after};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::pace::{Pace, Signal};
use crate::{LlmError, telemetry};

/// A secret (an API key): `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Where the server is and how to talk to it.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    /// The API root, e.g. `http://vllm:8000/v1` (`/chat/completions` is appended).
    pub base_url: String,
    /// The served model name.
    pub model: String,
    pub api_key: Option<Secret>,
    /// Requests in flight per client: always (`adaptive` false), or at most.
    pub max_concurrency: usize,
    /// The fewest requests in flight the adaptive pace goes down to.
    pub min_concurrency: usize,
    /// Whether the client sets its own pace between the two ([`crate::pace`]).
    pub adaptive: bool,
    /// Per-request timeout (connect to last byte).
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// The model's context (prompt + answer tokens) when it is known without asking the
    /// server: [`Client::context_tokens`] answers it instead of the server's `max_model_len`.
    pub context_tokens: Option<u64>,
}

impl LlmConfig {
    /// Defaults: at most 8 in flight, paced adaptively from 1, 120 s timeout, 6 retries, backoff 0.5 s doubling up to 30 s.
    pub fn new(base_url: &str, model: &str) -> LlmConfig {
        LlmConfig {
            base_url: base_url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            api_key: None,
            max_concurrency: 8,
            min_concurrency: 1,
            adaptive: true,
            timeout: Duration::from_secs(120),
            max_retries: 6,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            context_tokens: None,
        }
    }

    /// Reads the API key from the environment variable `var` (an error names the variable,
    /// never a value).
    pub fn api_key_from_env(mut self, var: &str) -> Result<LlmConfig, LlmError> {
        match std::env::var(var) {
            Ok(v) if !v.is_empty() => {
                self.api_key = Some(Secret(v));
                Ok(self)
            }
            _ => Err(LlmError::Config(format!(
                "environment variable {var} (the API key) is not set"
            ))),
        }
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.to_string(),
            content: content.into(),
        }
    }
}

/// Structured output, as OpenAI's `response_format`.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// `{"type": "json_object"}`: any JSON object.
    JsonObject,
    /// `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}`.
    JsonSchema {
        name: String,
        schema: Value,
        strict: bool,
    },
}

impl ResponseFormat {
    /// The request field's value.
    pub fn to_json(&self) -> Value {
        match self {
            ResponseFormat::JsonObject => json!({"type": "json_object"}),
            ResponseFormat::JsonSchema {
                name,
                schema,
                strict,
            } => json!({
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": strict},
            }),
        }
    }
}

/// A chat completion request (the model comes from the client's configuration).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub seed: Option<u64>,
    pub response_format: Option<ResponseFormat>,
    /// When set, the request is a text completion: `/completions` with this `prompt` (the
    /// `messages` are not sent). The answer comes back as `content` all the same.
    pub prompt: Option<String>,
}

/// Token counts from a response's `usage`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// A successful chat completion.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The first choice's message content.
    pub content: String,
    pub finish_reason: Option<String>,
    pub usage: Usage,
    /// The model the server says answered.
    pub model: String,
    /// Attempts it took (1 = no retry).
    pub attempts: u32,
}

/// Counters of one client (shared by its clones).
#[derive(Debug, Default)]
pub struct ClientStats {
    pub calls: AtomicU64,
    pub retries: AtomicU64,
    pub failures: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
}

impl ClientStats {
    /// `(calls, retries, failures, prompt_tokens, completion_tokens)`.
    pub fn snapshot(&self) -> [u64; 5] {
        [
            self.calls.load(Ordering::Relaxed),
            self.retries.load(Ordering::Relaxed),
            self.failures.load(Ordering::Relaxed),
            self.prompt_tokens.load(Ordering::Relaxed),
            self.completion_tokens.load(Ordering::Relaxed),
        ]
    }
}

/// The client. Cheap to clone (clones share the connection pool, the semaphore, the
/// counters and the model's context length once asked).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    /// The chat and completions endpoints, parsed once (a request then clones a parsed URL
    /// instead of parsing and IDNA-checking the string again).
    endpoints: Arc<Endpoints>,
    config: Arc<LlmConfig>,
    pace: Arc<Pace>,
    stats: Arc<ClientStats>,
    /// The server's `max_model_len` of the model, asked once.
    model_len: Arc<OnceCell<Option<u64>>>,
    /// [`Client::context_tokens`], or `None` when it could not be asked, once.
    context_once: Arc<OnceCell<Option<u64>>>,
    /// The teacher metrics' gauge of this server's pace.
    gauge: prometheus_client::metrics::gauge::Gauge,
}

impl Client {
    pub fn new(config: LlmConfig) -> Result<Client, LlmError> {
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(LlmError::Config(format!(
                "base_url {:?} is not an http(s) URL",
                config.base_url
            )));
        }
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| LlmError::Config(format!("http client: {e}")))?;
        let pace = Arc::new(if config.adaptive {
            Pace::adaptive(config.min_concurrency, config.max_concurrency)
        } else {
            Pace::fixed(config.max_concurrency)
        });
        let gauge = telemetry::concurrency_gauge(&config.base_url);
        gauge.set(pace.limit() as i64);
        Ok(Client {
            http,
            endpoints: Arc::new(Endpoints::of(&config.base_url)?),
            pace,
            gauge,
            config: Arc::new(config),
            stats: Arc::new(ClientStats::default()),
            model_len: Arc::new(OnceCell::new()),
            context_once: Arc::new(OnceCell::new()),
        })
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    /// The same server under another served model name, sharing this client's connection
    /// pool, concurrency limit and counters (so budgets and per-server limits cover both).
    pub fn with_model(&self, model: &str) -> Client {
        Client {
            http: self.http.clone(),
            endpoints: self.endpoints.clone(),
            config: Arc::new(LlmConfig {
                model: model.to_string(),
                ..(*self.config).clone()
            }),
            pace: self.pace.clone(),
            stats: self.stats.clone(),
            model_len: Arc::new(OnceCell::new()),
            context_once: Arc::new(OnceCell::new()),
            gauge: self.gauge.clone(),
        }
    }

    /// The requests it lets in flight now (the adaptive pace's limit, or the fixed one).
    pub fn concurrency(&self) -> usize {
        self.pace.limit()
    }

    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// The JSON body posted for `req` (also what the cache key hashes).
    pub fn request_body(&self, req: &ChatRequest) -> Value {
        let mut body = serde_json::Map::new();
        body.insert("model".into(), json!(self.config.model));
        match &req.prompt {
            Some(p) => body.insert("prompt".into(), json!(p)),
            None => body.insert("messages".into(), json!(req.messages)),
        };
        if let Some(t) = req.temperature {
            body.insert("temperature".into(), json!(t));
        }
        if let Some(p) = req.top_p {
            body.insert("top_p".into(), json!(p));
        }
        if let Some(m) = req.max_tokens {
            body.insert("max_tokens".into(), json!(m));
        }
        if let Some(s) = req.seed {
            body.insert("seed".into(), json!(s));
        }
        if let Some(f) = &req.response_format {
            body.insert("response_format".into(), f.to_json());
        }
        Value::Object(body)
    }

    /// The bytes of [`Client::request_body`], serialized straight from `req` (the same
    /// bytes as `serde_json::to_vec(&self.request_body(req))`, without building the value).
    pub fn request_bytes(&self, req: &ChatRequest) -> Vec<u8> {
        let body = Body {
            model: &self.config.model,
            messages: req.prompt.is_none().then_some(&req.messages),
            prompt: req.prompt.as_deref(),
            temperature: req.temperature,
            top_p: req.top_p,
            max_tokens: req.max_tokens,
            seed: req.seed,
            response_format: req.response_format.as_ref().map(ResponseFormat::to_json),
        };
        serde_json::to_vec(&body).expect("request bodies serialize")
    }

    /// Sends `req`, retrying as the module docs say.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let body = bytes::Bytes::from(self.request_bytes(req));
        let (url, parsed) = if req.prompt.is_some() {
            &self.endpoints.completions
        } else {
            &self.endpoints.chat
        };
        let (mut r, attempts) = self
            .retrying(|| async {
                let bytes = self.post(url, parsed.clone(), &body).await?;
                parse_completion(&bytes).map_err(|message| LlmError::BadResponse {
                    url: url.clone(),
                    message,
                })
            })
            .await?;
        r.attempts = attempts;
        telemetry::tokens(r.usage.prompt_tokens, r.usage.completion_tokens);
        self.stats
            .prompt_tokens
            .fetch_add(r.usage.prompt_tokens, Ordering::Relaxed);
        self.stats
            .completion_tokens
            .fetch_add(r.usage.completion_tokens, Ordering::Relaxed);
        Ok(r)
    }

    /// Embeddings of `inputs` from the server's `/embeddings` endpoint (vLLM's pooling
    /// models, TEI, OpenAI), in order, with the same concurrency limit, retries and
    /// counters as [`Client::chat`] (prompt tokens count towards a budget).
    pub async fn embed(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let url = format!("{}/embeddings", self.config.base_url);
        let body = bytes::Bytes::from(
            serde_json::to_vec(&json!({"model": self.config.model, "input": inputs}))
                .expect("json values serialize"),
        );
        let ((vectors, tokens), _) = self
            .retrying(|| async {
                let bytes = self.post(&url, url.as_str(), &body).await?;
                parse_embeddings(&bytes, inputs.len()).map_err(|message| LlmError::BadResponse {
                    url: url.clone(),
                    message,
                })
            })
            .await?;
        self.stats
            .prompt_tokens
            .fetch_add(tokens, Ordering::Relaxed);
        Ok(vectors)
    }

    /// Runs `once` in a slot of the client's pace, retrying retryable failures with
    /// backoff; returns its value and the attempts it took.
    async fn retrying<T, F, Fut>(&self, mut once: F) -> Result<(T, u32), LlmError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, LlmError>>,
    {
        let mut attempt = 0u32;
        // Built at the first retry: most requests succeed at once.
        let mut delays: Option<Delays> = None;
        loop {
            attempt += 1;
            // A slot per try: a request waiting out its backoff holds none.
            let ticket = self
                .pace
                .acquire()
                .await
                .ok_or_else(|| LlmError::Config("client closed".into()))?;
            self.stats.calls.fetch_add(1, Ordering::Relaxed);
            let r = once().await;
            ticket.done(load_signal(&r));
            self.gauge.set(self.pace.limit() as i64);
            match r {
                Ok(v) => return Ok((v, attempt)),
                Err(e) if e.is_retryable() && attempt <= self.config.max_retries => {
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    let delays = delays.get_or_insert_with(|| self.retry_policy().delays());
                    let delay = retry_delay(delays, &e);
                    tracing::warn!(attempt, delay_ms = delay.as_millis() as u64, error = %e, "llm request failed, retrying");
                    tokio::time::sleep(delay).await;
                }
                Err(e) => {
                    self.stats.failures.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
    }

    /// One POST of a JSON body to `target` (`url` parsed, or the string itself): the
    /// answer's bytes, or the error it is.
    async fn post(
        &self,
        url: &str,
        target: impl reqwest::IntoUrl,
        body: &bytes::Bytes,
    ) -> Result<bytes::Bytes, LlmError> {
        let mut rb = self
            .http
            .post(target)
            .header(reqwest::header::CONTENT_TYPE, JSON.clone())
            .body(body.clone());
        if let Some(key) = &self.config.api_key {
            rb = rb.bearer_auth(key.expose());
        }
        self.exchange(rb, url).await
    }

    /// Sends a request to `url` and reads its answer within the configured timeout (from
    /// the send to the answer's last byte): the body of a success, or the error it is (with
    /// the server's `Retry-After`); the request's latency and outcome go to the teacher
    /// metrics.
    ///
    /// The timeout is one `tokio::time::timeout` around the exchange rather than reqwest's
    /// per-request one, which also boxes the answer's body behind a timer of its own: on a
    /// loopback server that answers at once the client took 5% fewer requests a second with
    /// reqwest's (docs/benchmarks.md, "Teacher client: one timer a request").
    async fn exchange(
        &self,
        rb: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<bytes::Bytes, LlmError> {
        let started = std::time::Instant::now();
        match tokio::time::timeout(self.config.timeout, self.exchange_untimed(rb, url, started))
            .await
        {
            Ok(r) => r,
            Err(_) => {
                telemetry::request(telemetry::endpoint_of(url), "transport", started.elapsed());
                Err(LlmError::Transport {
                    url: url.to_string(),
                    message: format!("timed out after {:?}", self.config.timeout),
                })
            }
        }
    }

    /// [`Client::exchange`] without its timeout.
    async fn exchange_untimed(
        &self,
        rb: reqwest::RequestBuilder,
        url: &str,
        started: std::time::Instant,
    ) -> Result<bytes::Bytes, LlmError> {
        let transport = |e: reqwest::Error| LlmError::Transport {
            url: url.to_string(),
            message: error_chain(&e),
        };
        let endpoint = telemetry::endpoint_of(url);
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) => {
                telemetry::request(endpoint, "transport", started.elapsed());
                return Err(transport(e));
            }
        };
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after(v, std::time::SystemTime::now()))
            .map(|d| d.as_secs_f64());
        let bytes = resp.bytes().await;
        let outcome = match &bytes {
            Ok(_) => telemetry::outcome_of(status.as_u16()),
            Err(_) => "transport",
        };
        telemetry::request(endpoint, outcome, started.elapsed());
        let bytes = bytes.map_err(transport)?;
        if !status.is_success() {
            return Err(LlmError::Http {
                url: url.to_string(),
                status: status.as_u16(),
                message: error_message(&bytes),
                retry_after,
            });
        }
        Ok(bytes)
    }
}

/// The vectors of an OpenAI `/embeddings` answer, ordered by their `index`, and its prompt
/// tokens.
fn parse_embeddings(body: &[u8], n: usize) -> Result<(Vec<Vec<f32>>, u64), String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON ({e})"))?;
    let data = v
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| "no `data` in the embeddings answer".to_string())?;
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (i, d) in data.iter().enumerate() {
        let at = d
            .get("index")
            .and_then(Value::as_u64)
            .map_or(i, |x| x as usize);
        let e = d
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("item {i} has no `embedding` array"))?;
        let vec: Option<Vec<f32>> = e.iter().map(|x| x.as_f64().map(|f| f as f32)).collect();
        let slot = out
            .get_mut(at)
            .ok_or_else(|| format!("item index {at} past the {n} inputs"))?;
        *slot = Some(vec.ok_or_else(|| format!("item {i}: not a list of numbers"))?);
    }
    let tokens = v
        .pointer("/usage/prompt_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let vectors = out
        .into_iter()
        .enumerate()
        .map(|(i, x)| x.ok_or_else(|| format!("no embedding for input {i}")))
        .collect::<Result<_, _>>()?;
    Ok((vectors, tokens))
}

/// What a try's result says about the server's load.
fn load_signal<T>(r: &Result<T, LlmError>) -> Signal {
    match r {
        Ok(_) => Signal::Ok,
        Err(LlmError::Http { status, .. }) if *status == 429 || *status >= 500 => Signal::Overload,
        Err(LlmError::Transport { .. }) => Signal::Overload,
        Err(_) => Signal::Neutral,
    }
}

/// How long to wait before the next try after `e`: the server's `Retry-After` when it gave
/// one, else the policy's next delay.
fn retry_delay(delays: &mut Delays, e: &LlmError) -> Duration {
    let retry_after = match e {
        LlmError::Http { retry_after, .. } => retry_after.map(Duration::from_secs_f64),
        _ => None,
    };
    delays.next_delay(retry_after)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    s
}

/// `error.message` of an OpenAI error body, else the body's start.
fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.pointer("/error/message")?.as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned())
}

/// A request body in the order [`Client::request_body`] builds it.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<&'a Vec<ChatMessage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
}

static JSON: reqwest::header::HeaderValue =
    reqwest::header::HeaderValue::from_static("application/json");

/// The fields of a completion answer the client reads, borrowed where the JSON has no
/// escapes.
#[derive(Deserialize)]
struct Completion<'a> {
    #[serde(borrow, default)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<UsageIn>,
    #[serde(borrow, default)]
    model: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    content: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
struct UsageIn {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

/// The answer of a completion: read into the fields the client needs (the common case);
/// an answer of another shape goes through [`parse_completion_value`], which says what is
/// wrong or reads what it can as before.
fn parse_completion(body: &[u8]) -> Result<ChatResponse, String> {
    let Ok(c) = serde_json::from_slice::<Completion>(body) else {
        return parse_completion_value(body);
    };
    let Some(choice) = c.choices.into_iter().next() else {
        return parse_completion_value(body);
    };
    let content = match (choice.message.and_then(|m| m.content), choice.text) {
        (Some(c), _) | (None, Some(c)) => c.into_owned(),
        (None, None) => return parse_completion_value(body),
    };
    let usage = match c.usage {
        Some(UsageIn {
            prompt_tokens: Some(p),
            completion_tokens: Some(c),
        }) => Usage {
            prompt_tokens: p,
            completion_tokens: c,
        },
        _ => Usage::default(),
    };
    Ok(ChatResponse {
        content,
        finish_reason: choice.finish_reason.map(std::borrow::Cow::into_owned),
        usage,
        model: c
            .model
            .map(std::borrow::Cow::into_owned)
            .unwrap_or_default(),
        attempts: 0,
    })
}

/// [`parse_completion`] through a [`Value`]: any shape, with the reason when there is no
/// answer in it.
fn parse_completion_value(body: &[u8]) -> Result<ChatResponse, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        format!(
            "not JSON ({e}): {:?}",
            String::from_utf8_lossy(&body[..body.len().min(120)])
        )
    })?;
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| "no choices in the response".to_string())?;
    // Chat completions answer in `message.content`, text completions in `text`.
    let content = choice
        .pointer("/message/content")
        .or_else(|| choice.get("text"))
        .and_then(Value::as_str)
        .ok_or_else(|| "the first choice has no message content or text".to_string())?;
    let usage = v
        .get("usage")
        .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok())
        .unwrap_or_default();
    Ok(ChatResponse {
        content: content.to_string(),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage,
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        attempts: 0,
    })
}

/// The chat and completions endpoints of a base URL: each as a string (for errors and
/// metrics) and parsed (for requests).
#[derive(Debug)]
struct Endpoints {
    chat: (String, reqwest::Url),
    completions: (String, reqwest::Url),
}

impl Endpoints {
    fn of(base_url: &str) -> Result<Endpoints, LlmError> {
        let parse = |path: &str| {
            let s = format!("{base_url}/{path}");
            let u = reqwest::Url::parse(&s)
                .map_err(|e| LlmError::Config(format!("base_url {base_url:?}: {e}")))?;
            Ok::<_, LlmError>((s, u))
        };
        Ok(Endpoints {
            chat: parse("chat/completions")?,
            completions: parse("completions")?,
        })
    }
}

/// Prices per million tokens, for cost accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Price {
    pub input_per_million: f64,
    pub output_per_million: f64,
}

impl Price {
    /// The cost of some tokens.
    pub fn cost(&self, prompt_tokens: u64, completion_tokens: u64) -> f64 {
        (prompt_tokens as f64 * self.input_per_million
            + completion_tokens as f64 * self.output_per_million)
            / 1e6
    }
}

/// A job's spending limits: tokens (prompt + completion) and cost. Checked before each call;
/// calls already in flight finish, so a job may overrun by what they use.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    pub max_tokens: Option<u64>,
    pub max_cost: Option<f64>,
    pub price: Price,
}

impl Budget {
    /// `Some(why)` once the client's spending has reached a limit.
    pub fn exhausted(&self, stats: &ClientStats) -> Option<String> {
        let [_, _, _, prompt, completion] = stats.snapshot();
        let tokens = prompt + completion;
        if let Some(max) = self.max_tokens
            && tokens >= max
        {
            return Some(format!(
                "token budget reached: {tokens} tokens used, llm.budget.max_tokens = {max}"
            ));
        }
        let cost = self.price.cost(prompt, completion);
        if let Some(max) = self.max_cost
            && cost >= max
        {
            return Some(format!(
                "cost budget reached: {cost:.4} spent, llm.budget.max_cost = {max}"
            ));
        }
        None
    }
}

mod context;

#[cfg(test)]
mod tests;
