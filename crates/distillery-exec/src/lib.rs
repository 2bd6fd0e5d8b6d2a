//! Execution of a pipeline: the task graph and the task bodies.
//!
//! [`task`] plans a run into tasks (one per input file, then per stage as its
//! [`task::Partitioning`] says: one task, one per shard, or one per shard of the questions
//! and a merge task) and runs one task into its own attempt directory; `distillery-cluster`
//! hands those tasks to workers (`distillery run` through an embedded coordinator and
//! worker). A run goes:
//! 1. [`plan`]: resolve every input's paths (globs, URLs) into files, all missing files
//!    reported at once;
//! 2. ingest: each file is read on a blocking thread by its `distillery-ingest` reader into a
//!    [`sink::BatchingSink`], which shards records by stable id hash, batches them into Arrow
//!    `RecordBatch`es and hands them over a bounded channel to async [`parts::PartWriters`]
//!    (Parquet, zstd) writing under the attempt's directory through object_store;
//! 3. the bad-record check (`run.max_bad_ratio`);
//! 4. stages, from the staged Parquet: [`hseq_stage`] part by part; [`label_stage`] input by
//!    input (weak labels, trajectories and SFT samples through `distillery-label`, written as
//!    the `labels` and `sft` tables plus JSONL files, `dataset_info.json` and the label report);
//!    [`triples_stage`] part by part (triples extracted by the `[llm]` teacher through the
//!    response cache, with provenance, quarantined answers and the OpenIE exports);
//!    [`cirag_stage`] question by question (CIRAG teacher trajectories over a BM25-indexed
//!    corpus, distilled into student SFT samples); [`planner_stage`] (teacher plans into the
//!    label stage's guidance cache); [`relevance_stage`] (HANRAG relevance labels from the
//!    teacher as student samples); [`ras_stage`] (RAS HotpotQA-SUBQ planner and answerer
//!    samples, `[NO_RETRIEVAL]` by candle sentence embeddings);
//!    each returns a [`run::StageOutput`] (summary, parts, other files);
//! 5. [`publish`]: parts and files moved into place, `_summary.json`, then `_manifest.json`
//!    (the commit).
//!
//! [`estimate`] projects the calls, tokens and cost of the LLM stages from a sample
//! (`plan --estimate`). [`verify`] decodes a published output's segments back into sources (`hseq verify`).
//! [`store`] turns paths and URLs into object_store locations (local disk by default; S3, GCS,
//! Azure with credentials from the environment).
//!
//! Dependencies: `arrow`/`parquet` (the data plane and its files), `object_store` (all output
//! and remote input), `tokio` + `tokio-util` + `futures` (async writers, blocking readers
//! bridged with `SyncIoBridge`, tasks aborted on drop with `AbortOnDropHandle`), `indicatif` (progress bars on a terminal), `glob` (input
//! patterns), `url` (output URLs), `tracing` (structured logs), `thiserror` (error types),
//! `twox-hash` (XXH64, the label stage's duplicate-sample hashes: fast, and already built for
//! parquet),
//! `distillery-llm` + `distillery-triples` (the teacher client, response cache and triple
//! extraction of the `triples` stage), `distillery-distill` (the CIRAG loop, planner, relevance and
//! RAS prompts of the teacher stages), `distillery-embed` (candle sentence embeddings for
//! RAS's `[NO_RETRIEVAL]`).

pub mod cirag_stage;
pub mod error;
pub mod estimate;
pub mod faults;
pub mod hseq_stage;
pub mod label_route;
pub mod label_stage;
pub mod lock;
pub mod parts;
pub mod plan;
pub mod planner_stage;
pub mod publish;
pub mod ras_stage;
pub mod relevance_stage;
pub mod run;
mod sft_merge;
mod sft_out;
pub mod sink;
pub mod store;
pub mod task;
pub mod triples_stage;
pub mod verify;

pub use error::ExecError;
pub use run::{ProgressMode, RunOutcome, StageOutput};
