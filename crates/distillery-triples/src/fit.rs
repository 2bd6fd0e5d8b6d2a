//! Fitting passages into the teacher's context: a passage whose prompts would not fit is cut
//! into pieces that do, so every stage that extracts triples (the `triples` stage, CIRAG's
//! retrieved passages, RAS's kept documents) keeps every passage instead of having the
//! server refuse it.
//!
//! The context is `[llm] context_tokens`, else the server's `max_model_len`
//! ([`distillery_llm::Client::context_tokens`]); without either, passages go whole. A passage
//! fits when `overhead + tokens(passage) + max_tokens <= context`, where `overhead` is the
//! larger of the NER chat without its passage and the OpenIE chat without its passage and
//! entities plus `max_tokens` (the entities are the NER answer, at most `max_tokens` long),
//! and `tokens(passage)` counts the passage's content as one user message. Counts come from
//! the server's `/tokenize` (vLLM) while it answers, else 4 characters a token; a passage
//! whose UTF-8 bytes fit is not counted (no tokenizer makes more tokens than bytes).
//!
//! A passage that does not fit is cut with [`Passage::split`] at a length its count
//! suggests (10% spare), and every piece is counted and cut again until it fits. The cuts
//! are kept in the response cache (their key: the passage's requests, the model, its
//! revision, `max_tokens` and `context_tokens`), so a rerun cuts the same way without
//! counting, and a passage whose whole request is in the cache (answered) is taken whole
//! without asking anything: a rerun needs no `/tokenize` (and no `/models`, unless a kept
//! refusal asks whether the context grew). An estimate ([`Fitter::estimating`]) cuts as the
//! run would but keeps nothing: a cut made while the server did not count tokens must not
//! decide the run's.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::{ExtractError, Extraction, Extractor, Passage};
use distillery_llm::{CacheEntry, CacheKey, ChatMessage, LlmError, Usage};
use serde_json::{Value, json};
use tokio::sync::OnceCell;
use tracing::{info, warn};

/// The key parts of a kept split: the splitting rule and its version.
const SPLIT_TEMPLATE: (&str, &str) = ("passage-pieces", "1");
const SPLIT_SCHEMA: &str = "pieces-1";
/// Tokens allowed for the wrapping of a message by the chat template.
const SLACK: u64 = 16;
/// With fewer tokens than this left for a passage, passages go whole (the server decides).
const MIN_ROOM: u64 = 32;
/// A piece is cut again at most this many times.
const MAX_DEPTH: u32 = 8;

/// Fits the passages of one task into the context.
pub struct Fitter {
    extractor: Extractor,
    /// The context, once asked: `None` inside when nothing says it.
    context: OnceCell<Option<u64>>,
    /// Tokens of the prompts without the passage, and the answers (see the module docs).
    overhead: OnceCell<u64>,
    /// Whether `/tokenize` still answers.
    server_counts: AtomicBool,
    /// Prompts counted by the server's `/tokenize`.
    pub counted_tokenize: AtomicU64,
    /// Prompts counted at 4 characters a token.
    pub counted_chars: AtomicU64,
    /// Whether new cuts are kept in the cache (not by an estimate).
    keep: bool,
}

/// A chat's tokens at 4 characters a token.
fn chars_tokens(messages: &[ChatMessage]) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| m.role.chars().count() + m.content.chars().count() + 2)
        .sum();
    chars.div_ceil(4) as u64
}

/// A count error that may pass when asked again.
fn transient(e: &LlmError) -> bool {
    match e {
        LlmError::Transport { .. } => true,
        LlmError::Http { status, .. } => *status == 429 || *status >= 500,
        _ => false,
    }
}

impl Fitter {
    pub fn new(extractor: Extractor) -> Fitter {
        Fitter {
            extractor,
            context: OnceCell::new(),
            overhead: OnceCell::new(),
            server_counts: AtomicBool::new(true),
            counted_tokenize: AtomicU64::new(0),
            counted_chars: AtomicU64::new(0),
            keep: true,
        }
    }

