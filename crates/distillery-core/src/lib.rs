//! The shared data model of Distillery.
//!
//! Every other crate speaks these types:
//! - [`record`]: the records of the data plane ([`Document`], [`Table`], [`Triple`],
//!   [`Entity`], [`Question`], [`Segment`], [`QuarantineRecord`]) and the [`RecordSink`] that
//!   readers emit into;
//! - [`schema`]: their Arrow schemas, traced from the Rust types, and record ⇄ `RecordBatch`
//!   conversion (stages exchange `RecordBatch`es; records are the typed view of a batch);
//! - [`id`]: stable content ids and shard assignment;
//! - [`sharded`]: the shard key of a record, and records grouped and converted per (table,
//!   shard) on a reader's parser threads;
//! - [`ras_form`]: RAS's text-to-triple form `(S> s| P> p| O> o)` (and WikiOFGraph's), and
//!   Python's `repr` of a list of strings, shared by the readers and the teacher stages;
//! - [`spec`]: the pipeline file (versioned, strict, all errors reported at once, `--set`
//!   overrides);
//! - [`summary`]: `_summary.json` and `_manifest.json`;
//! - [`error`]: the retryable/fatal error kinds every library error reports;
//! - [`cpu`]: CPU time of the calling thread and of the process, and monotonic-clock laps, for
//!   stages that report where their time goes.
//!
//! No async runtime and no IO here, so every crate can depend on it cheaply.
//!
//! ```
//! use distillery_core::{record::*, schema};
//! let d = Document { id: "d1".into(), title: "T".into(), text: "Hi.".into(), ..Default::default() };
//! let batch = schema::to_batch(TableKind::Documents, &[d]).unwrap();
//! assert_eq!(batch.num_rows(), 1);
//! ```
//!
//! Dependencies: `schemars` (JSON schemas of the options types, from which `docs/pipelines.md`
//! is generated), `arrow-array`/`arrow-schema` (the data plane types), `serde_arrow` (schemas
//! traced from the record types, so each table has one definition), `toml` + `toml_edit` (the
//! pipeline file, and positions of keys for error messages), `serde_path_to_error` (the exact
//! key of a bad value), `sha1` (stable ids), `foldhash` (the per-record group lookups of
//! [`sharded`], where SipHash cost 3% of a two-core Freebase ingest), `thiserror` (error
//! types), `rustix` (the CPU-time clocks of [`cpu`], which the standard library does not
//! expose, without `unsafe`), `backon` (the backoff with jitter of [`retry`], the one retry
//! policy) and `httpdate` (`Retry-After` given as a date).

pub mod cpu;
pub mod error;
pub mod id;
pub mod ras_form;
pub mod record;
pub mod retry;
pub mod schema;
pub mod sharded;
pub mod spec;
pub mod summary;
pub mod tables;

pub use error::{ErrorKind, HasKind};
pub use record::*;
pub use tables::{TABLES, TableSpec};
