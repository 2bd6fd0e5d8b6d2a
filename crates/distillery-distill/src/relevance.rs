//! HANRAG relevance labels `<Q, D, IS_REL>` from a teacher (paper 001, 4.2 and appendix B):
//! for each context document of a question, the teacher judges whether the document states a
//! fact needed to answer the question; each judgement becomes a student sample of HANRAG's
//! relevance discriminator (task `hanrag_relevance`), the target `true` or `false` as the
//! ending discriminator's.
//!
//! The teacher is asked for `{"relevant": true|false}` (`response_format` json_schema); the
//! parser also accepts a bare `true`/`false`/`yes`/`no` answer. Templates (teacher:
//! `relevance_teacher_system.txt`, `relevance_teacher_user.txt`; student:
//! `relevance_system.txt`, `relevance_user.txt`; placeholders `{question}`, `{document}` =
//! the title, a newline and the text) can be replaced from a directory.

use distillery_core::id::stable_id;
use distillery_core::{Document, Question};
use distillery_llm::{ChatMessage, ChatRequest, Parser, ResponseFormat};
use serde_json::{Value, json};

use crate::DistillError;

pub const RELEVANCE_TEMPLATE: &str = "hanrag-relevance-teacher";
pub const RELEVANCE_SCHEMA: &str = "relevant-1";
pub const TASK_RELEVANCE: &str = "hanrag_relevance";

const FILES: [&str; 4] = [
    "relevance_teacher_system.txt",
    "relevance_teacher_user.txt",
    "relevance_system.txt",
    "relevance_user.txt",
];
const BUILTIN: [&str; 4] = [
    include_str!("../templates/relevance_teacher_system.txt"),
    include_str!("../templates/relevance_teacher_user.txt"),
    include_str!("../templates/relevance_system.txt"),
    include_str!("../templates/relevance_user.txt"),
];

/// The relevance templates.
#[derive(Debug, Clone)]
pub struct RelevancePrompts {
    texts: Vec<String>,
}

fn document_text(d: &Document) -> String {
    format!("{}\n{}", d.title, d.text)
}

impl RelevancePrompts {
    pub fn load(dir: Option<&str>) -> Result<RelevancePrompts, DistillError> {
        let texts = crate::load_templates(dir, &FILES, &BUILTIN)?;
        for i in [1, 3] {
            if !(texts[i].contains("{question}") && texts[i].contains("{document}")) {
                return Err(DistillError::Template {
                    path: dir.map_or("builtin".into(), |d| format!("{d}/{}", FILES[i])),
                    message: format!("{} needs {{question}} and {{document}}", FILES[i]),
                });
            }
        }
        Ok(RelevancePrompts { texts })
    }

    /// Version of the teacher template.
    pub fn teacher_version(&self) -> String {
        stable_id(&[&self.texts[0], &self.texts[1]])[..12].to_string()
    }

    /// Version of the student template (sample lineage).
    pub fn student_version(&self) -> String {
        stable_id(&[&self.texts[2], &self.texts[3]])[..12].to_string()
    }

    fn user(&self, i: usize, q: &Question, d: &Document) -> String {
        // Document first: a question holding "{document}" stays as it is.
        self.texts[i]
            .replace("{document}", &document_text(d))
            .replace("{question}", &q.question)
    }

    /// The teacher request for a (question, document) pair.
    pub fn request(
        &self,
        q: &Question,
        d: &Document,
        max_tokens: u32,
        seed: Option<u64>,
    ) -> ChatRequest {
        ChatRequest {
            messages: vec![
                ChatMessage::new("system", self.texts[0].clone()),
                ChatMessage::new("user", self.user(1, q, d)),
            ],
            temperature: Some(0.0),
            top_p: None,
            max_tokens: Some(max_tokens),
            seed,
            response_format: Some(ResponseFormat::JsonSchema {
                name: "relevance".into(),
                schema: json!({
                    "type": "object",
                    "properties": {"relevant": {"type": "boolean"}},
                    "required": ["relevant"],
                    "additionalProperties": false,
                }),
                strict: true,
            }),
            prompt: None,
        }
    }

    /// The student chat: `(role, content)` with the target `true`/`false` last.
    pub fn student(&self, q: &Question, d: &Document, relevant: bool) -> Vec<(String, String)> {
        let mut m = Vec::new();
        if !self.texts[2].is_empty() {
            m.push(("system".to_string(), self.texts[2].clone()));
        }
        m.push(("user".to_string(), self.user(3, q, d)));
        m.push(("assistant".to_string(), relevant.to_string()));
        m
    }
}

/// Parses a relevance judgement.
pub fn parse_relevance(raw: &str) -> Result<bool, String> {
    crate::parse_verdict(
        raw,
        "relevant",
        &["relevant"],
        &["irrelevant", "not relevant"],
    )
}

/// The cache parser of relevance judgements: stores `{"relevant"}`.
#[derive(Debug, Default)]
pub struct RelevanceParser;

impl Parser for RelevanceParser {
    fn version(&self) -> &str {
        "relevance-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        Ok(json!({ "relevant": parse_relevance(raw)? }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judgements_parse_and_samples_are_exact() {
        assert!(parse_relevance("{\"relevant\": true}").unwrap());
        assert!(!parse_relevance("```json\n{\"relevant\": false}\n```").unwrap());
        assert!(parse_relevance("Yes.").unwrap());
        assert!(parse_relevance("maybe").is_err());
        let p = RelevancePrompts::load(None).unwrap();
        let q = Question {
            question: "Who directed Harbor of Glass?".into(),
            ..Default::default()
        };
        let d = Document {
            title: "Harbor of Glass".into(),
            text: "Harbor of Glass is a film by Ines Calloway.".into(),
            ..Default::default()
        };
        let m = p.student(&q, &d, true);
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[1].1,
            "Question: Who directed Harbor of Glass?\nDocument:\n```\nHarbor of Glass\nHarbor of Glass is a film by Ines Calloway.\n```\nRelevant:"
        );
        assert_eq!(m[2].1, "true");
        assert_eq!(p.student(&q, &d, false)[2].1, "false");
    }
}
