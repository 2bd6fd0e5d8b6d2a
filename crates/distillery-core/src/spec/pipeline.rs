//! The checked [`Pipeline`] and its hash: the canonical view of what a run makes.

use serde::Serialize;

use super::{InputSpec, LlmSpec, RunSpec, StageSpec};

/// A checked pipeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pipeline {
    pub version: i64,
    pub name: String,
    pub description: Option<String>,
    /// Where the run writes everything: a local path or an object-store URL.
    pub output: String,
    pub run: RunSpec,
    pub inputs: Vec<InputSpec>,
    pub stages: Vec<StageSpec>,
    /// The teacher server, for stages that call one.
    pub llm: Option<LlmSpec>,
    /// SHA-1 of the effective pipeline (after overrides) less its `output` and
    /// `run.parallelism`, recorded in every manifest and in the lineage of every SFT sample.
    /// Where a run writes and how many threads it uses are not part of what it makes: the
    /// same pipeline run into two places, on any number of cores, writes byte-identical files.
    pub hash: String,
}

impl Pipeline {
    /// The input named `name`.
    pub fn input(&self, name: &str) -> Option<&InputSpec> {
        self.inputs.iter().find(|i| i.name == name)
    }
}

/// The hash of a checked pipeline: SHA-1 of its canonical JSON (see [`Pipeline::hash`]).
pub(super) fn hash_of(p: &Pipeline) -> String {
    let canonical = serde_json::to_string(&PipelineHashView(p)).unwrap_or_default();
    crate::id::sha1_hex(&canonical)
}

#[derive(Serialize)]
struct PipelineHashView<'a>(#[serde(with = "hash_view")] &'a Pipeline);

mod hash_view {
    use super::Pipeline;
    use serde::Serializer;
    use serde::ser::SerializeStruct;

    pub fn serialize<S: Serializer>(p: &&Pipeline, s: S) -> Result<S::Ok, S::Error> {
        // `output`, `run.parallelism` and `run.shards` are left out: where a run writes, how
        // many threads it uses and how many tasks it is spread over are not part of what it
        // makes (the records are the same for any shard count; which part file holds them,
        // and so the order of a merged JSONL or export, follows the shards).
        let run = super::RunSpec {
            parallelism: 0,
            shards: 1,
            ..p.run.clone()
        };
        let mut st = s.serialize_struct("Pipeline", 6)?;
        st.serialize_field("version", &p.version)?;
        st.serialize_field("name", &p.name)?;
        st.serialize_field("run", &run)?;
        st.serialize_field("inputs", &p.inputs)?;
        st.serialize_field("stages", &p.stages)?;
        // What the teacher is, not where it runs or how it is paid for: the server's URL,
        // key, concurrency, timeouts, cache and budget do not change what it answers.
        if let Some(l) = &p.llm {
            let teacher = serde_json::json!({
                "model": l.model,
                "model_revision": l.model_revision,
                "seed": l.seed,
            });
            st.serialize_field("llm", &teacher)?;
        }
        st.end()
    }
}
