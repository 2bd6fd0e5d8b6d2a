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
//! 4. stages, from the staged Parquet: each is one module of [`stages`] implementing
//!    [`contract::Stage`] (its typed options, checks, outputs, partitioning, estimate and
//!    run), found by kind in [`stages::REGISTRY`]; the engine (this crate's other modules)
//!    never names one, and what stages share lives in [`kit`] (the teacher, context readers,
//!    SFT text, the SFT writer and merge); each returns a [`contract::StageOutput`] (summary,
//!    parts, other files);
//! 5. [`publish`]: parts and files moved into place, `_summary.json`, then `_manifest.json`
//!    (the commit).
//!
//! [`estimate`] asks each stage for its projected calls, tokens and cost (`plan --estimate`).
//! [`verify`] decodes a published output's segments back into sources (`hseq verify`).
//! [`claim`] refuses a location Distillery does not own, and [`confine`] keeps every write
//! inside the ones it claimed (never through a symbolic link).
//!
//! Layers, each importing only those below it (a test checks the graph has no circle):
//! `error`, `sink`, `faults`, `confine` → `store` → `parts`, `publish`, `lock`, `claim`,
//! `verify` → [`contract`] (the stage contract and the data it passes) → [`kit`] → the
//! stage modules → the registry ([`stages`]) → the engine (`plan`, `task`, `run`,
//! `estimate`, `reference`). [`store`] turns paths and URLs into object_store locations (local disk by default; S3, GCS,
//! Azure with credentials from the environment).
//!
//! Dependencies: `arrow`/`parquet` (the data plane and its files), `object_store` (all output
//! and remote input), `tokio` + `tokio-util` + `futures` (async writers, blocking readers
//! bridged with `SyncIoBridge`, tasks aborted on drop with `AbortOnDropHandle`), `indicatif`
//! (progress bars on a terminal), `glob` (input patterns), `url` (output URLs), `humantime` (RFC 3339 times), `tracing`
//! (structured logs), `thiserror` (error types), `twox-hash` (XXH64, the label stage's
//! duplicate-sample hashes: fast, and already built for parquet), `foldhash` (the `subgraph`
//! stage's node and frontier maps, looked up once per KG edge per hop), `rustix` (`statfs` and `access`: an output on `/proc` or a read-only disk is refused before
//! any work), `aho-corasick` (the
//! `compound` stage finds which paragraphs name which titles in one scan of the texts per batch
//! of titles, instead of one scan per title), `schemars` (the stages'
//! options schemas: [`reference`] generates `docs/pipelines.md` from them), `toml` (a stage's option
//! check reading another `[[stages]]` entry as written),
//! `distillery-llm` + `distillery-triples` (the teacher client, response cache and triple
//! extraction of the `triples` stage), `distillery-distill` (the CIRAG loop, planner, relevance and
//! RAS prompts of the teacher stages), `distillery-embed` (candle sentence embeddings for
//! RAS's `[NO_RETRIEVAL]`).

pub mod claim;
pub mod confine;
pub mod contract;
pub mod error;
pub mod estimate;
pub mod faults;
pub mod kit;
#[cfg(test)]
mod layering;
pub mod lock;
pub mod parts;
pub mod plan;
pub mod publish;
pub mod reference;
pub mod run;
pub mod sink;
pub mod stages;
pub mod store;
pub mod task;
pub mod verify;

pub use error::ExecError;
pub use run::{ProgressMode, RunOutcome, StageOutput};
