//! SFT output shared by the teacher stages: samples split by question id hash, exact duplicates
//! dropped, written to `<dir>/train.jsonl` / `<dir>/validation.jsonl` (the label stage's line
//! form, [`crate::kit::jsonl::jsonl_line`]) and buffered per shard for the `sft` table, plus
//! `<dir>/dataset_info.json` (LLaMA-Factory) at the end. Memory: the samples of one batch and
//! 16 bytes per distinct sample kept.

use std::collections::{BTreeMap, HashSet};

use distillery_core::SftSample;
use distillery_core::TableKind;
use distillery_core::id::shard_of;
use distillery_core::schema::sft_batch;
use distillery_core::summary::{ManifestFile, StageSummary};

use crate::error::ExecError;
use crate::kit::jsonl::{JsonlLines, TextFile, content_hash, dataset_info, sample_split};
use crate::parts::PartWriters;
use crate::store::Location;

pub(crate) struct SftOut {
    dir: String,
    out: Location,
    staging: String,
    train: TextFile,
    validation: TextFile,
    seen: HashSet<u128>,
    lines: JsonlLines,
    validation_share: f64,
    shards: u32,
    buffered: BTreeMap<u32, Vec<SftSample>>,
}

impl SftOut {
    pub(crate) fn new(
        out: &Location,
        staging: &str,
        dir: &str,
        validation_share: f64,
        shards: u32,
    ) -> SftOut {
        SftOut {
            train: TextFile::new(out, staging, &format!("{dir}/train.jsonl")),
            validation: TextFile::new(out, staging, &format!("{dir}/validation.jsonl")),
            dir: dir.to_string(),
            out: out.clone(),
            staging: staging.to_string(),
            seen: HashSet::new(),
            lines: JsonlLines::default(),
            validation_share,
            shards: shards.max(1),
            buffered: BTreeMap::new(),
        }
    }

    /// Splits, deduplicates and writes a sample (counted in `samples.<split>` or
    /// `duplicates_removed`).
    pub(crate) async fn add(
        &mut self,
        mut s: SftSample,
        summary: &mut StageSummary,
    ) -> Result<(), ExecError> {
        s.split = sample_split(&s, self.validation_share).to_string();
        if !self.seen.insert(content_hash(&s)) {
            summary.add("duplicates_removed", 1);
            return Ok(());
        }
        summary.add(&format!("samples.{}", s.split), 1);
        summary.records_out += 1;
        let line = self.lines.line(&s);
        if s.split == "validation" {
            self.validation.write(&line).await?;
        } else {
            self.train.write(&line).await?;
        }
        self.buffered
            .entry(shard_of(&s.id, self.shards))
            .or_default()
            .push(s);
        Ok(())
    }

    /// Writes the buffered samples as `sft` batches.
    pub(crate) async fn flush(&mut self, pw: &mut PartWriters) -> Result<(), ExecError> {
        for (shard, rows) in std::mem::take(&mut self.buffered) {
            pw.write(TableKind::Sft, shard, &sft_batch(&rows)?).await?;
        }
        Ok(())
    }

    /// Closes the JSONL files and writes `dataset_info.json`.
    pub(crate) async fn finish(self) -> Result<Vec<ManifestFile>, ExecError> {
        let (train, validation) = (self.train.finish().await?, self.validation.finish().await?);
        let mut splits = Vec::new();
        if train.rows > 0 {
            splits.push(("train", "train.jsonl"));
        }
        if validation.rows > 0 {
            splits.push(("validation", "validation.jsonl"));
        }
        let mut info = TextFile::new(
            &self.out,
            &self.staging,
            &format!("{}/dataset_info.json", self.dir),
        );
        let text = serde_json::to_string_pretty(&dataset_info(&splits)).expect("json") + "\n";
        info.write(&text).await?;
        let mut m = info.finish().await?;
        m.rows = 1;
        Ok(vec![train, validation, m])
    }
}

/// What a stage writing through [`SftOut`] declares: the `sft` table and
/// `<stage>/train.jsonl`, `validation.jsonl`, `dataset_info.json`, after its own `extra`
/// files (also under `<stage>/`).
pub fn sft_declared(stage: &str, extra: &[&str]) -> crate::stages::Declared {
    let files = extra
        .iter()
        .chain(&["train.jsonl", "validation.jsonl", "dataset_info.json"])
        .map(|f| format!("{stage}/{f}"))
        .collect();
    crate::stages::Declared {
        tables: vec![distillery_core::TableKind::Sft],
        files,
    }
}
