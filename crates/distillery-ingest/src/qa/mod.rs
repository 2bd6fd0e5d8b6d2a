//! QA dataset readers into the one question schema, with their contexts as documents/tables.

pub(crate) mod common;
pub mod commonsenseqa;
pub mod cwq;
pub mod hotpotadv;
pub mod hotpotqa;
pub mod hybridqa;
pub mod metaqa;
pub mod musique;
pub mod nq_open;
pub mod qald;
pub mod simpleqa;
pub mod tatqa;
pub mod twowiki;
pub mod webqsp;
pub mod webquestions;
pub mod zeroshot_re;

pub use common::URI_ID_HEX;

use std::io::Read;

use distillery_core::spec::Format;
use serde_json::{Map, Value};

use crate::{IngestError, InputCtx};

/// Bytes of a file's (decompressed) head [`detect_format`] reads: enough for the first record
/// of every QA format (a TAT-QA context with its table and paragraphs is a few kilobytes).
pub const DETECT_HEAD_BYTES: u64 = 4 << 20;

/// The QA format of a file, told from its first record: a JSON array's first element or a
/// JSON line's keys (`Parses`, or `RawQuestion` with `QuestionId`: WebQSP, and the original
/// WebQSP object `{Version, Questions}`, told by its keys when it is larger than the head;
/// `question_decomposition`, or
/// `paragraphs` with `answerable`: MuSiQue; `paragraphs` with `qas_id` or `rationale`:
/// AdvHotpotQA; `evidences` 2Wiki; `context` with `supporting_facts` or `_id`: HotpotQA, its
/// test form included; `table_id` HybridQA; `table` and `questions` TAT-QA;
/// `template_questions` Zero-Shot RE; `sparql` with an object `answer` and neither
/// `machine_question` nor `webqsp_ID`: QALD; `sparql`, `machine_question` or `webqsp_ID` CWQ;
/// `question` with `answers` and `url`: WebQuestions; `topic_entity` with `question`
/// SimpleQuestions), or a MetaQA line (`question with [entity]<TAB>answers`). `None` when the
/// head fits none of them (the caller names the format instead).
pub fn detect_format(ctx: &InputCtx<'_>) -> Result<Option<Format>, IngestError> {
    let mut head = Vec::new();
    ctx.open()?
        .take(DETECT_HEAD_BYTES)
        .read_to_end(&mut head)
        .map_err(|e| IngestError::io(&ctx.location, e))?;
    Ok(detect_format_of(&head))
}

/// [`detect_format`] over a file's first bytes.
pub fn detect_format_of(head: &[u8]) -> Option<Format> {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let start = head.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = &head[start..];
    let first = match rest[0] {
        b'[' => {
            let inner = &rest[1..];
            let at = inner.iter().position(|b| !b.is_ascii_whitespace())?;
            first_object(&inner[at..])?
        }
        b'{' => match first_object(rest) {
            Some(m) => m,
            // An object larger than the head: the original WebQSP file, by its keys.
            None => return webqsp_original(rest).then_some(Format::WebQsp),
        },
        _ => {
            let line = rest.split(|b| *b == b'\n').next()?;
            let line = std::str::from_utf8(line).ok()?;
            let (question, _answers) = line.split_once('\t')?;
            let open = question.find('[')?;
            return question[open..].contains(']').then_some(Format::MetaQa);
        }
    };
    let has = |k: &str| first.contains_key(k);
    Some(
        if has("Parses")
            || (has("RawQuestion") && has("QuestionId"))
            || (has("Questions") && has("Version"))
        {
            Format::WebQsp
        } else if has("question_decomposition") || (has("paragraphs") && has("answerable")) {
            Format::Musique
        } else if has("paragraphs") && (has("qas_id") || has("rationale")) {
            Format::HotpotAdv
        } else if has("evidences") {
            Format::TwoWiki
        } else if has("context") && (has("supporting_facts") || has("_id")) {
            Format::HotpotQa
        } else if has("table_id") {
            Format::HybridQa
        } else if has("table") && has("questions") {
            Format::TatQa
        } else if has("template_questions") {
            Format::ZeroShotRe
        } else if has("sparql")
            && matches!(first.get("answer"), Some(Value::Object(_)))
            && !has("machine_question")
            && !has("webqsp_ID")
        {
            Format::Qald
        } else if has("sparql") || has("machine_question") || has("webqsp_ID") {
            Format::Cwq
        } else if has("question") && has("answers") && has("url") {
            Format::WebQuestions
        } else if has("topic_entity") && has("question") {
            Format::SimpleQa
        } else if has("answerKey")
            || matches!(first.get("question"), Some(Value::Object(q)) if q.contains_key("stem"))
        {
            Format::CommonsenseQa
        } else if has("question")
            && matches!(first.get("answer"), Some(Value::Array(_)))
            && first.len() <= 3
        {
            Format::NqOpen
        } else {
            return None;
        },
    )
}

