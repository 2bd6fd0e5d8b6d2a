//! HANRAG's compound-query benchmark (paper 001, appendix B.1): per entity, the teacher writes
//! one simple question and answer from each of the entity's documents (the answer copied from
//! the document), then combines 2 to 4 of an entity's questions into one compound question
//! whose answer is theirs together. Those compound questions train the Revelator's router
//! (class `compound question`) and decomposer (`<Q, q1 … qn>`).
//!
//! The teacher's question is asked for `{"Question": ..., "Answer": ...}` (`response_format`
//! json_schema); its combination is the compound question as text, or `no` when the
//! questions do not combine. Templates (`compound_qa_system.txt`, `compound_qa_user.txt` with
//! `{entity}`, `{title}`, `{document}`; `compound_combine_system.txt`,
//! `compound_combine_user.txt` with `{questions}`) can be replaced from a directory.
//!
//! [`accuracy`] is the paper's metric on the benchmark: the share of the answer's entities
//! (its sub-answers) that a prediction contains.

use distillery_core::id::stable_id;
use distillery_label::normalize::normalize_answer;
use distillery_llm::{ChatMessage, ChatRequest, Parser, ResponseFormat};
use serde_json::{Value, json};

use crate::DistillError;

pub const QA_TEMPLATE: &str = "hanrag-compound-qa";
pub const QA_SCHEMA: &str = "compound-qa-1";
pub const COMBINE_TEMPLATE: &str = "hanrag-compound-combine";
pub const COMBINE_SCHEMA: &str = "compound-combine-1";

const FILES: [&str; 4] = [
    "compound_qa_system.txt",
    "compound_qa_user.txt",
    "compound_combine_system.txt",
    "compound_combine_user.txt",
];
const BUILTIN: [&str; 4] = [
    include_str!("../templates/compound_qa_system.txt"),
    include_str!("../templates/compound_qa_user.txt"),
    include_str!("../templates/compound_combine_system.txt"),
    include_str!("../templates/compound_combine_user.txt"),
];

/// The benchmark's templates.
#[derive(Debug, Clone)]
pub struct CompoundPrompts {
    texts: Vec<String>,
}

impl CompoundPrompts {
    pub fn load(dir: Option<&str>) -> Result<CompoundPrompts, DistillError> {
        let texts = crate::load_templates(dir, &FILES, &BUILTIN)?;
        for (i, ph) in [
            (1, "{entity}"),
            (1, "{title}"),
            (1, "{document}"),
            (3, "{questions}"),
        ] {
            if !texts[i].contains(ph) {
                return Err(DistillError::Template {
                    path: dir.map_or("builtin".into(), |d| format!("{d}/{}", FILES[i])),
                    message: format!("{} needs {ph}", FILES[i]),
                });
            }
        }
        Ok(CompoundPrompts { texts })
    }

    /// Versions of the question and the combination templates.
    pub fn versions(&self) -> (String, String) {
        let v = |a: usize| stable_id(&[&self.texts[a], &self.texts[a + 1]])[..12].to_string();
        (v(0), v(2))
    }

    /// The request for one (entity, document) question.
    pub fn qa_request(
        &self,
        entity: &str,
        title: &str,
        document: &str,
        max_tokens: u32,
        seed: Option<u64>,
    ) -> ChatRequest {
        let user = crate::cirag::fill(
            &self.texts[1],
            &[
                ("{entity}", entity),
                ("{title}", title),
                ("{document}", document),
            ],
        );
        ChatRequest {
            messages: vec![
                ChatMessage::new("system", self.texts[0].clone()),
                ChatMessage::new("user", user),
            ],
            temperature: Some(0.0),
            top_p: None,
            max_tokens: Some(max_tokens),
            seed,
            response_format: Some(ResponseFormat::JsonSchema {
                name: "compound_qa".into(),
                schema: json!({
                    "type": "object",
                    "properties": {
                        "Question": {"type": "string"},
                        "Answer": {"type": "string"},
                    },
                    "required": ["Question", "Answer"],
                    "additionalProperties": false,
                }),
                strict: true,
            }),
            prompt: None,
        }
    }

