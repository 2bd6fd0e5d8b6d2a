//! The `hseq` stage: every documents/tables/triples/literals part of the selected inputs
//! becomes a segments part with the same shard and tag (`segments/part-SSSSS-TAG.parquet`), so
//! a source part and its segments are always found together. Documents come first, then
//! tables, then triples, then literals, each in part order (each KG part encoded by a fresh
//! `KgEncoder`): the segments part lists sources in a deterministic order that
//! `hseq verify` walks in lockstep. With `verify = true` (default) each source is decoded back
//! from its segments while they are made and the round trips are counted in the summary.

use std::collections::BTreeMap;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use distillery_core::schema::{from_batch, to_batch};
use distillery_core::spec::{Pipeline, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, Segment, Table, TableKind, Triple};
use distillery_hseq::{HseqOptions, KgEncoder, Verifier, level};
use futures::StreamExt;
use tracing::{info, warn};

use crate::contract::{Declared, Partitioning, RunCx, Stage, StageFuture, StageOutput};
use crate::error::ExecError;
use crate::parts::{PartWriters, WrittenPart, read_part_rows};
use crate::store::Location;

/// The `hseq` stage. Options: [`HseqOptions`] (in `distillery-hseq`, whose linearizers read
/// them).
pub struct Hseq;

impl Stage for Hseq {
    type Options = HseqOptions;

    fn kind(&self) -> &'static str {
        "hseq"
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Shards
    }

    fn outputs(&self, _o: &HseqOptions, _stage: &StageSpec) -> Declared {
        Declared {
            tables: vec![TableKind::Segments],
            files: Vec::new(),
        }
    }

    fn run<'a>(&'a self, o: &'a HseqOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run_stage(
            o,
            cx.pipeline,
            cx.stage,
            cx.out,
            cx.dir,
            cx.parts,
            cx.parallelism,
        ))
    }
}

/// Rows per segments batch written, at most.
const SEGMENT_BATCH: usize = 8192;
/// Content bytes per segments batch, at most (keeps batches far from Utf8's 2 GiB offsets and
/// memory bounded whatever the page sizes).
const SEGMENT_BATCH_BYTES: usize = 16 << 20;

/// Splits segments into runs of at most `SEGMENT_BATCH` rows and about `SEGMENT_BATCH_BYTES`.
fn chunk_by_size(segs: &[Segment]) -> impl Iterator<Item = &[Segment]> {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= segs.len() {
            return None;
        }
        let mut bytes = 0;
        let mut end = start;
        while end < segs.len() && end - start < SEGMENT_BATCH {
            bytes += segs[end].content.len() + 128;
            end += 1;
            if bytes >= SEGMENT_BATCH_BYTES {
                break;
            }
        }
        let chunk = &segs[start..end];
        start = end;
        Some(chunk)
    })
}

/// Runs one stage over the parts written so far.
pub async fn run_stage(
    opts: &HseqOptions,
    p: &Pipeline,
    stage: &StageSpec,
    out: &Location,
    staging: &str,
    parts: &[WrittenPart],
    parallelism: usize,
) -> Result<StageOutput, ExecError> {
    let started = Instant::now();

    // (shard, tag) → source parts, in table order documents, tables, triples, literals.
    let mut groups: BTreeMap<(u32, String), Vec<WrittenPart>> = BTreeMap::new();
    for part in parts {
        if !matches!(
            part.table,
            TableKind::Documents | TableKind::Tables | TableKind::Triples | TableKind::Literals
        ) {
            continue;
        }
        if let Some(id) = part.id().filter(|id| id.of(&stage.inputs)) {
            groups
                .entry((id.shard, id.tag))
                .or_default()
                .push(part.clone());
        }
    }
    for v in groups.values_mut() {
        v.sort_by_key(|p| p.table);
    }
    let results: Vec<Result<(Vec<WrittenPart>, StageSummary), ExecError>> =
        futures::stream::iter(groups)
            .map(|((shard, tag), sources)| {
                let out = out.clone();
                let staging = staging.to_string();
                let opts = opts.clone();
                async move { hseq_group(out, staging, shard, tag, sources, opts).await }
            })
            .buffer_unordered(parallelism.max(1))
            .collect()
            .await;
    let mut summary = StageSummary::new(&stage.name);
    let mut written = Vec::new();
    for r in results {
        let (w, s) = r?;
        written.extend(w);
        summary.merge(&s);
    }
    summary.stage = stage.name.clone();
    summary.seconds = started.elapsed().as_secs_f64();
    written.sort_by(|a, b| a.rel.cmp(&b.rel));
    let failed = summary
        .counters
        .get("roundtrip.failed")
        .copied()
        .unwrap_or(0);
    if failed > 0 {
        warn!(stage = %stage.name, failed, "sources that do not round-trip through hseq");
    }
    info!(
        stage = %stage.name,
        pipeline = %p.name,
        sources = summary.records_in,
        segments = summary.records_out,
        "hseq done"
    );
    Ok(StageOutput {
        summary,
        parts: written,
        ..Default::default()
    })
}

