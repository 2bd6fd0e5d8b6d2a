//! What a task hands back: a stage's output ([`StageOutput`]), the record an attempt commits
//! ([`TaskOutput`]) and the committed outputs a later task reads ([`ShardOutput`]); and how a
//! stage is cut into tasks ([`Partitioning`]).

use std::collections::BTreeMap;

use distillery_core::summary::{ManifestFile, StageSummary};
use serde::{Deserialize, Serialize};

use crate::parts::WrittenPart;

/// How a stage's work is cut into tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioning {
    /// One task reads every part written below it.
    Whole,
    /// One task per shard, reading only its shard's parts of every table.
    Shards,
    /// One task per shard of the questions: a task reads its shard's `questions` parts (and
    /// `subgraphs` parts, which a `subgraph` stage writes in its questions' shards) and
    /// every other part whole (the contexts and knowledge bases its questions cite), and
    /// writes its questions' rows into its own shard. A merge task then joins the files the
    /// shard tasks staged for it, so the stage's rows, reports and files are the same for any
    /// task count (its merged SFT JSONL holds the same lines, in the order of the tasks).
    Questions,
}

/// Ingest counts of one file, for the bad-record gate and the summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IngestCounts {
    /// Rows of the format's primary table (pages, questions, edges).
    pub primary: u64,
    pub quarantined: u64,
    pub quarantine_by_reason: BTreeMap<String, u64>,
    /// The file's first quarantined records, described (where and why), for the gate's error.
    #[serde(default)]
    pub quarantine_examples: Vec<String>,
}

/// What one task attempt wrote, as recorded in its commit record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskOutput {
    /// Table parts, each under the attempt's directory (`base`).
    pub parts: Vec<WrittenPart>,
    /// Other files (paths relative to the attempt's directory, which are their output paths).
    pub files: Vec<ManifestFile>,
    /// The attempt's directory, relative to the output location.
    pub dir: String,
    /// This task's share of its stage's summary (`ingest/<input>` for ingest tasks).
    pub summary: StageSummary,
    pub ingest: Option<IngestCounts>,
    /// Files staged for the stage's merge task (paths relative to the attempt's directory),
    /// never published themselves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intermediate: Vec<ManifestFile>,
    /// Files published unchanged from another task's directory (a merge task taking a shard
    /// task's file as it is rather than copying it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopted: Vec<AdoptedFile>,
    /// The worker that ran this attempt, and the attempt's number (1 for the first), set by
    /// the worker: the summary's `tasks` say where each task ran.
    #[serde(default)]
    pub worker: String,
    #[serde(default)]
    pub attempt: u32,
    /// When the attempt started running (Unix milliseconds, 0 when unknown): the job page's
    /// timeline of a finished job.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub started_ms: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// A file another task staged, published as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdoptedFile {
    /// The directory of the task that staged it, relative to the output location.
    pub dir: String,
    pub file: ManifestFile,
}

/// The counters a teacher task's spending is read from: prompt and completion tokens.
pub const SPENT_TOKENS: [&str; 2] = ["llm.tokens_in", "llm.tokens_out"];
/// The counter of a teacher task's cost (millionths, by `[llm.price]`).
pub const SPENT_COST: &str = "llm.cost_micro";

/// A committed task output another task reads: for a merge task, each shard task of its
/// stage; for a stage task, each task below it that published files (a planner's plans, say),
/// its parts left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardOutput {
    pub task: String,
    pub output: TaskOutput,
}

impl TaskOutput {
    /// Rows plus bytes written, for progress reports.
    pub fn records(&self) -> u64 {
        self.summary.records_out
    }
}

/// What a stage produced: its summary, the table parts it staged and the other files it
/// staged (paths relative to the staging directory, which are their paths in the output).
#[derive(Debug, Clone, Default)]
pub struct StageOutput {
    pub summary: StageSummary,
    pub parts: Vec<WrittenPart>,
    pub files: Vec<ManifestFile>,
    /// Files staged for the stage's merge task, not published themselves.
    pub intermediate: Vec<ManifestFile>,
    /// Files of other tasks published as they are (see [`AdoptedFile`]).
    pub adopted: Vec<AdoptedFile>,
}

impl StageOutput {
    /// The task output of an attempt that staged this under `dir`.
    pub fn into_task(self, dir: &str) -> TaskOutput {
        TaskOutput {
            parts: self.parts,
            files: self.files,
            dir: dir.to_string(),
            summary: self.summary,
            ingest: None,
            intermediate: self.intermediate,
            adopted: self.adopted,
            ..Default::default()
        }
    }
}
