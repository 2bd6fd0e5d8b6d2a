//! Guidance g(q, type) for the iteration agent (HSEQ paper 000, 2.4, 3.2 and 9.3.3).
//!
//! [`GuidanceSource::guidance_for`] returns, for a question, the plan of the job's planner
//! stage when the label stage reads one (`plans`), else the planner's cached plan when the
//! cache has one, else the heuristic template of the question's type.
//!
//! **Cache layout.** `<guidance_cache>/<planner model>/<dataset>/<sha1(question text)>.txt`,
//! where `<planner model>` is the `planner_model` option with every `/` replaced by `__`
//! (`Qwen/Qwen2.5-7B-Instruct` → `Qwen__Qwen2.5-7B-Instruct`), `<dataset>` the question's
//! dataset (`hotpotqa`, `musique`, ...) and the file name the full lowercase hex SHA-1 of the
//! question text exactly as stored in the `questions` table, UTF-8. The file holds the plan
//! as UTF-8 text (surrounding whitespace is trimmed; an empty file counts as a miss). Without
//! `planner_model` the files are looked up in `<guidance_cache>/<dataset>/` directly. A cache
//! directory that does not exist yet is allowed (every lookup misses); a cache path that is
//! a file, or a URL, is a configuration error. The planner stage writes the same layout
//! through [`GuidanceSource::cache_path`], each plan with a sidecar `<sha1>.json`
//! (`{"teacher", "cache_entry"}`: the teacher and response-cache entry it came from,
//! [`GuidanceSource::lineage`]) that samples guided by it name in their lineage; a plan
//! file without one (written by hand or another tool) guides without lineage.
//!
//! **Heuristic templates.** Every template starts with the paper's opening sentence
//! ([`PLAN_PREFIX`]) and adds one sentence for the question type ([`QuestionKind`]): what to
//! look at first, how to widen the search when evidence is missing, and when to stop.
//! The type comes from the question text (a leading auxiliary verb → binary; "how many",
//! "how much", "percentage", "change in", ... → numeric; who/whom/whose/which/where/when →
//! factoid; anything else → default), except that a TAT-QA `answer_type` of `arithmetic` or
//! `count` in the question's `meta` makes it numeric. Gold answers are never used: guidance
//! must be computable at inference time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use distillery_core::Question;
use distillery_core::id::sha1_hex;

use crate::LabelError;

/// The opening sentence of every heuristic guidance (HSEQ 9.3.3.2).
pub const PLAN_PREFIX: &str =
    "Plan: retrieve a minimal set of highly relevant snippets; prefer concise facts.";

/// Coarse question types keying the heuristic templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuestionKind {
    Numeric,
    Factoid,
    Binary,
    Default,
}

impl QuestionKind {
    /// The type-specific sentence of the heuristic template.
    pub fn sentence(self) -> &'static str {
        match self {
            QuestionKind::Numeric => {
                "Look first at table rows and sentences that give figures for the items and \
                 periods asked about; if a figure is missing, widen to neighbouring rows or the \
                 surrounding paragraph; stop once every number needed is stated (or can be \
                 computed from stated numbers) and a snippet confirms it."
            }
            QuestionKind::Factoid => {
                "Look first for short passages that name the person, place, date or thing asked \
                 for; if the question reaches it through another entity, follow that entity to \
                 its own paragraph, row or relation; stop as soon as one snippet states the \
                 answer plainly."
            }
            QuestionKind::Binary => {
                "Look for one or two statements that settle the claim for each entity it \
                 involves; stop when the evidence clearly confirms or rules out the yes/no \
                 answer."
            }
            QuestionKind::Default => {
                "Favour snippets that mention the question's key entities and the relation \
                 between them; broaden to parent sections or adjacent facts when a link is \
                 missing; stop once the answer is stated explicitly."
            }
        }
    }

    /// The name used in lineage (`numeric`, `factoid`, `binary`, `default`).
    pub fn name(self) -> &'static str {
        match self {
            QuestionKind::Numeric => "numeric",
            QuestionKind::Factoid => "factoid",
            QuestionKind::Binary => "binary",
            QuestionKind::Default => "default",
        }
    }
}