/// Whether the head of an object too large for it is the original WebQSP file: its
/// `Questions` with a question's `RawQuestion` and `Parses`.
fn webqsp_original(head: &[u8]) -> bool {
    [&b"\"Questions\""[..], b"\"RawQuestion\"", b"\"Parses\""]
        .iter()
        .all(|k| memchr::memmem::find(head, k).is_some())
}

/// The JSON object at the start of `bytes` (what follows it is not read).
fn first_object(bytes: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Value>()
        .next()?
    {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

#[cfg(test)]
mod detect_tests {
    use super::*;

    #[test]
    fn each_qa_format_is_told_from_its_first_record() {
        let cases: &[(&str, Format)] = &[
            (
                r#"[{"_id":"a","question":"q","answer":"x","supporting_facts":[],"context":[]}]"#,
                Format::HotpotQa,
            ),
            (
                r#"[{"_id":"a","question":"q","context":[]}]"#,
                Format::HotpotQa,
            ),
            (
                r#" [ {"_id":"a","question":"q","context":[],"supporting_facts":[],"evidences":[]}, {"#,
                Format::TwoWiki,
            ),
            (
                "{\"id\":\"2hop__1\",\"paragraphs\":[],\"question\":\"q\",\"question_decomposition\":[],\"answerable\":true}\n{\"id\":",
                Format::Musique,
            ),
            (
                r#"[{"question_id":"1","question":"q","table_id":"List_0","answer-text":"a"}]"#,
                Format::HybridQa,
            ),
            (
                r#"[{"table":{"uid":"t","table":[]},"paragraphs":[],"questions":[]}]"#,
                Format::TatQa,
            ),
            (
                r#"[{"ID":"1","question":"q","sparql":"SELECT","answer":"a"}]"#,
                Format::Cwq,
            ),
            (
                r#"[{"question":"q","answer":"a","topic_entity":{"m.1":"x"}}]"#,
                Format::SimpleQa,
            ),
            (
                "what movies did [Tom Hanks] star in\tBig|Cast Away\n",
                Format::MetaQa,
            ),
            (
                r#"[{"url":"http://www.freebase.com/view/en/x","question":"q","answers":["a"],"topic_entity":{"m.1":"x"},"QID":{"Q1":"x"}}]"#,
                Format::WebQuestions,
            ),
            (
                r#"[{"QuestionId":"WebQTest-0","RawQuestion":"q","ProcessedQuestion":"q","Parses":[],"topic_entity":{"m.1":"x"}}]"#,
                Format::WebQsp,
            ),
            (
                r#"{"Version":"1.0","FreebaseVersion":"2015-08-09","Questions":[{"QuestionId":"WebQTest-0","RawQuestion":"q","Parses":[]}]}"#,
                Format::WebQsp,
            ),
            (
                r#"[{"answer":{"Q1":"a"},"question":"q","sparql":"SELECT","QID":{"Q2":"x"},"topic_entity":{"m.1":"x"}}]"#,
                Format::Qald,
            ),
            (
                r#"[{"qas_id":"a","question":"q","paragraphs":[{"title":"t","context":"c","is_supp":true}],"answer":"a","rationale":[]}]"#,
                Format::HotpotAdv,
            ),
            (
                r#"[{"input":"E [SEP] r","QID":{"Q1":"E"},"template_questions":["q"],"answer":"a","relation":"r","alias":[]}]"#,
                Format::ZeroShotRe,
            ),
        ];
        for (text, want) in cases {
            let mut bytes = b"\xef\xbb\xbf".to_vec();
            bytes.extend_from_slice(text.as_bytes());
            assert_eq!(detect_format_of(text.as_bytes()), Some(*want), "{text}");
            assert_eq!(detect_format_of(&bytes), Some(*want), "BOM + {text}");
        }
    }

    #[test]
    fn the_original_webqsp_file_is_told_from_a_cut_head() {
        let head = "{\n \"Version\": \"1.0\",\n \"Questions\": [\n  {\n   \"QuestionId\": \"WebQTest-0\",\n   \"RawQuestion\": \"q\",\n   \"Parses\": [\n    {\"ParseId\": ";
        assert_eq!(detect_format_of(head.as_bytes()), Some(Format::WebQsp));
        // Another object cut short is none.
        assert_eq!(detect_format_of(b"{\"Questions\": [{\"question\": "), None);
    }

    #[test]
    fn a_head_that_fits_no_format_is_none() {
        for text in [
            "",
            "   ",
            "[]",
            r#"[{"question":"q","answer":"a"}]"#,
            "{not json",
            "a plain line of text\n",
            "a line\twith a tab but no brackets\n",
            "[{\"_id\":\"cut off in the first rec",
        ] {
            assert_eq!(detect_format_of(text.as_bytes()), None, "{text:?}");
        }
    }
}
