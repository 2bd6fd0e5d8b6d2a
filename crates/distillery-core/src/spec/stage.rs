//! A stage: its checked options ([`StageOptions`], the typed value and the hashed JSON), the
//! checked [`StageSpec`] and the `[[stages]]` entry as written, with its JSON schema.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The JSON schema of a `[[stages]]` entry, for the pipeline reference.
pub fn stage_schema() -> schemars::Schema {
    schemars::schema_for!(RawStage)
}

/// A stage's checked options: the typed value its stage module reads back with
/// [`StageOptions::get`], and the JSON form the pipeline hash covers (fields a stage marks
/// `skip_serializing`, such as a memory budget, are left out of it).
#[derive(Clone)]
pub struct StageOptions {
    typed: std::sync::Arc<dyn std::any::Any + Send + Sync>,
    hashed: serde_json::Value,
}

impl StageOptions {
    /// Wraps a stage's typed options.
    pub fn new<T: Serialize + Send + Sync + 'static>(options: T) -> StageOptions {
        let hashed = serde_json::to_value(&options).unwrap_or(serde_json::Value::Null);
        StageOptions {
            typed: std::sync::Arc::new(options),
            hashed,
        }
    }

    /// The typed options, when they are a `T`.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.typed.downcast_ref::<T>()
    }

    /// The options as the pipeline hash sees them.
    pub fn json(&self) -> &serde_json::Value {
        &self.hashed
    }
}

impl fmt::Debug for StageOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.hashed)
    }
}

impl PartialEq for StageOptions {
    fn eq(&self, other: &Self) -> bool {
        self.hashed == other.hashed
    }
}

impl Serialize for StageOptions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.hashed.serialize(s)
    }
}

/// One stage of the pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageSpec {
    pub name: String,
    /// The stage kind: a kind of the executor's stage registry.
    pub kind: String,
    /// Names of the inputs or stages it consumes (default: all inputs).
    pub inputs: Vec<String>,
    pub options: StageOptions,
    /// GPUs a worker must offer to run this stage's tasks (0: any worker). Where a stage runs
    /// is not part of what it makes, so this is left out of the pipeline hash.
    #[serde(skip)]
    pub gpus: u32,
    /// Tasks a stage that splits runs as (default `run.shards`). An execution setting, left
    /// out of the pipeline hash like `run.shards`.
    #[serde(skip)]
    pub tasks: Option<u32>,
}

/// A `[[stages]]` entry.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStage {
    /// The stage: one of the kinds listed below.
    pub(super) kind: String,
    /// The stage's name (default: its kind): `--set stages.<name>.…`, output folders of its
    /// files, the tag of its parts.
    #[serde(default)]
    pub(super) name: Option<String>,
    /// GPUs a worker must offer to run its tasks (0: any worker). Not part of the hash.
    #[serde(default)]
    pub(super) gpus: u32,
    /// Tasks a stage that splits runs as (default `run.shards`). Not part of the hash.
    #[serde(default)]
    pub(super) tasks: Option<u32>,
    /// Names of the inputs it reads (default: all).
    #[serde(default)]
    pub(super) inputs: Option<Vec<String>>,
    /// The stage's options (below, per kind).
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub(super) options: Option<toml::Table>,
}