const AUXILIARIES: &[&str] = &[
    "is", "are", "was", "were", "do", "does", "did", "can", "could", "will", "would", "has",
    "have", "had", "should", "shall", "may", "might", "must", "isn't", "aren't", "wasn't",
    "weren't", "don't", "doesn't", "didn't",
];

const NUMERIC_PHRASES: &[&str] = &[
    "how many",
    "how much",
    "how long",
    "how old",
    "how far",
    "how tall",
    "how big",
    "how large",
    "how high",
    "what percentage",
    "what percent",
    "what proportion",
    "what is the ratio",
    "what was the ratio",
    "what is the average",
    "what was the average",
    "what is the change",
    "what was the change",
    "change in",
    "difference between",
    "what is the total",
    "what was the total",
    "number of",
];

const FACTOID_WORDS: &[&str] = &["who", "whom", "whose", "which", "where", "when"];

/// The question's coarse type (see the module docs).
pub fn question_kind(q: &Question) -> QuestionKind {
    if let Ok(serde_json::Value::Object(m)) = serde_json::from_str::<serde_json::Value>(&q.meta)
        && let Some(t) = m.get("answer_type").and_then(|v| v.as_str())
        && matches!(t, "arithmetic" | "count")
    {
        return QuestionKind::Numeric;
    }
    kind_of_text(&q.question)
}

/// The coarse type of a question text.
pub fn kind_of_text(text: &str) -> QuestionKind {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    if words.first().is_some_and(|w| AUXILIARIES.contains(w)) {
        return QuestionKind::Binary;
    }
    let spaced = format!(" {} ", words.join(" "));
    if NUMERIC_PHRASES
        .iter()
        .any(|p| spaced.contains(&format!(" {p} ")))
        || lower.contains('%')
    {
        return QuestionKind::Numeric;
    }
    if words.iter().any(|w| FACTOID_WORDS.contains(w)) {
        return QuestionKind::Factoid;
    }
    QuestionKind::Default
}

/// The heuristic guidance of a question type.
pub fn template_guidance(kind: QuestionKind) -> String {
    format!("{PLAN_PREFIX} {}", kind.sentence())
}

/// A plan of this job's planner stage, with the teacher answer it came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub text: String,
    /// `model@revision` of the planner's teacher (empty when the line does not say).
    pub teacher: String,
    /// The response-cache entry (digest) of its answer (empty when the line does not say).
    pub entry: String,
}

/// Where guidance comes from: the planner cache, else the heuristic templates.
#[derive(Debug, Clone, Default)]
pub struct GuidanceSource {
    /// `<cache>/<model>` (or `<cache>` without a planner model), when a cache is configured.
    root: Option<PathBuf>,
    /// Plans of this job's planner stage by question id (read from its `plans.jsonl`), looked
    /// up before the cache.
    plans: Option<Arc<HashMap<String, Plan>>>,
}

impl GuidanceSource {
    /// A source reading the cache at `cache_dir` for `planner_model` (see the module docs);
    /// without a cache, templates only.
    pub fn new(
        cache_dir: Option<&str>,
        planner_model: Option<&str>,
    ) -> Result<GuidanceSource, LabelError> {
        let Some(dir) = cache_dir else {
            return Ok(GuidanceSource::default());
        };
        if dir.contains("://") {
            return Err(LabelError::Guidance {
                path: dir.to_string(),
                message: "only a local directory is supported as guidance cache".into(),
            });
        }
        let base = PathBuf::from(dir);
        if base.exists() && !base.is_dir() {
            return Err(LabelError::Guidance {
                path: dir.to_string(),
                message: "not a directory".into(),
            });
        }
        let root = match planner_model {
            Some(m) if !m.is_empty() => base.join(model_dir(m)),
            _ => base,
        };
        Ok(GuidanceSource {
            root: Some(root),
            plans: None,
        })
    }

    /// Also answers from a planner stage's plans (question id → plan), before the cache.
    pub fn with_plans(mut self, plans: HashMap<String, Plan>) -> GuidanceSource {
        self.plans = Some(Arc::new(plans));
        self
    }

