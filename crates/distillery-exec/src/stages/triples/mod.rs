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
//! The context: a passage whose prompts plus `max_tokens` would not fit the model's context
//! (`llm.context_tokens`, else the server's `max_model_len`; tokens counted by the server's
//! `/tokenize`, else 4 characters a token) is cut into pieces that fit, at sentence starts
//! (inside a sentence only when one sentence alone does not fit), and each piece is extracted
//! as a passage of its own (its own cache keys, its own export line); its rows keep the
//! document's provenance. The cuts are kept in the response cache, so a rerun cuts the same
//! way without counting (see `distillery_triples::fit`). A request the server still refuses
//! as it is (400, 413, 422) quarantines its passage or piece (`llm_rejected`), and the cache
//! keeps the refusal with the context it was refused under, so a rerun quarantines it again
//! without a chat call (asking the context once), unless the context has grown since.
//!
//! - `triples/part-SSSSS-INPUT@STAGE-NNNN.parquet` (the documents part's shard, and its tag
//!   with the stage name, [`stage_tag`], so nothing of the input is overwritten): one row
//!   per kept triple, `subject`/`object` the normalised entity keys (the model's text in
//!   `subject_name`/`object_name`), `dataset = "openie"`, provenance `document_id`,
//!   `sentence` (index into the document's sentences), `start`/`end` (char offsets of that
//!   sentence in the document; for a piece cut inside a sentence, the whole sentence). Row
//!   ids are made of the document, the passage index, the piece index of a piece, and the
//!   triple. The `hseq` stage, listed after this one, encodes them as KG segments of the
//!   same input.
//! - `quarantine/part-SSSSS-INPUT@STAGE-NNNN.parquet`: one row per passage (or piece) whose
//!   answer did not parse (`reason = "llm_invalid_answer"`, detail = template and parser
//!   message, excerpt = the raw answer) or whose request the server refused
//!   (`reason = "llm_rejected"`, detail = template and the server's error, excerpt = its
//!   message); the cache keeps such answers as raw text only, never as results.
//! - `openie/openie_results.json` (export `hipporag`): HippoRAG's OpenIE result, streamed
//!   (a piece is a doc of its own: `passage` its title and text, `idx` their MD5).
//! - `openie/ras.jsonl` (export `ras`): `{"id", "document_id", "passage", "target"}` with
//!   the RAS text-to-triple target `(S> s| P> p| O> o), ...`.
//!
//! Budgets: before each passage (and each piece) the run's spending (this run's calls; cache hits are free)
//! is checked against `llm.budget`; at a limit the stage stops with
//! [`ExecError::Budget`], nothing is published, and a rerun resumes where it stopped because
//! every answer received is in the cache.
//!
//! Counters: `passages`, `passages.skipped_short`, `passages.split` (passages cut into
//! pieces), `pieces` (the pieces they were cut into), `passages.invalid` (passages and
//! pieces quarantined), `context.counted_tokenize` and `context.counted_chars` (prompts whose
//! tokens the server's `/tokenize` counted, resp. counted at 4 characters a token, to fit
//! passages), `entities`, `triples`, `triples.unsupported` (no sentence found),
//! `triples.no_key` (an entity that normalises to nothing), `llm.calls` (requests answered
//! by the server), `llm.cache_hits`, `llm.reparsed`, `llm.retries`, `llm.failures`,
//! `llm.repaired` (truncated answers repaired), `llm.tokens_in`, `llm.tokens_out`,
//! `llm.quarantined`, `llm.rejected` (quarantined because the server refused the request,
//! from the server or the cache), `llm.cost_micro` (cost by `[llm.price]`, in millionths).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use distillery_core::id::stable_id;
use distillery_core::schema::{from_batch, to_batch};
use distillery_core::spec::{StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, QuarantineRecord, TableKind, Triple};
use distillery_llm::Budget;
use distillery_triples::fit::Fitter;
use distillery_triples::openie::{ExportWriter, doc_json, entity_key};
use distillery_triples::prompt::Prompts;
use distillery_triples::{
    Extraction, Extractor, Passage, TRIPLE_EXPORTS, TriplesOptions, Unit, passages, ras,
};
use futures::StreamExt;
use futures::future::LocalBoxFuture;
use serde_json::json;
use tracing::info;

