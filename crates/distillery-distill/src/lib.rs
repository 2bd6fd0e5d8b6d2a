//! Teacher-trajectory distillation: multi-step runs of a teacher LLM become student SFT data.
//!
//! - [`cirag`]: CIRAG's construction-integration loop (BM25 retrieval, cached triple
//!   extraction, reranked candidate facts, the teacher's integration decisions with the
//!   exact section markers, a final answer checked against the gold) and its student
//!   samples, one per step of a kept trajectory;
//! - [`cascade`]: CIRAG's adaptive cascade (triples, then supporting sentences, then
//!   passages, until the teacher does not refuse) and its generation samples;
//! - [`compound`]: HANRAG's compound-query benchmark (a teacher's simple questions per
//!   entity document, combined 2 to 4 at a time) and its accuracy metric;
//! - [`planner`]: HSEQ planner guidance per question from a teacher, for the label stage's
//!   guidance cache;
//! - [`ras`]: RAS HotpotQA-SUBQ planner and answerer samples (labels, graph lines, Python
//!   `repr` of triples), the teacher's sub-query prompt and parsing;
//! - [`relevance`]: HANRAG relevance labels `<Q, D, IS_REL>` from a teacher, as student
//!   samples of the relevance discriminator;
//! - [`router`]: Adaptive-RAG silver labels of a query-complexity router (`A` no retrieval,
//!   `B` one step, `C` several) from the teacher's closed-book and one-step answers;
//! - [`support`]: the teacher's check of one weak positive (does this evidence state a fact
//!   the known answer needs?), for the label stage's `verify` option;
//! - [`metrics`]: exact match and token F1 for the answer filter.
//!
//! Dependencies: `distillery-llm` (client, cache), `distillery-triples` (the construction
//! phase's triples), `distillery-index` (BM25 with tantivy), `distillery-label` (answer
//! normalisation), `serde_json`.

pub mod cascade;
pub mod cirag;
pub mod compound;
pub mod metrics;
pub mod planner;
pub mod ras;
pub mod relevance;
pub mod router;
pub mod support;

use std::path::Path;

use distillery_core::{ErrorKind, HasKind};

/// Template texts: the built-in ones, each replaced by the file of the same name in `dir`
/// when there is one (trailing whitespace trimmed).
pub(crate) fn load_templates(
    dir: Option<&str>,
    files: &[&str],
    builtin: &[&str],
) -> Result<Vec<String>, DistillError> {
    let mut texts = Vec::new();
    for (name, builtin) in files.iter().zip(builtin) {
        let file = dir.map(|d| Path::new(d).join(name)).filter(|f| f.exists());
        texts.push(match file {
            Some(f) => std::fs::read_to_string(&f)
                .map_err(|e| DistillError::Template {
                    path: f.display().to_string(),
                    message: e.to_string(),
                })?
                .trim_end()
                .to_string(),
            None => builtin.trim_end().to_string(),
        });
    }
    Ok(texts)
}

/// A yes/no verdict of the teacher: `{"<key>": bool}` (fenced or with prose around it), else
/// the whole answer as one word: `true`/`yes` or one of `yes`, `false`/`no` or one of `no`.
pub(crate) fn parse_verdict(
    raw: &str,
    key: &str,
    yes: &[&str],
    no: &[&str],
) -> Result<bool, String> {
    if let Ok((v, _)) = distillery_triples::parse::extract_json(raw)
        && let Some(b) = v.get(key).and_then(serde_json::Value::as_bool)
    {
        return Ok(b);
    }
    let word = raw
        .trim()
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    match word.as_str() {
        "true" | "yes" => Ok(true),
        "false" | "no" => Ok(false),
        w if yes.contains(&w) => Ok(true),
        w if no.contains(&w) => Ok(false),
        _ => Err(format!("no `{key}` boolean in the answer")),
    }
}

/// Errors of distillation.
#[derive(Debug, thiserror::Error)]
pub enum DistillError {
    #[error("template {path}: {message}")]
    Template { path: String, message: String },
    #[error(transparent)]
    Llm(#[from] distillery_llm::LlmError),
    #[error(transparent)]
    Extract(#[from] distillery_triples::ExtractError),
    #[error(transparent)]
    Index(#[from] distillery_index::IndexError),
    /// A spending limit was reached.
    #[error("{0}")]
    Budget(String),
}

impl HasKind for DistillError {
    fn kind(&self) -> ErrorKind {
        match self {
            DistillError::Llm(e) => e.kind(),
            DistillError::Extract(e) => e.kind(),
            DistillError::Index(e) => e.kind(),
            _ => ErrorKind::Fatal,
        }
    }
}
