//! Labelling one question: weak positives of every method, trajectories, and the SFT samples
//! of the iteration agent (HSEQ paper 000, 3.1, 9.2 and 9.3.2) plus the HANRAG tasks.
//!
//! [`label_question`]:
//! 1. builds S_h ([`crate::sh::build_sh`], default HSEQ options: sections on, cells off) and
//!    the candidate stream ([`candidate_stream`]): the non-root segments of S_h in ρ order
//!    but the sentences that repeat their paragraph word for word, the first `max_segments`
//!    of them (the preset's cap, the one the methods use);
//! 2. runs every method and synthesizes its trajectory ([`crate::trajectory::synthesize`])
//!    over the positives it can pick ([`reachable_positives`]: one outside the stream stands
//!    as its nearest ancestor in it, which the record lists too; one with no such ancestor
//!    keeps the trajectory from ending sufficient without it);
//!    each method gives one [`LabelRecord`] (id = `stable_id([question id, method])`). A
//!    question without answers or without candidates is not given to the methods: its records
//!    have no positives, `low_confidence` true and an empty trajectory;
//! 3. for the SFT method ([`crate::LabelOptions::sft_method`]: `answer-aware` unless told
//!    otherwise) renders one `hseq_iteration` sample per trajectory step: messages
//!    `[system, user, assistant]`, the user prompt fitted to `max_tokens` by [`crate::prompt::Prompts::render_iteration`], the
//!    assistant turn the exact target JSON of [`target_json`];
//! 4. with the `head` option, adds the trajectory's HSEQ-H head sample ([`crate::head`]);
//! 5. adds the HANRAG samples ([`crate::hanrag::samples`]) when the `hanrag` option is on;
//! 6. breaks the chat-template control tokens (`<|im_end|>`, `[INST]`, ...) that source text
//!    brought into the samples' messages ([`neutralise_control_tokens`]).
//!
//! The time each question spends in steps 1 (`hseq`), 2 (`label`) and 3-4 (`samples`) is
//! returned with its output ([`crate::Phases`], monotonic-clock laps).
//!
//! Sample fields: `weight` the step's weight; `split` empty (the executor assigns train /
//! validation by a hash of the question id); `question_id` the question's record id; `segment_ids` the
//! candidates shown (after budget fitting) followed by the segments selected before the
//! step; `params` a JSON object (method, preset and its resolved k / max_segments /
//! max_tokens, W, u, T_max, snippet_chars, lexical_weight, the method's own params, guidance
//! source and cache key, token counter, whether the prompt is over budget); `step` 1-based,
//! `steps` the trajectory length, `sufficient` the step's target sufficiency; token counts by
//! [`crate::prompt::TokenCounter`]; `id` = `stable_id([task, question id, method, step,
//! messages])`.

use distillery_core::cpu::WallLap;
use distillery_core::id::{StableIdBuilder, stable_id};
use distillery_core::{LabelRecord, Message, Segment, SftSample};
use distillery_hseq::HseqOptions;
use foldhash::{HashMap, HashSet};

use crate::positives::{
    Method, Positive, Positives, Prepared, is_root, labeled_segment, max_segments,
};
use crate::prompt::{IterationInput, LineCache, SegmentLine};
use crate::sh::build_sh;
use crate::trajectory::{Preset, Step, Trajectory, TrajectoryParams, synthesize};
use crate::{LabelOutput, Labeller, QuestionContext, hanrag};

/// Task name of iteration-agent samples.
pub const TASK_ITERATION: &str = "hseq_iteration";

/// The `strategy` of every target action.
pub const STRATEGY: &str = "guided_topk";

/// The candidate stream: indices of the non-root segments of `sh` (already in ρ order; roots
/// as [`crate::positives::is_root`] defines them), the first `max_segments` of them — the
/// cap of the methods' candidate sets ([`crate::positives::max_segments`]) — less the
/// `echo`es among them (sentences that repeat their paragraph, [`Prepared::echoes`]; empty:
/// none). An echo that is a positive is picked as its paragraph ([`reachable_positives`]).
pub fn candidate_stream(sh: &[Segment], max_segments: usize, echo: &[bool]) -> Vec<usize> {
    sh.iter()
        .enumerate()
        .filter(|(_, s)| !is_root(&s.level))
        .map(|(i, _)| i)
        .take(max_segments)
        .filter(|&i| !echo.get(i).copied().unwrap_or(false))
        .collect()
}

