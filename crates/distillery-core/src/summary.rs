//! `_summary.json` and `_manifest.json`: what a run did and what an output holds.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counts of one stage of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    pub stage: String,
    pub records_in: u64,
    pub records_out: u64,
    pub quarantined: u64,
    /// Input bytes read (compressed size for compressed inputs).
    pub bytes_in: u64,
    /// Parquet bytes written.
    pub bytes_out: u64,
    pub seconds: f64,
    /// Stage-specific counters (per table written, per quarantine reason, round trips, LLM
    /// calls, cache hits, tokens, ...).
    pub counters: BTreeMap<String, u64>,
    /// Where each task of the stage ran (the committed attempt), in plan order; filled in when
    /// the job is published.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskRun>,
}

/// One task of a stage as it ran: the worker of its committed attempt, how many attempts it
/// took, what that attempt wrote and how long it ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskRun {
    pub task: String,
    pub worker: String,
    pub attempts: u32,
    pub records_out: u64,
    pub seconds: f64,
    /// When it started (Unix milliseconds; absent when unknown).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub started_ms: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

impl StageSummary {
    pub fn new(stage: &str) -> StageSummary {
        StageSummary {
            stage: stage.to_string(),
            ..Default::default()
        }
    }

    /// A summary whose documented counters are all present, zero or not.
    pub fn with_counters(stage: &str, counters: &[&str]) -> StageSummary {
        let mut s = StageSummary::new(stage);
        for c in counters {
            s.add(c, 0);
        }
        s
    }

    pub fn add(&mut self, counter: &str, n: u64) {
        *self.counters.entry(counter.to_string()).or_default() += n;
    }

    /// Adds another summary's counts into this one (same stage, another task).
    pub fn merge(&mut self, other: &StageSummary) {
        self.records_in += other.records_in;
        self.records_out += other.records_out;
        self.quarantined += other.quarantined;
        self.bytes_in += other.bytes_in;
        self.bytes_out += other.bytes_out;
        self.seconds += other.seconds;
        for (k, v) in &other.counters {
            *self.counters.entry(k.clone()).or_default() += v;
        }
    }
}

/// The whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub pipeline: String,
    pub pipeline_hash: String,
    pub run_id: String,
    pub started_at: String,
    pub seconds: f64,
    pub stages: Vec<StageSummary>,
    /// Quarantined records by reason, over all stages.
    pub quarantine_by_reason: BTreeMap<String, u64>,
}

/// One file of an output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestFile {
    /// Path relative to the output root, e.g. `documents/part-00000.parquet`.
    pub path: String,
    /// Rows of a table part, lines of a JSONL file, 1 for a JSON document.
    pub rows: u64,
    pub bytes: u64,
}

/// One table of an output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestTable {
    pub name: String,
    pub schema_hash: String,
    pub rows: u64,
    pub files: Vec<ManifestFile>,
}

/// `_manifest.json`: written last when an output is published; an output without it is
/// incomplete and readers refuse it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub pipeline: String,
    pub pipeline_hash: String,
    pub run_id: String,
    pub shards: u32,
    pub tables: Vec<ManifestTable>,
    /// Files of the output that are not table parts (`sft/train.jsonl`,
    /// `sft/dataset_info.json`, `label_report.json`, ...), sorted by path. Absent in
    /// manifests written before stages wrote such files.
    #[serde(default)]
    pub files: Vec<ManifestFile>,
}

impl Manifest {
    pub const FILE: &'static str = "_manifest.json";
    pub const SUMMARY: &'static str = "_summary.json";

    pub fn table(&self, name: &str) -> Option<&ManifestTable> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// A non-table file of the output, by its path relative to the output root.
    pub fn file(&self, path: &str) -> Option<&ManifestFile> {
        self.files.iter().find(|f| f.path == path)
    }
}