use crate::contract::{
    Declared, EstimateCx, MergeCx, Partitioning, RunCx, Stage, StageFuture, StageOutput, stage_tag,
};
use crate::error::ExecError;
use crate::kit::fragments::{Fragments, concat, fragments};
use crate::kit::jsonl::TextFile;
use crate::kit::teacher::Teacher;
use crate::parts::{PartWriters, WrittenPart, read_part_rows};

mod estimate;

/// The `triples` stage. Options: [`TriplesOptions`] (in `distillery-triples`, since every
/// stage that extracts triples builds its extractor from them).
pub struct Triples;

impl Stage for Triples {
    type Options = TriplesOptions;

    fn kind(&self) -> &'static str {
        "triples"
    }

    fn uses_llm(&self) -> bool {
        true
    }

    fn check(&self, o: &mut TriplesOptions, cx: &mut StageCheck<'_, '_>) {
        if !["paragraph", "document"].contains(&o.unit.as_str()) {
            let message = format!("unknown unit `{}`, expected paragraph or document", o.unit);
            cx.error("unit", message);
        }
        if !["json_schema", "json_object", "none"].contains(&o.response_format.as_str()) {
            let message = format!(
                "unknown response_format `{}`, expected json_schema, json_object or none",
                o.response_format
            );
            cx.error("response_format", message);
        }
        if o.max_tokens == 0 {
            cx.error("max_tokens", "`max_tokens` must be at least 1");
        }
        for e in &o.exports {
            if !TRIPLE_EXPORTS.contains(&e.as_str()) {
                let message = format!(
                    "unknown export `{e}`, expected one of {}",
                    TRIPLE_EXPORTS.join(", ")
                );
                cx.error("exports", message);
            }
        }
    }

    fn outputs(&self, o: &TriplesOptions, _stage: &StageSpec) -> Declared {
        Declared {
            tables: vec![TableKind::Triples],
            files: o
                .exports
                .iter()
                .map(|e| match e.as_str() {
                    "ras" => RAS_EXPORT.to_string(),
                    _ => OPENIE_EXPORT.to_string(),
                })
                .collect(),
        }
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Shards
    }

    fn merges(&self) -> bool {
        true
    }

    fn max_tasks(&self, o: &TriplesOptions) -> Option<u32> {
        o.max_passages.is_some().then_some(1)
    }

    fn run<'a>(&'a self, o: &'a TriplesOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run_stage(o, cx))
    }

    fn merge<'a>(&'a self, o: &'a TriplesOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(merge_exports(o, cx))
    }

    fn estimate<'a>(
        &'a self,
        o: &'a TriplesOptions,
        cx: EstimateCx<'a>,
    ) -> Option<LocalBoxFuture<'a, Result<crate::contract::StageEstimate, ExecError>>> {
        Some(Box::pin(estimate::estimate(o, cx)))
    }
}

pub const OPENIE_EXPORT: &str = "openie/openie_results.json";
pub const RAS_EXPORT: &str = "openie/ras.jsonl";

/// Documents read per batch.
const DOC_BATCH: usize = 64;