/// State carried across the batches of one group, moved in and out of blocking tasks.
struct GroupState {
    opts: HseqOptions,
    kg: KgEncoder,
    verifier: Verifier,
    /// The current subject run: its triples and segments, verified when the run ends.
    run_triples: Vec<Triple>,
    run_segments: Vec<Segment>,
    levels: BTreeMap<String, u64>,
    failures: Vec<String>,
}

impl GroupState {
    fn verify_run(&mut self) {
        if self.opts.verify
            && !self.run_triples.is_empty()
            && let Err(m) = self
                .verifier
                .verify_kg(&self.run_triples, &self.run_segments)
            && self.failures.len() < 5
        {
            self.failures.push(m.to_string());
        }
        self.run_triples.clear();
        self.run_segments.clear();
    }

    /// Encodes one batch of a source table; returns the segments.
    fn encode(&mut self, table: TableKind, batch: &RecordBatch) -> Result<Vec<Segment>, ExecError> {
        let mut segs = Vec::new();
        match table {
            TableKind::Documents => {
                for d in from_batch::<Document>(table, batch)? {
                    let s = distillery_hseq::encode_document(&d, &self.opts);
                    if self.opts.verify
                        && let Err(m) = self.verifier.verify_document(&d, &s)
                        && self.failures.len() < 5
                    {
                        self.failures.push(m.to_string());
                    }
                    segs.extend(s);
                }
            }
            TableKind::Tables => {
                for t in from_batch::<Table>(table, batch)? {
                    let s = distillery_hseq::encode_table(&t, &self.opts);
                    if self.opts.verify
                        && let Err(m) = self.verifier.verify_table(&t, &s)
                        && self.failures.len() < 5
                    {
                        self.failures.push(m.to_string());
                    }
                    segs.extend(s);
                }
            }
            TableKind::Triples | TableKind::Literals => {
                for t in from_batch::<Triple>(table, batch)? {
                    let s = self.kg.push(&t);
                    if s.iter().any(|x| x.level == level::SUBGRAPH) {
                        self.verify_run();
                    }
                    self.run_segments.extend(s.iter().cloned());
                    self.run_triples.push(t);
                    segs.extend(s);
                }
            }
            _ => {}
        }
        for s in &segs {
            *self.levels.entry(s.level.clone()).or_default() += 1;
        }
        Ok(segs)
    }
}

async fn hseq_group(
    out: Location,
    staging: String,
    shard: u32,
    tag: String,
    sources: Vec<WrittenPart>,
    opts: HseqOptions,
) -> Result<(Vec<WrittenPart>, StageSummary), ExecError> {
    let mut writer = PartWriters::new(out.clone(), &staging, &tag);
    let mut state = Some(GroupState {
        opts,
        kg: KgEncoder::new(),
        verifier: Verifier::new(),
        run_triples: Vec::new(),
        run_segments: Vec::new(),
        levels: BTreeMap::new(),
        failures: Vec::new(),
    });
    let mut summary = StageSummary::new("hseq");
    for src in &sources {
        // Each KG part is encoded by a fresh encoder, as the label stage numbers a part's
        // edges (`distillery_label::kg_ids`): a subject's entity edges and its literals are
        // two runs, each under its own root.
        if let Some(st) = state
            .as_mut()
            .filter(|_| TableKind::KG_EDGES.contains(&src.table))
        {
            st.verify_run();
            st.kg = KgEncoder::new();
        }
        // Documents are whole pages (a wiki page can be megabytes, and its segments several
        // times that): read them a few at a time so the stage's memory is bounded by a batch.
        let rows = match src.table {
            TableKind::Documents => 64,
            TableKind::Tables => 256,
            _ => 4096,
        };
        let mut stream = Box::pin(read_part_rows(&out, &src.path(), rows).await?);
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            summary.records_in += batch.num_rows() as u64;
            let table = src.table;
            let mut st = state.take().expect("state is returned after each batch");
            let (st, batches) = tokio::task::spawn_blocking(move || {
                let segs = st.encode(table, &batch)?;
                let batches = chunk_by_size(&segs)
                    .map(|c| to_batch(TableKind::Segments, c))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok::<_, ExecError>((st, batches))
            })
            .await
            .map_err(|e| ExecError::Task(e.to_string()))??;
            state = Some(st);
            for b in &batches {
                summary.records_out += b.num_rows() as u64;
                writer.write(TableKind::Segments, shard, b).await?;
            }
        }
        summary.bytes_in += src.bytes;
    }
    let mut st = state.take().expect("state present");
    st.verify_run();
    let parts = writer.finish().await?;
    summary.bytes_out = parts.iter().map(|p| p.bytes).sum();
    for (lvl, n) in &st.levels {
        summary.add(&format!("segments.{lvl}"), *n);
    }
    if st.opts.verify {
        let c = st.verifier.counts();
        summary.add("roundtrip.documents_ok", c.documents_ok);
        summary.add("roundtrip.tables_ok", c.tables_ok);
        summary.add("roundtrip.kg_edges_ok", c.edges_ok);
        summary.add("roundtrip.subgraphs_ok", c.subgraphs_ok);
        summary.add("roundtrip.failed", c.failed());
    }
    for f in &st.failures {
        warn!(tag = %tag, shard, failure = %f, "hseq round trip failed");
    }
    Ok((parts, summary))
}
