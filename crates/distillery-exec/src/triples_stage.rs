//! The `triples` stage: triples extracted from the documents of the selected inputs by the
//! teacher LLM of the pipeline's `[llm]` section (HippoRAG NER then OpenIE per passage, see
//! `distillery-triples`).
//!
//! For each staged `documents` part of a selected input, in part order (tag, then shard),
//! documents are read 64 at a time and cut into passages (`unit`); passages shorter than
//! `min_chars` are skipped and counted; at most `max_passages` are extracted. Passages go to
//! the server `llm.max_concurrency` at a time (two calls each, NER then OpenIE), through the
//! response cache at `llm.cache`; results are consumed in passage order, so the outputs do
//! not depend on timing and a rerun writes the same bytes.
//!
//! - `triples/part-SSSSS-INPUT@STAGE-NNNN.parquet` (the documents part's shard, and its tag
//!   with the stage name, [`stage_tag`], so nothing of the input is overwritten): one row
//!   per kept triple, `subject`/`object` the normalised entity keys (the model's text in
//!   `subject_name`/`object_name`), `dataset = "openie"`, provenance `document_id`,
//!   `sentence` (index into the document's sentences), `start`/`end` (char offsets of that
//!   sentence in the document). The `hseq` stage, listed after this one, encodes them as KG
//!   segments of the same input.
//! - `quarantine/part-SSSSS-INPUT@STAGE-NNNN.parquet`: one row per passage whose answer did not parse
//!   (`reason = "llm_invalid_answer"`, detail = template and parser message, excerpt = the
//!   raw answer); the cache keeps such answers as raw text only, never as results.
//! - `openie/openie_results.json` (export `hipporag`): HippoRAG's OpenIE result, streamed.
//! - `openie/ras.jsonl` (export `ras`): `{"id", "document_id", "passage", "target"}` with
//!   the RAS text-to-triple target `(S> s| P> p| O> o), ...`.
//!
//! Budgets: before each passage the run's spending (this run's calls; cache hits are free)
//! is checked against `llm.budget`; at a limit the stage stops with
//! [`ExecError::Budget`], nothing is published, and a rerun resumes where it stopped because
//! every answer received is in the cache.
//!
//! Counters: `passages`, `passages.skipped_short`, `passages.invalid`, `entities`,
//! `triples`, `triples.unsupported` (no sentence found), `triples.no_key` (an entity that
//! normalises to nothing), `llm.calls` (requests answered by the server), `llm.cache_hits`,
//! `llm.reparsed`, `llm.retries`, `llm.failures`, `llm.repaired` (truncated answers
//! repaired), `llm.tokens_in`, `llm.tokens_out`, `llm.quarantined`, `llm.cost_micro`
//! (cost by `[llm.price]`, in millionths).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use distillery_core::id::stable_id;
use distillery_core::schema::{from_batch, to_batch};
use distillery_core::spec::{LlmSpec, Pipeline, StageOptions, StageSpec, TriplesOptions};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, QuarantineRecord, TableKind, Triple};
use distillery_llm::{Budget, Client, LlmConfig, Price, ResponseCache};
use distillery_triples::openie::{ExportWriter, entity_key};
use distillery_triples::prompt::{Constraint, Prompts};
use distillery_triples::{Extraction, Extractor, ExtractorConfig, Passage, Unit, passages, ras};
use futures::StreamExt;
use serde_json::json;
use tracing::info;

use crate::error::ExecError;
use crate::label_stage::TextFile;
use crate::parts::{PartWriters, WrittenPart, parse_part_name, read_part_rows};
use crate::plan::{stage_tag, tag_input};
use crate::run::StageOutput;
use crate::store::{Location, open_location};

pub const OPENIE_EXPORT: &str = "openie/openie_results.json";
pub const RAS_EXPORT: &str = "openie/ras.jsonl";

/// Documents read per batch.
const DOC_BATCH: usize = 64;

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
        cfg.timeout = Duration::from_secs(llm.timeout_secs.max(1));
        cfg.max_retries = llm.max_retries;
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
    /// [`distillery_llm::Outcome::Invalid`] (quarantined by the caller), not an error.
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

    /// The LLM counters of this run into a stage summary.
    pub fn count(&self, s: &mut StageSummary) {
        let [_, retries, failures, tokens_in, tokens_out] = self.client.stats().snapshot();
        let cs = self.cache.stats();
        s.add("llm.calls", cs.misses.load(Ordering::Relaxed));
        s.add("llm.cache_hits", cs.hits.load(Ordering::Relaxed));
        s.add("llm.reparsed", cs.reparsed.load(Ordering::Relaxed));
        s.add("llm.retries", retries);
        s.add("llm.failures", failures);
        s.add("llm.tokens_in", tokens_in);
        s.add("llm.tokens_out", tokens_out);
        let cost = self.budget.price.cost(tokens_in, tokens_out);
        s.add("llm.cost_micro", (cost * 1e6).round() as u64);
    }
}

