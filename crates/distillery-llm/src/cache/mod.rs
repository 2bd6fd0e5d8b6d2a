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
//!
//! # Packs
//!
//! One object per entry costs one read per lookup. [`ResponseCache::pack`] gathers loose
//! entries into packs, `PREFIX/packs/<ms>-<pid>-<random>-<n>.pack`, each many entries with
//! an index and checksums (format in `pack.rs`). A cache reads its packs into memory at its
//! first lookup (every entry decoded, by digest), so a warm lookup of a packed entry opens
//! no object: it hashes the key and finds the entry in memory.
//!
//! - **Writes stay loose.** Every answer is written at once as its own object,
//!   create-if-not-exists, as before packs: an entry is durable the moment its call
//!   returns, so a task that crashes loses nothing, and many writers never overwrite each
//!   other. Packing is a later step over what is already durable (`distillery cache pack`,
//!   which calls [`ResponseCache::pack`]), not a buffer of unwritten entries:
//!   buffering to pack at flush points would lose every answer since the last flush in a
//!   crash, and pay for them again.
//! - **Many packers.** A pack's name is unique to its writer (milliseconds, process id and
//!   64 random bits) and it is created only if absent, so packers never overwrite each
//!   other; two packers of the same loose entries write the same entries twice, which
//!   costs space, not answers (a digest held twice resolves to the entry written last,
//!   then to the pack whose name sorts last). A loose object is removed only after the
//!   pack holding it is written, and only when it has not changed since it was read
//!   (`keep_loose` keeps them all). Object stores have no conditional delete, so an
//!   overwrite landing between that check and the delete is lost; what stays is the packed
//!   copy it replaced, a refusal or an older parse, which the next lookup asks or parses
//!   again. A first answer is never lost this way: only overwrites change a loose object.
//! - **Readers see every committed entry.** A key in no pack held in memory is looked up
//!   as its loose object; when that is absent too, the pack list is read again (at most
//!   one listing in flight, shared by concurrent misses) before the lookup answers `None`.
//!   A pack is written before the loose objects it holds are removed, so an entry is
//!   always in a loose object, in a pack the reader holds, or in a pack the listing finds.
//!   A miss therefore costs a `LIST` of `PREFIX/packs/` besides the loose `GET`; a miss is
//!   followed by a model call, which costs far more.
//! - **Overwrites.** Kept refusals asked again and re-parsed entries are overwritten as
//!   loose objects (with a later `created_at`). A packed entry is taken from memory unless
//!   it is a refusal, or its parser version is not the caller's ([`cached_chat`]): then a
//!   loose object of the key, when there is one, is newer and wins. Packing keeps the
//!   newest of each digest.
//! - **Old layout.** A cache with no `packs/` is read as before, entry by entry; packed
//!   and loose entries mix freely.
//! - **Damage.** A pack that is truncated or damaged (a checksum that does not match, an
//!   entry that does not decode or holds another key) is never read as a partial set or
//!   taken for a miss, which would ask the model again: every lookup through the cache
//!   fails with [`LlmError::Cache`] naming the pack object, until the pack is removed or
//!   replaced (its entries are then found loose, if kept, or asked again).
//! - **Memory.** The packs are held decoded, about the size of their JSON or a little
//!   more, for the life of the cache handle (a teacher task opens one).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

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
    /// Lookups answered from a pack in memory (no object read).
    pub packed_hits: AtomicU64,
    /// Packs read into memory.
    pub packs_loaded: AtomicU64,
}

/// Where a found entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A pack held in memory: no object was read for it.
    Packed,
    /// Its own object, `PREFIX/<fan>/<digest>.json`.
    Loose,
}

/// What [`ResponseCache::pack`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PackReport {
    /// Loose entries found.
    pub loose: usize,
    /// Entries written into new packs.
    pub packed: usize,
    /// Loose entries already held, unchanged, by a pack (left out of the new packs).
    pub already_packed: usize,
    /// The packs written (object paths).
    pub packs: Vec<String>,
    /// Loose objects removed after their pack was written.
    pub removed: usize,
    /// Loose objects kept because they changed after they were read.
    pub changed: usize,
}

