//! The NER and OpenIE prompts (HippoRAG's two-call scheme, our own wording).
//!
//! Each call is a chat: the system instruction, a one-shot example (a user turn with the
//! example passage and the assistant's answer), then the user turn of the passage. The
//! OpenIE user turn gives the passage in a fenced block followed by the NER answer as JSON
//! (`{"named_entities": [...]}`), as HippoRAG's prompt does.
//!
//! Templates are plain text files with `{passage}` and `{named_entities}` placeholders. The
//! built-in ones live in `crates/distillery-triples/templates/`; a directory given as the
//! stage's `templates` option replaces any of them by file name:
//!
//! | file | what |
//! |---|---|
//! | `ner_system.txt` | NER instruction |
//! | `ner_user.txt` | NER user turn (`{passage}`) |
//! | `openie_system.txt` | OpenIE instruction |
//! | `openie_user.txt` | OpenIE user turn (`{passage}`, `{named_entities}`) |
//! | `example_passage.txt` | the one-shot passage |
//! | `example_ner.json` | the one-shot NER answer |
//! | `example_openie.json` | the one-shot OpenIE answer |
//!
//! A template's version is a hash of the files it uses, so editing a template changes the
//! cache key of every call made with it, and nothing stale is reused.

use std::path::Path;

use distillery_core::id::stable_id;
use distillery_llm::{ChatMessage, ResponseFormat};
use serde_json::json;

use crate::ExtractError;

/// The template files, in the order of the table above.
pub const FILES: [&str; 7] = [
    "ner_system.txt",
    "ner_user.txt",
    "openie_system.txt",
    "openie_user.txt",
    "example_passage.txt",
    "example_ner.json",
    "example_openie.json",
];

const BUILTIN: [&str; 7] = [
    include_str!("../templates/ner_system.txt"),
    include_str!("../templates/ner_user.txt"),
    include_str!("../templates/openie_system.txt"),
    include_str!("../templates/openie_user.txt"),
    include_str!("../templates/example_passage.txt"),
    include_str!("../templates/example_ner.json"),
    include_str!("../templates/example_openie.json"),
];

/// Template ids: the first half of the cache key.
pub const NER_TEMPLATE: &str = "hipporag-ner";
pub const OPENIE_TEMPLATE: &str = "hipporag-openie";

/// The loaded templates.
#[derive(Debug, Clone)]
pub struct Prompts {
    texts: Vec<String>,
    /// Where each file came from (`builtin` or a path), for messages.
    pub origins: Vec<String>,
}

impl Prompts {
    /// The built-in templates, with files of `dir` (when given) replacing them by name.
    pub fn load(dir: Option<&str>) -> Result<Prompts, ExtractError> {
        let mut texts = Vec::new();
        let mut origins = Vec::new();
        for (name, builtin) in FILES.iter().zip(BUILTIN) {
            let file = dir.map(|d| Path::new(d).join(name));
            match file.filter(|f| f.exists()) {
                Some(f) => {
                    let text = std::fs::read_to_string(&f).map_err(|e| ExtractError::Template {
                        path: f.display().to_string(),
                        message: e.to_string(),
                    })?;
                    origins.push(f.display().to_string());
                    texts.push(text.trim_end().to_string());
                }
                None => {
                    origins.push("builtin".to_string());
                    texts.push(builtin.trim_end().to_string());
                }
            }
        }
        let p = Prompts { texts, origins };
        p.check()?;
        Ok(p)
    }

    fn text(&self, name: &str) -> &str {
        let i = FILES.iter().position(|f| *f == name).expect("known file");
        &self.texts[i]
    }

    fn origin(&self, name: &str) -> &str {
        let i = FILES.iter().position(|f| *f == name).expect("known file");
        &self.origins[i]
    }

    /// Placeholders must be there, and the example answers must be what the parsers accept.
    fn check(&self) -> Result<(), ExtractError> {
        let need = |file: &str, ph: &str| {
            if self.text(file).contains(ph) {
                Ok(())
            } else {
                Err(ExtractError::Template {
                    path: self.origin(file).to_string(),
                    message: format!("{file} has no {ph} placeholder"),
                })
            }
        };
        need("ner_user.txt", "{passage}")?;
        need("openie_user.txt", "{passage}")?;
        need("openie_user.txt", "{named_entities}")?;
        crate::parse::parse_entities(self.text("example_ner.json")).map_err(|m| {
            ExtractError::Template {
                path: self.origin("example_ner.json").to_string(),
                message: m,
            }
        })?;
        crate::parse::parse_triples(self.text("example_openie.json")).map_err(|m| {
            ExtractError::Template {
                path: self.origin("example_openie.json").to_string(),
                message: m,
            }
        })?;
        Ok(())
    }

    /// Version of the NER template: a hash of the files it uses.
    pub fn ner_version(&self) -> String {
        self.version(&[
            "ner_system.txt",
            "ner_user.txt",
            "example_passage.txt",
            "example_ner.json",
        ])
    }

    /// Version of the OpenIE template.
    pub fn openie_version(&self) -> String {
        self.version(&[
            "openie_system.txt",
            "openie_user.txt",
            "example_passage.txt",
            "example_ner.json",
            "example_openie.json",
        ])
    }

    /// The one-shot answers (NER, OpenIE): what a typical answer looks like, for estimates.
    pub fn example_answers(&self) -> (&str, &str) {
        (
            self.text("example_ner.json"),
            self.text("example_openie.json"),
        )
    }

    fn version(&self, files: &[&str]) -> String {
        let parts: Vec<&str> = files.iter().map(|f| self.text(f)).collect();
        stable_id(&parts)[..12].to_string()
    }