/// Runs the stage over the parts staged so far.
pub async fn run_stage(
    p: &Pipeline,
    stage: &StageSpec,
    out: &Location,
    staging: &str,
    parts: &[WrittenPart],
) -> Result<StageOutput, ExecError> {
    let StageOptions::Triples(opts) = &stage.options else {
        return Err(ExecError::Task(format!(
            "stage `{}` is not a triples stage",
            stage.name
        )));
    };
    let started = Instant::now();
    let (llm, teacher) = Teacher::for_stage(p, stage)?;
    let extractor = teacher.extractor(llm, opts, Prompts::load(opts.templates.as_deref())?);
    info!(
        stage = %stage.name,
        server = %llm.base_url,
        model = %llm.model,
        cache = %teacher.cache_display,
        "triple extraction started"
    );

    let mut docs: Vec<(String, u32, &WrittenPart)> = parts
        .iter()
        .filter(|w| w.table == TableKind::Documents)
        .filter_map(|w| {
            let (_, shard, tag) = parse_part_name(&w.rel)?;
            let selected = tag_input(&tag).is_some_and(|n| stage.inputs.iter().any(|i| i == n));
            selected.then_some((tag, shard, w))
        })
        .collect();
    docs.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));

    let mut st = State {
        opts: opts.clone(),
        unit: Unit::from_name(&opts.unit).unwrap_or(Unit::Paragraph),
        extractor,
        budget: teacher.budget,
        concurrency: llm.max_concurrency.max(1),
        summary: StageSummary::new(&stage.name),
        hippo: opts.exports.iter().any(|e| e == "hipporag").then(|| {
            (
                TextFile::new(out, staging, OPENIE_EXPORT),
                ExportWriter::new(),
            )
        }),
        ras: opts
            .exports
            .iter()
            .any(|e| e == "ras")
            .then(|| TextFile::new(out, staging, RAS_EXPORT)),
        cache_display: teacher.cache_display.clone(),
    };
    for c in [
        "passages",
        "passages.skipped_short",
        "passages.invalid",
        "entities",
        "triples",
        "triples.unsupported",
        "triples.no_key",
        "llm.repaired",
        "llm.quarantined",
    ] {
        st.summary.add(c, 0);
    }

    let mut written: Vec<WrittenPart> = Vec::new();
    let mut writer: Option<(String, PartWriters)> = None;
    let mut left = opts.max_passages.unwrap_or(u64::MAX);
    'parts: for (tag, shard, part) in docs {
        if writer.as_ref().map(|(t, _)| t.as_str()) != Some(tag.as_str()) {
            if let Some((_, w)) = writer.take() {
                written.extend(w.finish().await?);
            }
            let derived = stage_tag(&tag, &stage.name);
            writer = Some((
                tag.clone(),
                PartWriters::new(out.clone(), staging, &derived),
            ));
        }
        let w = &mut writer.as_mut().expect("set above").1;
        st.summary.bytes_in += part.bytes;
        let mut stream = Box::pin(read_part_rows(out, &part.path(), DOC_BATCH).await?);
        while let Some(batch) = stream.next().await {
            if left == 0 {
                break 'parts;
            }
            let documents: Vec<Document> = from_batch(TableKind::Documents, &batch?)?;
            let mut batch_passages = Vec::new();
            for d in &documents {
                for ps in passages(d, st.unit) {
                    if (ps.text.chars().count() as u32) < st.opts.min_chars {
                        st.summary.add("passages.skipped_short", 1);
                    } else if left > 0 {
                        left -= 1;
                        batch_passages.push(ps);
                    }
                }
            }
            st.extract_batch(batch_passages, w, shard).await?;
        }
    }
    if let Some((_, w)) = writer.take() {
        written.extend(w.finish().await?);
    }

    let mut files = Vec::new();
    if let Some((mut f, export)) = st.hippo.take() {
        f.write(&export.finish()).await?;
        let mut m = f.finish().await?;
        m.rows = 1;
        files.push(m);
    }
    if let Some(f) = st.ras.take() {
        files.push(f.finish().await?);
    }
    Ok(teacher.finish(st.summary, written, files, started))
}

struct State {
    opts: TriplesOptions,
    unit: Unit,
    extractor: Extractor,
    budget: Budget,
    concurrency: usize,
    summary: StageSummary,
    hippo: Option<(TextFile, ExportWriter)>,
    ras: Option<TextFile>,
    cache_display: String,
}