/// The packs of a cache held in memory: every packed entry by digest, and which packs were
/// read. See the module docs.
#[derive(Debug, Default)]
struct Packs {
    entries: RwLock<HashMap<String, Arc<CacheEntry>>>,
    /// The packs read so far; held while the pack list is read again.
    loaded: tokio::sync::Mutex<HashSet<String>>,
    /// Refreshes begun and the last one finished (numbered from 1; 0: never).
    started: AtomicU64,
    done: AtomicU64,
}

/// Entries per pack [`ResponseCache::pack`] writes, at most.
pub const PACK_ENTRIES: usize = 65_536;
/// Bytes of entries per pack [`ResponseCache::pack`] writes, about (an entry is never split).
pub const PACK_BYTES: usize = 64 << 20;

/// The cache: a prefix in an object store.
#[derive(Debug, Clone)]
pub struct ResponseCache {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    stats: Arc<CacheStats>,
    packs: Arc<Packs>,
}

impl ResponseCache {
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> ResponseCache {
        ResponseCache {
            store,
            prefix: prefix.trim_matches('/').to_string(),
            stats: Arc::new(CacheStats::default()),
            packs: Arc::new(Packs::default()),
        }
    }

    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    fn under(&self, rest: &str) -> Path {
        if self.prefix.is_empty() {
            Path::from(rest)
        } else {
            Path::from(format!("{}/{rest}", self.prefix))
        }
    }

    fn path(&self, digest: &str) -> Path {
        let fan = &digest[..2.min(digest.len())];
        self.under(&format!("{fan}/{digest}.json"))
    }

    /// Where the packs are: `PREFIX/packs/`.
    fn packs_dir(&self) -> Path {
        self.under(PACKS)
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
        Ok(self
            .lookup(key)
            .await?
            .map(|(e, _)| Arc::unwrap_or_clone(e)))
    }

    /// [`ResponseCache::get`] without copying the entry, and where it was found. Packs are
    /// read into memory at the first lookup; a packed entry is answered from memory, unless
    /// it is a refusal, which a loose entry written since may replace (see the module docs).
    /// A key in no pack is looked up as its loose object; when there is none, the pack list
    /// is read again (another writer may have packed it since) before the answer is `None`.
    pub async fn lookup(
        &self,
        key: &CacheKey,
    ) -> Result<Option<(Arc<CacheEntry>, Source)>, LlmError> {
        let started = std::time::Instant::now();
        let r = self.find(key).await;
        let result = match &r {
            Ok(Some(_)) => crate::telemetry::Lookup::Hit,
            Ok(None) => crate::telemetry::Lookup::Miss,
            Err(_) => crate::telemetry::Lookup::Error,
        };
        crate::telemetry::lookup(result, started.elapsed());
        r
    }

