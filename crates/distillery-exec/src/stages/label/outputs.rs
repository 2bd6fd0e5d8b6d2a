//! Everything a shard task writes, in chunk order: the chunks' label records and samples
//! buffered into Parquet batches for the shard writers, the samples into the JSONL files and
//! the ledger, the counters, and the report's counts; at the end, staged for the merge task.

use std::collections::BTreeMap;

use distillery_core::summary::StageSummary;
use distillery_core::{LabelRecord, SftSample, TableKind};
use distillery_label::report::ReportBuilder;

use super::lanes::ChunkResult;
use super::merge::{REPORT_COUNTS, put};
use super::writers::{Rows, ShardWriter};
use super::{TRAIN_JSONL, VALIDATION_JSONL};
use crate::contract::StageOutput;
use crate::error::ExecError;
use crate::kit::jsonl::TextFile;
use crate::kit::sft_merge::LedgerWriter;
use crate::parts::{PART_BUFFER_BYTES, PartWriters, WrittenPart, part_name};
use crate::store::Location;

/// Message bytes of SFT samples buffered per shard before a Parquet batch is written, whatever
/// `run.batch_size` says: samples carry whole prompts (kilobytes each), so a row cap alone
/// would buffer hundreds of megabytes across the shards.
const SAMPLE_BUFFER_BYTES: usize = 8 << 20;

/// The part writers of the current question part (tag and shard): its questions' label
/// records and samples go to parts of the same tag and shard.
struct TagWriters {
    tag: String,
    shard: u32,
    out: Location,
    staging: String,
    /// Bytes each shard's parts may buffer (row groups in progress): [`PART_BUFFER_BYTES`]
    /// over the shards.
    budget: usize,
    /// One writer per shard written so far.
    writers: BTreeMap<u32, ShardWriter>,
    labels: BTreeMap<u32, Vec<LabelRecord>>,
    samples: BTreeMap<u32, Vec<SftSample>>,
    /// Message bytes buffered per shard in `samples`.
    sample_bytes: BTreeMap<u32, usize>,
}

impl TagWriters {
    /// Queues rows for a shard's writer, started on first use.
    async fn send(&mut self, shard: u32, rows: Rows) -> Result<(), ExecError> {
        let w = match self.writers.entry(shard) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                let parts = PartWriters::new(self.out.clone(), &self.staging, &self.tag)
                    .with_budget(self.budget);
                e.insert(ShardWriter::spawn(parts, shard))
            }
        };
        w.send(rows).await
    }
}

/// Everything the stage writes, consumed in order.
pub(super) struct Outputs {
    out: Location,
    staging: String,
    batch_size: usize,
    pub(super) summary: StageSummary,
    current: Option<TagWriters>,
    parts: Vec<WrittenPart>,
    /// Every sample written, for the merge task's duplicate removal.
    pub(super) ledger: LedgerWriter,
    train: TextFile,
    validation: TextFile,
    /// The report's counts over every label record so far.
    report: ReportBuilder,
}

impl Outputs {
    pub(super) fn new(out: Location, staging: &str, batch_size: usize) -> Outputs {
        Outputs {
            train: TextFile::new(&out, staging, TRAIN_JSONL),
            validation: TextFile::new(&out, staging, VALIDATION_JSONL),
            ledger: LedgerWriter::new(&out, staging),
            out,
            staging: staging.to_string(),
            batch_size: batch_size.max(1),
            summary: StageSummary::new("label"),
            current: None,
            parts: Vec::new(),
            report: ReportBuilder::default(),
        }
    }

    /// The tag and shard of the question part being labelled.
    pub(super) fn part(&self) -> Option<(&str, u32)> {
        self.current.as_ref().map(|c| (c.tag.as_str(), c.shard))
    }

    pub(super) async fn start_tag(&mut self, tag: &str, shard: u32) -> Result<(), ExecError> {
        self.finish_tag().await?;
        self.current = Some(TagWriters {
            tag: tag.to_string(),
            shard,
            out: self.out.clone(),
            staging: self.staging.clone(),
            budget: PART_BUFFER_BYTES,
            writers: BTreeMap::new(),
            labels: BTreeMap::new(),
            samples: BTreeMap::new(),
            sample_bytes: BTreeMap::new(),
        });
        Ok(())
    }