/// Runs one task of the stage: the documents parts of its shards.
pub async fn run_stage(opts: &TriplesOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (stage, out, staging, parts) = (cx.stage, cx.out, cx.dir, cx.parts);
    let started = Instant::now();
    let (llm, teacher) = Teacher::for_task(&cx)?;
    let extractor = teacher.extractor(llm, opts, Prompts::load(opts.templates.as_deref())?);
    let fitter = Arc::new(Fitter::new(extractor.clone()));
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
            let id = w.id().filter(|id| id.of(&stage.inputs))?;
            Some((id.tag, id.shard, w))
        })
        .collect();
    docs.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));

    let mut st = State {
        teacher: crate::kit::teacher::teacher_name(llm),
        opts: opts.clone(),
        unit: Unit::from_name(&opts.unit).unwrap_or(Unit::Paragraph),
        extractor,
        fitter: fitter.clone(),
        budget: teacher.budget,
        concurrency: llm.max_concurrency.max(1),
        summary: StageSummary::new(&stage.name),
        hippo: opts
            .exports
            .iter()
            .any(|e| e == "hipporag")
            .then(|| Fragments::new(out, staging, OPENIE_EXPORT)),
        ras: opts
            .exports
            .iter()
            .any(|e| e == "ras")
            .then(|| Fragments::new(out, staging, RAS_EXPORT)),
        part: (String::new(), 0),
        cache_display: teacher.cache_display.clone(),
    };
    for c in [
        "passages",
        "passages.skipped_short",
        "passages.split",
        "pieces",
        "passages.invalid",
        "entities",
        "triples",
        "triples.unsupported",
        "triples.no_key",
        "llm.repaired",
        "llm.quarantined",
        "llm.rejected",
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
        st.part = (tag.clone(), shard);
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

    st.summary.add(
        "context.counted_tokenize",
        fitter.counted_tokenize.load(Ordering::Relaxed),
    );
    st.summary.add(
        "context.counted_chars",
        fitter.counted_chars.load(Ordering::Relaxed),
    );
    let mut files = Vec::new();
    for f in [st.hippo.take(), st.ras.take()].into_iter().flatten() {
        files.extend(f.finish().await?);
    }
    Ok(teacher.finish_shard(st.summary, written, files, started))
}

/// The merge task: the exports' fragments joined in part order, the bytes one task writes.
async fn merge_exports(opts: &TriplesOptions, cx: MergeCx<'_>) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let mut files = Vec::new();
    if opts.exports.iter().any(|e| e == "hipporag") {
        use tokio::io::AsyncBufReadExt;
        let mut file = TextFile::new(cx.out, cx.dir, OPENIE_EXPORT);
        let mut export = ExportWriter::new();
        for (_, _, rel) in fragments(cx.shards, OPENIE_EXPORT) {
            let bad = |e: String| ExecError::Task(format!("{}: {e}", cx.out.show(&rel)));
            let mut lines = cx.out.reader(&rel).await?.lines();
            while let Some(doc) = lines.next_line().await.map_err(|e| bad(e.to_string()))? {
                let v: serde_json::Value =
                    serde_json::from_str(&doc).map_err(|e| bad(e.to_string()))?;
                let entities: Vec<String> =
                    serde_json::from_value(v["extracted_entities"].clone()).unwrap_or_default();
                file.write(&export.push(&doc, &entities)).await?;
            }
        }
        file.write(&export.finish()).await?;
        let mut m = file.finish().await?;
        m.rows = 1;
        files.push(m);
    }
    if opts.exports.iter().any(|e| e == "ras") {
        files.push(concat(cx.out, cx.dir, cx.shards, RAS_EXPORT).await?);
    }
    let mut summary = StageSummary::new(&cx.stage.name);
    summary.bytes_out = files.iter().map(|f| f.bytes).sum();
    summary.seconds = started.elapsed().as_secs_f64();
    Ok(StageOutput {
        summary,
        files,
        ..Default::default()
    })
}