    async fn find(&self, key: &CacheKey) -> Result<Option<(Arc<CacheEntry>, Source)>, LlmError> {
        if self.packs.done.load(Ordering::Acquire) == 0 {
            self.refresh_packs(0).await?;
        }
        let digest = key.digest();
        if let Some(e) = self.packed(&digest, key) {
            if e.rejected.is_none() {
                self.stats.packed_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Some((e, Source::Packed)));
            }
            // A refusal may have been asked again and replaced by a loose entry since.
            return Ok(Some(match self.get_loose(&digest, key).await? {
                Some(l) => (l, Source::Loose),
                None => (e, Source::Packed),
            }));
        }
        if let Some(l) = self.get_loose(&digest, key).await? {
            return Ok(Some((l, Source::Loose)));
        }
        // Packed (and its loose object removed) by another writer since the packs were read?
        // Only a listing begun after the loose object was found absent is sure to show the
        // pack (written before the loose object was removed): `seen` is read after the get.
        let seen = self.packs.started.load(Ordering::Acquire);
        self.refresh_packs(seen).await?;
        Ok(self.packed(&digest, key).map(|e| (e, Source::Packed)))
    }

    fn packed(&self, digest: &str, key: &CacheKey) -> Option<Arc<CacheEntry>> {
        let map = self.packs.entries.read().unwrap_or_else(|e| e.into_inner());
        map.get(digest).filter(|e| e.key == *key).cloned()
    }

    /// The loose entry of `key` (its own object), if any.
    pub async fn get_loose(
        &self,
        digest: &str,
        key: &CacheKey,
    ) -> Result<Option<Arc<CacheEntry>>, LlmError> {
        let path = self.path(digest);
        let bytes = match self.store.get(&path).await {
            Ok(r) => r.bytes().await.map_err(|e| Self::err(&path, e))?,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(Self::err(&path, e)),
        };
        let entry: CacheEntry = serde_json::from_slice(&bytes)
            .map_err(|e| Self::err(&path, format!("not a cache entry: {e}")))?;
        Ok((entry.key == *key).then(|| Arc::new(entry)))
    }

    /// Reads the packs not read yet, unless a refresh that began after the caller saw
    /// `Packs::started` at `seen` has finished since (its list is as new as the caller
    /// needs). A pack that cannot be read or decoded fails the refresh with an error naming
    /// it, and every later lookup that reaches it fails the same way.
    async fn refresh_packs(&self, seen: u64) -> Result<(), LlmError> {
        let mut loaded = self.packs.loaded.lock().await;
        if self.packs.done.load(Ordering::Acquire) > seen {
            return Ok(());
        }
        let n = self.packs.started.fetch_add(1, Ordering::AcqRel) + 1;
        let dir = self.packs_dir();
        let mut list = self.store.list(Some(&dir));
        let mut new = Vec::new();
        while let Some(m) = list.next().await {
            let m = m.map_err(|e| Self::err(&dir, e))?;
            let name = m.location.to_string();
            if name.ends_with(PACK_EXT) && !loaded.contains(&name) {
                new.push(m.location);
            }
        }
        // Names order the packs, so every reader resolves a digest held twice the same way.
        new.sort();
        let loads = futures::stream::iter(new.into_iter().map(|p| self.read_pack(p)))
            .buffered(8)
            .collect::<Vec<_>>()
            .await;
        for r in loads {
            let (path, entries) = r?;
            self.hold(entries);
            loaded.insert(path.to_string());
            self.stats.packs_loaded.fetch_add(1, Ordering::Relaxed);
        }
        self.packs.done.store(n, Ordering::Release);
        Ok(())
    }

    /// The entries of the pack at `path`, decoded.
    async fn read_pack(&self, path: Path) -> Result<(Path, Vec<CacheEntry>), LlmError> {
        let bytes = self
            .store
            .get(&path)
            .await
            .map_err(|e| Self::err(&path, e))?
            .bytes()
            .await
            .map_err(|e| Self::err(&path, e))?;
        let shown = path.to_string();
        let entries = tokio::task::spawn_blocking(move || decode_pack(&bytes))
            .await
            .map_err(|e| Self::err(&path, e))?
            .map_err(|e| Self::err(&path, e))?;
        tracing::debug!(pack = %shown, entries = entries.len(), "response cache pack read");
        Ok((path, entries))
    }

    /// Puts packed entries in memory: of two entries of one digest, the later written stays.
    fn hold(&self, entries: Vec<CacheEntry>) {
        let mut map = self
            .packs
            .entries
            .write()
            .unwrap_or_else(|e| e.into_inner());
        for e in entries {
            let digest = e.key.digest();
            match map.get(&digest) {
                Some(old) if old.created_at > e.created_at => {}
                _ => {
                    map.insert(digest, Arc::new(e));
                }
            }
        }
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

    /// Writes the loose object of `entry` (every write is loose: see the module docs). An
    /// overwrite also replaces a packed copy held in memory.
    async fn write(&self, entry: &CacheEntry, mode: PutMode) -> Result<bool, LlmError> {
        let digest = entry.key.digest();
        let path = self.path(&digest);
        let body = serde_json::to_vec(entry).expect("entries serialize");
        let overwrite = matches!(mode, PutMode::Overwrite);
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        match self
            .store
            .put_opts(&path, PutPayload::from(body), opts)
            .await
        {
            Ok(_) => {
                if overwrite {
                    let mut map = self
                        .packs
                        .entries
                        .write()
                        .unwrap_or_else(|e| e.into_inner());
                    if map.contains_key(&digest) {
                        map.insert(digest, Arc::new(entry.clone()));
                    }
                }
                Ok(true)
            }
            Err(object_store::Error::AlreadyExists { .. }) => {
                self.stats.lost_races.fetch_add(1, Ordering::Relaxed);
                Ok(false)
            }
            Err(e) => Err(Self::err(&path, e)),
        }
    }
}