/// The positives a trajectory picks from, and the ancestors that stood in for some of them.
///
/// A positive outside the candidate stream (past the cap: a sentence of a late paragraph, as
/// ρ puts every paragraph before any sentence and the cap cuts sentences first; or an echo)
/// is replaced, in its place in the priority order, by its nearest ancestor inside the
/// stream, whose text holds it (reason `within:<its reason>`); the reader of the selected
/// segments gets that text whole, though the window may show only its head. Positives inside
/// a stand-in are then dropped (picking the paragraph picks them). A positive with no
/// ancestor in the stream (a table row or KB edge past the cap: their parents are roots)
/// stays in the list, outside the stream: [`synthesize`] cannot pick it, and it still
/// counts toward sufficiency, so a trajectory does not end sufficient without it. The
/// second list holds the stand-ins that are not positives themselves, for the label record.
pub fn reachable_positives(
    sh: &[Segment],
    stream: &[usize],
    positives: &Positives,
) -> (Positives, Vec<Positive>) {
    let mut in_stream = vec![false; sh.len()];
    for &i in stream {
        in_stream[i] = true;
    }
    if positives.items.iter().all(|p| in_stream[p.index]) {
        return (positives.clone(), Vec::new());
    }
    let at: HashMap<&str, usize> = sh
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let parent = |i: usize| sh[i].parent.as_deref().and_then(|id| at.get(id)).copied();
    let is_positive: HashSet<usize> = positives.items.iter().map(|p| p.index).collect();
    let mut items = Vec::with_capacity(positives.items.len());
    let mut stand_ins: Vec<Positive> = Vec::new();
    for p in &positives.items {
        if in_stream[p.index] {
            items.push(p.clone());
            continue;
        }
        let mut ancestor = parent(p.index);
        while let Some(a) = ancestor.filter(|&a| !in_stream[a]) {
            ancestor = parent(a);
        }
        let Some(a) = ancestor else {
            items.push(p.clone());
            continue;
        };
        let stand_in = Positive {
            index: a,
            reason: format!("within:{}", p.reason),
            score: p.score,
            lexical: p.lexical,
        };
        if !is_positive.contains(&a) && !stand_ins.iter().any(|s| s.index == a) {
            stand_ins.push(stand_in.clone());
        }
        items.push(stand_in);
    }
    // Picking a stand-in picks what it holds.
    let standing: HashSet<usize> = items
        .iter()
        .filter(|p| p.reason.starts_with("within:"))
        .map(|p| p.index)
        .collect();
    items.retain(|p| {
        let mut up = parent(p.index);
        while let Some(a) = up {
            if standing.contains(&a) {
                return false;
            }
            up = parent(a);
        }
        true
    });
    let reachable = Positives {
        items,
        candidates: positives.candidates,
        low_confidence: positives.low_confidence,
        teacher: None,
    };
    (reachable, stand_ins)
}

/// The target action, byte-exact as Python's `json.dumps` writes it (`": "` and `", "`
/// separators, ASCII escapes):
/// `{"type": "select", "args": {"segment_ids": ["a", "b"], "strategy": "guided_topk", "top_k": 2}, "sufficiency": true}`.
pub fn target_json(segment_ids: &[&str], top_k: u32, sufficient: bool) -> String {
    let ids: Vec<String> = segment_ids.iter().map(|s| py_json_string(s)).collect();
    format!(
        "{{\"type\": \"select\", \"args\": {{\"segment_ids\": [{}], \"strategy\": \"{STRATEGY}\", \"top_k\": {top_k}}}, \"sufficiency\": {sufficient}}}",
        ids.join(", ")
    )
}