    /// The planner stage's plan of a question, when it has a non-empty one.
    pub fn plan(&self, q: &Question) -> Option<&Plan> {
        self.plans
            .as_ref()
            .and_then(|p| p.get(&q.id))
            .filter(|p| !p.text.trim().is_empty())
    }

    /// The teacher plan behind the guidance [`GuidanceSource::guidance_for`] gave from
    /// `source`, when it has lineage: the planner stage's line, or the cache file's sidecar
    /// (`<sha1>.json` beside `<sha1>.txt`, see the module docs; its text left empty); `None`
    /// for templates and for plans without it.
    pub fn lineage(&self, q: &Question, source: &str) -> Option<Plan> {
        let plan = match source {
            "planner" => self.plan(q).cloned(),
            "cache" => {
                let side = std::fs::read(self.cache_path(q)?.with_extension("json")).ok()?;
                let v: serde_json::Value = serde_json::from_slice(&side).ok()?;
                let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
                Some(Plan {
                    text: String::new(),
                    teacher: field("teacher"),
                    entry: field("cache_entry"),
                })
            }
            _ => None,
        };
        plan.filter(|p| !p.teacher.is_empty())
    }

    /// The cache file of a question (whether or not it exists); `None` without a cache.
    pub fn cache_path(&self, q: &Question) -> Option<PathBuf> {
        self.root.as_deref().map(|r| cache_file(r, q))
    }

    /// The guidance of a question and where it came from: `"planner"` (the plans of this
    /// job's planner stage), `"cache"` or `"template"`.
    pub fn guidance_for(&self, q: &Question) -> (String, &'static str) {
        if let Some(plan) = self.plan(q) {
            return (plan.text.trim().to_string(), "planner");
        }
        if let Some(path) = self.cache_path(q)
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            let text = text.trim();
            if !text.is_empty() {
                return (text.to_string(), "cache");
            }
        }
        (template_guidance(question_kind(q)), "template")
    }

    /// The cache key of a question, relative to the cache directory:
    /// `<model>/<dataset>/<sha1>.txt` (without the model part when none is configured).
    pub fn cache_key(&self, q: &Question, planner_model: Option<&str>) -> String {
        let rel = format!("{}/{}.txt", dataset_dir(&q.dataset), sha1_hex(&q.question));
        match planner_model {
            Some(m) if !m.is_empty() => format!("{}/{rel}", model_dir(m)),
            _ => rel,
        }
    }
}

/// The directory name of a planner model id: `/` replaced by `__`.
pub fn model_dir(model: &str) -> String {
    model.replace('/', "__")
}

fn dataset_dir(dataset: &str) -> String {
    if dataset.is_empty() {
        "_".to_string()
    } else {
        dataset.replace('/', "__")
    }
}

fn cache_file(root: &Path, q: &Question) -> PathBuf {
    root.join(dataset_dir(&q.dataset))
        .join(format!("{}.txt", sha1_hex(&q.question)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_text() {
        assert_eq!(
            kind_of_text("Are A and B both in Iran?"),
            QuestionKind::Binary
        );
        assert_eq!(
            kind_of_text("How many stores are there?"),
            QuestionKind::Numeric
        );
        assert_eq!(
            kind_of_text("What was the change in revenue from 2018 to 2019?"),
            QuestionKind::Numeric
        );
        assert_eq!(kind_of_text("Who directed Kismet?"), QuestionKind::Factoid);
        assert_eq!(
            kind_of_text("The film [X] was directed by which person"),
            QuestionKind::Factoid
        );
        assert_eq!(kind_of_text("What genre is Kismet?"), QuestionKind::Default);
    }

    #[test]
    fn tatqa_answer_type_is_numeric() {
        let q = Question {
            question: "What is the revenue?".into(),
            meta: r#"{"answer_type":"arithmetic"}"#.into(),
            ..Default::default()
        };
        assert_eq!(question_kind(&q), QuestionKind::Numeric);
        let g = template_guidance(QuestionKind::Numeric);
        assert!(g.starts_with(PLAN_PREFIX));
    }

    #[test]
    fn model_dirs_replace_slashes() {
        assert_eq!(model_dir("Qwen/Qwen2.5-7B"), "Qwen__Qwen2.5-7B");
        assert!(GuidanceSource::new(Some("http://x/y"), None).is_err());
    }
}