impl State {
    /// Extracts a batch of passages (in order) and writes what they gave.
    async fn extract_batch(
        &mut self,
        batch: Vec<Passage>,
        w: &mut PartWriters,
        shard: u32,
    ) -> Result<(), ExecError> {
        if batch.is_empty() {
            return Ok(());
        }
        let (extractor, budget) = (self.extractor.clone(), self.budget);
        let cache = self.cache_display.clone();
        let mut results = futures::stream::iter(batch)
            .map(|ps| {
                let extractor = extractor.clone();
                let cache = cache.clone();
                async move {
                    if let Some(why) = budget.exhausted(extractor.client.stats()) {
                        return Err(ExecError::Budget(format!(
                            "{why}; nothing was published; the answers received so far are in \
                             the cache at {cache}, so a rerun resumes from there"
                        )));
                    }
                    let x = extractor.extract(&ps).await?;
                    Ok::<_, ExecError>((ps, x))
                }
            })
            .buffered(self.concurrency);
        let mut triples: Vec<Triple> = Vec::new();
        let mut bad: Vec<QuarantineRecord> = Vec::new();
        while let Some(r) = results.next().await {
            let (ps, x) = r?;
            self.summary.records_in += 1;
            self.summary.add("passages", 1);
            match x {
                Extraction::Done {
                    entities,
                    triples: ts,
                    repaired,
                    ..
                } => {
                    self.summary.add("entities", entities.len() as u64);
                    self.summary.add("llm.repaired", u64::from(repaired));
                    let rows = self.records(&ps, &ts);
                    self.summary.add("triples", rows.len() as u64);
                    self.summary.records_out += rows.len() as u64;
                    self.export(&ps, &entities, &ts).await?;
                    triples.extend(rows);
                }
                Extraction::Invalid {
                    template,
                    raw,
                    reason,
                } => {
                    self.summary.add("passages.invalid", 1);
                    self.summary.add("llm.quarantined", 1);
                    self.summary.quarantined += 1;
                    bad.push(QuarantineRecord {
                        id: stable_id(&[&ps.document_id, &ps.index.to_string(), template]),
                        dataset: "openie".into(),
                        source: ps.document_id.clone(),
                        byte_offset: None,
                        line: None,
                        record: Some(u64::from(ps.index)),
                        reason: "llm_invalid_answer".into(),
                        detail: format!("{template}: {reason}"),
                        excerpt: excerpt(&raw),
                    });
                }
            }
        }
        if !triples.is_empty() {
            w.write(
                TableKind::Triples,
                shard,
                &to_batch(TableKind::Triples, &triples)?,
            )
            .await?;
        }
        if !bad.is_empty() {
            w.write(
                TableKind::Quarantine,
                shard,
                &to_batch(TableKind::Quarantine, &bad)?,
            )
            .await?;
        }
        Ok(())
    }

    /// The `triples` rows of a passage's triples, with provenance.
    fn records(&mut self, ps: &Passage, ts: &[[String; 3]]) -> Vec<Triple> {
        let mut rows = Vec::with_capacity(ts.len());
        for t in ts {
            let (s, o) = (entity_key(&t[0]), entity_key(&t[2]));
            if s.is_empty() || o.is_empty() {
                self.summary.add("triples.no_key", 1);
                continue;
            }
            let sup = distillery_triples::align::support(t, &ps.sentences);
            if sup.is_none() {
                self.summary.add("triples.unsupported", 1);
            }
            rows.push(Triple {
                id: stable_id(&[
                    "openie",
                    &ps.document_id,
                    &ps.index.to_string(),
                    &t[0],
                    &t[1],
                    &t[2],
                ]),
                dataset: "openie".into(),
                source: ps.source.clone(),
                subject: s,
                predicate: t[1].clone(),
                object: o,
                object_kind: "entity".into(),
                subject_name: Some(t[0].clone()),
                object_name: Some(t[2].clone()),
                document_id: Some(ps.document_id.clone()),
                sentence: sup.and_then(|x| (x.sentence != u32::MAX).then_some(x.sentence)),
                start: sup.map(|x| x.start),
                end: sup.map(|x| x.end),
                ..Default::default()
            });
        }
        rows
    }

    async fn export(
        &mut self,
        ps: &Passage,
        entities: &[String],
        ts: &[[String; 3]],
    ) -> Result<(), ExecError> {
        if self.hippo.is_none() && self.ras.is_none() {
            return Ok(());
        }
        let (id, content) = (ps.chunk_id(), ps.content());
        if let Some((f, export)) = &mut self.hippo {
            let piece = export.doc(&id, &content, entities, ts);
            f.write(&piece).await?;
        }
        if let Some(f) = &mut self.ras {
            let mut line = json!({
                "id": id,
                "document_id": ps.document_id,
                "passage": content,
                "target": ras::render(ts),
            })
            .to_string();
            line.push('\n');
            f.write(&line).await?;
        }
        Ok(())
    }
}

/// Up to 512 bytes of a raw answer, cut on a char boundary.
fn excerpt(raw: &str) -> String {
    let mut end = raw.len().min(512);
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    raw[..end].to_string()
}