/// A JSON string literal as Python's `json.dumps` (with `ensure_ascii`) writes it: `\"`,
/// `\\`, `\n`, `\r`, `\t`, `\b`, `\f`, every other char outside `' '..='~'` as `\uxxxx`
/// (lowercase hex, surrogate pairs above U+FFFF).
pub fn py_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
    out
}

/// The messages of a single-turn sample, `[system, user, assistant]` (no system message when
/// `system` is `None`), and the prompt's token count (system and user).
pub fn chat_messages(
    counter: &crate::prompt::TokenCounter,
    system: Option<String>,
    user: String,
    target: String,
) -> (Vec<Message>, u32) {
    let mut messages = Vec::with_capacity(3);
    let mut prompt_tokens = 0u32;
    if let Some(s) = system {
        prompt_tokens += counter.count(&s);
        messages.push(Message {
            role: "system".into(),
            content: s,
        });
    }
    prompt_tokens = prompt_tokens.saturating_add(counter.count(&user));
    messages.push(Message {
        role: "user".into(),
        content: user,
    });
    messages.push(Message {
        role: "assistant".into(),
        content: target,
    });
    (messages, prompt_tokens)
}

/// Stable id of a sample: task, question id, method, step and the messages.
pub fn sample_id(
    task: &str,
    question_id: &str,
    method: &str,
    step: &str,
    messages: &[Message],
) -> String {
    // stable_id(&[task, question_id, method, step, messages as `role 0x1e content` joined
    // by 0x1d]), without building the joined string.
    let mut b = StableIdBuilder::new();
    b.part(task)
        .part(question_id)
        .part(method)
        .part(step)
        .part("");
    for (i, m) in messages.iter().enumerate() {
        if i > 0 {
            b.extend("\u{1d}");
        }
        b.extend(&m.role).extend("\u{1e}").extend(&m.content);
    }
    b.finish()
}

/// The character [`neutralise_control_tokens`] puts inside a control token: U+200B ZERO
/// WIDTH SPACE.
pub const NEUTRALISER: char = '\u{200b}';

/// The control tokens of chat templates matched as they are written (Llama 2, Gemma); the
/// `<|...|>` shape (ChatML, Llama 3, Phi, Qwen) and DeepSeek's `<｜...｜>` are matched by
/// [`control_token_at`].
const CONTROL_TOKENS: &[&str] = &[
    "[INST]",
    "[/INST]",
    "<<SYS>>",
    "<</SYS>>",
    "<s>",
    "</s>",
    "<start_of_turn>",
    "<end_of_turn>",
];

/// Whether `s[i..]` starts with a chat-template control token: one of [`CONTROL_TOKENS`], or
/// `<|name|>` / `<｜name｜>` with `name` 1 to 64 characters, none of them whitespace, `|`,
/// `｜`, `<` or `>` (`<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, `<|start_header_id|>`,
/// `<|end|>`, `<｜begin▁of▁sentence｜>`).
fn control_token_at(s: &str, i: usize) -> bool {
    let rest = &s[i..];
    if CONTROL_TOKENS.iter().any(|t| rest.starts_with(t)) {
        return true;
    }
    for (open, close) in [("<|", "|>"), ("<\u{ff5c}", "\u{ff5c}>")] {
        let Some(body) = rest.strip_prefix(open) else {
            continue;
        };
        let mut n = 0;
        for (j, c) in body.char_indices() {
            if body[j..].starts_with(close) {
                return n > 0;
            }
            n += 1;
            if n > 64 || c.is_whitespace() || matches!(c, '|' | '\u{ff5c}' | '<' | '>') {
                break;
            }
        }
    }
    false
}

