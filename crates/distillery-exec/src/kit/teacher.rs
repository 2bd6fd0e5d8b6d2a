//! The teacher: the client, response cache and budget of a pipeline's `[llm]` section, shared
//! by every stage that asks the teacher LLM.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use distillery_core::spec::{LlmSpec, PaceSpec, Pipeline, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_llm::{Budget, Client, LlmConfig, Price, ResponseCache};
use distillery_triples::prompt::{Constraint, Prompts};
use distillery_triples::{Extractor, ExtractorConfig, TriplesOptions};

use crate::contract::{RunCx, SPENT_COST, SPENT_TOKENS, StageOutput};
use crate::error::ExecError;
use crate::parts::WrittenPart;
use crate::store::open_location;
use tracing::info;

/// How a sample names the teacher it came from ([`distillery_core::SftSample::teacher`]):
/// `model@model_revision`, or the model alone when no revision is set.
pub fn teacher_name(llm: &LlmSpec) -> String {
    if llm.model_revision.is_empty() {
        llm.model.clone()
    } else {
        format!("{}@{}", llm.model, llm.model_revision)
    }
}

/// The client, cache and budget of a pipeline's `[llm]` section.
pub struct Teacher {
    pub client: Arc<Client>,
    pub cache: Arc<ResponseCache>,
    pub cache_display: String,
    pub budget: Budget,
}

impl Teacher {
    /// Connects nothing yet: builds the client (API key from `api_key_env`) and opens the cache.
    pub fn new(llm: &LlmSpec, output: &str) -> Result<Teacher, ExecError> {
        let mut cfg = LlmConfig::new(&llm.base_url, &llm.model);
        cfg.max_concurrency = llm.max_concurrency.max(1);
        cfg.min_concurrency = llm.min_concurrency.clamp(1, cfg.max_concurrency);
        cfg.adaptive = llm.pace == PaceSpec::Adaptive;
        cfg.timeout = Duration::from_secs(llm.timeout_secs.max(1));
        cfg.max_retries = llm.max_retries;
        cfg.context_tokens = llm.context_tokens;
        if let Some(var) = &llm.api_key_env {
            cfg = cfg.api_key_from_env(var)?;
        }
        let client = Client::new(cfg)?;
        let cache_at = llm.cache_location(output);
        let loc = open_location(&cache_at, true)?;
        Ok(Teacher {
            client: Arc::new(client),
            cache: Arc::new(ResponseCache::new(loc.store.clone(), loc.root.as_ref())),
            cache_display: cache_at,
            budget: Budget {
                max_tokens: llm.budget.max_tokens,
                max_cost: llm.budget.max_cost,
                price: Price {
                    input_per_million: llm.price.input_per_million,
                    output_per_million: llm.price.output_per_million,
                },
            },
        })
    }

    /// The same teacher under another served model name (a base model on the same server):
    /// one connection pool, concurrency limit, cache, budget and set of counters.
    pub fn with_model(&self, model: &str) -> Teacher {
        Teacher {
            client: Arc::new(self.client.with_model(model)),
            cache: self.cache.clone(),
            cache_display: self.cache_display.clone(),
            budget: self.budget,
        }
    }

