//! Pipeline files: versioned, strict TOML that names inputs, stages and the output location.
//!
//! ```toml
//! version = 1
//! name = "quickstart"
//! output = "out/quickstart"          # a path, file://, s3://, gs://, az:// URL
//!
//! [run]
//! shards = 4                         # Parquet shards per table, by stable id hash
//! batch_size = 2048                  # records per Arrow batch: bounds reader memory
//! max_bad_ratio = 0.05               # fail the run when more records than this are bad
//!
//! [[inputs]]
//! name = "wiki"
//! format = "mediawiki"
//! paths = ["data/quickstart/wiki.xml"]
//! options = { namespaces = [0] }
//!
//! [[stages]]
//! kind = "hseq"
//! ```
//!
//! [`Pipeline::parse`] reads a file, applies `--set key.path=value` overrides, and checks the
//! whole of it, collecting *every* problem (unknown keys, bad values, dangling references) into
//! one [`SpecErrors`] with a location for each: the key path and, when the key is in the file,
//! its line and column. It does no IO beyond reading nothing: input paths are checked by the
//! executor's planner.
//!
//! The files of this module, one job each: `format` and `input` (the input formats, their
//! options, the input entries), `stage`, `llm`, `run` and `pipeline` (the other sections, and
//! the checked pipeline with its hash), `overrides` (`--set`), `locate` (key paths, their
//! positions in the file, the error lines), `groups` (option groups several stages flatten into theirs), `collect` (deserializing with every bad key
//! reported), `catalog` (what the executor's stage registry tells the checks), `check` (the
//! checks of the whole file) and `sections` (the checks of one entry or section).

mod catalog;
mod check;
mod collect;
mod format;
mod groups;
mod input;
mod llm;
mod locate;
mod overrides;
mod pipeline;
mod run;
mod sections;
mod stage;
#[cfg(test)]
mod tests;

pub use catalog::{StageCatalog, StageCheck};
pub use check::MAX_PIPELINE_BYTES;
pub use format::Format;
pub use groups::{QuestionCap, SftSplit};
pub use input::{
    DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_PAGE_BYTES, DEFAULT_MAX_RECORD_BYTES, Fb15kOptions,
    FormatOptions, FreebaseOptions, HybridQaOptions, InputSpec, JsonOptions, LineOptions,
    MediaWikiOptions, MetaQaOptions, NoOptions, WikidataOptions, input_schema,
};
pub use llm::{BudgetSpec, LlmSpec, PaceSpec, PriceSpec};
pub use locate::{SpecError, SpecErrors};
pub use overrides::{OverrideError, apply_override};
pub use pipeline::Pipeline;
pub use run::RunSpec;
pub use sections::{check_location, valid_name};
pub use stage::{StageOptions, StageSpec, stage_schema};

/// The pipeline file version this build understands.
pub const SPEC_VERSION: i64 = 1;
