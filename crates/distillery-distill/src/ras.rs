//! RAS HotpotQA-SUBQ (paper 002, 4 and appendix B; formats.md "RAS"): planner and answerer
//! samples built from a teacher's sub-queries and the triples of each supporting document.
//!
//! Per question (the stage drives the calls; this module renders and parses):
//! 1. the base model answers the question without context; when its answer's sentence
//!    embedding is close to the gold answer's (cosine ≥ the threshold, 0.8), the question is
//!    a `[NO_RETRIEVAL]` case: one planner sample (`instruction + "\nQuestion: " + Q` →
//!    `[NO_RETRIEVAL]`) and one answerer sample (→ the gold answer);
//! 2. else the supporting documents are filtered by the teacher (only those needed for the
//!    answer stay; a question left with none is dropped), the teacher writes one sub-query
//!    per kept document given the previous ones ([`parse_subquery`]; one retry with a
//!    stricter reminder when the answer is not a question, then a fallback: the main
//!    question for the first document, `What does <title> say about <question>` after), and
//!    each document's triples are extracted (`(S> s| P> p| O> o)`, shown as Python's `repr`
//!    of the list of triple strings);
//! 3. samples ([`samples`]): planner `instruction + "\nQuestion: " + Q` → `[SUBQ] q0`; for
//!    each document i, the input `instruction` + the lines `[SUBQ] q_j` /
//!    `Retrieved Graph Information: g_j` for j ≤ i + `Question: Q` → `[SUBQ] q_{i+1}`, or
//!    `[SUFFICIENT]` after the last document; one answerer sample with every pair → the gold
//!    answer.
//!
//! Instructions and the teacher's sub-query prompt are ours (replaceable from files); labels
//! and line prefixes are exact.

use distillery_core::id::stable_id;
use distillery_llm::{ChatMessage, ChatRequest, Parser};
use distillery_triples::ras::{py_repr_list, render_triple};
use serde_json::{Value, json};

use crate::DistillError;

pub const NO_RETRIEVAL: &str = "[NO_RETRIEVAL]";
pub const SUBQ: &str = "[SUBQ]";
pub const SUFFICIENT: &str = "[SUFFICIENT]";
pub const GRAPH_PREFIX: &str = "Retrieved Graph Information: ";
pub const QUESTION_PREFIX: &str = "Question: ";
pub const TASK_PLANNER: &str = "ras_planner";
pub const TASK_ANSWERER: &str = "ras_answerer";
pub const SUBQUERY_TEMPLATE: &str = "ras-subquery";
pub const SUBQUERY_SCHEMA: &str = "subquery-1";
pub const BASE_TEMPLATE: &str = "ras-base-answer";
pub const BASE_SCHEMA: &str = "base-answer-1";

const FILES: [&str; 5] = [
    "ras_planner_instruction.txt",
    "ras_answerer_instruction.txt",
    "ras_subquery_system.txt",
    "ras_subquery_user.txt",
    "ras_base_user.txt",
];
const BUILTIN: [&str; 5] = [
    include_str!("../templates/ras_planner_instruction.txt"),
    include_str!("../templates/ras_answerer_instruction.txt"),
    include_str!("../templates/ras_subquery_system.txt"),
    include_str!("../templates/ras_subquery_user.txt"),
    include_str!("../templates/ras_base_user.txt"),
];

/// The RAS templates.
#[derive(Debug, Clone)]
pub struct RasPrompts {
    texts: Vec<String>,
}

impl RasPrompts {
    pub fn load(dir: Option<&str>) -> Result<RasPrompts, DistillError> {
        let texts = crate::load_templates(dir, &FILES, &BUILTIN)?;
        for (i, ph) in [
            (3, "{question}"),
            (3, "{document}"),
            (3, "{previous}"),
            (4, "{question}"),
        ] {
            if !texts[i].contains(ph) {
                return Err(DistillError::Template {
                    path: dir.map_or("builtin".into(), |d| format!("{d}/{}", FILES[i])),
                    message: format!("{} has no {ph} placeholder", FILES[i]),
                });
            }
        }
        Ok(RasPrompts { texts })
    }

    pub fn planner_instruction(&self) -> &str {
        &self.texts[0]
    }

    pub fn answerer_instruction(&self) -> &str {
        &self.texts[1]
    }

    /// Version of the sub-query template.
    pub fn subquery_version(&self) -> String {
        stable_id(&[&self.texts[2], &self.texts[3]])[..12].to_string()
    }

    /// Version of the base-answer template.
    pub fn base_version(&self) -> String {
        stable_id(&[&self.texts[4]])[..12].to_string()
    }