    /// The NER chat for a passage.
    pub fn ner(&self, passage: &str) -> Vec<ChatMessage> {
        let user = |p: &str| self.text("ner_user.txt").replace("{passage}", p);
        vec![
            ChatMessage::new("system", self.text("ner_system.txt")),
            ChatMessage::new("user", user(self.text("example_passage.txt"))),
            ChatMessage::new("assistant", self.text("example_ner.json")),
            ChatMessage::new("user", user(passage)),
        ]
    }

    /// The OpenIE chat for a passage and its entities.
    pub fn openie(&self, passage: &str, entities: &[String]) -> Vec<ChatMessage> {
        let user = |p: &str, ents: &str| {
            // One pass over the template, so a passage holding "{named_entities}" stays as it is.
            let t = self.text("openie_user.txt");
            let mut out = String::with_capacity(t.len() + p.len() + ents.len());
            let mut rest = t;
            while let Some(i) = rest.find('{') {
                out.push_str(&rest[..i]);
                let tail = &rest[i..];
                if let Some(r) = tail.strip_prefix("{passage}") {
                    out.push_str(p);
                    rest = r;
                } else if let Some(r) = tail.strip_prefix("{named_entities}") {
                    out.push_str(ents);
                    rest = r;
                } else {
                    out.push('{');
                    rest = &tail[1..];
                }
            }
            out.push_str(rest);
            out
        };
        let example_ents = self.text("example_ner.json");
        let ents = json!({ "named_entities": entities }).to_string();
        vec![
            ChatMessage::new("system", self.text("openie_system.txt")),
            ChatMessage::new("user", user(self.text("example_passage.txt"), example_ents)),
            ChatMessage::new("assistant", self.text("example_openie.json")),
            ChatMessage::new("user", user(passage, &ents)),
        ]
    }
}

/// Longest entity or triple element the `json_schema` constraint lets the model write
/// (chars): a runaway string would otherwise eat the whole `max_tokens` and leave nothing to
/// parse.
pub const MAX_STRING: u32 = 160;

/// How answers are constrained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Constraint {
    /// `response_format: json_schema` with the answer's schema (vLLM: guided decoding).
    JsonSchema,
    /// `response_format: json_object`.
    JsonObject,
    /// No `response_format`: the parser copes with prose and fences.
    None,
}

impl Constraint {
    pub fn from_name(s: &str) -> Option<Constraint> {
        match s {
            "json_schema" => Some(Constraint::JsonSchema),
            "json_object" => Some(Constraint::JsonObject),
            "none" => Some(Constraint::None),
            _ => None,
        }
    }

    /// The NER `response_format`.
    pub fn ner(self) -> Option<ResponseFormat> {
        self.format(
            "named_entities",
            json!({
                "type": "object",
                "properties": {"named_entities": {"type": "array", "items": {
                    "type": "string", "maxLength": MAX_STRING,
                }}},
                "required": ["named_entities"],
                "additionalProperties": false,
            }),
        )
    }

    /// The OpenIE `response_format`.
    pub fn openie(self) -> Option<ResponseFormat> {
        self.format(
            "triples",
            json!({
                "type": "object",
                "properties": {"triples": {"type": "array", "items": {
                    "type": "array", "minItems": 3, "maxItems": 3,
                    "items": {"type": "string", "maxLength": MAX_STRING},
                }}},
                "required": ["triples"],
                "additionalProperties": false,
            }),
        )
    }

    fn format(self, name: &str, schema: serde_json::Value) -> Option<ResponseFormat> {
        match self {
            Constraint::JsonSchema => Some(ResponseFormat::JsonSchema {
                name: name.to_string(),
                schema,
                strict: true,
            }),
            Constraint::JsonObject => Some(ResponseFormat::JsonObject),
            Constraint::None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_templates_render_the_one_shot_chats() {
        let p = Prompts::load(None).unwrap();
        let ner = p.ner("Ada Lovelace was born in London.");
        assert_eq!(ner.len(), 4);
        assert_eq!(
            ner.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(),
            ["system", "user", "assistant", "user"]
        );
        assert_eq!(ner[3].content, "Ada Lovelace was born in London.");
        let ie = p.openie("A {named_entities} B", &["Ada Lovelace".to_string()]);
        assert!(
            ie[3]
                .content
                .starts_with("Passage:\n```\nA {named_entities} B\n```\n\n")
        );
        assert!(
            ie[3]
                .content
                .ends_with("{\"named_entities\":[\"Ada Lovelace\"]}")
        );
        assert!(ie[1].content.contains("\"Lake Zell\""));
        assert_eq!(p.ner_version().len(), 12);
        assert_ne!(p.ner_version(), p.openie_version());
    }

    #[test]
    fn a_template_directory_replaces_files_and_changes_the_version() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("ner_system.txt"),
            "Name the entities. JSON please.",
        )
        .unwrap();
        let base = Prompts::load(None).unwrap();
        let p = Prompts::load(dir.path().to_str()).unwrap();
        assert_eq!(p.ner("x")[0].content, "Name the entities. JSON please.");
        assert_ne!(p.ner_version(), base.ner_version());
        assert_eq!(p.openie_version(), base.openie_version());

        std::fs::write(dir.path().join("openie_user.txt"), "{passage} only").unwrap();
        let err = Prompts::load(dir.path().to_str()).unwrap_err().to_string();
        assert!(
            err.contains("openie_user.txt") && err.contains("{named_entities}"),
            "{err}"
        );
        std::fs::write(
            dir.path().join("openie_user.txt"),
            "{passage} {named_entities}",
        )
        .unwrap();
        std::fs::write(dir.path().join("example_ner.json"), "not json").unwrap();
        let err = Prompts::load(dir.path().to_str()).unwrap_err().to_string();
        assert!(err.contains("example_ner.json"), "{err}");
    }
}