struct State {
    opts: TriplesOptions,
    unit: Unit,
    extractor: Extractor,
    fitter: Arc<Fitter>,
    budget: Budget,
    concurrency: usize,
    summary: StageSummary,
    /// Fragments of the exports (a doc, a line per passage), joined by the merge task.
    hippo: Option<Fragments>,
    ras: Option<Fragments>,
    /// The documents part being read: its tag and shard name the fragments.
    part: (String, u32),
    cache_display: String,
    /// [`crate::kit::teacher::teacher_name`], on every row extracted.
    teacher: String,
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
        let fitter = self.fitter.clone();
        let cache = self.cache_display.clone();
        let mut results = futures::stream::iter(batch)
            .map(|ps| {
                let extractor = extractor.clone();
                let fitter = fitter.clone();
                let cache = cache.clone();
                async move {
                    let spent = || {
                        budget.exhausted(extractor.client.stats()).map(|why| {
                            ExecError::Budget(format!(
                                "{why}; nothing was published; the answers received so far are \
                                 in the cache at {cache}, so a rerun resumes from there"
                            ))
                        })
                    };
                    if let Some(e) = spent() {
                        return Err(e);
                    }
                    // The passage, or its pieces when it does not fit the context; the
                    // pieces are extracted together (the client limits what is in flight),
                    // each after its own budget check.
                    let pieces = fitter.fit(&ps).await?;
                    let xs = futures::future::try_join_all(pieces.iter().map(|q| async {
                        match spent() {
                            Some(e) => Err(e),
                            None => Ok(extractor.extract(q).await?),
                        }
                    }))
                    .await?;
                    Ok::<_, ExecError>((pieces, xs))
                }
            })
            .buffered(self.concurrency);
        let mut triples: Vec<Triple> = Vec::new();
        let mut bad: Vec<QuarantineRecord> = Vec::new();
        while let Some(r) = results.next().await {
            let (pieces, xs) = r?;
            self.summary.records_in += 1;
            self.summary.add("passages", 1);
            if pieces.iter().any(|q| q.piece.is_some()) {
                self.summary.add("passages.split", 1);
                self.summary.add("pieces", pieces.len() as u64);
            }
            for (ps, x) in pieces.iter().zip(xs) {
                self.take(ps, x, &mut triples, &mut bad).await?;
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

    /// What the extraction of one passage or piece gave: its rows and exports, or its
    /// quarantine row.
    async fn take(
        &mut self,
        ps: &Passage,
        x: Extraction,
        triples: &mut Vec<Triple>,
        bad: &mut Vec<QuarantineRecord>,
    ) -> Result<(), ExecError> {
        match x {
            Extraction::Done {
                entities,
                triples: ts,
                repaired,
                entry,
                ..
            } => {
                self.summary.add("entities", entities.len() as u64);
                self.summary.add("llm.repaired", u64::from(repaired));
                let mut rows = self.records(ps, &ts);
                for r in &mut rows {
                    r.teacher = Some(self.teacher.clone());
                    r.cache_entry = Some(entry.clone());
                }
                self.summary.add("triples", rows.len() as u64);
                self.summary.records_out += rows.len() as u64;
                self.export(ps, &entities, &ts).await?;
                triples.extend(rows);
            }
            Extraction::Invalid {
                template,
                raw,
                reason,
                rejected,
            } => {
                self.summary.add("passages.invalid", 1);
                self.summary.add("llm.quarantined", 1);
                if rejected {
                    self.summary.add("llm.rejected", 1);
                }
                self.summary.quarantined += 1;
                let index = ps.index.to_string();
                let piece = ps.piece.map(|k| format!("piece {k}"));
                let mut id = vec![ps.document_id.as_str(), &index];
                id.extend(piece.as_deref());
                id.push(template);
                bad.push(QuarantineRecord {
                    id: stable_id(&id),
                    dataset: "openie".into(),
                    source: ps.document_id.clone(),
                    byte_offset: None,
                    line: None,
                    record: Some(u64::from(ps.index)),
                    reason: if rejected {
                        "llm_rejected"
                    } else {
                        "llm_invalid_answer"
                    }
                    .into(),
                    detail: format!("{template}: {reason}"),
                    excerpt: excerpt(&raw),
                });
            }
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
            // A piece's rows are told apart from its siblings' by the piece index.
            let (index, piece) = (ps.index.to_string(), ps.piece.map(|k| format!("piece {k}")));
            let mut id = vec!["openie", &ps.document_id, &index];
            id.extend(piece.as_deref());
            id.extend([t[0].as_str(), &t[1], &t[2]]);
            rows.push(Triple {
                id: stable_id(&id),
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
        let (tag, shard) = (&self.part.0, self.part.1);
        if let Some(f) = &mut self.hippo {
            let mut line = doc_json(&id, &content, entities, ts);
            line.push('\n');
            f.write(tag, shard, &line).await?;
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
            f.write(tag, shard, &line).await?;
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
