//! The LLM response cache: nothing is asked twice.
//!
//! A [`CacheKey`] is what makes two calls the same call: the prompt template's id and
//! version, a hash of the rendered request body, the model id and its revision, the decoding
//! parameters (temperature, top_p, max_tokens, seed, response_format) and the version of the
//! output schema. Its digest names one JSON object, `PREFIX/<2 hex>/<digest>.json`, holding a
//! [`CacheEntry`]: the key, the raw answer, the parsed value (absent when the parser rejected
//! the answer), the parser version, the usage and when it was written.
//!
//! - Many writers: entries are written with object_store's create-if-not-exists; when two
//!   workers answer the same call, the first entry stays and the second write is a no-op.
//! - Parser upgrades: an entry parsed by another parser version is parsed again from its raw
//!   text ([`cached_chat`] reports `reparsed`) and rewritten; no call is made.
//! - Invalid answers are kept as raw text only (so a rerun does not pay for them again) and
//!   come back as [`Outcome::Invalid`] with the reason, for the caller's quarantine table.
//! - Refused requests: a request the server refuses as it is ([`LlmError::is_rejection`]:
//!   400, 413, 422, e.g. a prompt longer than the model's context) is refused again every
//!   time, so the refusal is kept too: an entry with the server's message as `raw`, no parsed
//!   value and [`CacheEntry::rejected`] set. A hit on it returns the same
//!   [`LlmError::Http`] error as the call did, without calling. Errors that may pass (429,
//!   5xx, timeouts, broken answers) are never kept. A refusal records the model's context
//!   length when it was refused ([`Client::context_tokens_once`]); a hit on it asks the
//!   context again (one `GET /models` per client, no chat call; a server that does not
//!   answer leaves the refusal standing) and, when the context has grown since, asks the
//!   request again and overwrites the entry with what the server says now
//!   ([`CacheStats::stale_refusals`]; with workers behind servers of different contexts
//!   sharing one cache, the last writer's answer stays). A refusal made without a known
//!   context stays until the entry is deleted or a part of the key changes (the model
//!   revision, the template, the request).
//! - [`ResponseCache::get_many`] looks keys up concurrently, for batches.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use distillery_core::id::stable_id;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::LlmError;
use crate::client::{ChatRequest, Client, Usage};

/// Everything that makes two LLM calls the same call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheKey {
    pub template_id: String,
    pub template_version: String,
    /// SHA-1 (hex) of the request body as sent.
    pub request_hash: String,
    pub model: String,
    pub model_revision: String,
    /// The decoding parameters of the body, as compact JSON.
    pub decoding: String,
    pub schema_version: String,
}

impl CacheKey {
    /// The key of `body` (a chat request body, see [`Client::request_body`]).
    pub fn new(
        (template_id, template_version): (&str, &str),
        model_revision: &str,
        schema_version: &str,
        body: &Value,
    ) -> CacheKey {
        let decoding: serde_json::Map<String, Value> = [
            "temperature",
            "top_p",
            "max_tokens",
            "seed",
            "response_format",
        ]
        .iter()
        .filter_map(|k| Some((k.to_string(), body.get(*k)?.clone())))
        .collect();
        CacheKey {
            template_id: template_id.to_string(),
            template_version: template_version.to_string(),
            request_hash: stable_id(&[&body.to_string()]),
            model: body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            model_revision: model_revision.to_string(),
            decoding: Value::Object(decoding).to_string(),
            schema_version: schema_version.to_string(),
        }
    }

    /// The digest naming the entry.
    pub fn digest(&self) -> String {
        stable_id(&[
            &self.template_id,
            &self.template_version,
            &self.request_hash,
            &self.model,
            &self.model_revision,
            &self.decoding,
            &self.schema_version,
        ])
    }
}

/// One cached answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheEntry {
    pub key: CacheKey,
    pub raw: String,
    /// `None` when the parser of `parser_version` rejected `raw`.
    pub parsed: Option<Value>,
    /// Why the parser rejected `raw`.
    pub invalid_reason: Option<String>,
    pub parser_version: String,
    pub usage: Usage,
    /// The model the server said answered.
    pub served_model: String,
    /// Unix seconds.
    pub created_at: u64,
    /// Set when the server refused the request as it is: `raw` is then the server's
    /// message and `parsed` is `None` (see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Rejected>,
}

/// What refused a request: the error status and the URL that answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    pub status: u16,
    pub url: String,
    /// The model's context length (tokens) when the request was refused, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
}

/// Whether a kept refusal still holds: it does unless the model's context is known now and
/// is longer than when the request was refused.
async fn refusal_stands(client: &Client, r: &Rejected) -> bool {
    let Some(then) = r.context_tokens else {
        return true;
    };
    match client.context_tokens_once().await {
        Some(now) => now <= then,
        None => true,
    }
}