    /// The request combining simple questions (`Simple Question1: ...` lines).
    pub fn combine_request(
        &self,
        questions: &[&str],
        max_tokens: u32,
        seed: Option<u64>,
    ) -> ChatRequest {
        let lines: Vec<String> = questions
            .iter()
            .enumerate()
            .map(|(i, q)| format!("Simple Question{}: {q}", i + 1))
            .collect();
        let user = crate::cirag::fill(&self.texts[3], &[("{questions}", &lines.join("\n"))]);
        ChatRequest {
            messages: vec![
                ChatMessage::new("system", self.texts[2].clone()),
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

/// A simple question and its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleQa {
    pub question: String,
    pub answer: String,
}

/// Parses the teacher's `{"Question", "Answer"}` (fenced or with prose around it).
pub fn parse_qa(raw: &str) -> Result<SimpleQa, String> {
    let (v, _) = distillery_triples::parse::extract_json(raw).map_err(|e| e.to_string())?;
    let field = |k: &str| {
        v.get(k)
            .or_else(|| v.get(k.to_lowercase()))
            .and_then(Value::as_str)
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("no `{k}` string in the answer"))
    };
    Ok(SimpleQa {
        question: field("Question")?,
        answer: field("Answer")?,
    })
}

/// Parses a combination: the compound question (quotes and a `Compound Question:` prefix
/// taken off), or `None` for the teacher's `no`.
pub fn parse_combination(raw: &str) -> Result<Option<String>, String> {
    let mut s = raw.trim();
    if let Some(i) = s.rfind("Compound Question:") {
        s = &s[i + "Compound Question:".len()..];
    }
    let s = s
        .trim()
        .trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '“' | '”' | '‘' | '’'))
        .trim();
    let first = s.lines().next().unwrap_or("").trim();
    if first.is_empty() {
        return Err("empty combination".into());
    }
    // `no`, `No.`, `No, these cannot be combined.`: the first word alone.
    let word = first
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or("");
    if word.eq_ignore_ascii_case("no") {
        return Ok(None);
    }
    Ok(Some(first.to_string()))
}

/// The cache parser of simple questions: stores `{"question", "answer"}`.
#[derive(Debug, Default)]
pub struct QaParser;

impl Parser for QaParser {
    fn version(&self) -> &str {
        "compound-qa-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        let qa = parse_qa(raw)?;
        Ok(json!({"question": qa.question, "answer": qa.answer}))
    }
}

/// The cache parser of combinations: stores `{"compound"}` (null for `no`).
#[derive(Debug, Default)]
pub struct CombineParser;

impl Parser for CombineParser {
    fn version(&self) -> &str {
        "compound-combine-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        Ok(json!({ "compound": parse_combination(raw)? }))
    }
}

/// Whether `answer` is in `document`, both normalised (SQuAD rules), as whole words.
pub fn answer_in(answer: &str, document: &str) -> bool {
    let a = normalize_answer(answer);
    !a.is_empty() && distillery_label::normalize::contains_phrase(&normalize_answer(document), &a)
}

/// HANRAG's compound accuracy: the share of `answers` (the compound answer's entities, one
/// per sub-question) whose normalised text the normalised prediction contains as whole
/// words; 0 for no answers.
pub fn accuracy(prediction: &str, answers: &[String]) -> f64 {
    if answers.is_empty() {
        return 0.0;
    }
    let p = normalize_answer(prediction);
    let found = answers
        .iter()
        .filter(|a| {
            let a = normalize_answer(a);
            !a.is_empty() && distillery_label::normalize::contains_phrase(&p, &a)
        })
        .count();
    found as f64 / answers.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        let qa =
            parse_qa("```json\n{\"Question\": \"When was X born?\", \"Answer\": \"1983\"}\n```")
                .unwrap();
        assert_eq!(
            (qa.question.as_str(), qa.answer.as_str()),
            ("When was X born?", "1983")
        );
        assert!(parse_qa("{\"Question\": \"Q?\"}").is_err());
        assert_eq!(
            parse_combination("Compound Question: \"When was X born, and where?\"").unwrap(),
            Some("When was X born, and where?".to_string())
        );
        assert_eq!(parse_combination("No.").unwrap(), None);
        assert_eq!(
            parse_combination("No, these questions cannot be combined.").unwrap(),
            None
        );
        assert_eq!(
            parse_combination("Nobel Prize: when was it won, and by whom?").unwrap(),
            Some("Nobel Prize: when was it won, and by whom?".to_string())
        );
        assert!(parse_combination("  ").is_err());
    }

    #[test]
    fn the_requests_are_exact() {
        let p = CompoundPrompts::load(None).unwrap();
        let r = p.qa_request(
            "Liu Xiang",
            "Liu Xiang",
            "He was born in {title}.",
            64,
            None,
        );
        assert_eq!(
            r.messages[1].content,
            "Topic: Liu Xiang\nTitle: Liu Xiang\nDoc: He was born in {title}.\nOutput:"
        );
        let r = p.combine_request(&["When was X born?", "Where does X live?"], 64, None);
        assert_eq!(
            r.messages[1].content,
            "Simple Question1: When was X born?\nSimple Question2: Where does X live?\nCompound Question:"
        );
    }

    #[test]
    fn accuracy_is_the_share_of_answer_entities_found() {
        let answers = vec![
            "1983".to_string(),
            "Shanghai".to_string(),
            "The hurdles".into(),
        ];
        assert_eq!(accuracy("Born 1983 in Shanghai.", &answers), 2.0 / 3.0);
        assert_eq!(accuracy("1983, Shanghai, hurdles", &answers), 1.0);
        assert_eq!(accuracy("19834", &answers[..1]), 0.0, "whole words only");
        assert_eq!(accuracy("anything", &[]), 0.0);
        assert!(answer_in(
            "July 13, 1983",
            "He was born on July 13, 1983, in Shanghai."
        ));
        assert!(!answer_in("1984", "He was born on July 13, 1983."));
    }
}
