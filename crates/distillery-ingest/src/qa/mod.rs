//! QA dataset readers into the one question schema, with their contexts as documents/tables.

mod common;
pub mod cwq;
pub mod hotpotqa;
pub mod hybridqa;
pub mod metaqa;
pub mod musique;
pub mod simpleqa;
pub mod tatqa;
pub mod twowiki;

pub use common::URI_ID_HEX;

use std::io::Read;

use distillery_core::spec::Format;
use serde_json::{Map, Value};

use crate::{IngestError, InputCtx};

/// Bytes of a file's (decompressed) head [`detect_format`] reads: enough for the first record
/// of every QA format (a TAT-QA context with its table and paragraphs is a few kilobytes).
pub const DETECT_HEAD_BYTES: u64 = 4 << 20;

/// The QA format of a file, told from its first record: a JSON array's first element or a
/// JSON line's keys (`question_decomposition`, or `paragraphs` with `answerable`: MuSiQue;
/// `evidences` 2Wiki; `context` with `supporting_facts` or `_id`: HotpotQA, its test form
/// included; `table_id` HybridQA; `table` and `questions`
/// TAT-QA, `sparql`, `machine_question` or `webqsp_ID` CWQ, `topic_entity` SimpleQuestions),
/// or a MetaQA line (`question with [entity]<TAB>answers`). `None` when the head fits none
/// of them (the caller names the format instead).
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
        b'{' => first_object(rest)?,
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
        if has("question_decomposition") || (has("paragraphs") && has("answerable")) {
            Format::Musique
        } else if has("evidences") {
            Format::TwoWiki
        } else if has("context") && (has("supporting_facts") || has("_id")) {
            Format::HotpotQa
        } else if has("table_id") {
            Format::HybridQa
        } else if has("table") && has("questions") {
            Format::TatQa
        } else if has("sparql") || has("machine_question") || has("webqsp_ID") {
            Format::Cwq
        } else if has("topic_entity") && has("question") {
            Format::SimpleQa
        } else {
            return None;
        },
    )
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
        ];
        for (text, want) in cases {
            let mut bytes = b"\xef\xbb\xbf".to_vec();
            bytes.extend_from_slice(text.as_bytes());
            assert_eq!(detect_format_of(text.as_bytes()), Some(*want), "{text}");
            assert_eq!(detect_format_of(&bytes), Some(*want), "BOM + {text}");
        }
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