/// Turns raw answers into values; its version is stored with every entry.
pub trait Parser: Send + Sync {
    fn version(&self) -> &str;
    /// The parsed value, or why the answer is not valid.
    fn parse(&self, raw: &str) -> Result<Value, String>;
}

/// Cache counters.
#[derive(Debug, Default)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub reparsed: AtomicU64,
    pub invalid: AtomicU64,
    /// Writes that found the entry already created by another writer.
    pub lost_races: AtomicU64,
    /// Refused requests, from the server or the cache.
    pub rejected: AtomicU64,
    /// Cached refusals asked again because the model's context grew since.
    pub stale_refusals: AtomicU64,
}

/// The cache: a prefix in an object store.
#[derive(Debug, Clone)]
pub struct ResponseCache {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    stats: Arc<CacheStats>,
}

impl ResponseCache {
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> ResponseCache {
        ResponseCache {
            store,
            prefix: prefix.trim_matches('/').to_string(),
            stats: Arc::new(CacheStats::default()),
        }
    }

    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    fn path(&self, digest: &str) -> Path {
        let fan = &digest[..2.min(digest.len())];
        if self.prefix.is_empty() {
            Path::from(format!("{fan}/{digest}.json"))
        } else {
            Path::from(format!("{}/{fan}/{digest}.json", self.prefix))
        }
    }

    fn err(path: &Path, e: impl std::fmt::Display) -> LlmError {
        LlmError::Cache {
            path: path.to_string(),
            message: e.to_string(),
        }
    }

    /// The entry of `key`, if any. An entry whose key differs (a digest collision or a
    /// foreign file) counts as absent.
    pub async fn get(&self, key: &CacheKey) -> Result<Option<CacheEntry>, LlmError> {
        let path = self.path(&key.digest());
        let started = std::time::Instant::now();
        let got = match self.store.get(&path).await {
            Ok(r) => r.bytes().await.map(Some),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        };
        let result = match &got {
            Ok(Some(_)) => "hit",
            Ok(None) => "miss",
            Err(_) => "error",
        };
        crate::telemetry::lookup(result, started.elapsed());
        let Some(bytes) = got.map_err(|e| Self::err(&path, e))? else {
            return Ok(None);
        };
        let entry: CacheEntry = serde_json::from_slice(&bytes)
            .map_err(|e| Self::err(&path, format!("not a cache entry: {e}")))?;
        Ok((entry.key == *key).then_some(entry))
    }

    /// [`ResponseCache::get`] for many keys, 32 lookups in flight, results in key order.
    pub async fn get_many(&self, keys: &[CacheKey]) -> Result<Vec<Option<CacheEntry>>, LlmError> {
        futures::stream::iter(keys.iter().map(|k| self.get(k)))
            .buffered(32)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    /// Creates the entry unless one exists; `false` when another writer was first.
    pub async fn put(&self, entry: &CacheEntry) -> Result<bool, LlmError> {
        self.write(entry, PutMode::Create).await
    }

    async fn write(&self, entry: &CacheEntry, mode: PutMode) -> Result<bool, LlmError> {
        let path = self.path(&entry.key.digest());
        let body = serde_json::to_vec(entry).expect("entries serialize");
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        match self
            .store
            .put_opts(&path, PutPayload::from(body), opts)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => {
                self.stats.lost_races.fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            Err(e) => Err(Self::err(&path, e)),
        }
    }
}

/// What a cached call gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Parsed {
        value: Value,
        raw: String,
        usage: Usage,
        /// Answered from the cache (no call).
        cached: bool,
        /// Parsed again from a cached raw answer of another parser version.
        reparsed: bool,
        /// The digest naming the cache entry that holds the answer (`<fan>/<digest>.json`
        /// under the cache root): a sample's lineage.
        entry: String,
    },
    /// The parser rejected the answer: quarantine `raw` with `reason`.
    Invalid {
        raw: String,
        reason: String,
        cached: bool,
        /// The cache entry's digest (empty when nothing was kept).
        entry: String,
    },
}

