//! HSEQ-H head-agent samples (paper 000, 3.2, "Answer generation"): once the iterator has
//! gathered sufficient evidence, the head answers from the canonicalized package
//! `Z = κ(M_τ)` alone, `ŷ = H(q, Z; g)`, with a minimal prompt: the answer only (a span, a
//! number, yes or no), grounded in `Z`, no chain of thought; optionally with the ids of `Z`
//! that support it.
//!
//! One `hseq_head` sample per question whose SFT-method trajectory ends sufficient and that has
//! a gold answer: messages `[system, user, assistant]` from the `head` templates
//! ([`crate::prompt`]; `{question}`, `{guidance}`, `{evidence}`). The evidence is `Z` in κ's
//! order (by uri, then offsets), one line per item: `- [<item id>] (<level>, <uri>,
//! <start>-<end>) <snippet>` (no offsets for KG items, which have none), snippets cut to
//! `snippet_chars` by κ. The guidance is the iteration samples' (planner,
//! cache or template). The target is the first gold answer; with `head_supporting_ids`, the
//! JSON `{"answer": "...", "supporting_ids": ["<item id>", ...]}` (Python `json.dumps` form),
//! the ids being every item of `Z` (the trajectory selects only what the answer needs).
//!
//! Lineage: `segment_ids` the selected segments, `params` the method, the guidance source and
//! key, the item count and the snippet budget; `sufficient` true.

use distillery_core::{Segment, SftSample};
use distillery_hseq::{CanonOptions, EvidenceItem, canonicalize_with};

use crate::Labeller;
use crate::QuestionContext;
use crate::sft::{chat_messages, py_json_string, sample_id};
use crate::trajectory::Trajectory;

/// Task name of head-agent samples.
pub const TASK_HEAD: &str = "hseq_head";

/// The evidence lines of a package.
pub fn evidence_lines(z: &[EvidenceItem]) -> String {
    z.iter()
        .map(|e| {
            let snippet: String = e.snippet.split_whitespace().collect::<Vec<_>>().join(" ");
            match e.offsets {
                [a, b] if a >= 0 && b >= 0 => {
                    format!("- [{}] ({}, {}, {a}-{b}) {snippet}", e.id, e.level, e.uri)
                }
                _ => format!("- [{}] ({}, {}) {snippet}", e.id, e.level, e.uri),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The head target: the answer, or with supporting ids the JSON object.
pub fn head_target(answer: &str, supporting: Option<&[EvidenceItem]>) -> String {
    match supporting {
        None => answer.to_string(),
        Some(z) => {
            let ids: Vec<String> = z.iter().map(|e| py_json_string(&e.id)).collect();
            format!(
                "{{\"answer\": {}, \"supporting_ids\": [{}]}}",
                py_json_string(answer),
                ids.join(", ")
            )
        }
    }
}

/// The head sample of a trajectory, when it ends sufficient and the question has an answer.
pub fn head_sample(
    l: &Labeller,
    method: &str,
    ctx: &QuestionContext<'_>,
    sh: &[Segment],
    traj: &Trajectory,
) -> Option<SftSample> {
    let q = ctx.question;
    let answer = q.answers.iter().map(|a| a.trim()).find(|a| !a.is_empty())?;
    if !traj.sufficient {
        return None;
    }
    let selected: Vec<Segment> = traj.selected().iter().map(|&i| sh[i].clone()).collect();
    if selected.is_empty() {
        return None;
    }
    let snippet_chars = l.options.snippet_chars as usize;
    let z = canonicalize_with(
        &selected,
        &CanonOptions {
            snippet_chars: Some(snippet_chars),
        },
    );
    let (guidance, guidance_source) = l.guidance.guidance_for(q);
    let (system, user) = l
        .prompts
        .render_head(&q.question, &guidance, &evidence_lines(&z));
    let target = head_target(answer, l.options.head_supporting_ids.then_some(&z[..]));
    let (messages, prompt_tokens) = chat_messages(&l.counter, system, user, target);
    let params = serde_json::json!({
        "method": method,
        "guidance": guidance_source,
        "guidance_key": l.guidance.cache_key(q, l.options.planner_model.as_deref()),
        "evidence_items": z.len(),
        "snippet_chars": snippet_chars,
        "supporting_ids": l.options.head_supporting_ids,
        "tokens": l.counter.name(),
    });
    let template = &l.prompts.head;
    Some(SftSample {
        id: sample_id(TASK_HEAD, &q.id, method, "", &messages),
        task: TASK_HEAD.to_string(),
        target_tokens: l.counter.count(&messages[messages.len() - 1].content),
        messages,
        weight: 1.0,
        split: String::new(),
        dataset: q.dataset.clone(),
        question_id: q.id.clone(),
        segment_ids: selected.iter().map(|s| s.id.clone()).collect(),
        revisions: distillery_core::revisions_of(&selected, Segment::page_revision),
        method: method.to_string(),
        params: params.to_string(),
        template_id: template.id.clone(),
        template_version: template.version.clone(),
        pipeline_hash: l.pipeline_hash.clone(),
        step: None,
        steps: Some(traj.steps.len() as u32),
        sufficient: Some(true),
        prompt_tokens,
        teacher: None,
        cache_entries: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, level: &str, uri: &str, offsets: [i64; 2], snippet: &str) -> EvidenceItem {
        EvidenceItem {
            id: id.into(),
            level: level.into(),
            uri: uri.into(),
            offsets,
            snippet: snippet.into(),
            ..Default::default()
        }
    }

    #[test]
    fn evidence_lines_and_targets() {
        let z = [
            item(
                "e1",
                "sentence",
                "hotpotqa:Lake#abc",
                [0, 24],
                "Lake Varnholm is\n a lake.",
            ),
            item(
                "e2",
                "triplet",
                "kg:m.01",
                [-1, -1],
                "(Lake, in, \"Osterland\")",
            ),
        ];
        assert_eq!(
            evidence_lines(&z),
            "- [e1] (sentence, hotpotqa:Lake#abc, 0-24) Lake Varnholm is a lake.\n\
             - [e2] (triplet, kg:m.01) (Lake, in, \"Osterland\")"
        );
        assert_eq!(head_target("Osterland", None), "Osterland");
        assert_eq!(
            head_target("Café \"X\"", Some(&z)),
            "{\"answer\": \"Caf\\u00e9 \\\"X\\\"\", \"supporting_ids\": [\"e1\", \"e2\"]}"
        );
    }
}
