//! The teacher's check of a weak positive: given a question, its gold answer and one piece of
//! evidence a teacher-free labeller picked (a sentence, a row, a triple, with the title of the
//! page it comes from), does the evidence state a fact the answer needs? The label stage's
//! `verify` option asks it for every candidate of the SFT method and keeps the confirmed ones.
//!
//! The teacher is asked for `{"supports": true|false}` (`response_format` json_schema); the
//! parser also accepts a bare `true`/`false`/`yes`/`no`. The templates
//! (`support_teacher_system.txt`, `support_teacher_user.txt`; placeholders `{question}`,
//! `{answer}`, `{title}`, `{evidence}`) can be replaced from a directory.

use distillery_core::Question;
use distillery_core::id::stable_id;
use distillery_llm::{ChatMessage, ChatRequest, Parser, ResponseFormat};
use serde_json::{Value, json};

use crate::DistillError;

pub const SUPPORT_TEMPLATE: &str = "label-support-teacher";
pub const SUPPORT_SCHEMA: &str = "supports-1";

const FILES: [&str; 2] = ["support_teacher_system.txt", "support_teacher_user.txt"];
const BUILTIN: [&str; 2] = [
    include_str!("../templates/support_teacher_system.txt"),
    include_str!("../templates/support_teacher_user.txt"),
];
const PLACEHOLDERS: [&str; 4] = ["{question}", "{answer}", "{title}", "{evidence}"];

/// The support-check templates.
#[derive(Debug, Clone)]
pub struct SupportPrompts {
    texts: Vec<String>,
}

impl SupportPrompts {
    pub fn load(dir: Option<&str>) -> Result<SupportPrompts, DistillError> {
        let texts = crate::load_templates(dir, &FILES, &BUILTIN)?;
        if let Some(p) = PLACEHOLDERS.iter().find(|p| !texts[1].contains(*p)) {
            return Err(DistillError::Template {
                path: dir.map_or("builtin".into(), |d| format!("{d}/{}", FILES[1])),
                message: format!("{} needs {p}", FILES[1]),
            });
        }
        Ok(SupportPrompts { texts })
    }

    /// Version of the templates (part of each cache key).
    pub fn version(&self) -> String {
        stable_id(&[&self.texts[0], &self.texts[1]])[..12].to_string()
    }

    /// The user turn: the placeholders filled in one pass, so a value holding a placeholder
    /// stays as it is.
    pub fn user(&self, q: &Question, title: &str, evidence: &str) -> String {
        let answer = q.answers.first().map_or("", String::as_str);
        let mut out = String::with_capacity(self.texts[1].len() + evidence.len() + 128);
        let mut rest = self.texts[1].as_str();
        while let Some((at, p)) = PLACEHOLDERS
            .iter()
            .filter_map(|p| rest.find(p).map(|i| (i, *p)))
            .min_by_key(|(i, _)| *i)
        {
            out.push_str(&rest[..at]);
            out.push_str(match p {
                "{question}" => &q.question,
                "{answer}" => answer,
                "{title}" => title,
                _ => evidence,
            });
            rest = &rest[at + p.len()..];
        }
        out.push_str(rest);
        out
    }

    /// The teacher request for one piece of evidence.
    pub fn request(
        &self,
        q: &Question,
        title: &str,
        evidence: &str,
        max_tokens: u32,
        seed: Option<u64>,
    ) -> ChatRequest {
        ChatRequest {
            messages: vec![
                ChatMessage::new("system", self.texts[0].clone()),
                ChatMessage::new("user", self.user(q, title, evidence)),
            ],
            temperature: Some(0.0),
            top_p: None,
            max_tokens: Some(max_tokens),
            seed,
            response_format: Some(ResponseFormat::JsonSchema {
                name: "support".into(),
                schema: json!({
                    "type": "object",
                    "properties": {"supports": {"type": "boolean"}},
                    "required": ["supports"],
                    "additionalProperties": false,
                }),
                strict: true,
            }),
            prompt: None,
        }
    }
}

/// Parses a support verdict.
pub fn parse_support(raw: &str) -> Result<bool, String> {
    crate::parse_verdict(raw, "supports", &["supports"], &[])
}

/// The cache parser of support verdicts: stores `{"supports"}`.
#[derive(Debug, Default)]
pub struct SupportParser;

impl Parser for SupportParser {
    fn version(&self) -> &str {
        "support-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        Ok(json!({ "supports": parse_support(raw)? }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_parse_and_the_prompt_is_exact() {
        assert!(parse_support("{\"supports\": true}").unwrap());
        assert!(!parse_support("```json\n{\"supports\": false}\n```").unwrap());
        assert!(parse_support("Yes.").unwrap());
        assert!(parse_support("perhaps").is_err());
        let p = SupportPrompts::load(None).unwrap();
        let q = Question {
            question: "Who directed Harbor of Glass?".into(),
            answers: vec!["Ines Calloway".into(), "I. Calloway".into()],
            ..Default::default()
        };
        let r = p.request(
            &q,
            "Harbor of Glass",
            "It is a film by {answer}.",
            16,
            Some(7),
        );
        assert_eq!(r.messages.len(), 2);
        assert_eq!(
            r.messages[1].content,
            "Question: Who directed Harbor of Glass?\nAnswer: Ines Calloway\nEvidence from \
             \"Harbor of Glass\":\n```\nIt is a film by {answer}.\n```"
        );
        assert_eq!(
            (r.max_tokens, r.seed, r.temperature),
            (Some(16), Some(7), Some(0.0))
        );
    }

    #[test]
    fn a_template_without_a_placeholder_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("support_teacher_user.txt"), "Q: {question}").unwrap();
        let e = SupportPrompts::load(dir.path().to_str()).unwrap_err();
        assert!(e.to_string().contains("needs {answer}"), "{e}");
    }
}
