//! HSEQ planner guidance from a teacher (paper 000, 2.4 and 9.3.3): a two-to-four sentence
//! plan per question (first-look targets, expansion rule, stop rule), written into the
//! guidance cache that the label stage reads (`distillery-label::guidance`: per dataset,
//! question hash and planner model), so the iteration-agent samples carry the planner's
//! guidance instead of the heuristic template.
//!
//! Templates `planner_system.txt` and `planner_user.txt` (`{question}`, `{question_type}`:
//! `numeric`, `factoid`, `binary` or `default`, computed from the question, never from its
//! answer) can be replaced from a directory.

use distillery_core::Question;
use distillery_core::id::stable_id;
use distillery_label::guidance::question_kind;
use distillery_llm::{ChatMessage, ChatRequest, Parser};
use serde_json::{Value, json};

use crate::DistillError;

pub const PLANNER_TEMPLATE: &str = "hseq-planner";
pub const PLANNER_SCHEMA: &str = "hseq-plan-1";
/// Sentences a plan keeps at most.
pub const MAX_SENTENCES: usize = 4;

const FILES: [&str; 2] = ["planner_system.txt", "planner_user.txt"];
const BUILTIN: [&str; 2] = [
    include_str!("../templates/planner_system.txt"),
    include_str!("../templates/planner_user.txt"),
];

/// The planner templates.
#[derive(Debug, Clone)]
pub struct PlannerPrompts {
    texts: Vec<String>,
}

impl PlannerPrompts {
    /// The built-in templates, files of `dir` replacing them by name.
    pub fn load(dir: Option<&str>) -> Result<PlannerPrompts, DistillError> {
        let texts = crate::load_templates(dir, &FILES, &BUILTIN)?;
        if !texts[1].contains("{question}") {
            return Err(DistillError::Template {
                path: dir.map_or("builtin".into(), |d| format!("{d}/planner_user.txt")),
                message: "planner_user.txt has no {question} placeholder".into(),
            });
        }
        Ok(PlannerPrompts { texts })
    }

    /// Version: a hash of the template files.
    pub fn version(&self) -> String {
        stable_id(&[&self.texts[0], &self.texts[1]])[..12].to_string()
    }

    /// The planner request of a question.
    pub fn request(&self, q: &Question, max_tokens: u32, seed: Option<u64>) -> ChatRequest {
        let user = self.texts[1]
            .replace("{question_type}", question_kind(q).name())
            .replace("{question}", &q.question);
        ChatRequest {
            messages: vec![
                ChatMessage::new("system", self.texts[0].clone()),
                ChatMessage::new("user", user),
            ],
            temperature: Some(0.0),
            top_p: None,
            max_tokens: Some(max_tokens),
            seed,
            response_format: None,
            prompt: None,
        }
    }
}

/// Cleans a planner answer into a plan: fences and a leading `Plan:` label dropped, spacing
/// collapsed, at most [`MAX_SENTENCES`] sentences. Empty answers are invalid.
pub fn parse_plan(raw: &str) -> Result<String, String> {
    let text = raw.replace("```", " ");
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = text
        .strip_prefix("Plan:")
        .or_else(|| text.strip_prefix("plan:"))
        .unwrap_or(&text)
        .trim();
    if text.chars().filter(|c| c.is_alphanumeric()).count() < 3 {
        return Err("the plan is empty".into());
    }
    let mut out = String::new();
    let mut sentences = 0;
    for (i, c) in text.char_indices() {
        out.push(c);
        let end = matches!(c, '.' | '!' | '?') && text[i + c.len_utf8()..].starts_with(' ');
        if end {
            sentences += 1;
            if sentences == MAX_SENTENCES {
                break;
            }
        }
    }
    Ok(out.trim().to_string())
}

/// The cache parser of plans: stores `{"plan"}`.
#[derive(Debug, Default)]
pub struct PlanParser;

impl Parser for PlanParser {
    fn version(&self) -> &str {
        "plan-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        Ok(json!({ "plan": parse_plan(raw)? }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_cleaned_and_capped() {
        assert_eq!(
            parse_plan("Plan:  Look at the film paragraphs.\nThen the director.  Stop.").unwrap(),
            "Look at the film paragraphs. Then the director. Stop."
        );
        let long = "One. Two. Three. Four. Five. Six.";
        assert_eq!(parse_plan(long).unwrap(), "One. Two. Three. Four.");
        assert!(parse_plan("  ``` ```  ").is_err());
        let p = PlannerPrompts::load(None).unwrap();
        let q = Question {
            question: "Who directed Harbor of Glass?".into(),
            ..Default::default()
        };
        let r = p.request(&q, 128, None);
        assert_eq!(
            r.messages[1].content,
            "Question: Who directed Harbor of Glass?\nQuestion type: factoid"
        );
    }
}
