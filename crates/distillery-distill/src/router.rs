//! Adaptive-RAG silver labels for a query-complexity router (`../shared/docs/formats.md`,
//! "HANRAG Revelator tasks"): `A` when the teacher answers the question without retrieval,
//! else `B` when it answers from the question's documents in one step, else `C` (the
//! simplest strategy that answers correctly wins). Teacher templates
//! `router_closed_user.txt` and `router_open_user.txt` (`{question}`, and `{documents}`: each
//! document's title, a newline and its text, a blank line between), and the student's
//! `router_user.txt` (`{question}`), can be replaced from a directory; answers are parsed as
//! RAS's base answers (the first line).

use distillery_core::id::stable_id;
use distillery_core::{Document, Question};
use distillery_llm::{ChatMessage, ChatRequest};

use crate::DistillError;

pub const ROUTER_CLOSED_TEMPLATE: &str = "router-closed-answer";
pub const ROUTER_OPEN_TEMPLATE: &str = "router-open-answer";
pub const TASK_ROUTER: &str = "router_silver";

const FILES: [&str; 3] = [
    "router_closed_user.txt",
    "router_open_user.txt",
    "router_user.txt",
];
const BUILTIN: [&str; 3] = [
    include_str!("../templates/router_closed_user.txt"),
    include_str!("../templates/router_open_user.txt"),
    include_str!("../templates/router_user.txt"),
];

/// The router templates.
#[derive(Debug, Clone)]
pub struct RouterPrompts {
    texts: Vec<String>,
}

impl RouterPrompts {
    pub fn load(dir: Option<&str>) -> Result<RouterPrompts, DistillError> {
        let texts = crate::load_templates(dir, &FILES, &BUILTIN)?;
        let needs = [
            &["{question}"][..],
            &["{question}", "{documents}"],
            &["{question}"],
        ];
        for (i, keys) in needs.iter().enumerate() {
            if let Some(k) = keys.iter().find(|k| !texts[i].contains(**k)) {
                return Err(DistillError::Template {
                    path: dir.map_or("builtin".into(), |d| format!("{d}/{}", FILES[i])),
                    message: format!("{} needs {k}", FILES[i]),
                });
            }
        }
        Ok(RouterPrompts { texts })
    }

    /// Version of a teacher template (0: closed, 1: open).
    pub fn teacher_version(&self, i: usize) -> String {
        stable_id(&[&self.texts[i]])[..12].to_string()
    }

    /// Version of the student template (sample lineage).
    pub fn student_version(&self) -> String {
        stable_id(&[&self.texts[2]])[..12].to_string()
    }

    /// The teacher request: closed-book without `docs`, else over them.
    pub fn request(
        &self,
        q: &Question,
        docs: Option<&[&Document]>,
        max_tokens: u32,
        seed: Option<u64>,
    ) -> ChatRequest {
        let text = match docs {
            None => self.texts[0].replace("{question}", &q.question),
            Some(docs) => {
                let docs: Vec<String> = docs
                    .iter()
                    .map(|d| format!("{}\n{}", d.title, d.text))
                    .collect();
                // Documents first: a question holding "{documents}" stays as it is.
                self.texts[1]
                    .replace("{documents}", &docs.join("\n\n"))
                    .replace("{question}", &q.question)
            }
        };
        ChatRequest {
            messages: vec![ChatMessage::new("user", text)],
            temperature: Some(0.0),
            max_tokens: Some(max_tokens),
            seed,
            ..Default::default()
        }
    }

    /// The student's prompt for a question.
    pub fn student(&self, q: &Question) -> String {
        self.texts[2].replace("{question}", &q.question)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_filled_and_checked() {
        let p = RouterPrompts::load(None).unwrap();
        let q = Question {
            question: "Who wrote {documents}?".into(),
            ..Default::default()
        };
        let d = Document {
            title: "T".into(),
            text: "body".into(),
            ..Default::default()
        };
        let open = p.request(&q, Some(&[&d]), 16, None);
        assert!(open.messages[0].content.contains("T\nbody"));
        assert!(open.messages[0].content.contains("Who wrote {documents}?"));
        assert!(
            !p.request(&q, None, 16, None).messages[0]
                .content
                .contains("body")
        );
        assert!(p.student(&q).contains("Who wrote"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("router_open_user.txt"), "{question} only").unwrap();
        let e = RouterPrompts::load(dir.path().to_str())
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs {documents}"), "{e}");
    }
}