    /// A fitter for an estimate: it reads kept cuts and cuts as [`Fitter::new`]'s does, but
    /// keeps no new cut (see the module docs).
    pub fn estimating(extractor: Extractor) -> Fitter {
        Fitter {
            keep: false,
            ..Fitter::new(extractor)
        }
    }

    /// The extractor the pieces go to.
    pub fn extractor(&self) -> &Extractor {
        &self.extractor
    }

    /// Extracts `p`, or each of its pieces when it does not fit the context (in order,
    /// concurrently: the client limits what is in flight). Each piece keeps its sentences'
    /// offsets in the document, so provenance stays the document's.
    pub async fn extract(&self, p: &Passage) -> Result<Vec<(Passage, Extraction)>, ExtractError> {
        let pieces = self.fit(p).await?;
        let xs =
            futures::future::try_join_all(pieces.iter().map(|q| self.extractor.extract(q))).await?;
        Ok(pieces.into_iter().zip(xs).collect())
    }

    /// What to extract for `p`: `p` itself (`piece: None`) or its pieces, in order.
    pub async fn fit(&self, p: &Passage) -> Result<Vec<Passage>, ExtractError> {
        let whole = || Ok(vec![p.clone()]);
        if self.context.get() == Some(&None) {
            return whole();
        }
        let cache = &self.extractor.cache;
        // Asked whole before (and not refused): whole again.
        if let Some(e) = cache.get(&self.extractor.ner_key(p)).await?
            && e.rejected.is_none()
        {
            return whole();
        }
        let key = self.split_key(p);
        if let Some(spans) = cache.get(&key).await?.and_then(|e| spans_of(&e, p)) {
            return Ok(p.pieces(&spans));
        }
        let Some(context) = self.context().await? else {
            return whole();
        };
        let spans = self.plan(p, context).await?;
        if spans.len() <= 1 {
            return whole();
        }
        if !self.keep {
            return Ok(p.pieces(&spans));
        }
        let raw = json!(spans.iter().map(|&(a, b)| [a, b]).collect::<Vec<_>>());
        cache
            .put(&CacheEntry {
                key,
                raw: raw.to_string(),
                parsed: Some(raw),
                invalid_reason: None,
                parser_version: SPLIT_SCHEMA.to_string(),
                usage: Usage::default(),
                served_model: String::new(),
                created_at: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                rejected: None,
            })
            .await?;
        Ok(p.pieces(&spans))
    }

    async fn context(&self) -> Result<Option<u64>, ExtractError> {
        let client = &self.extractor.client;
        let c = self
            .context
            .get_or_try_init(|| async {
                let c = client.context_tokens().await?;
                let from = if client.config().context_tokens.is_some() {
                    "llm.context_tokens"
                } else {
                    "the server's max_model_len"
                };
                match c {
                    Some(n) => info!(
                        context_tokens = n,
                        from, "passages are fitted to the context"
                    ),
                    None => info!(
                        "the server does not say its context length and llm.context_tokens is \
                         not set: passages are sent whole"
                    ),
                }
                Ok::<_, LlmError>(c)
            })
            .await?;
        Ok(*c)
    }

    /// The tokens of a chat: the server's count while it gives one, else 4 characters a
    /// token.
    async fn count(&self, messages: &[ChatMessage]) -> u64 {
        if self.server_counts.load(Ordering::Relaxed) {
            let client = &self.extractor.client;
            let cfg = client.config();
            let mut attempt = 0u32;
            let mut delays = client.retry_policy().delays();
            loop {
                attempt += 1;
                match client.count_tokens(messages).await {
                    Ok(n) => {
                        self.counted_tokenize.fetch_add(1, Ordering::Relaxed);
                        return n;
                    }
                    Err(e) if transient(&e) && attempt <= cfg.max_retries => {
                        let delay = delays.next_delay(None);
                        tokio::time::sleep(delay).await;
                    }
                    Err(e) => {
                        if self.server_counts.swap(false, Ordering::Relaxed) {
                            warn!(error = %e, "no token counts from the server's /tokenize: 4 characters a token from here on");
                        }
                        break;
                    }
                }
            }
        }
        self.counted_chars.fetch_add(1, Ordering::Relaxed);
        chars_tokens(messages)
    }

