//! 2WikiMultihopQA reader (JSON array of `{_id, type, question, context [[title, [sentences]]],
//! supporting_facts [[title, sent_idx]], evidences [[s, r, o]], answer}`, plus `entity_ids`,
//! `evidences_id`, `answer_id` in the full release).
//!
//! Contexts and supporting facts are read like HotpotQA's (see
//! `hotpotqa::read_sentence_context`), with one difference: 2Wiki strips its
//! sentences, so they are joined with one space (unless one side already has whitespace at the
//! joint); sentence spans exclude that space and still cover each given sentence exactly.
//! Each `evidences` triple becomes a `triple` evidence with text `s|r|o`. `question_type` =
//! `type` (comparison, inference, compositional, bridge_comparison). Everything else
//! (`entity_ids`, `evidences_id`, `answer_id`, ...) goes to `meta` verbatim.

use distillery_core::{Evidence, Record, RecordSink};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::common::{IdString, Join, Qa, answers_from, meta_string};
use super::hotpotqa::read_sentence_context;
use crate::{IngestError, InputCtx};

const DATASET: &str = "2wiki";

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "_id")]
    id: IdString,
    question: String,
    #[serde(default)]
    answer: Option<Value>,
    #[serde(rename = "type", default)]
    qtype: Option<String>,
    context: Vec<(String, Vec<String>)>,
    #[serde(default)]
    supporting_facts: Vec<(String, i32)>,
    #[serde(default)]
    evidences: Vec<(String, String, String)>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Reads a 2WikiMultihopQA JSON file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let mut qa = Qa::new(ctx, DATASET, sink);
    qa.for_each_json(|qa, r: Raw, raw| {
        let answers = answers_from(r.answer.as_ref(), "answer")?;
        let has_answer = !matches!(r.answer, None | Some(Value::Null));
        let mut q = qa.question(&r.id.0, r.question);
        read_sentence_context(
            qa,
            raw,
            &mut q,
            &r.context,
            &r.supporting_facts,
            Join::SpaceIfNeeded,
        )?;
        q.evidence
            .extend(r.evidences.into_iter().map(|(s, p, o)| Evidence {
                kind: "triple".to_string(),
                text: Some(format!("{s}|{p}|{o}")),
                ..Default::default()
            }));
        q.answers = answers;
        q.answerable = has_answer.then_some(true);
        q.question_type = r.qtype;
        q.meta = meta_string(&r.extra);
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
    fn triples_and_extras() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dev.json");
        std::fs::write(
            &p,
            r#"[{"_id":"x1","type":"compositional","question":"Q?","answer":"A",
                "context":[["T",["One.","Two."]]],"supporting_facts":[["T",1]],
                "evidences":[["T","mother","M"]],"entity_ids":"Q1_Q2","evidences_id":[["Q1","mother","Q2"]],"answer_id":null},
               {"_id":"x2","question":"Q?","context":[],"evidences":[["only two","x"]]}]"#,
        )
        .unwrap();
        let o = FormatOptions::default_for(Format::TwoWiki);
        let ctx = InputCtx::local(p.to_str().unwrap(), &o);
        let mut s = VecSink::default();
        read(&ctx, &mut s).unwrap();
        let q = s.questions();
        assert_eq!(q.len(), 1);
        assert_eq!(s.documents()[0].text, "One. Two.");
        assert_eq!(q[0].evidence.len(), 3);
        assert_eq!(q[0].evidence[0].text.as_deref(), Some("Two."));
        assert_eq!(q[0].evidence[2].text.as_deref(), Some("T|mother|M"));
        let meta: Value = serde_json::from_str(&q[0].meta).unwrap();
        assert_eq!(meta["entity_ids"], "Q1_Q2");
        assert_eq!(meta["evidences_id"][0][2], "Q2");
        let bad = s.quarantine();
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].reason, "bad_value");
        assert_eq!(bad[0].record, Some(1));
    }
}