impl Outcome {
    /// The digest of the cache entry the outcome came from (empty when none).
    pub fn entry(&self) -> &str {
        match self {
            Outcome::Parsed { entry, .. } | Outcome::Invalid { entry, .. } => entry,
        }
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One chat call through the cache: a hit makes no call (re-parsing when the parser version
/// changed); a miss calls the server, parses, and stores the answer. A request the server
/// refuses as it is is stored as refused and comes back as the server's error, from the
/// server the first time and from the cache after that (see the module docs).
/// `schema_version` versions the output schema the request asks for (part of the key); the
/// parser's own version is not (see the module docs).
pub async fn cached_chat(
    client: &Client,
    cache: &ResponseCache,
    template: (&str, &str),
    (model_revision, schema_version): (&str, &str),
    parser: &dyn Parser,
    req: &ChatRequest,
) -> Result<Outcome, LlmError> {
    let body = client.request_body(req);
    let key = CacheKey::new(template, model_revision, schema_version, &body);
    let stats = &cache.stats;
    // Whether a kept refusal is asked again: what the server says now replaces it.
    let mut mode = PutMode::Create;
    if let Some(mut entry) = cache.get(&key).await? {
        if let Some(r) = entry.rejected.take() {
            if refusal_stands(client, &r).await {
                stats.hits.fetch_add(1, Ordering::Relaxed);
                stats.rejected.fetch_add(1, Ordering::Relaxed);
                return Err(LlmError::Http {
                    url: r.url,
                    status: r.status,
                    message: entry.raw,
                    retry_after: None,
                });
            }
            stats.stale_refusals.fetch_add(1, Ordering::Relaxed);
            mode = PutMode::Overwrite;
        } else {
            stats.hits.fetch_add(1, Ordering::Relaxed);
            return reuse(cache, entry, parser).await;
        }
    }
    stats.misses.fetch_add(1, Ordering::Relaxed);
    let resp = match client.chat(req).await {
        Ok(resp) => resp,
        Err(e) if e.is_rejection() => {
            // Refused as it is: asking again gives the same answer, so it is kept.
            stats.rejected.fetch_add(1, Ordering::Relaxed);
            if let LlmError::Http {
                url,
                status,
                message,
                ..
            } = &e
            {
                let context_tokens = client.context_tokens_once().await;
                let entry = CacheEntry {
                    key,
                    raw: message.clone(),
                    parsed: None,
                    invalid_reason: Some(format!("refused by the server ({status})")),
                    parser_version: parser.version().to_string(),
                    usage: Usage::default(),
                    served_model: String::new(),
                    created_at: now_secs(),
                    rejected: Some(Rejected {
                        status: *status,
                        url: url.clone(),
                        context_tokens,
                    }),
                };
                cache.write(&entry, mode.clone()).await?;
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let (parsed, invalid_reason) = split(parser.parse(&resp.content));
    let entry = CacheEntry {
        key,
        raw: resp.content,
        parsed,
        invalid_reason,
        parser_version: parser.version().to_string(),
        usage: resp.usage,
        served_model: resp.model,
        created_at: now_secs(),
        rejected: None,
    };
    cache.write(&entry, mode).await?;
    Ok(outcome(entry, false, false, stats))
}

/// A cached answer: as it is, or parsed again (and rewritten) when the parser version
/// changed.
async fn reuse(
    cache: &ResponseCache,
    mut entry: CacheEntry,
    parser: &dyn Parser,
) -> Result<Outcome, LlmError> {
    let stats = &cache.stats;
    if entry.parser_version != parser.version() {
        stats.reparsed.fetch_add(1, Ordering::Relaxed);
        let (parsed, reason) = split(parser.parse(&entry.raw));
        entry.parsed = parsed;
        entry.invalid_reason = reason;
        entry.parser_version = parser.version().to_string();
        cache.write(&entry, PutMode::Overwrite).await?;
        return Ok(outcome(entry, true, true, stats));
    }
    Ok(outcome(entry, true, false, stats))
}

fn split(r: Result<Value, String>) -> (Option<Value>, Option<String>) {
    match r {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    }
}

fn outcome(entry: CacheEntry, cached: bool, reparsed: bool, stats: &CacheStats) -> Outcome {
    let digest = entry.key.digest();
    match entry.parsed {
        Some(value) => Outcome::Parsed {
            value,
            raw: entry.raw,
            usage: entry.usage,
            cached,
            reparsed,
            entry: digest,
        },
        None => {
            stats.invalid.fetch_add(1, Ordering::Relaxed);
            Outcome::Invalid {
                raw: entry.raw,
                reason: entry.invalid_reason.unwrap_or_default(),
                cached,
                entry: digest,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_change_with_every_part() {
        let body = json!({"model": "m", "messages": [], "temperature": 0.0});
        let k = CacheKey::new(("t", "1"), "rev", "s1", &body);
        assert_eq!(k.decoding, r#"{"temperature":0.0}"#);
        assert_eq!(
            k.digest(),
            CacheKey::new(("t", "1"), "rev", "s1", &body).digest()
        );
        let other_body = json!({"model": "m", "messages": [], "temperature": 0.5});
        for other in [
            CacheKey::new(("t", "2"), "rev", "s1", &body),
            CacheKey::new(("u", "1"), "rev", "s1", &body),
            CacheKey::new(("t", "1"), "rev2", "s1", &body),
            CacheKey::new(("t", "1"), "rev", "s2", &body),
            CacheKey::new(("t", "1"), "rev", "s1", &other_body),
        ] {
            assert_ne!(k.digest(), other.digest(), "{other:?}");
        }
    }
}