    async fn overhead(&self) -> u64 {
        let x = &self.extractor;
        *self
            .overhead
            .get_or_init(|| async {
                let ner = self.count(&x.prompts.ner("")).await;
                let openie = self.count(&x.prompts.openie("", &[])).await;
                ner.max(openie + u64::from(x.config.max_tokens))
            })
            .await
    }

    /// Where to cut `p` for a context of `context` tokens: one span when it fits.
    async fn plan(&self, p: &Passage, context: u64) -> Result<Vec<(u32, u32)>, ExtractError> {
        let whole = vec![(p.start, p.end())];
        let answer = u64::from(self.extractor.config.max_tokens);
        let overhead = self.overhead().await;
        let room = context.saturating_sub(overhead + answer + SLACK);
        if room < MIN_ROOM {
            warn!(
                context,
                overhead, "the prompts leave no room for a passage: passages are sent whole"
            );
            return Ok(whole);
        }
        let user = |q: &Passage| vec![ChatMessage::new("user", q.content())];
        let mut todo: Vec<(Passage, u32)> = vec![(p.clone(), 0)];
        let mut spans = Vec::new();
        while let Some((q, depth)) = todo.pop() {
            let content = q.content();
            if content.len() as u64 <= room {
                spans.push((q.start, q.end()));
                continue;
            }
            let tokens = self.count(&user(&q)).await;
            let n = q.text.chars().count() as u64;
            // Chars of content that should fit, 10% spare, less the title's.
            let fit = (room as f64 * 0.9 * content.chars().count() as f64 / tokens as f64) as u64;
            let title = q.title.chars().count() as u64 + 1;
            if tokens <= room || depth >= MAX_DEPTH || n <= 1 || fit < title + 16 {
                spans.push((q.start, q.end()));
                continue;
            }
            let max = (fit - title).min(n - 1) as u32;
            for piece in q.pieces(&q.split(max)).into_iter().rev() {
                todo.push((piece, depth + 1));
            }
        }
        Ok(spans)
    }

    /// The key of `p`'s kept split (see the module docs).
    fn split_key(&self, p: &Passage) -> CacheKey {
        let x = &self.extractor;
        let body = json!({
            "model": x.client.config().model,
            "max_tokens": x.config.max_tokens,
            "context_tokens": x.client.config().context_tokens,
            "ner": x.client.request_body(&x.ner_request(p)),
            "openie": x.client.request_body(&x.openie_request(p, &[])),
        });
        CacheKey::new(
            SPLIT_TEMPLATE,
            &x.config.model_revision,
            SPLIT_SCHEMA,
            &body,
        )
    }
}

/// The spans of a kept split, when they are spans of `p` in order.
fn spans_of(e: &CacheEntry, p: &Passage) -> Option<Vec<(u32, u32)>> {
    let spans: Vec<(u32, u32)> = e
        .parsed
        .as_ref()?
        .as_array()?
        .iter()
        .map(|s| {
            let s = s.as_array()?;
            let n = |i: usize| s.get(i).and_then(Value::as_u64).map(|v| v as u32);
            Some((n(0)?, n(1)?))
        })
        .collect::<Option<_>>()?;
    let ordered = spans.windows(2).all(|w| w[0].1 <= w[1].0)
        && spans
            .iter()
            .all(|&(a, b)| a < b && a >= p.start && b <= p.end());
    (ordered && !spans.is_empty()).then_some(spans)
}