/// `text` with every chat-template control token ([`control_token_at`]) broken by a
/// [`NEUTRALISER`] after its first character (`<|im_end|>` becomes `<\u{200b}|im_end|>`), so
/// that no tokenizer's added-token matcher sees it and no training sample carries a turn
/// boundary it did not mean; everything else byte for byte. `None` when there is none (the
/// common case, found without allocating). The chat template's own markers are added by the
/// trainer; nothing this program writes holds one, and no marker of its formats
/// (`[NO_RETRIEVAL]`, `[SUFFICIENT]`, `<paragraph>`) is matched.
pub fn neutralise_control_tokens(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut at = memchr::memchr2_iter(b'<', b'[', b).filter(|&i| control_token_at(text, i));
    let first = at.next()?;
    let mut out = String::with_capacity(text.len() + 16);
    let mut from = 0;
    for i in std::iter::once(first).chain(at) {
        // The first character is `<` or `[`: one byte.
        out.push_str(&text[from..=i]);
        out.push(NEUTRALISER);
        from = i + 1;
    }
    out.push_str(&text[from..]);
    Some(out)
}

/// Neutralises the control tokens in the contents of `messages`
/// ([`neutralise_control_tokens`]); whether any changed.
pub fn neutralise_messages(messages: &mut [Message]) -> bool {
    let mut changed = false;
    for m in messages {
        if let Some(t) = neutralise_control_tokens(&m.content) {
            m.content = t;
            changed = true;
        }
    }
    changed
}

/// Whether a content holds a control token that [`neutralise_control_tokens`] broke (its
/// first character followed by [`NEUTRALISER`]): how the writers downstream of a neutralised
/// sample count it.
pub fn carries_neutralised_token(text: &str) -> bool {
    let z = NEUTRALISER.len_utf8();
    memchr::memmem::find_iter(text.as_bytes(), "\u{200b}".as_bytes()).any(|i| {
        let Some(first @ (b'<' | b'[')) = i.checked_sub(1).map(|p| text.as_bytes()[p]) else {
            return false;
        };
        // The token as it was: its first character and what follows the neutraliser (at
        // most 80 characters: the longest token matched is 68).
        let tail = &text[i + z..];
        let end = tail.char_indices().nth(80).map_or(tail.len(), |(j, _)| j);
        let mut was = String::with_capacity(end + 1);
        was.push(char::from(first));
        was.push_str(&tail[..end]);
        control_token_at(&was, 0)
    })
}

/// Labels one question with every method and renders its samples (see the module docs).
pub fn label_question(
    l: &Labeller,
    methods: &[Box<dyn Method + Send + Sync>],
    ctx: &QuestionContext<'_>,
) -> LabelOutput {
    let mut lap = WallLap::start();
    let q = ctx.question;
    let preset = Preset::from_options(&l.options);
    let params = TrajectoryParams::from_options(&l.options);
    let sh = build_sh(ctx, &HseqOptions::default());
    let prep = Prepared::new(&sh);
    let stream = candidate_stream(&sh, max_segments(&l.options), &prep.echoes());
    let answerable = q.answers.iter().any(|a| !a.trim().is_empty());
    let sft_method = l
        .sft_method()
        .filter(|n| methods.iter().any(|m| m.name() == *n))
        .or_else(|| methods.first().map(|m| m.name()));
    let mut out = LabelOutput::default();
    out.phases.hseq = lap.lap();
    for m in methods {
        let positives = if answerable && !stream.is_empty() {
            m.label_prepared(q, &sh, &prep, ctx)
        } else {
            Positives {
                items: Vec::new(),
                candidates: stream.len() as u32,
                low_confidence: true,
                teacher: None,
            }
        };
        let (reachable, stand_ins) = reachable_positives(&sh, &stream, &positives);
        let traj = synthesize(sh.len(), &stream, &reachable, &params);
        out.labels.push(LabelRecord {
            id: stable_id(&[&q.id, m.name()]),
            question_id: q.id.clone(),
            dataset: q.dataset.clone(),
            question_type: q.question_type.clone(),
            method: m.name().to_string(),
            segments: sh.len() as u32,
            candidates: positives.candidates,
            positives: positives
                .items
                .iter()
                .chain(&stand_ins)
                .map(|p| labeled_segment(&sh, p, ctx))
                .collect(),
            low_confidence: positives.low_confidence,
            steps: traj.steps.len() as u32,
            sufficient: traj.sufficient,
            sufficient_at: traj.sufficient_at,
            selected: traj.selected().iter().map(|&i| sh[i].id.clone()).collect(),
        });
        out.phases.label += lap.lap();
        if Some(m.name()) == sft_method && !traj.steps.is_empty() {
            let from = out.samples.len();
            let (samples, plan) = iteration_samples(l, m.as_ref(), ctx, &sh, &traj, &preset);
            out.samples.extend(samples);
            if l.options.head {
                out.samples
                    .extend(crate::head::head_sample(l, m.name(), ctx, &sh, &traj));
            }
            // The plan that guided them and positives a teacher confirmed: the samples name
            // those answers.
            for s in &mut out.samples[from..] {
                if let Some(p) = &plan {
                    s.teacher = Some(p.teacher.clone());
                    s.cache_entries.push(p.entry.clone());
                }
                if let Some(t) = &positives.teacher {
                    s.teacher = Some(t.teacher.clone());
                    s.cache_entries.extend(t.entries.iter().cloned());
                }
            }
            out.phases.samples += lap.lap();
        }
    }
    if l.options.hanrag {
        out.samples.extend(hanrag::samples(l, q));
        out.phases.samples += lap.lap();
    }
    // Source text (the question, its contexts, answers) may hold chat-template control
    // tokens: broken here, so that the `sft` rows, the JSONL lines and the duplicate hash all
    // see the same neutralised text (the writers count such samples).
    for s in &mut out.samples {
        neutralise_messages(&mut s.messages);
    }
    out
}