/// The folder of the packs under the cache's prefix.
const PACKS: &str = "packs";
const PACK_EXT: &str = ".pack";

/// The entries of a pack's bytes, or why it is not a good pack.
fn decode_pack(bytes: &[u8]) -> Result<Vec<CacheEntry>, String> {
    let d = crate::pack::decode(bytes)?;
    d.entries
        .into_iter()
        .map(|(digest, r)| {
            let e: CacheEntry = serde_json::from_slice(&bytes[r])
                .map_err(|e| format!("entry {digest} is not a cache entry: {e}"))?;
            if e.key.digest() != digest {
                return Err(format!("entry {digest} holds the key of another digest"));
            }
            Ok(e)
        })
        .collect()
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
        /// The digest naming the cache entry that holds the answer (its loose object
        /// `<fan>/<digest>.json` under the cache root, or its place in a pack): a sample's
        /// lineage.
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

/// Now, or `then + 1` when that is later: an overwrite is always newer than what it
/// replaces, so a packed copy of the old entry never wins over it (see the module docs).
fn later_than(then: u64) -> u64 {
    now_secs().max(then + 1)
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
    // When a kept refusal is asked again: its `created_at`, which the new entry must pass.
    let mut replaces = None;
    if let Some((found, source)) = cache.lookup(&key).await? {
        let mut found = found;
        if source == Source::Packed && found.parser_version != parser.version() {
            // Parsed again since it was packed? The loose entry then holds the new parse.
            if let Some(l) = cache.get_loose(&found.key.digest(), &key).await? {
                found = l;
            }
        }
        if found.rejected.is_none() && found.parser_version == parser.version() {
            // The common hit: the answer is copied out of the entry, not the whole entry.
            stats.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(outcome(&found, true, false, stats));
        }
        let mut entry = Arc::unwrap_or_clone(found);
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
            replaces = Some(entry.created_at);
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
                    created_at: replaces.map_or_else(now_secs, later_than),
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
        created_at: replaces.map_or_else(now_secs, later_than),
        rejected: None,
    };
    cache.write(&entry, mode).await?;
    Ok(outcome(&entry, false, false, stats))
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
        // Newer than a packed copy of the old parse (see the module docs).
        entry.created_at = later_than(entry.created_at);
        cache.write(&entry, PutMode::Overwrite).await?;
        return Ok(outcome(&entry, true, true, stats));
    }
    Ok(outcome(&entry, true, false, stats))
}

fn split(r: Result<Value, String>) -> (Option<Value>, Option<String>) {
    match r {
        Ok(v) => (Some(v), None),
        Err(e) => (None, Some(e)),
    }
}

fn outcome(entry: &CacheEntry, cached: bool, reparsed: bool, stats: &CacheStats) -> Outcome {
    let digest = entry.key.digest();
    match &entry.parsed {
        Some(value) => Outcome::Parsed {
            value: value.clone(),
            raw: entry.raw.clone(),
            usage: entry.usage,
            cached,
            reparsed,
            entry: digest,
        },
        None => {
            stats.invalid.fetch_add(1, Ordering::Relaxed);
            Outcome::Invalid {
                raw: entry.raw.clone(),
                reason: entry.invalid_reason.clone().unwrap_or_default(),
                cached,
                entry: digest,
            }
        }
    }
}

mod packing;

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
