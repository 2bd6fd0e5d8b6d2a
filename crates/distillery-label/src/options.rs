//! Options of the `label` stage, here because the labeller, its methods and presets read
//! them; the stage module in `distillery-exec` checks them against the pipeline.

use distillery_core::spec::SftSplit;
use serde::{Deserialize, Serialize};

fn yes() -> bool {
    true
}
fn default_methods() -> Vec<String> {
    vec![crate::positives::answer_aware::NAME.to_string()]
}
fn default_preset() -> String {
    "small".to_string()
}
fn default_u() -> f64 {
    1.0
}
fn default_steps() -> u32 {
    4
}
fn default_one() -> u32 {
    1
}
fn default_lexical_weight() -> f64 {
    0.5
}
fn default_cpt() -> f64 {
    4.0
}
fn default_snippet() -> u32 {
    240
}
fn default_hops() -> u32 {
    3
}
fn default_context_memory() -> u64 {
    1 << 30
}

/// Labelling methods this build knows.
pub const LABEL_METHODS: &[&str] = &["hseq-paper", "answer-aware"];

/// Size-group presets of the label stage.
pub const LABEL_PRESETS: &[&str] = &["small", "medium", "large"];

/// `label` stage options (HSEQ appendix 9.2 and 9.3; HANRAG teacher-free tasks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelOptions {
    /// Weak-positive methods to run (`answer-aware`, `hseq-paper`); all are reported.
    /// `hseq-paper` reproduces the paper's appendix 9.2; `answer-aware` labels better on
    /// curated and on retrieved contexts alike (docs/benchmarks.md, "Weak positives").
    #[serde(default = "default_methods")]
    pub methods: Vec<String>,
    /// The method whose trajectories become SFT samples (default: `answer-aware` when it is
    /// one of `methods`, else the first of them).
    #[serde(default)]
    pub sft_method: Option<String>,
    /// Size group: `small` (k=2, 48 segments, 3072 tokens), `medium` (k=4, 48, 3072),
    /// `large` (k=5, 32, 2048).
    #[serde(default = "default_preset")]
    pub preset: String,
    /// Segments selected per step (k), overriding the preset's.
    #[serde(default)]
    pub top_k: Option<u32>,
    /// Candidate segments shown per step at most, overriding the preset's.
    #[serde(default)]
    pub max_segments: Option<u32>,
    /// Prompt token budget of a step, overriding the preset's.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Candidate window W over the ordered stream: how many candidate segments a step shows.
    /// Default: the preset's segment cap (48 small/medium, 32 large), as the paper's
    /// per-step `max_segments`; the token budget then trims what does not fit.
    #[serde(default)]
    pub window: Option<u32>,
    /// Sufficiency threshold u: share of the positive pool that must be selected.
    #[serde(default = "default_u")]
    pub sufficiency: f64,
    /// Step cap T_max.
    #[serde(default = "default_steps")]
    pub max_steps: u32,
    /// Positives wanted from answer matching before the Jaccard fallback adds more.
    #[serde(default = "default_one")]
    pub min_positives: u32,
    /// Per-step weight of a step whose picks came from lexical overlap only.
    #[serde(default = "default_lexical_weight")]
    pub lexical_weight: f64,
    /// A Hugging Face `tokenizer.json` to count tokens; without it, `chars_per_token`.
    #[serde(default)]
    pub tokenizer: Option<String>,
    /// Characters per token when no `tokenizer` is given.
    #[serde(default = "default_cpt")]
    pub chars_per_token: f64,
    /// Characters of segment text shown per candidate line (truncated for display).
    #[serde(default = "default_snippet")]
    pub snippet_chars: u32,
    /// Directory (or URL) of cached planner guidance, keyed by (dataset, question hash,
    /// planner model); the heuristic template is used when it has no entry.
    #[serde(default)]
    pub guidance_cache: Option<String>,
    /// The planner model whose entries of `guidance_cache` are read.
    #[serde(default)]
    pub planner_model: Option<String>,
    /// The name of a `planner` stage listed before this one: its plans (`<name>/plans.jsonl`,
    /// read from the object store, wherever the planner ran) guide the questions it planned,
    /// ahead of `guidance_cache`.
    #[serde(default)]
    pub plans: Option<String>,
    /// Directory of prompt template files replacing the built-in ones (see the docs).
    #[serde(default)]
    pub templates: Option<String>,
    /// Also write the HANRAG refiner, ending-discriminator and router samples.
    #[serde(default = "yes")]
    pub hanrag: bool,
    /// Also write HSEQ-H head-agent samples (`hseq_head`): for a question whose SFT-method
    /// trajectory ends sufficient, its question, guidance and the canonicalized evidence κ of
    /// the selected segments in, the gold answer out.
    #[serde(default)]
    pub head: bool,
    /// With `head`: the target is `{"answer": ..., "supporting_ids": [...]}` (the ids of the
    /// evidence items) instead of the bare answer.
    #[serde(default)]
    pub head_supporting_ids: bool,
    /// Ask the teacher (the pipeline's `[llm]` section) whether each positive of the SFT
    /// method states a fact the gold answer needs, through the response cache; the confirmed
    /// ones are labelled as one more method, `<sft method>+verify`, reported beside the
    /// method, and its trajectories become the SFT samples. Counters `verify.*` and `llm.*`.
    /// The teacher's templates (`support_teacher_system.txt`, `support_teacher_user.txt`) are
    /// replaced from `templates`.
    #[serde(default)]
    pub verify: bool,
    /// The validation split and the decontamination (`validation_share`, `decontaminate`,
    /// `decontaminate_formats`: see [`SftSplit`]).
    #[serde(flatten)]
    pub split: SftSplit,
    /// Where questions' KB edges come from, for MetaQA-style k-hop subgraphs: the name of a
    /// KB input (`metaqa-kb`, `freebase`, ...; a task holds the whole KB in memory), or of a
    /// `subgraph` stage listed before this one (each question gets its subgraph's edges; a
    /// task holds only its shard's subgraphs).
    #[serde(default)]
    pub kb: Option<String>,
    /// Cap on the hop count of KB subgraphs.
    #[serde(default = "default_hops")]
    pub max_hops: u32,
    /// About how many bytes of one input's contexts (its documents and tables, decoded) the
    /// stage may hold at once (default 1 GiB). An input whose contexts are estimated above it
    /// (from the first batch of each of its parts) is labelled in groups of consecutive
    /// questions, each group holding only the contexts its questions cite, routed to it
    /// through spill parts in the stage's staging directory (one more pass over the contexts
    /// per wave of groups, a write and a read of what is cited). The outputs are the same
    /// bytes under any budget, so it is not part of the pipeline's hash.
    #[serde(default = "default_context_memory", skip_serializing)]
    pub context_memory_bytes: u64,
}

impl LabelOptions {
    /// The method whose trajectories become SFT samples: `sft_method` when it is one of
    /// `methods`, else `answer-aware` when listed, else the first method.
    pub fn sft_method(&self) -> Option<&str> {
        let listed = |n: &str| self.methods.iter().any(|m| m == n);
        self.sft_method
            .as_deref()
            .filter(|n| listed(n))
            .or_else(|| {
                let aware = crate::positives::answer_aware::NAME;
                listed(aware).then_some(aware)
            })
            .or_else(|| self.methods.first().map(String::as_str))
    }
}

impl Default for LabelOptions {
    fn default() -> Self {
        serde_json::from_value(serde_json::Value::Object(Default::default()))
            .expect("all label options have defaults")
    }
}
