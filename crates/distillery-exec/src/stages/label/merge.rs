//! The stage's merge task: the shard tasks' SFT files joined and their report counts added
//! up into `label_report.json`.

use std::time::Instant;

use distillery_core::spec::{Pipeline, StageSpec};
use distillery_core::summary::{ManifestFile, StageSummary};
use distillery_label::report::ReportBuilder;
use serde_json::Value;
use tracing::info;

use super::LABEL_REPORT;
use crate::contract::{ShardOutput, StageOutput};
use crate::error::ExecError;
use crate::kit::sft_merge;
use crate::store::Location;

/// A shard task's report counts, staged for the merge task.
pub(super) const REPORT_COUNTS: &str = "_merge/label-report-counts.json";

/// The merge task of a label stage: the shard tasks' SFT files joined
/// ([`crate::kit::sft_merge`]: duplicates removed across shards, `dataset_info.json`) and their
/// report counts added up into `label_report.json`.
pub async fn merge_stage(
    _p: &Pipeline,
    stage: &StageSpec,
    out: &Location,
    staging: &str,
    shards: &[ShardOutput],
) -> Result<StageOutput, ExecError> {
    let started = Instant::now();
    let mut summary = StageSummary::new(&stage.name);
    let merged = sft_merge::merge_sft(out, staging, "sft", shards, &mut summary).await?;
    let mut report = ReportBuilder::default();
    for s in shards {
        let rel = format!("{}/{REPORT_COUNTS}", s.output.dir);
        let b = out.read(&rel).await?;
        let r: ReportBuilder = serde_json::from_slice(&b)
            .map_err(|e| ExecError::Task(format!("{}: {e}", out.show(&rel))))?;
        report.merge(r);
    }
    let report = pretty(&report.finish().to_json());
    let mut files = merged.files;
    let f = put(out, staging, LABEL_REPORT, report, 1).await?;
    summary.bytes_out += f.bytes;
    files.push(f);
    summary.seconds = started.elapsed().as_secs_f64();
    info!(
        stage = %stage.name,
        shards = shards.len(),
        samples = summary.records_out,
        duplicates = summary.counters.get("duplicates_removed").copied().unwrap_or(0),
        "label shards merged"
    );
    Ok(StageOutput {
        summary,
        parts: merged.parts,
        files,
        adopted: merged.adopted,
        ..Default::default()
    })
}

/// Stages a small file whole.
pub(super) async fn put(
    out: &Location,
    staging: &str,
    rel: &str,
    data: Vec<u8>,
    rows: u64,
) -> Result<ManifestFile, ExecError> {
    let bytes = data.len() as u64;
    out.write(&format!("{staging}/{rel}"), data).await?;
    Ok(ManifestFile {
        path: rel.to_string(),
        rows,
        bytes,
    })
}

fn pretty(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("json values serialize");
    b.push(b'\n');
    b
}