    /// The teacher of one task of a stage, under its share of the job-wide `[llm.budget]`:
    /// what the teacher tasks below it spent is taken off the budget and the rest is split
    /// evenly among the stage's tasks (rounded up, so no share is 0 while tokens remain: the
    /// tasks together may pass the budget by fewer tokens than there are tasks). A task that
    /// reaches its share stops the job like a budget reached; a rerun resumes from the
    /// response cache.
    pub fn for_task<'a>(cx: &RunCx<'a>) -> Result<(&'a LlmSpec, Teacher), ExecError> {
        let (llm, mut teacher) = Self::for_stage(cx.pipeline, cx.stage)?;
        let (_, tasks) = crate::task::partitioning(cx.pipeline, cx.stage);
        let spent = |k: &str| -> u64 {
            cx.upstream
                .iter()
                .map(|u| u.output.summary.counters.get(k).copied().unwrap_or(0))
                .sum()
        };
        let tokens: u64 = SPENT_TOKENS.iter().map(|k| spent(k)).sum();
        let cost = spent(SPENT_COST) as f64 / 1e6;
        teacher.budget.max_tokens = llm
            .budget
            .max_tokens
            .map(|m| m.saturating_sub(tokens).div_ceil(u64::from(tasks)));
        teacher.budget.max_cost = llm
            .budget
            .max_cost
            .map(|m| (m - cost).max(0.0) / f64::from(tasks));
        Ok((llm, teacher))
    }

    /// The `[llm]` section of a stage's pipeline and its teacher.
    pub fn for_stage<'a>(
        p: &'a Pipeline,
        stage: &StageSpec,
    ) -> Result<(&'a LlmSpec, Teacher), ExecError> {
        let llm = p.llm.as_ref().ok_or_else(|| {
            ExecError::Task(format!(
                "stage `{}` needs the pipeline's [llm] section",
                stage.name
            ))
        })?;
        Ok((llm, Teacher::new(llm, &p.output)?))
    }

    /// The extractor of a triples stage: temperature 0, the stage's constraint and answer
    /// length, the section's seed and model revision.
    pub fn extractor(&self, llm: &LlmSpec, opts: &TriplesOptions, prompts: Prompts) -> Extractor {
        Extractor::new(
            self.client.clone(),
            self.cache.clone(),
            prompts,
            ExtractorConfig {
                constraint: Constraint::from_name(&opts.response_format)
                    .unwrap_or(Constraint::JsonSchema),
                max_tokens: opts.max_tokens,
                temperature: 0.0,
                seed: llm.seed,
                model_revision: llm.model_revision.clone(),
            },
        )
    }

    /// One teacher call through the cache: the budget checked first (a stop is
    /// [`ExecError::Budget`]); a request the server rejects as it is becomes
    /// [`distillery_llm::Outcome::Invalid`] (quarantined by the caller), not an error, and
    /// the cache keeps the refusal, so a rerun gets it without a call.
    pub async fn ask(
        &self,
        template: (&str, &str),
        schema: (&str, &str),
        parser: &dyn distillery_llm::Parser,
        req: &distillery_llm::ChatRequest,
    ) -> Result<distillery_llm::Outcome, ExecError> {
        if let Some(why) = self.budget.exhausted(self.client.stats()) {
            return Err(ExecError::Budget(format!(
                "{why}; nothing was published; the answers received so far are in the cache at \
                 {}, so a rerun resumes from there",
                self.cache_display
            )));
        }
        match distillery_llm::cached_chat(&self.client, &self.cache, template, schema, parser, req)
            .await
        {
            Err(e) if e.is_rejection() => Ok(distillery_llm::Outcome::Invalid {
                raw: String::new(),
                reason: format!("request rejected: {e}"),
                cached: false,
                entry: String::new(),
            }),
            other => other.map_err(ExecError::from),
        }
    }

    /// Ends a teacher stage: the LLM counters, output bytes and time into the summary, parts
    /// in name order, one log line.
    pub fn finish(
        &self,
        mut summary: StageSummary,
        mut parts: Vec<WrittenPart>,
        files: Vec<distillery_core::summary::ManifestFile>,
        started: Instant,
    ) -> StageOutput {
        self.count(&mut summary);
        summary.bytes_out =
            parts.iter().map(|w| w.bytes).sum::<u64>() + files.iter().map(|f| f.bytes).sum::<u64>();
        summary.seconds = started.elapsed().as_secs_f64();
        let counter = |k: &str| summary.counters.get(k).copied().unwrap_or(0);
        info!(
            stage = %summary.stage,
            records_in = summary.records_in,
            records_out = summary.records_out,
            quarantined = summary.quarantined,
            calls = counter("llm.calls"),
            cache_hits = counter("llm.cache_hits"),
            "teacher stage done"
        );
        parts.sort_by(|a, b| a.rel.cmp(&b.rel));
        StageOutput {
            summary,
            parts,
            files,
            ..Default::default()
        }
    }

    /// [`Teacher::finish`] for a task whose files are staged for its stage's merge task
    /// (`intermediate`), not published.
    pub fn finish_shard(
        &self,
        summary: StageSummary,
        parts: Vec<WrittenPart>,
        intermediate: Vec<distillery_core::summary::ManifestFile>,
        started: Instant,
    ) -> StageOutput {
        let mut o = self.finish(summary, parts, Vec::new(), started);
        o.intermediate = intermediate;
        o
    }

    /// The LLM counters of this run into a stage summary.
    pub fn count(&self, s: &mut StageSummary) {
        let [_, retries, failures, tokens_in, tokens_out] = self.client.stats().snapshot();
        let cs = self.cache.stats();
        s.add("llm.calls", cs.misses.load(Ordering::Relaxed));
        s.add("llm.cache_hits", cs.hits.load(Ordering::Relaxed));
        s.add("llm.reparsed", cs.reparsed.load(Ordering::Relaxed));
        let refused = cs.rejected.load(Ordering::Relaxed);
        if refused > 0 {
            s.add("llm.refused", refused);
        }
        let stale = cs.stale_refusals.load(Ordering::Relaxed);
        if stale > 0 {
            s.add("llm.stale_refusals", stale);
        }
        s.add("llm.retries", retries);
        s.add("llm.failures", failures);
        s.add("llm.tokens_in", tokens_in);
        s.add("llm.tokens_out", tokens_out);
        let cost = self.budget.price.cost(tokens_in, tokens_out);
        s.add("llm.cost_micro", (cost * 1e6).round() as u64);
    }
}
