//! Options of the `triples` stage, here because every stage that extracts triples through
//! the teacher (triples, cirag, ras) builds its [`crate::Extractor`] from them.

use serde::{Deserialize, Serialize};

fn default_unit() -> String {
    "paragraph".to_string()
}
fn default_response_format() -> String {
    "json_schema".to_string()
}
fn default_answer_tokens() -> u32 {
    512
}
fn default_min_chars() -> u32 {
    20
}
fn default_exports() -> Vec<String> {
    vec!["hipporag".to_string()]
}

/// Export forms of the `triples` stage.
pub const TRIPLE_EXPORTS: &[&str] = &["hipporag", "ras"];

/// `triples` stage options (HippoRAG NER + OpenIE; formats.md "Triple extraction").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TriplesOptions {
    /// What one LLM call reads: `paragraph` (each paragraph of a document, the whole text
    /// when it has none) or `document`.
    #[serde(default = "default_unit")]
    pub unit: String,
    /// `json_schema` (the answer's schema; vLLM constrains decoding to it), `json_object`
    /// or `none`.
    #[serde(default = "default_response_format")]
    pub response_format: String,
    /// `max_tokens` of each answer.
    #[serde(default = "default_answer_tokens")]
    pub max_tokens: u32,
    /// Extract at most this many passages (in part order): a sample run.
    #[serde(default)]
    pub max_passages: Option<u64>,
    /// Passages shorter than this (chars, title excluded) are skipped and counted.
    #[serde(default = "default_min_chars")]
    pub min_chars: u32,
    /// Directory of template files replacing the built-in prompts (see distillery-triples).
    #[serde(default)]
    pub templates: Option<String>,
    /// Extra exports: `hipporag` (`openie/openie_results.json`, HippoRAG's OpenIE result)
    /// and `ras` (`openie/ras.jsonl`, passages with RAS text-to-triple targets).
    #[serde(default = "default_exports")]
    pub exports: Vec<String>,
}

impl Default for TriplesOptions {
    fn default() -> Self {
        serde_json::from_value(serde_json::Value::Object(Default::default()))
            .expect("all triples options have defaults")
    }
}
