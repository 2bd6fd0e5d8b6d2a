//! MuSiQue reader (JSON lines; MuSiQue-Ans and MuSiQue-Full).
//!
//! Each line `{id, paragraphs [{idx, title, paragraph_text, is_supporting}], question,
//! question_decomposition [{id, question, answer, paragraph_support_idx}], answer,
//! answer_aliases, answerable}` becomes one question. Each paragraph becomes a document (one
//! paragraph span, sentences by [`crate::text::sentence_spans`]), written once per file. A
//! supporting paragraph gives a `paragraph` evidence (`index` = its position in the context).
//! Decomposition steps keep their question and answer; `support` is the position in the context
//! of the paragraph whose `idx` is `paragraph_support_idx` (the raw value if no paragraph has
//! that idx; empty when null). `question_type` is the hop prefix of the id (`2hop`, `3hop1`,
//! `4hop3`: the part before `__`). Answers: `answer`, then `answer_aliases`. The sub-question
//! ids go to `meta.decomposition_ids`; unknown fields to `meta` verbatim.

use distillery_core::{DecompositionStep, Evidence, Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{IdString, Qa, answers_from, meta_string, push_aliases};
use crate::{IngestError, InputCtx};

const DATASET: &str = "musique";

#[derive(Deserialize)]
struct Raw {
    id: IdString,
    question: String,
    paragraphs: Vec<RawParagraph>,
    #[serde(default)]
    question_decomposition: Vec<RawStep>,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(default)]
    answer_aliases: Option<Value>,
    #[serde(default)]
    answerable: Option<bool>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

#[derive(Deserialize)]
struct RawParagraph {
    #[serde(default)]
    idx: Option<i32>,
    title: String,
    paragraph_text: String,
    #[serde(default)]
    is_supporting: bool,
}

#[derive(Deserialize)]
struct RawStep {
    #[serde(default)]
    id: Option<Value>,
    question: String,
    #[serde(default)]
    answer: Option<String>,
    #[serde(default)]
    paragraph_support_idx: Option<i32>,
}

/// Reads a MuSiQue JSON-lines file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let mut answers = answers_from(r.answer.as_ref(), "answer")?;
        push_aliases(
            &mut answers,
            answers_from(r.answer_aliases.as_ref(), "answer_aliases")?,
        );
        let hops = r.id.0.split("__").next().unwrap_or_default().to_string();
        let mut q = qa.question(&r.id.0, r.question);
        q.answers = answers;
        q.answerable = r.answerable;
        q.question_type = (!hops.is_empty() && hops != r.id.0).then_some(hops);
        let position = |idx: i32| r.paragraphs.iter().position(|p| p.idx == Some(idx));
        // A support index naming no paragraph of the record is dropped from its step and
        // quarantined (`bad_evidence`, one record per step); the question is kept.
        let mut bad = Vec::new();
        q.decomposition = r
            .question_decomposition
            .iter()
            .enumerate()
            .map(|(k, s)| DecompositionStep {
                question: s.question.clone(),
                answer: s.answer.clone(),
                support: match s.paragraph_support_idx.map(|i| (i, position(i))) {
                    Some((_, Some(p))) => vec![p as i32],
                    Some((i, None)) => {
                        bad.push((k, i));
                        Vec::new()
                    }
                    None => Vec::new(),
                },
            })
            .collect();
        for (k, i) in bad {
            let detail = format!(
                "question_decomposition[{k}].paragraph_support_idx {i} names no paragraph of \
                 the record ({} paragraphs): the support is dropped, the question kept",
                r.paragraphs.len()
            );
            let excerpt = format!("\"paragraph_support_idx\": {i}");
            let q = qa.quarantine_part(raw, k, "bad_evidence", detail, excerpt.as_bytes());
            qa.quarantine(q)?;
        }
        let mut meta = r.extra;
        if r.question_decomposition.iter().any(|s| s.id.is_some()) {
            let ids = r
                .question_decomposition
                .iter()
                .map(|s| s.id.clone().unwrap_or(Value::Null))
                .collect();
            meta.insert("decomposition_ids".to_string(), Value::Array(ids));
        }
        q.meta = meta_string(&meta);
        for (i, p) in r.paragraphs.into_iter().enumerate() {
            let d = qa.document_from_text(&p.title, p.paragraph_text);
            if p.is_supporting {
                q.evidence.push(Evidence {
                    kind: "paragraph".to_string(),
                    title: Some(p.title),
                    record_id: Some(d.id.clone()),
                    index: Some(i as i32),
                    ..Default::default()
                });
            }
            q.context_documents.push(d.id.clone());
            qa.emit_once(Record::Document(d))?;
        }
        qa.emit(Record::Question(q))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;
    use distillery_core::spec::{Format, FormatOptions};

    #[test]
    fn steps_support_and_hops() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("musique_full_v1.0_dev.jsonl");
        let lines = [
            r##"{"id":"3hop1__1_2_3","paragraphs":[{"idx":4,"title":"A","paragraph_text":"Alpha one. Alpha two.","is_supporting":false},{"idx":7,"title":"B","paragraph_text":"Beta.","is_supporting":true}],"question":"Q?","question_decomposition":[{"id":1,"question":"q1","answer":"a1","paragraph_support_idx":7},{"id":2,"question":"#1 q2","answer":"a2","paragraph_support_idx":null}],"answer":"a2","answer_aliases":["A2","a2"],"answerable":false}"##,
            r#"{"id":"2hop__9","paragraphs":[{"idx":0,"title":"B","paragraph_text":"Beta.","is_supporting":true}],"question":"Q2?","answer":"x","answer_aliases":[],"answerable":true}"#,
            r#"{"id":"2hop__10","paragraphs":[{"idx":0,"title":"B","paragraph_text":"Beta.","is_supporting":true}],"question":"Q3?","question_decomposition":[{"id":1,"question":"q1","answer":"a1","paragraph_support_idx":1000000000},{"id":2,"question":"q2","answer":"a2","paragraph_support_idx":-1},{"id":3,"question":"q3","answer":"a3","paragraph_support_idx":0}],"answer":"x","answerable":true}"#,
        ];
        std::fs::write(&p, lines.join("\n")).unwrap();
        let o = FormatOptions::default_for(Format::Musique);
        let ctx = InputCtx::local(p.to_str().unwrap(), &o);
        let mut s = VecSink::default();
        read(&ctx, &mut s).unwrap();
        assert_eq!(s.documents().len(), 2, "Beta is written once");
        assert_eq!(s.documents()[0].sentences.len(), 2);
        let q = s.questions();
        assert_eq!(q[0].question_type.as_deref(), Some("3hop1"));
        assert_eq!(q[0].answers, vec!["a2", "A2"]);
        assert_eq!(q[0].answerable, Some(false));
        assert_eq!(q[0].decomposition[0].support, vec![1]);
        assert!(q[0].decomposition[1].support.is_empty());
        assert_eq!(q[0].evidence[0].index, Some(1));
        assert_eq!(q[0].meta, r#"{"decomposition_ids":[1,2]}"#);
        assert_eq!(q[1].question_type.as_deref(), Some("2hop"));
        assert_eq!(q[1].context_documents, vec![s.documents()[1].id.clone()]);
        // Support indexes naming no paragraph: dropped, one quarantine record each, the
        // question kept with its valid support.
        assert_eq!(q.len(), 3);
        let steps: Vec<_> = q[2]
            .decomposition
            .iter()
            .map(|d| d.support.clone())
            .collect();
        assert_eq!(steps, vec![vec![], vec![], vec![0]]);
        let bad = s.quarantine();
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(
            bad.iter()
                .all(|b| b.reason == "bad_evidence" && b.record == Some(2))
        );
        assert!(bad[0].detail.contains("1000000000"), "{}", bad[0].detail);
        assert_ne!(bad[0].id, bad[1].id);
    }
}