    /// Flushes the buffers of the current tag (in shard order) and closes its parts.
    pub(super) async fn finish_tag(&mut self) -> Result<(), ExecError> {
        let Some(mut c) = self.current.take() else {
            return Ok(());
        };
        for (shard, rows) in std::mem::take(&mut c.labels) {
            c.send(shard, Rows::Labels(rows)).await?;
        }
        for (shard, rows) in std::mem::take(&mut c.samples) {
            c.send(shard, Rows::Samples(rows)).await?;
        }
        for w in std::mem::take(&mut c.writers).into_values() {
            self.parts.extend(w.finish().await?);
        }
        Ok(())
    }

    /// Takes what a chunk produced, in chunk order.
    pub(super) async fn consume(&mut self, r: ChunkResult) -> Result<(), ExecError> {
        let s = &mut self.summary;
        s.records_in += r.questions;
        s.add("questions", r.questions);
        s.add("questions_missing_context", r.missing_context);
        let c = self
            .current
            .as_mut()
            .expect("a tag is open while questions are read");
        for l in r.labels {
            s.add(&format!("labels.{}", l.method), 1);
            let own = l
                .positives
                .iter()
                .filter(|p| !p.reason.starts_with("within:"));
            s.add(&format!("positives.{}", l.method), own.count() as u64);
            s.add(
                &format!("low_confidence.{}", l.method),
                u64::from(l.low_confidence),
            );
            s.add(&format!("sufficient.{}", l.method), u64::from(l.sufficient));
            s.records_out += 1;
            let shard = c.shard;
            let buf = c.labels.entry(shard).or_default();
            buf.push(l);
            if buf.len() >= self.batch_size {
                let rows = std::mem::take(buf);
                c.send(shard, Rows::Labels(rows)).await?;
            }
        }
        self.report.merge(r.report);
        for p in r.samples {
            if p.contaminated {
                s.add("decontaminated", 1);
                continue;
            }
            // Duplicates are removed, and the kept samples counted, by the merge task.
            let sample = p.sample;
            if sample.split == "validation" {
                self.validation.write(&p.line).await?;
            } else {
                self.train.write(&p.line).await?;
            }
            let shard = c.shard;
            self.ledger
                .add(&sample, p.hash, &part_name(TableKind::Sft, shard, &c.tag))
                .await?;
            let bytes = c.sample_bytes.entry(shard).or_default();
            *bytes += sample
                .messages
                .iter()
                .map(|m| m.content.len())
                .sum::<usize>();
            let full = *bytes >= SAMPLE_BUFFER_BYTES;
            let buf = c.samples.entry(shard).or_default();
            buf.push(sample);
            if buf.len() >= self.batch_size || full {
                c.sample_bytes.insert(shard, 0);
                let rows = std::mem::take(buf);
                c.send(shard, Rows::Samples(rows)).await?;
            }
        }
        Ok(())
    }

    /// Closes everything and stages, for the merge task, the JSONL files, the ledger of
    /// their samples and the report's counts.
    pub(super) async fn finish(mut self) -> Result<StageOutput, ExecError> {
        self.finish_tag().await?;
        let mut intermediate = vec![self.train.finish().await?, self.validation.finish().await?];
        intermediate.extend(self.ledger.finish().await?);
        let report = serde_json::to_vec(&self.report).expect("report counts serialize");
        let n = report.len() as u64;
        intermediate.push(put(&self.out, &self.staging, REPORT_COUNTS, report, n).await?);
        let mut summary = self.summary;
        summary.bytes_out = self.parts.iter().map(|p| p.bytes).sum::<u64>();
        self.parts.sort_by(|a, b| a.rel.cmp(&b.rel));
        Ok(StageOutput {
            summary,
            parts: self.parts,
            intermediate,
            ..Default::default()
        })
    }
}