/// The iteration samples of a trajectory, one per step, and the teacher plan that guided
/// them when it has lineage ([`crate::guidance::GuidanceSource::lineage`]).
fn iteration_samples(
    l: &Labeller,
    method: &(dyn Method + Send + Sync),
    ctx: &QuestionContext<'_>,
    sh: &[Segment],
    traj: &Trajectory,
    preset: &Preset,
) -> (Vec<SftSample>, Option<crate::guidance::Plan>) {
    let q = ctx.question;
    let (guidance, guidance_source) = l.guidance.guidance_for(q);
    let plan = l.guidance.lineage(q, guidance_source);
    let guidance_key = l.guidance.cache_key(q, l.options.planner_model.as_deref());
    let o = &l.options;
    // The same for every step but `over_budget`: built once per question, both ways.
    let params = |over_budget: bool| {
        serde_json::json!({
            "method": method.name(),
            "preset": o.preset,
            "k": preset.top_k,
            "max_segments": preset.max_segments,
            "max_tokens": preset.max_tokens,
            "window": TrajectoryParams::from_options(o).window,
            "sufficiency": o.sufficiency,
            "max_steps": o.max_steps,
            "snippet_chars": o.snippet_chars,
            "lexical_weight": o.lexical_weight,
            "method_params": method.params(),
            "guidance": guidance_source,
            "guidance_key": guidance_key,
            "tokens": l.counter.name(),
            "over_budget": over_budget,
        })
        .to_string()
    };
    let s = StepSamples {
        l,
        method,
        q,
        sh,
        preset,
        guidance: &guidance,
        params: [params(false), params(true)],
        lines: LineCache::new(),
        steps: traj.steps.len() as u32,
    };
    let samples = traj
        .steps
        .iter()
        .enumerate()
        .map(|(n, step)| s.sample(step, n as u32 + 1))
        .collect();
    (samples, plan)
}

/// What the steps of one question's trajectory share.
struct StepSamples<'a> {
    l: &'a Labeller,
    method: &'a (dyn Method + Send + Sync),
    q: &'a distillery_core::Question,
    sh: &'a [Segment],
    preset: &'a Preset,
    guidance: &'a str,
    /// The `params` JSON without and with `over_budget`.
    params: [String; 2],
    lines: LineCache<'a>,
    steps: u32,
}