    /// Version of the student instructions (sample lineage).
    pub fn sample_version(&self) -> String {
        stable_id(&[&self.texts[0], &self.texts[1]])[..12].to_string()
    }

    /// The teacher's sub-query request for document `title`/`text` given earlier sub-queries;
    /// `strict` adds the retry reminder; `(max_tokens, seed)` the decoding.
    pub fn subquery_request(
        &self,
        question: &str,
        title: &str,
        text: &str,
        previous: &[String],
        strict: bool,
        (max_tokens, seed): (u32, Option<u64>),
    ) -> ChatRequest {
        let prev = if previous.is_empty() {
            String::new()
        } else {
            let lines: Vec<String> = previous.iter().map(|q| format!("- {q}")).collect();
            format!("Sub-queries written so far:\n{}\n", lines.join("\n"))
        };
        let mut user = self.texts[3]
            .replace("{previous}", &prev)
            .replace("{document}", text)
            .replace("{title}", title)
            .replace("{question}", question);
        if strict {
            user.push_str(
                "\nAnswer with the question only, on one line, ending with a question mark.",
            );
        }
        ChatRequest {
            messages: vec![
                ChatMessage::new("system", self.texts[2].clone()),
                ChatMessage::new("user", user),
            ],
            temperature: Some(0.0),
            max_tokens: Some(max_tokens),
            seed,
            ..Default::default()
        }
    }

    /// The base model's no-context answer request.
    pub fn base_request(&self, question: &str, max_tokens: u32, seed: Option<u64>) -> ChatRequest {
        ChatRequest {
            messages: vec![ChatMessage::new(
                "user",
                self.texts[4].replace("{question}", question),
            )],
            temperature: Some(0.0),
            max_tokens: Some(max_tokens),
            seed,
            ..Default::default()
        }
    }
}

