//! The `[run]` section: execution settings.

use serde::{Deserialize, Serialize};

fn default_shards() -> u32 {
    4
}
fn default_batch() -> usize {
    2048
}
fn default_bad_ratio() -> f64 {
    0.05
}

/// Execution settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Parquet shards per table (records are assigned by stable id hash), and the tasks a
    /// stage that splits runs as (one per shard). An execution setting, not part of the
    /// pipeline's hash: the records a run makes are the same for any count; which part file
    /// holds them, and so the order of lines in a merged JSONL or export, follows the shards
    /// (and the KG segments of extracted triples group by part).
    #[serde(default = "default_shards")]
    pub shards: u32,
    /// Records per Arrow batch; with `shards` this bounds the memory of a run.
    #[serde(default = "default_batch")]
    pub batch_size: usize,
    /// Readers and stage tasks run at once; 0 means one per core.
    #[serde(default)]
    pub parallelism: usize,
    /// Fail the run (non-zero exit, nothing published) when quarantined / read records is
    /// above this share. 1.0 never fails.
    #[serde(default = "default_bad_ratio")]
    pub max_bad_ratio: f64,
    /// Input files bigger than this (bytes) are read as several ingest tasks of about this
    /// many bytes each where the format allows: a multistream bz2 MediaWiki dump at bz2
    /// stream starts (from its `-index.txt(.bz2)` beside it, else by scanning), plain
    /// N-Triples and Wikidata JSON at line starts. 0 reads every file as one task. The
    /// records are those of a whole read, in the same order of ids, except that triples read
    /// from a range carry no line number (their quarantine rows give byte offsets). Default
    /// 1 GiB.
    #[serde(
        default = "default_split_bytes",
        skip_serializing_if = "is_default_split"
    )]
    pub split_bytes: u64,
}

fn default_split_bytes() -> u64 {
    1 << 30
}
fn is_default_split(v: &u64) -> bool {
    *v == default_split_bytes()
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            split_bytes: default_split_bytes(),
            shards: default_shards(),
            batch_size: default_batch(),
            parallelism: 0,
            max_bad_ratio: default_bad_ratio(),
        }
    }
}