impl StepSamples<'_> {
    /// The sample of step `n` (1-based).
    fn sample(&self, step: &Step, n: u32) -> SftSample {
        let (l, sh, q, preset) = (self.l, self.sh, self.q, self.preset);
        let line = |i: usize| SegmentLine {
            id: &sh[i].id,
            content: &sh[i].content,
        };
        let input = IterationInput {
            question: &q.question,
            guidance: self.guidance,
            top_k: preset.top_k,
            selected: step.selected_before.iter().map(|&i| line(i)).collect(),
            window: step.window.iter().map(|&i| line(i)).collect(),
            keep: step.window.iter().map(|i| step.picks.contains(i)).collect(),
        };
        let rendered = l.prompts.render_iteration_cached(
            &input,
            &l.counter,
            l.options.snippet_chars,
            preset.max_tokens,
            &self.lines,
        );
        let pick_ids: Vec<&str> = step.picks.iter().map(|&i| sh[i].id.as_str()).collect();
        let target = target_json(&pick_ids, preset.top_k, step.sufficient);
        let target_tokens = l.counter.count(&target);
        let mut messages = Vec::with_capacity(3);
        if !rendered.system.is_empty() {
            messages.push(Message {
                role: "system".into(),
                content: rendered.system,
            });
        }
        messages.push(Message {
            role: "user".into(),
            content: rendered.user,
        });
        messages.push(Message {
            role: "assistant".into(),
            content: target,
        });
        let mut segment_ids: Vec<String> = rendered
            .shown
            .iter()
            .map(|&p| sh[step.window[p]].id.clone())
            .collect();
        segment_ids.extend(step.selected_before.iter().map(|&i| sh[i].id.clone()));
        let evidence: Vec<usize> = (rendered.shown.iter().map(|&p| step.window[p]))
            .chain(step.selected_before.iter().copied())
            .collect();
        let revisions = distillery_core::revisions_of(&evidence, |&i| sh[i].page_revision());
        let method = self.method.name();
        let id = sample_id(TASK_ITERATION, &q.id, method, &n.to_string(), &messages);
        SftSample {
            id,
            task: TASK_ITERATION.to_string(),
            messages,
            weight: step.weight,
            split: String::new(),
            dataset: q.dataset.clone(),
            question_id: q.id.clone(),
            segment_ids,
            revisions,
            method: method.to_string(),
            params: self.params[usize::from(rendered.over_budget)].clone(),
            template_id: l.prompts.iteration.id.clone(),
            template_version: l.prompts.iteration.version.clone(),
            pipeline_hash: l.pipeline_hash.clone(),
            step: Some(n),
            steps: Some(self.steps),
            sufficient: Some(step.sufficient),
            prompt_tokens: rendered.prompt_tokens,
            target_tokens,
            teacher: None,
            cache_entries: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(id: &str, level: &str, parent: Option<&str>) -> Segment {
        Segment {
            id: id.into(),
            level: level.into(),
            parent: parent.map(Into::into),
            content: id.into(),
            ..Default::default()
        }
    }

    fn positive(index: usize, reason: &str) -> Positive {
        Positive {
            index,
            reason: reason.into(),
            score: 1.0,
            lexical: false,
        }
    }

    #[test]
    fn positives_past_the_cap_stand_as_their_ancestor_in_the_stream() {
        // doc → p1, p2 (paragraphs first in ρ) → s1 (of p1), s2 and s3 (of p2); the cap keeps
        // 4 candidates: p1, p2, s1, s2.
        let sh = vec![
            seg("doc", "document", None),
            seg("p1", "paragraph", Some("doc")),
            seg("p2", "paragraph", Some("doc")),
            seg("s1", "sentence", Some("p1")),
            seg("s2", "sentence", Some("p2")),
            seg("s3", "sentence", Some("p2")),
        ];
        let stream = candidate_stream(&sh, 4, &[]);
        assert_eq!(stream, [1, 2, 3, 4]);
        let of = |items: &[Positive]| -> Vec<(usize, String)> {
            items.iter().map(|p| (p.index, p.reason.clone())).collect()
        };
        let pos = |items: Vec<Positive>| Positives {
            items,
            candidates: 4,
            low_confidence: false,
            teacher: None,
        };
        let params = TrajectoryParams {
            k: 2,
            window: 4,
            sufficiency: 1.0,
            max_steps: 4,
            lexical_weight: 0.5,
        };

        // s3 (the answer) past the cap stands as p2; s2, inside p2, goes with it.
        let given = pos(vec![
            positive(3, "bridge"),
            positive(4, "lead"),
            positive(5, "exact"),
        ]);
        let (reachable, stand_ins) = reachable_positives(&sh, &stream, &given);
        assert_eq!(
            of(&reachable.items),
            [(3, "bridge".to_string()), (2, "within:exact".to_string())]
        );
        assert_eq!(of(&stand_ins), [(2, "within:exact".to_string())]);
        let t = synthesize(sh.len(), &stream, &reachable, &params);
        assert!(t.sufficient);
        assert_eq!(t.selected(), [3, 2]);
        // Before: s3 could not be picked and did not count, and the trajectory ended
        // sufficient without it.
        let before = Positives {
            items: vec![positive(3, "bridge"), positive(4, "lead")],
            ..given.clone()
        };
        assert!(synthesize(sh.len(), &stream, &before, &params).sufficient);

        // A stand-in that is a positive already is not listed again.
        let given = pos(vec![positive(2, "exact"), positive(5, "substring")]);
        let (reachable, stand_ins) = reachable_positives(&sh, &stream, &given);
        assert_eq!(
            of(&reachable.items),
            [
                (2, "exact".to_string()),
                (2, "within:substring".to_string())
            ]
        );
        assert!(stand_ins.is_empty());

        // A positive with no ancestor in the stream stays, outside it: it cannot be picked
        // and the trajectory does not end sufficient without it.
        let short = [1, 3];
        let given = pos(vec![positive(3, "exact"), positive(5, "exact")]);
        let (reachable, _) = reachable_positives(&sh, &short, &given);
        assert_eq!(of(&reachable.items), of(&given.items));
        let t = synthesize(sh.len(), &short, &reachable, &params);
        assert_eq!(t.selected(), [3]);
        assert!(!t.sufficient && !t.steps.is_empty());

        // Everything in the stream: unchanged.
        let inside = pos(vec![positive(1, "exact")]);
        assert_eq!(reachable_positives(&sh, &stream, &inside).0, inside);
    }

    #[test]
    fn target_is_python_json() {
        assert_eq!(
            target_json(&["s1", "s2"], 2, true),
            r#"{"type": "select", "args": {"segment_ids": ["s1", "s2"], "strategy": "guided_topk", "top_k": 2}, "sufficiency": true}"#
        );
        assert_eq!(
            target_json(&[], 4, false),
            r#"{"type": "select", "args": {"segment_ids": [], "strategy": "guided_topk", "top_k": 4}, "sufficiency": false}"#
        );
    }

    #[test]
    fn strings_escape_like_python() {
        assert_eq!(py_json_string("a\"b\\c\n"), r#""a\"b\\c\n""#);
        assert_eq!(py_json_string("é\u{1}\u{7f}"), r#""\u00e9\u0001\u007f""#);
        assert_eq!(py_json_string("😀"), r#""\ud83d\ude00""#);
    }

    #[test]
    fn stream_skips_roots_and_caps() {
        let seg = |id: &str, level: &str| Segment {
            id: id.into(),
            level: level.into(),
            ..Default::default()
        };
        let sh = vec![
            seg("d", "document"),
            seg("t", "table"),
            seg("p1", "paragraph"),
            seg("r1", "table_row"),
            seg("s1", "sentence"),
        ];
        assert_eq!(candidate_stream(&sh, 10, &[]), [2, 3, 4]);
        assert_eq!(candidate_stream(&sh, 2, &[]), [2, 3]);
        // Echoes are left out of the capped stream (the cap is the methods' candidate set).
        let echo = [false, false, false, true, false];
        assert_eq!(candidate_stream(&sh, 2, &echo), [2]);
        assert_eq!(candidate_stream(&sh, 10, &echo), [2, 4]);
    }

    #[test]
    fn a_sole_sentence_that_repeats_its_paragraph_is_an_echo() {
        let seg = |id: &str, level: &str, parent: &str, content: &str| Segment {
            id: id.into(),
            level: level.into(),
            parent: (!parent.is_empty()).then(|| parent.into()),
            content: content.into(),
            ..Default::default()
        };
        let sh = vec![
            seg("d", "document", "", "doc"),
            seg("p1", "paragraph", "d", "One sentence."),
            seg("p2", "paragraph", "d", "First. Second."),
            seg("p3", "paragraph", "d", "Longer than its sentence."),
            seg("s1", "sentence", "p1", " One sentence. "),
            seg("s2", "sentence", "p2", "First."),
            seg("s3", "sentence", "p2", " Second."),
            seg("s4", "sentence", "p3", "Longer"),
        ];
        let echo = Prepared::new(&sh).echoes();
        assert_eq!(
            echo,
            [false, false, false, false, true, false, false, false]
        );
        assert_eq!(candidate_stream(&sh, 48, &echo), [1, 2, 3, 5, 6, 7]);
    }

    #[test]
    fn control_tokens_are_broken_and_everything_else_kept() {
        let z = "\u{200b}";
        for (raw, want) in [
            ("a <|im_end|> b", format!("a <{z}|im_end|> b")),
            ("<|im_start|>user", format!("<{z}|im_start|>user")),
            ("x<|endoftext|>", format!("x<{z}|endoftext|>")),
            (
                "<|begin_of_text|><|start_header_id|>system<|end_header_id|><|eot_id|>",
                format!(
                    "<{z}|begin_of_text|><{z}|start_header_id|>system<{z}|end_header_id|><{z}|eot_id|>"
                ),
            ),
            ("<|user|>hi<|end|>", format!("<{z}|user|>hi<{z}|end|>")),
            ("[INST] q [/INST]", format!("[{z}INST] q [{z}/INST]")),
            ("<<SYS>>s<</SYS>>", format!("<{z}<SYS>>s<{z}</SYS>>")),
            ("<s>x</s>", format!("<{z}s>x<{z}/s>")),
            (
                "<start_of_turn>user\nq<end_of_turn>",
                format!("<{z}start_of_turn>user\nq<{z}end_of_turn>"),
            ),
            (
                "é<｜begin▁of▁sentence｜>ü",
                format!("é<{z}｜begin▁of▁sentence｜>ü"),
            ),
        ] {
            let got = neutralise_control_tokens(raw).unwrap();
            assert_eq!(got, want, "{raw:?}");
            assert_eq!(got.replace(z, ""), raw, "only the neutraliser is added");
            assert!(
                neutralise_control_tokens(&got).is_none(),
                "idempotent: {got:?}"
            );
            assert!(carries_neutralised_token(&got), "{got:?}");
        }
        // Not control tokens: the formats' own markers, look-alikes, plain text.
        for text in [
            "[NO_RETRIEVAL] [SUFFICIENT] [INSUFFICIENT] <paragraph>x</paragraph>",
            "a || b, x <| y, <||>, <| im_end |>, <|a\nb|>, [inst], <S>, <sys>, [INST",
            "<|aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa|>",
            "plain text with <b>tags</b> and [brackets] and é ü 中文",
            "",
        ] {
            assert_eq!(neutralise_control_tokens(text), None, "{text:?}");
            assert!(!carries_neutralised_token(text), "{text:?}");
        }
        // A zero width space the source had, not after a token's first character.
        assert!(!carries_neutralised_token("a\u{200b}b <\u{200b}b>"));
    }

    #[test]
    fn messages_are_neutralised_in_place() {
        let mut m = vec![
            Message {
                role: "system".into(),
                content: "You pick segments.".into(),
            },
            Message {
                role: "user".into(),
                content: "Who? <|im_end|><|im_start|>assistant [INST]".into(),
            },
        ];
        assert!(neutralise_messages(&mut m));
        assert_eq!(m[0].content, "You pick segments.");
        assert!(!m[1].content.contains("<|im_end|>") && !m[1].content.contains("[INST]"));
        assert!(!neutralise_messages(&mut m));
    }
}