/// A sub-query from a teacher answer: its first line, without a `Sub-query:` style label,
/// list marker or quotes; at least three words.
pub fn parse_subquery(raw: &str) -> Result<String, String> {
    let line = raw
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or_else(|| "an empty answer".to_string())?;
    let mut s = line;
    for label in [
        "Sub-query:",
        "Subquery:",
        "Sub-question:",
        "Question:",
        "Query:",
    ] {
        if let Some(r) = s.strip_prefix(label) {
            s = r.trim();
        }
    }
    let s = s
        .trim_start_matches(|c: char| c == '-' || c == '*' || c.is_ascii_digit() || c == '.')
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`')
        .trim();
    if s.split_whitespace().count() < 3 {
        return Err(format!("not a question: {s:?}"));
    }
    Ok(s.to_string())
}

/// The first line of a base model answer.
pub fn parse_base_answer(raw: &str) -> Result<String, String> {
    let a = raw
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or_else(|| "an empty answer".to_string())?;
    let a = a.strip_prefix("Answer:").unwrap_or(a).trim();
    Ok(a.to_string())
}

/// The cache parser of sub-queries: stores `{"subquery"}`.
#[derive(Debug, Default)]
pub struct SubqueryParser;

impl Parser for SubqueryParser {
    fn version(&self) -> &str {
        "subquery-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        Ok(json!({ "subquery": parse_subquery(raw)? }))
    }
}

/// The cache parser of base answers: stores `{"answer"}`.
#[derive(Debug, Default)]
pub struct BaseAnswerParser;

impl Parser for BaseAnswerParser {
    fn version(&self) -> &str {
        "base-answer-1"
    }
    fn parse(&self, raw: &str) -> Result<Value, String> {
        Ok(json!({ "answer": parse_base_answer(raw)? }))
    }
}

/// The fallback sub-query of document `i` when the teacher gives none.
pub fn fallback_subquery(i: usize, question: &str, title: &str) -> String {
    if i == 0 {
        question.to_string()
    } else {
        format!(
            "What does {title} say about {}",
            question.trim_end_matches('?')
        )
    }
}

/// `g_j`: Python's `repr` of the document's triples in RAS form.
pub fn graph_repr(triples: &[[String; 3]]) -> String {
    let items: Vec<String> = triples.iter().map(render_triple).collect();
    py_repr_list(&items)
}

/// The model input: the instruction, the `[SUBQ]` / graph lines of `pairs`, the question.
pub fn format_input(instruction: &str, pairs: &[(String, String)], question: &str) -> String {
    let mut s = instruction.to_string();
    for (q, g) in pairs {
        s.push_str(&format!("\n{SUBQ} {q}\n{GRAPH_PREFIX}{g}"));
    }
    s.push_str(&format!("\n{QUESTION_PREFIX}{question}"));
    s
}

/// One sample: (task, step, input, label).
pub type Sample = (&'static str, u32, String, String);

/// The samples of a question: `[NO_RETRIEVAL]` when `pairs` is `None`, else the planner
/// chain over the documents' (sub-query, graph) pairs and the answerer sample.
pub fn samples(
    prompts: &RasPrompts,
    question: &str,
    answer: &str,
    pairs: Option<&[(String, String)]>,
) -> Vec<Sample> {
    let (plan, ans) = (
        prompts.planner_instruction(),
        prompts.answerer_instruction(),
    );
    let Some(pairs) = pairs else {
        return vec![
            (
                TASK_PLANNER,
                0,
                format_input(plan, &[], question),
                NO_RETRIEVAL.to_string(),
            ),
            (
                TASK_ANSWERER,
                0,
                format_input(ans, &[], question),
                answer.to_string(),
            ),
        ];
    };
    let mut out = Vec::new();
    if let Some((q0, _)) = pairs.first() {
        out.push((
            TASK_PLANNER,
            0,
            format_input(plan, &[], question),
            format!("{SUBQ} {q0}"),
        ));
    }
    for i in 0..pairs.len() {
        let label = match pairs.get(i + 1) {
            Some((next, _)) => format!("{SUBQ} {next}"),
            None => SUFFICIENT.to_string(),
        };
        out.push((
            TASK_PLANNER,
            i as u32 + 1,
            format_input(plan, &pairs[..=i], question),
            label,
        ));
    }
    if !pairs.is_empty() {
        out.push((
            TASK_ANSWERER,
            pairs.len() as u32,
            format_input(ans, pairs, question),
            answer.to_string(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str, p: &str, o: &str) -> [String; 3] {
        [s.into(), p.into(), o.into()]
    }

    #[test]
    fn samples_are_byte_exact() {
        let p = RasPrompts::load(None).unwrap();
        let plan = p.planner_instruction().to_string();
        let g0 = graph_repr(&[t("Harbor of Glass", "directed by", "Ines Calloway")]);
        let g1 = graph_repr(&[t("Ines Calloway", "born in", "O'Hare")]);
        assert_eq!(
            g0,
            "['(S> Harbor of Glass| P> directed by| O> Ines Calloway)']"
        );
        assert_eq!(g1, "[\"(S> Ines Calloway| P> born in| O> O'Hare)\"]");
        let pairs = vec![
            ("Who directed Harbor of Glass?".to_string(), g0.clone()),
            ("Where was Ines Calloway born?".to_string(), g1.clone()),
        ];
        let s = samples(
            &p,
            "Where was the director of Harbor of Glass born?",
            "O'Hare",
            Some(&pairs),
        );
        assert_eq!(s.len(), 4);
        assert_eq!(
            s[0].2,
            format!("{plan}\nQuestion: Where was the director of Harbor of Glass born?")
        );
        assert_eq!(s[0].3, "[SUBQ] Who directed Harbor of Glass?");
        assert_eq!(
            s[1].2,
            format!(
                "{plan}\n[SUBQ] Who directed Harbor of Glass?\nRetrieved Graph Information: {g0}\nQuestion: Where was the director of Harbor of Glass born?"
            )
        );
        assert_eq!(s[1].3, "[SUBQ] Where was Ines Calloway born?");
        assert_eq!(s[2].3, "[SUFFICIENT]");
        assert!(s[2].2.contains(&format!(
            "\n[SUBQ] Where was Ines Calloway born?\nRetrieved Graph Information: {g1}\nQuestion: "
        )));
        assert_eq!(s[3].0, TASK_ANSWERER);
        assert!(s[3].2.starts_with(p.answerer_instruction()));
        assert_eq!(s[3].3, "O'Hare");
        let none = samples(&p, "What is 2 + 2?", "4", None);
        assert_eq!(none[0].3, "[NO_RETRIEVAL]");
        assert_eq!(none[0].2, format!("{plan}\nQuestion: What is 2 + 2?"));
        assert_eq!(none[1].3, "4");
    }

    #[test]
    fn subqueries_are_cleaned_or_refused() {
        assert_eq!(
            parse_subquery("Sub-query: \"Who directed Harbor of Glass?\"\nBecause...").unwrap(),
            "Who directed Harbor of Glass?"
        );
        assert_eq!(
            parse_subquery("1. Where was Ines born?").unwrap(),
            "Where was Ines born?"
        );
        assert!(parse_subquery("Sure!").is_err());
        assert!(parse_subquery("   ").is_err());
        assert_eq!(fallback_subquery(0, "Q?", "T"), "Q?");
        assert_eq!(
            fallback_subquery(1, "Who is X?", "T"),
            "What does T say about Who is X"
        );
    }
}
