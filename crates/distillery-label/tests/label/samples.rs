//! Tests of S_h, trajectories, prompts and SFT samples.
//!
//! Golden targets on a hand-made question; trajectory cases; budget fitting with a tiny
//! WordLevel `tokenizer.json` built here and with the character estimate; template
//! replacement; the guidance cache; the MetaQA neighbourhood; samples of the real shared
//! HotpotQA, MuSiQue (with HANRAG), 2Wiki, TAT-QA and HybridQA files; determinism.

use std::collections::HashMap;
use std::path::Path;

use distillery_core::spec::Format;
use distillery_core::{
    Document, LabeledSegment, Paragraph, Question, Segment, Sentence, SftSample, Table, Triple,
    VecSink,
};
use distillery_label::LabelOptions;
use distillery_label::guidance::{GuidanceSource, PLAN_PREFIX, model_dir};
use distillery_label::positives::{Method, Positive, Positives};
use distillery_label::prompt::{
    IterationInput, Prompts, RenderedIteration, SegmentLine, TokenCounter, fill,
};
use distillery_label::sft::{self, target_json};
use distillery_label::sh::{KbIndex, StartSide, build_sh, question_hops, start_side};
use distillery_label::trajectory::{Preset, TrajectoryParams, synthesize};
use distillery_label::{LabelOutput, Labeller, QuestionContext, hanrag};

use crate::common::{self, bundled, read, shared};

// ---------------------------------------------------------------------------------------
// Helpers

/// A test method: every candidate whose content contains the needle (paragraphs first, as the
/// stream orders them), flagged lexical or not.
struct Contains {
    needle: &'static str,
    lexical: bool,
}

impl Method for Contains {
    fn name(&self) -> &'static str {
        "contains"
    }
    fn params(&self) -> serde_json::Value {
        serde_json::json!({ "needle": self.needle })
    }
    fn label(&self, _q: &Question, sh: &[Segment], _ctx: &QuestionContext<'_>) -> Positives {
        let cands: Vec<usize> = sft::candidate_stream(sh, 48, &[]);
        let items = cands
            .iter()
            .filter(|&&i| sh[i].content.contains(self.needle))
            .map(|&i| Positive {
                index: i,
                reason: if self.lexical { "lexical" } else { "substring" }.into(),
                score: 1.0,
                lexical: self.lexical,
            })
            .collect();
        Positives {
            items,
            candidates: cands.len() as u32,
            low_confidence: self.lexical,
            teacher: None,
        }
    }
}

fn boxed(m: Contains) -> Vec<Box<dyn Method + Send + Sync>> {
    vec![Box::new(m)]
}

fn france() -> (Question, Document) {
    let text = "France is a country. Its capital is Paris.";
    let doc = Document {
        id: "doc-france".into(),
        dataset: "handmade".into(),
        source: "handmade.json".into(),
        uri: "handmade:France".into(),
        title: "France".into(),
        text: text.into(),
        paragraphs: vec![Paragraph {
            start: 0,
            end: 42,
            section: -1,
        }],
        sentences: vec![
            Sentence {
                start: 0,
                end: 20,
                paragraph: 0,
            },
            Sentence {
                start: 21,
                end: 42,
                paragraph: 0,
            },
        ],
        ..Default::default()
    };
    let q = Question {
        id: "q-france".into(),
        dataset: "handmade".into(),
        question_id: "1".into(),
        question: "What is the capital of France?".into(),
        answers: vec!["Paris".into()],
        context_documents: vec![doc.id.clone()],
        ..Default::default()
    };
    (q, doc)
}

fn labeller(options: LabelOptions) -> Labeller {
    Labeller::new(options, "pipeline-hash-test").expect("labeller")
}

/// The options of the golden samples: `hseq-paper` positives (the goldens were written on
/// them; the default method is `answer-aware`), then `f`.
fn options(f: impl FnOnce(&mut LabelOptions)) -> LabelOptions {
    let mut o = LabelOptions {
        methods: vec!["hseq-paper".into()],
        ..LabelOptions::default()
    };
    f(&mut o);
    o
}

fn assistant(s: &SftSample) -> &str {
    &s.messages.last().expect("messages").content
}

fn user(s: &SftSample) -> &str {
    &s.messages
        .iter()
        .find(|m| m.role == "user")
        .expect("user")
        .content
}

/// The ids listed in a prompt section (`- [id] ...` lines up to the next `###`).
fn section_ids(prompt: &str, marker: &str) -> Vec<String> {
    let Some(start) = prompt.find(marker) else {
        return Vec::new();
    };
    prompt[start + marker.len()..]
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("###"))
        .filter_map(|l| l.strip_prefix("- ["))
        .filter_map(|l| l.split_once(']'))
        .map(|(id, _)| id.to_string())
        .collect()
}

/// Checks the invariants of an iteration sample.
fn check_iteration(s: &SftSample, max_tokens: u32) {
    assert_eq!(s.task, "hseq_iteration");
    let roles: Vec<&str> = s.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant"]);
    let u = user(s);
    let markers = [
        "### Instruction",
        "### Question",
        "### Guidance",
        "### Selected-So-Far",
        "### Candidate-Window",
        "### Output (JSON)",
    ];
    let mut at = 0;
    for m in markers {
        let p = u[at..]
            .find(m)
            .unwrap_or_else(|| panic!("{m} missing or out of order"));
        at += p + m.len();
    }
    let target: serde_json::Value = serde_json::from_str(assistant(s)).expect("target JSON");
    let ids: Vec<&str> = target["args"]["segment_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let k = target["args"]["top_k"].as_u64().unwrap() as u32;
    let suff = target["sufficiency"].as_bool().unwrap();
    assert!(ids.len() <= k as usize);
    assert_eq!(assistant(s), target_json(&ids, k, suff), "byte-exact form");
    assert_eq!(s.sufficient, Some(suff));
    let window = section_ids(u, "### Candidate-Window");
    let selected = section_ids(u, "### Selected-So-Far");
    for id in &ids {
        assert!(
            window.iter().any(|w| w == id),
            "pick {id} not in the window"
        );
        assert!(
            !selected.iter().any(|w| w == id),
            "pick {id} already selected"
        );
    }
    let mut listed = window.clone();
    listed.extend(selected);
    assert_eq!(listed, s.segment_ids);
    let params: serde_json::Value = serde_json::from_str(&s.params).unwrap();
    if !params["over_budget"].as_bool().unwrap() {
        assert!(
            s.prompt_tokens <= max_tokens,
            "{} > {max_tokens}",
            s.prompt_tokens
        );
    }
    assert!(s.target_tokens > 0);
    assert!(s.weight > 0.0 && s.weight <= 1.0);
    assert_eq!(s.split, "");
    assert_eq!(s.pipeline_hash, "pipeline-hash-test");
    assert!(!s.template_id.is_empty() && !s.template_version.is_empty());
    assert!(s.step.unwrap() >= 1 && s.step <= s.steps);
}

/// A QA file in memory: questions and the records their contexts name.
struct Corpus {
    questions: Vec<Question>,
    documents: HashMap<String, Document>,
    tables: HashMap<String, Table>,
}

impl Corpus {
    fn of(sink: &VecSink) -> Corpus {
        Corpus {
            questions: sink.questions().into_iter().cloned().collect(),
            documents: sink
                .documents()
                .into_iter()
                .map(|d| (d.id.clone(), d.clone()))
                .collect(),
            tables: sink
                .tables()
                .into_iter()
                .map(|t| (t.id.clone(), t.clone()))
                .collect(),
        }
    }

    fn context(&self, q: &Question) -> (Vec<Document>, Vec<Table>) {
        (
            q.context_documents
                .iter()
                .filter_map(|id| self.documents.get(id).cloned())
                .collect(),
            q.context_tables
                .iter()
                .filter_map(|id| self.tables.get(id).cloned())
                .collect(),
        )
    }

    fn label(&self, l: &Labeller, q: &Question, triples: &[Triple]) -> LabelOutput {
        let (documents, tables) = self.context(q);
        l.label_question(&QuestionContext {
            question: q,
            documents: &common::refs(&documents),
            tables: &common::refs(&tables),
            triples,
            kg_ids: &[],
        })
    }

    fn label_all(&self, l: &Labeller, limit: usize) -> Vec<LabelOutput> {
        self.questions
            .iter()
            .take(limit)
            .map(|q| self.label(l, q, &[]))
            .collect()
    }
}

fn by_task<'a>(outs: &'a [LabelOutput], task: &str) -> Vec<&'a SftSample> {
    outs.iter()
        .flat_map(|o| o.samples.iter())
        .filter(|s| s.task == task)
        .collect()
}

// ---------------------------------------------------------------------------------------
// Golden targets

#[test]
fn golden_target_single_step() {
    let (q, doc) = france();
    let l = labeller(LabelOptions::default());
    let docs = [doc];
    let ctx = QuestionContext {
        question: &q,
        documents: &common::refs(&docs),
        tables: &[],
        triples: &[],
        kg_ids: &[],
    };
    let sh = build_sh(&ctx, &Default::default());
    let levels: Vec<&str> = sh.iter().map(|s| s.level.as_str()).collect();
    assert_eq!(levels, ["document", "paragraph", "sentence", "sentence"]);
    let out = sft::label_question(
        &l,
        &boxed(Contains {
            needle: "Paris",
            lexical: false,
        }),
        &ctx,
    );
    assert_eq!(out.labels.len(), 1);
    let rec = &out.labels[0];
    assert_eq!(rec.positives.len(), 2);
    assert_eq!((rec.steps, rec.sufficient, rec.sufficient_at), (1, true, 1));
    let it: Vec<_> = out
        .samples
        .iter()
        .filter(|s| s.task == "hseq_iteration")
        .collect();
    assert_eq!(it.len(), 1);
    assert_eq!(
        assistant(it[0]),
        "{\"type\": \"select\", \"args\": {\"segment_ids\": [\"0fde336166df3d00f879391a34b51790\", \"82df16d012806c538be14f300ab367cb\"], \"strategy\": \"guided_topk\", \"top_k\": 2}, \"sufficiency\": true}"
    );
    assert_eq!(it[0].weight, 1.0);
    check_iteration(it[0], 3072);
}

#[test]
fn golden_target_two_steps_k1() {
    let (q, doc) = france();
    let l = labeller(options(|o| o.top_k = Some(1)));
    let docs = [doc];
    let ctx = QuestionContext {
        question: &q,
        documents: &common::refs(&docs),
        tables: &[],
        triples: &[],
        kg_ids: &[],
    };
    let out = sft::label_question(
        &l,
        &boxed(Contains {
            needle: "Paris",
            lexical: true,
        }),
        &ctx,
    );
    let it: Vec<_> = out
        .samples
        .iter()
        .filter(|s| s.task == "hseq_iteration")
        .collect();
    assert_eq!(it.len(), 2);
    assert_eq!(
        assistant(it[0]),
        "{\"type\": \"select\", \"args\": {\"segment_ids\": [\"0fde336166df3d00f879391a34b51790\"], \"strategy\": \"guided_topk\", \"top_k\": 1}, \"sufficiency\": false}"
    );
    assert_eq!(
        assistant(it[1]),
        "{\"type\": \"select\", \"args\": {\"segment_ids\": [\"82df16d012806c538be14f300ab367cb\"], \"strategy\": \"guided_topk\", \"top_k\": 1}, \"sufficiency\": true}"
    );
    // Lexical picks get the lexical weight.
    assert_eq!(it[0].weight, 0.5);
    // The second prompt lists the first pick as selected, and not in the window.
    let u = user(it[1]);
    assert_eq!(
        section_ids(u, "### Selected-So-Far"),
        ["0fde336166df3d00f879391a34b51790"]
    );
    assert!(u.contains("- [82df16d012806c538be14f300ab367cb] Its capital is Paris."));
    assert!(user(it[0]).contains("### Selected-So-Far\n(none)\n"));
    assert_eq!((it[1].step, it[1].steps), (Some(2), Some(2)));
    for s in &it {
        check_iteration(s, 3072);
    }
    let rec = &out.labels[0];
    assert_eq!(
        rec.selected,
        [
            "0fde336166df3d00f879391a34b51790",
            "82df16d012806c538be14f300ab367cb"
        ]
    );
    assert_eq!(rec.sufficient_at, 2);
}

#[test]
fn golden_prompt_layout() {
    let (q, doc) = france();
    let l = labeller(LabelOptions::default());
    let docs = [doc];
    let ctx = QuestionContext {
        question: &q,
        documents: &common::refs(&docs),
        tables: &[],
        triples: &[],
        kg_ids: &[],
    };
    let out = sft::label_question(
        &l,
        &boxed(Contains {
            needle: "Paris",
            lexical: false,
        }),
        &ctx,
    );
    let s = &out.samples[0];
    let system = &s.messages[0].content;
    let instruction = fill(&Prompts::builtin().iteration.instruction, &[("top_k", "2")]);
    let expected = format!(
        "### Instruction\n{instruction}\n### Question\nWhat is the capital of France?\n### Guidance\n\
         {PLAN_PREFIX} {}\n### Selected-So-Far\n(none)\n\n### Candidate-Window\n\
         - [0fde336166df3d00f879391a34b51790] France is a country. Its capital is Paris.\n\
         - [4f368a6f8dd970a8824a585cdd3be1a9] France is a country.\n\
         - [82df16d012806c538be14f300ab367cb] Its capital is Paris.\n\n### Output (JSON)",
        distillery_label::guidance::QuestionKind::Default.sentence()
    );
    assert_eq!(user(s), expected);
    // The instruction is written once: the system message names the role and points at it.
    assert!(!system.contains("Choose at most") && system.len() * 3 < instruction.len());
    assert_eq!(s.template_version, "2");
}

// ---------------------------------------------------------------------------------------
// Trajectories

fn positives(items: &[(usize, bool)]) -> Positives {
    Positives {
        items: items
            .iter()
            .map(|&(index, lexical)| Positive {
                index,
                reason: if lexical { "lexical" } else { "exact" }.into(),
                score: 1.0,
                lexical,
            })
            .collect(),
        candidates: 0,
        low_confidence: false,
        teacher: None,
    }
}

fn tp(k: u32, window: u32, sufficiency: f64, max_steps: u32) -> TrajectoryParams {
    TrajectoryParams {
        k,
        window,
        sufficiency,
        max_steps,
        lexical_weight: 0.25,
    }
}

#[test]
fn trajectory_k_limits_picks_per_step() {
    let stream: Vec<usize> = (1..11).collect();
    let p = positives(&[(2, false), (3, false), (4, false), (5, false), (6, false)]);
    let t = synthesize(11, &stream, &p, &tp(2, 8, 1.0, 10));
    let picks: Vec<Vec<usize>> = t.steps.iter().map(|s| s.picks.clone()).collect();
    assert_eq!(picks, [vec![2, 3], vec![4, 5], vec![6]]);
    assert_eq!(
        t.steps.iter().map(|s| s.sufficient).collect::<Vec<_>>(),
        [false, false, true]
    );
    let t = synthesize(11, &stream, &p, &tp(5, 8, 1.0, 10));
    assert_eq!(t.steps.len(), 1);
    assert_eq!(t.steps[0].picks, [2, 3, 4, 5, 6]);
}

#[test]
fn trajectory_picks_follow_priority_within_window() {
    let stream: Vec<usize> = (0..6).collect();
    // Priority order 4, 1, 2: the window of 3 holds 0..3, so 1 and 2 first, then 4.
    let p = positives(&[(4, false), (1, false), (2, false)]);
    let t = synthesize(6, &stream, &p, &tp(2, 3, 1.0, 10));
    assert_eq!(t.steps[0].window, [0, 1, 2]);
    assert_eq!(t.steps[0].picks, [1, 2]);
    assert_eq!(t.steps[1].window, [0, 3, 4]);
    assert_eq!(t.steps[1].picks, [4]);
    assert_eq!(t.steps[1].selected_before, [1, 2]);
    // A wide window shows all: the priority order decides.
    let t = synthesize(6, &stream, &p, &tp(2, 6, 1.0, 10));
    assert_eq!(t.steps[0].picks, [4, 1]);
}

#[test]
fn trajectory_window_slides_past_empty_windows() {
    let stream: Vec<usize> = (0..12).collect();
    let p = positives(&[(9, false)]);
    let t = synthesize(12, &stream, &p, &tp(2, 4, 1.0, 4));
    assert_eq!(t.steps.len(), 3);
    assert_eq!(t.steps[0].window, [0, 1, 2, 3]);
    assert!(t.steps[0].picks.is_empty() && !t.steps[0].sufficient);
    assert_eq!(t.steps[1].window, [4, 5, 6, 7]);
    assert!(t.steps[1].picks.is_empty());
    assert_eq!(t.steps[2].window, [8, 9, 10, 11]);
    assert_eq!(t.steps[2].picks, [9]);
    assert_eq!(t.sufficient_at, 3);
    // Empty steps have full weight when the pool is not lexical.
    assert_eq!(t.steps[0].weight, 1.0);
}

#[test]
fn trajectory_refresh_after_full_step_slide_after_partial() {
    let stream: Vec<usize> = (0..12).collect();
    // Window 0..4 holds three positives: k = 2 takes two, the window refreshes and the third
    // is still shown; that partial step slides the window past 4..6.
    let p = positives(&[(1, false), (2, false), (3, false), (10, false)]);
    let t = synthesize(12, &stream, &p, &tp(2, 4, 1.0, 10));
    let windows: Vec<Vec<usize>> = t.steps.iter().map(|s| s.window.clone()).collect();
    assert_eq!(
        windows,
        [
            vec![0, 1, 2, 3],
            vec![0, 3, 4, 5],
            vec![6, 7, 8, 9],
            vec![10, 11]
        ]
    );
    let picks: Vec<Vec<usize>> = t.steps.iter().map(|s| s.picks.clone()).collect();
    assert_eq!(picks, [vec![1, 2], vec![3], vec![], vec![10]]);
    assert_eq!(t.sufficient_at, 4);
}

#[test]
fn trajectory_sufficiency_threshold_u() {
    let stream: Vec<usize> = (0..10).collect();
    let p = positives(&[(0, false), (1, false), (2, false), (3, false)]);
    // u = 0.5: ceil(0.5 * 4) = 2 picks suffice.
    let t = synthesize(10, &stream, &p, &tp(1, 8, 0.5, 10));
    assert_eq!(t.steps.len(), 2);
    assert!(t.sufficient);
    assert_eq!(t.sufficient_at, 2);
    // u = 0.3: ceil(1.2) = 2.
    let t = synthesize(10, &stream, &p, &tp(1, 8, 0.3, 10));
    assert_eq!(t.sufficient_at, 2);
    // u = 0.1: one pick.
    let t = synthesize(10, &stream, &p, &tp(1, 8, 0.1, 10));
    assert_eq!(t.sufficient_at, 1);
}

#[test]
fn trajectory_step_cap_t_max() {
    let stream: Vec<usize> = (0..10).collect();
    let p = positives(&[(0, false), (1, false), (2, false), (3, false), (4, false)]);
    let t = synthesize(10, &stream, &p, &tp(1, 8, 1.0, 3));
    assert_eq!(t.steps.len(), 3);
    assert!(!t.sufficient);
    assert_eq!(t.sufficient_at, 0);
    assert!(t.steps.iter().all(|s| !s.sufficient));
}

#[test]
fn trajectory_lexical_weights() {
    let stream: Vec<usize> = (0..10).collect();
    let p = positives(&[(0, true), (1, false), (2, true), (3, true)]);
    let t = synthesize(10, &stream, &p, &tp(2, 8, 1.0, 10));
    // Step 1 picks 0 (lexical) and 1 (exact): full weight; step 2 picks 2, 3 (lexical).
    assert_eq!(t.steps[0].weight, 1.0);
    assert_eq!(t.steps[1].weight, 0.25);
    // An all-lexical pool makes its empty steps lexical too.
    let p = positives(&[(9, true)]);
    let t = synthesize(10, &stream, &p, &tp(2, 4, 1.0, 10));
    assert!(t.steps[0].picks.is_empty());
    assert_eq!(t.steps[0].weight, 0.25);
}

#[test]
fn trajectory_without_positives_or_candidates_is_empty() {
    let stream: Vec<usize> = (0..10).collect();
    let t = synthesize(10, &stream, &positives(&[]), &tp(2, 8, 1.0, 4));
    assert!(t.steps.is_empty() && !t.sufficient && t.sufficient_at == 0);
    let t = synthesize(10, &[], &positives(&[(1, false)]), &tp(2, 8, 1.0, 4));
    assert!(t.steps.is_empty());
    let t = synthesize(10, &stream, &positives(&[(1, false)]), &tp(2, 8, 1.0, 0));
    assert!(t.steps.is_empty());
}

#[test]
fn trajectory_params_resolve_presets() {
    let o = options(|o| o.preset = "large".into());
    assert_eq!(TrajectoryParams::from_options(&o).k, 5);
    let p = Preset::from_options(&o);
    assert_eq!((p.max_segments, p.max_tokens), (32, 2048));
    let o = options(|o| {
        o.preset = "medium".into();
        o.max_tokens = Some(1000);
    });
    let p = Preset::from_options(&o);
    assert_eq!((p.top_k, p.max_segments, p.max_tokens), (4, 48, 1000));
    assert_eq!(
        TrajectoryParams::from_options(&LabelOptions::default()).k,
        2
    );
}

#[test]
fn question_without_answers_gets_a_record_but_no_samples() {
    let (mut q, doc) = france();
    q.answers.clear();
    let l = labeller(LabelOptions::default());
    let docs = [doc];
    let ctx = QuestionContext {
        question: &q,
        documents: &common::refs(&docs),
        tables: &[],
        triples: &[],
        kg_ids: &[],
    };
    let out = sft::label_question(
        &l,
        &boxed(Contains {
            needle: "Paris",
            lexical: false,
        }),
        &ctx,
    );
    assert_eq!(out.labels.len(), 1);
    assert!(out.labels[0].positives.is_empty());
    assert_eq!(out.labels[0].steps, 0);
    assert!(out.samples.is_empty());
    // No context either: still a record.
    let (q, _) = france();
    let ctx = QuestionContext {
        question: &q,
        documents: &[],
        tables: &[],
        triples: &[],
        kg_ids: &[],
    };
    let out = l.label_question(&ctx);
    assert!(!out.labels.is_empty());
    assert!(
        out.labels
            .iter()
            .all(|r| r.positives.is_empty() && r.segments == 0)
    );
    assert!(out.samples.is_empty());
}

// ---------------------------------------------------------------------------------------
// Budget fitting

/// Writes a WordLevel `tokenizer.json` (whitespace pre-tokenizer) with the tokenizers crate.
fn tiny_tokenizer(dir: &Path) -> String {
    use tokenizers::models::wordlevel::WordLevel;
    use tokenizers::pre_tokenizers::whitespace::Whitespace;
    let words = [
        "[UNK]", "the", "a", "of", "is", "capital", "paris", "france",
    ];
    let vocab: serde_json::Map<String, serde_json::Value> = words
        .iter()
        .enumerate()
        .map(|(i, w)| (w.to_string(), serde_json::json!(i)))
        .collect();
    let vocab_path = dir.join("vocab.json");
    std::fs::write(&vocab_path, serde_json::to_string(&vocab).unwrap()).unwrap();
    let model = WordLevel::builder()
        .files(vocab_path.to_str().unwrap().to_string())
        .unk_token("[UNK]".into())
        .build()
        .unwrap();
    let mut tok = tokenizers::Tokenizer::new(model);
    tok.with_pre_tokenizer(Some(Whitespace));
    let path = dir.join("tokenizer.json");
    tok.save(&path, false).unwrap();
    path.to_str().unwrap().to_string()
}

fn long_text(i: usize) -> String {
    (0..60)
        .map(|j| format!("word{i}x{j}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn budget_case(counter: &TokenCounter) {
    let prompts = Prompts::builtin();
    let texts: Vec<String> = (0..8).map(long_text).collect();
    let ids: Vec<String> = (0..8).map(|i| format!("seg{i}")).collect();
    let sel_text = long_text(99);
    let input = IterationInput {
        question: "What is the capital of France?",
        guidance: "Plan: look.",
        top_k: 2,
        selected: vec![SegmentLine {
            id: "sel0",
            content: &sel_text,
        }],
        window: ids
            .iter()
            .zip(&texts)
            .map(|(id, c)| SegmentLine { id, content: c })
            .collect(),
        keep: (0..8).map(|i| i == 6).collect(),
    };
    let full = prompts.render_iteration(&input, counter, 10_000, 1_000_000);
    assert!(!full.over_budget);
    assert_eq!(full.shown.len(), 8);
    let system_tokens = counter.count(&full.system);
    // A budget that forces dropping candidates.
    let tight = system_tokens + counter.count(&full.user) / 3;
    let r = prompts.render_iteration(&input, counter, 10_000, tight);
    assert!(r.prompt_tokens <= tight, "{} > {tight}", r.prompt_tokens);
    assert!(r.shown.contains(&6), "the target was dropped");
    assert!(r.shown.len() < 8);
    assert!(r.user.contains("- [seg6] "));
    assert!(r.user.contains("- [sel0] "));
    assert!(!r.over_budget);
    // Dropped lines are trailing non-targets: what is shown is a prefix plus the target.
    let non_target: Vec<usize> = r.shown.iter().copied().filter(|&i| i != 6).collect();
    assert_eq!(non_target, (0..non_target.len()).collect::<Vec<_>>());
    // An impossible budget keeps the target and the selected ids, flagged over budget.
    let r = prompts.render_iteration(&input, counter, 10_000, 1);
    assert!(r.over_budget);
    assert_eq!(r.shown, [6]);
    assert!(r.user.contains("- [seg6] "));
    assert!(r.user.contains("- [sel0] "));
    assert_eq!(r.snippet_chars, 16);
}

#[test]
fn budget_with_char_estimate_keeps_targets() {
    budget_case(&TokenCounter::new(None, 4.0).unwrap());
}

#[test]
fn budget_with_tokenizer_json_keeps_targets() {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny_tokenizer(dir.path());
    let counter = TokenCounter::new(Some(&path), 4.0).unwrap();
    assert!(counter.has_tokenizer());
    // WordLevel over whitespace words: one token a word, unknown words too.
    assert_eq!(counter.count("the capital of France is Paris"), 6);
    assert_eq!(counter.count("the capital, of"), 4);
    budget_case(&counter);
    assert!(TokenCounter::new(Some("/nonexistent/tokenizer.json"), 4.0).is_err());
}

#[test]
fn snippets_are_cut_at_word_boundaries() {
    let prompts = Prompts::builtin();
    let counter = TokenCounter::new(None, 4.0).unwrap();
    let text = "alpha beta gamma delta epsilon zeta eta theta";
    let input = IterationInput {
        question: "q?",
        guidance: "g",
        top_k: 1,
        selected: vec![],
        window: vec![SegmentLine {
            id: "s",
            content: text,
        }],
        keep: vec![true],
    };
    let r = prompts.render_iteration(&input, &counter, 20, 100_000);
    assert!(r.user.contains("- [s] alpha beta gamma…\n"), "{}", r.user);
}

// ---------------------------------------------------------------------------------------
// Templates and guidance

#[test]
fn templates_are_replaced_from_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("iteration_user.txt"),
        "Q: {question}\nG: {guidance}\nS:\n{selected}\nC:\n{candidates}\nJSON {\"keep\": 1}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("hanrag_router_system.txt"), "").unwrap();
    let p = Prompts::load(Some(dir.path().to_str().unwrap())).unwrap();
    assert_eq!(p.iteration.id, "custom:hseq_iteration");
    assert_eq!(p.iteration.version.len(), 12);
    assert_eq!(p.refiner.id, "distillery:hanrag_refiner");
    assert_eq!(p.router.id, "custom:hanrag_router");
    let (system, router_user) = Prompts::render_hanrag(&p.router, "Who?", "");
    assert!(system.is_none());
    assert_eq!(router_user, "Query: Who?\nAnswer:");

    let (q, doc) = france();
    let l = labeller(options(|o| {
        o.templates = Some(dir.path().to_str().unwrap().to_string())
    }));
    let docs = [doc];
    let ctx = QuestionContext {
        question: &q,
        documents: &common::refs(&docs),
        tables: &[],
        triples: &[],
        kg_ids: &[],
    };
    let out = sft::label_question(
        &l,
        &boxed(Contains {
            needle: "Paris",
            lexical: false,
        }),
        &ctx,
    );
    let s = &out.samples[0];
    assert!(user(s).starts_with("Q: What is the capital of France?\nG: Plan: "));
    assert!(user(s).ends_with("JSON {\"keep\": 1}"));
    assert_eq!(s.template_id, "custom:hseq_iteration");
    assert_eq!(s.template_version, p.iteration.version);

    // A user template without {candidates} is refused; so is a missing directory.
    std::fs::write(dir.path().join("iteration_user.txt"), "{question}").unwrap();
    assert!(Prompts::load(Some(dir.path().to_str().unwrap())).is_err());
    assert!(Prompts::load(Some("/nonexistent/templates")).is_err());
}

/// `iteration_instruction.txt` replaces what `{instruction}` renders. A directory that
/// replaces the system or the user text but has no instruction file keeps the templates as
/// they were before version 2: the system message holds the instruction (its own system text
/// or the built-in instruction), `{instruction}` is that text, and the version hashes the
/// system and user text only, as it did then.
#[test]
fn the_instruction_is_a_template_of_its_own() {
    let input = IterationInput {
        question: "q?",
        guidance: "g",
        top_k: 3,
        selected: vec![],
        window: vec![SegmentLine {
            id: "s",
            content: "alpha",
        }],
        keep: vec![true],
    };
    let render = |p: &Prompts| p.render_iteration(&input, &TokenCounter::chars(4.0), 240, 100_000);
    let starts =
        |r: &RenderedIteration, head: &str| assert!(r.user.starts_with(head), "{}", r.user);
    let builtin_prompts = Prompts::builtin();
    let builtin = render(&builtin_prompts);
    let instruction = fill(&builtin_prompts.iteration.instruction, &[("top_k", "3")]);
    assert!(instruction.contains("Choose at most 3 ids"));
    let head = format!("### Instruction\n{instruction}\n### Question\nq?");
    starts(&builtin, &head);
    assert!(!builtin.system.contains("Choose at most"));
    let v1_hash = |system: &str, user: &str| {
        distillery_core::id::sha1_hex(&format!("{system}\u{1f}{user}"))[..12].to_string()
    };

    let dir = tempfile::tempdir().unwrap();
    let path = |f: &str| dir.path().join(f);
    let load = || Prompts::load(Some(dir.path().to_str().unwrap())).unwrap();
    let builtin_user = builtin_prompts.iteration.user.clone();

    // Only the system text replaced: it is the system message and `{instruction}`.
    std::fs::write(path("iteration_system.txt"), "Pick at most {top_k} ids.\n").unwrap();
    let system_only = load();
    let r = render(&system_only);
    assert_eq!(r.system, "Pick at most 3 ids.");
    starts(&r, "### Instruction\nPick at most 3 ids.\n### Question");
    let v = v1_hash("Pick at most {top_k} ids.", &builtin_user);
    assert_eq!(system_only.iteration.version, v);

    // Only the user text replaced, without `{instruction}`: the system message still holds
    // the built-in instruction, as it did before version 2.
    std::fs::remove_file(path("iteration_system.txt")).unwrap();
    std::fs::write(
        path("iteration_user.txt"),
        "Q: {question}\nC:\n{candidates}\n",
    )
    .unwrap();
    let user_only = load();
    let r = render(&user_only);
    assert_eq!(r.system, instruction);
    assert_eq!(r.user, "Q: q?\nC:\n- [s] alpha");
    let v = v1_hash(
        &builtin_prompts.iteration.instruction,
        "Q: {question}\nC:\n{candidates}",
    );
    assert_eq!(user_only.iteration.version, v);
    std::fs::remove_file(path("iteration_user.txt")).unwrap();

    // An instruction file: `{instruction}` renders it; with a system file too, both are
    // used and both are in the version.
    std::fs::write(path("iteration_instruction.txt"), "Name {top_k} ids.").unwrap();
    let r = render(&load());
    assert_eq!(r.system, builtin.system);
    starts(&r, "### Instruction\nName 3 ids.\n### Question");
    std::fs::write(path("iteration_system.txt"), "Pick at most {top_k} ids.\n").unwrap();
    let both = load();
    let r = render(&both);
    assert_eq!(r.system, "Pick at most 3 ids.");
    starts(&r, "### Instruction\nName 3 ids.\n### Question");
    assert_ne!(both.iteration.version, system_only.iteration.version);
    // An empty instruction file renders nothing, which is not the system-only directory.
    std::fs::write(path("iteration_instruction.txt"), "").unwrap();
    let empty = load();
    starts(&render(&empty), "### Instruction\n\n### Question");
    assert_ne!(empty.iteration.version, system_only.iteration.version);
    assert_ne!(empty.iteration.version, both.iteration.version);
}

#[test]
fn guidance_cache_hit_and_template_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let model = "Org/Planner-7B";
    let (q, doc) = france();
    let g = GuidanceSource::new(Some(dir.path().to_str().unwrap()), Some(model)).unwrap();
    let (text, source) = g.guidance_for(&q);
    assert_eq!(source, "template");
    assert!(text.starts_with(PLAN_PREFIX));

    let file = dir
        .path()
        .join(model_dir(model))
        .join("handmade")
        .join(format!(
            "{}.txt",
            distillery_core::id::sha1_hex("What is the capital of France?")
        ));
    assert_eq!(g.cache_path(&q).unwrap(), file);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        "  First look for the capital. Stop at a city name.\n",
    )
    .unwrap();
    let (text, source) = g.guidance_for(&q);
    assert_eq!(source, "cache");
    assert_eq!(text, "First look for the capital. Stop at a city name.");
    assert_eq!(
        g.cache_key(&q, Some(model)),
        format!(
            "Org__Planner-7B/handmade/{}",
            file.file_name().unwrap().to_str().unwrap()
        )
    );
    // Another planner model has no entry: template.
    let other = GuidanceSource::new(Some(dir.path().to_str().unwrap()), Some("Other")).unwrap();
    assert_eq!(other.guidance_for(&q).1, "template");

    // The cached plan reaches the prompt and the lineage.
    let l = labeller(options(|o| {
        o.guidance_cache = Some(dir.path().to_str().unwrap().to_string());
        o.planner_model = Some(model.to_string());
    }));
    let docs = [doc];
    let ctx = QuestionContext {
        question: &q,
        documents: &common::refs(&docs),
        tables: &[],
        triples: &[],
        kg_ids: &[],
    };
    let out = sft::label_question(
        &l,
        &boxed(Contains {
            needle: "Paris",
            lexical: false,
        }),
        &ctx,
    );
    let s = &out.samples[0];
    assert!(user(s).contains("### Guidance\nFirst look for the capital. Stop at a city name.\n"));
    let params: serde_json::Value = serde_json::from_str(&s.params).unwrap();
    assert_eq!(params["guidance"], "cache");
    // A file as cache directory is an error.
    assert!(GuidanceSource::new(Some(file.to_str().unwrap()), None).is_err());
}

// ---------------------------------------------------------------------------------------
// Real samples

#[test]
fn metaqa_neighbourhood_from_the_head_kb() {
    let (Some(kb), Some(qs)) = (
        shared("metaqa/kb.head.txt"),
        shared("metaqa/1-hop/test.txt"),
    ) else {
        return;
    };
    let triples: Vec<Triple> = read(Format::MetaQaKb, &kb)
        .triples()
        .into_iter()
        .cloned()
        .collect();
    assert!(!triples.is_empty());
    let index = KbIndex::new(triples);
    let sink = read(Format::MetaQa, &qs);
    let questions: Vec<&Question> = sink
        .questions()
        .into_iter()
        .filter(|q| q.topic_entities.iter().any(|e| index.contains(e)))
        .collect();
    assert!(
        !questions.is_empty(),
        "no 1-hop question about a head-KB entity"
    );
    let l = labeller(LabelOptions::default());
    let mut answered = 0;
    let mut samples = 0;
    let mut other_entity = 0;
    for q in &questions {
        assert_eq!(question_hops(q, 3), 1);
        let n = index.for_question(q, 3, 256);
        let topic = q.topic_entities[0].to_lowercase();
        let side = start_side(q);
        assert_ne!(side, StartSide::Both, "{:?}", q.question_type);
        let on_side = |t: &Triple| match side {
            StartSide::Subject => t.subject.to_lowercase() == topic,
            _ => t.object.to_lowercase() == topic,
        };
        for t in &n {
            assert!(
                on_side(t),
                "a 1-hop edge must have the topic entity on the side its type names: {} {t:?}",
                q.question
            );
        }
        if n.is_empty() {
            // The head KB has the name only as another entity: the year 1984 for the film
            // `1984`, the films tagged `chicago` for the film `Chicago`.
            let both = index.neighbourhood(&q.topic_entities, 1, 256);
            assert!(
                !both.is_empty() && !both.iter().any(on_side),
                "{}",
                q.question
            );
            other_entity += 1;
            continue;
        }
        let reached = n
            .iter()
            .any(|t| q.answers.iter().any(|a| a == &t.object || a == &t.subject));
        answered += usize::from(reached);
        let ctx = QuestionContext {
            question: q,
            documents: &[],
            tables: &[],
            triples: &n,
            kg_ids: &[],
        };
        let sh = build_sh(&ctx, &Default::default());
        assert!(sh.iter().any(|s| s.level == "subgraph"));
        assert_eq!(sh.iter().filter(|s| s.level == "triplet").count(), n.len());
        let out = l.label_question(&ctx);
        for s in &out.samples {
            check_iteration(s, 3072);
        }
        samples += out.samples.len();
    }
    // Two hops reach at least what one hop reaches.
    let q = questions[0];
    let one = index.neighbourhood(&q.topic_entities, 1, 10_000);
    let two = index.neighbourhood(&q.topic_entities, 2, 10_000);
    assert!(two.len() >= one.len());
    assert!(one.iter().all(|t| two.contains(t)));
    eprintln!(
        "metaqa 1-hop: {} questions in the head KB, {answered} with an answer in reach, {samples} samples, {other_entity} whose name the head KB has only as another entity",
        questions.len()
    );
    // 13 of the shared sample's questions (`[1984]`, `[Chicago]`, `[Romance]`, ...) name a
    // film the head KB has only as a year, tag or genre; the rest are answered from their own
    // entity.
    assert!(other_entity > 0 && other_entity < questions.len() / 4);
    assert!(answered > 0);
    assert!(samples > 0);
}

#[test]
fn hotpotqa_samples() {
    let Some(p) = shared("hotpotqa/hotpot_dev_distractor_v1.head.json") else {
        return;
    };
    let c = Corpus::of(&read(Format::HotpotQa, &p));
    let l = labeller(LabelOptions::default());
    let outs = c.label_all(&l, usize::MAX);
    let labels: usize = outs.iter().map(|o| o.labels.len()).sum();
    assert_eq!(labels, c.questions.len() * l.options.methods.len());
    let it = by_task(&outs, "hseq_iteration");
    for s in &it {
        check_iteration(s, 3072);
    }
    // HotpotQA has no decomposition: no HANRAG samples.
    assert!(
        outs.iter()
            .flat_map(|o| &o.samples)
            .all(|s| s.task == "hseq_iteration")
    );
    let with_samples = outs.iter().filter(|o| !o.samples.is_empty()).count();
    eprintln!(
        "hotpotqa: {} questions, {} label records, {} iteration samples, {with_samples} questions with samples",
        c.questions.len(),
        labels,
        it.len()
    );
    assert!(with_samples * 2 > c.questions.len());
    // Every selected id is a positive of its record.
    for o in &outs {
        for r in &o.labels {
            for id in &r.selected {
                assert!(
                    r.positives
                        .iter()
                        .any(|p: &LabeledSegment| &p.segment_id == id)
                );
            }
        }
    }
}

#[test]
fn musique_samples_with_hanrag() {
    let Some(p) = shared("musique/musique_ans_v1.0_train.first70.jsonl") else {
        return;
    };
    let c = Corpus::of(&read(Format::Musique, &p));
    let l = labeller(LabelOptions::default());
    let outs = c.label_all(&l, usize::MAX);
    let it = by_task(&outs, "hseq_iteration");
    let refiner = by_task(&outs, hanrag::TASK_REFINER);
    let ending = by_task(&outs, hanrag::TASK_ENDING);
    let router = by_task(&outs, hanrag::TASK_ROUTER);
    for s in &it {
        check_iteration(s, 3072);
    }
    let hops: usize = c.questions.iter().map(|q| q.decomposition.len()).sum();
    eprintln!(
        "musique: {} questions ({hops} hops): {} iteration, {} refiner, {} ending, {} router samples",
        c.questions.len(),
        it.len(),
        refiner.len(),
        ending.len(),
        router.len()
    );
    assert!(!it.is_empty());
    assert_eq!(router.len(), hops + c.questions.len());
    assert_eq!(ending.len(), hops);
    assert_eq!(refiner.len(), 2 * hops);
    assert_eq!(
        ending.iter().filter(|s| assistant(s) == "true").count(),
        c.questions.len()
    );
    for s in router.iter() {
        assert!(
            ["single-step question", "complex question"].contains(&assistant(s)),
            "{}",
            assistant(s)
        );
    }
    for s in refiner.iter().chain(&ending) {
        assert!(user(s).contains("Thought:"));
        assert!(
            !assistant(s).contains('#'),
            "unresolved reference: {}",
            assistant(s)
        );
    }

    // The first record, by hand.
    let q = &c.questions[0];
    assert!(
        q.question
            .starts_with("Who was the first president of the association")
    );
    let out = &outs[0];
    let mine =
        |task: &str| -> Vec<&SftSample> { out.samples.iter().filter(|s| s.task == task).collect() };
    let r = mine(hanrag::TASK_REFINER);
    assert_eq!(
        assistant(r[0]),
        "What company published Journal of Psychotherapy Integration?"
    );
    assert!(user(r[0]).contains("```\nnothing\n```"));
    assert_eq!(
        assistant(r[1]),
        "Who was the first president of American Psychological Association?"
    );
    assert!(user(r[1]).contains(
        "*seed query-1**: What company published Journal of Psychotherapy Integration?\n\
         *answer-1**: American Psychological Association"
    ));
    let e = mine(hanrag::TASK_ENDING);
    assert_eq!(
        e.iter().map(|s| assistant(s)).collect::<Vec<_>>(),
        ["false", "true"]
    );
    assert!(user(e[1]).contains("*answer-2**: G. Stanley Hall"));
    let ro = mine(hanrag::TASK_ROUTER);
    assert_eq!(assistant(ro.last().unwrap()), "complex question");
    assert!(user(ro.last().unwrap()).contains(&q.question));
    assert_eq!(assistant(ro[0]), "single-step question");

    // HANRAG off: only iteration samples.
    let l = labeller(options(|o| o.hanrag = false));
    let outs = c.label_all(&l, 5);
    assert!(
        outs.iter()
            .flat_map(|o| &o.samples)
            .all(|s| s.task == "hseq_iteration")
    );
}

#[test]
fn twowiki_hanrag_from_evidence_triples() {
    let Some(p) = shared("2wikimultihopqa/hipporag_2wikimultihopqa.first5.json") else {
        return;
    };
    let c = Corpus::of(&read(Format::TwoWiki, &p));
    let l = labeller(LabelOptions::default());
    let outs = c.label_all(&l, usize::MAX);
    let q = &c.questions[0];
    assert_eq!(q.question, "When did Lothair Ii's mother die?");
    let r: Vec<&SftSample> = outs[0]
        .samples
        .iter()
        .filter(|s| s.task == hanrag::TASK_REFINER)
        .collect();
    assert_eq!(
        r.iter().map(|s| assistant(s)).collect::<Vec<_>>(),
        [
            "Who is the mother of Lothair II?",
            "When did Ermengarde of Tours die?"
        ]
    );
    assert!(user(r[1]).contains("*answer-1**: Ermengarde of Tours"));
    let e: Vec<&str> = outs[0]
        .samples
        .iter()
        .filter(|s| s.task == hanrag::TASK_ENDING)
        .map(assistant)
        .collect();
    assert_eq!(e, ["false", "true"]);
    // No router samples from evidence triples.
    assert!(by_task(&outs, hanrag::TASK_ROUTER).is_empty());
    for s in by_task(&outs, "hseq_iteration") {
        check_iteration(s, 3072);
    }
    eprintln!(
        "2wiki: {} questions: {} iteration, {} refiner, {} ending samples",
        c.questions.len(),
        by_task(&outs, "hseq_iteration").len(),
        by_task(&outs, hanrag::TASK_REFINER).len(),
        by_task(&outs, hanrag::TASK_ENDING).len()
    );
}

#[test]
fn tatqa_samples_table_and_paragraphs() {
    let Some(p) = shared("tatqa/tatqa_dataset_dev.first200.json") else {
        return;
    };
    let c = Corpus::of(&read(Format::TatQa, &p));
    let l = labeller(LabelOptions::default());
    let limit = 150;
    let outs = c.label_all(&l, limit);
    let it = by_task(&outs, "hseq_iteration");
    for s in &it {
        check_iteration(s, 3072);
    }
    // S_h holds the table and the paragraphs.
    let q = &c.questions[0];
    let (docs, tables) = c.context(q);
    assert!(!tables.is_empty() && !docs.is_empty());
    let ctx = QuestionContext {
        question: q,
        documents: &common::refs(&docs),
        tables: &common::refs(&tables),
        triples: &[],
        kg_ids: &[],
    };
    let sh = build_sh(&ctx, &Default::default());
    for level in ["table", "table_row", "document", "paragraph"] {
        assert!(sh.iter().any(|s| s.level == level), "no {level}");
    }
    // ρ: paragraphs before rows before sentences.
    let first = |lvl: &str| sh.iter().position(|s| s.level == lvl).unwrap();
    let last = |lvl: &str| sh.iter().rposition(|s| s.level == lvl).unwrap();
    assert!(last("paragraph") < first("table_row"));
    if sh.iter().any(|s| s.level == "sentence") {
        assert!(last("table_row") < first("sentence"));
    }
    let row_picks = outs
        .iter()
        .flat_map(|o| &o.labels)
        .flat_map(|r| &r.positives)
        .filter(|p| p.level == "table_row")
        .count();
    let numeric = it
        .iter()
        .filter(|s| user(s).contains("table rows and sentences that give figures"))
        .count();
    eprintln!(
        "tatqa: {limit} of {} questions: {} iteration samples, {row_picks} table-row positives, {numeric} samples with numeric guidance",
        c.questions.len(),
        it.len()
    );
    assert!(!it.is_empty());
    assert!(row_picks > 0);
    assert!(numeric > 0);
}

#[test]
fn hybridqa_samples_with_their_table() {
    let Some(p) = shared("hybridqa/dev.json") else {
        return;
    };
    let c = Corpus::of(&read(Format::HybridQa, &p));
    // The shared cut has one table (and 8 of its passages); two dev questions ask about it.
    let with_table: Vec<&Question> = c
        .questions
        .iter()
        .filter(|q| q.context_tables.iter().any(|t| c.tables.contains_key(t)))
        .collect();
    assert_eq!(with_table.len(), 2);
    let l = labeller(LabelOptions::default());
    let mut samples = 0;
    for q in &with_table {
        let (docs, tables) = c.context(q);
        let ctx = QuestionContext {
            question: q,
            documents: &common::refs(&docs),
            tables: &common::refs(&tables),
            triples: &[],
            kg_ids: &[],
        };
        let sh = build_sh(&ctx, &Default::default());
        assert_eq!(sh.iter().filter(|s| s.level == "table").count(), 1);
        assert_eq!(sh.iter().filter(|s| s.level == "table_row").count(), 20);
        assert_eq!(
            sh.iter().filter(|s| s.level == "document").count(),
            docs.len()
        );
        let out = l.label_question(&ctx);
        assert_eq!(out.labels.len(), l.options.methods.len());
        for s in &out.samples {
            check_iteration(s, 3072);
        }
        // The answer (Jerry, July) is in Walter Payton's passage.
        let by_id: HashMap<&str, &Segment> = sh.iter().map(|s| (s.id.as_str(), s)).collect();
        assert!(
            out.labels[0]
                .positives
                .iter()
                .any(|p| by_id[p.segment_id.as_str()]
                    .content
                    .contains("Walter Jerry Payton")),
            "{}",
            q.question
        );
        assert!(!out.samples.is_empty());
        eprintln!(
            "hybridqa: {:?}: {} passages, {} segments, {} positives, {} iteration samples",
            q.question,
            docs.len(),
            sh.len(),
            out.labels[0].positives.len(),
            out.samples.len()
        );
        samples += out.samples.len();
    }
    assert!(samples >= 2);
    // A question without its table: a record, no samples.
    let other = c
        .questions
        .iter()
        .find(|q| q.context_tables.iter().all(|t| !c.tables.contains_key(t)))
        .unwrap();
    let out = c.label(&l, other, &[]);
    assert!(out.samples.is_empty());
    assert!(out.labels.iter().all(|r| r.positives.is_empty()));
}

#[test]
fn labelling_is_deterministic() {
    let Some(p) = shared("musique/musique_ans_v1.0_train.first70.jsonl") else {
        return;
    };
    let c = Corpus::of(&read(Format::Musique, &p));
    let l1 = labeller(LabelOptions::default());
    let l2 = labeller(LabelOptions::default());
    let a = c.label_all(&l1, 10);
    let b = c.label_all(&l2, 10);
    let samples = |o: &[LabelOutput]| -> Vec<SftSample> {
        o.iter().flat_map(|x| x.samples.clone()).collect()
    };
    let labels = |o: &[LabelOutput]| -> Vec<distillery_core::LabelRecord> {
        o.iter().flat_map(|x| x.labels.clone()).collect()
    };
    assert_eq!(samples(&a), samples(&b));
    assert_eq!(labels(&a), labels(&b));
    let ids: std::collections::HashSet<_> = samples(&a).into_iter().map(|s| s.id).collect();
    assert_eq!(ids.len(), samples(&a).len(), "sample ids are unique");
}

#[test]
fn bundled_quickstart_samples_and_kb() {
    let c = Corpus::of(&read(Format::HotpotQa, &bundled("quickstart/hotpot.json")));
    assert!(!c.questions.is_empty());
    let l = labeller(LabelOptions::default());
    let outs = c.label_all(&l, usize::MAX);
    let it = by_task(&outs, "hseq_iteration");
    assert!(!it.is_empty());
    for s in &it {
        check_iteration(s, 3072);
    }
    let kb = KbIndex::new(
        read(Format::MetaQaKb, &bundled("quickstart/kb.txt"))
            .triples()
            .into_iter()
            .cloned()
            .collect(),
    );
    let n = kb.neighbourhood(&["The Lantern Keeper".to_string()], 1, 100);
    assert!(n.iter().any(|t| t.object == "Ines Calloway"));
    let two = kb.neighbourhood(&["The Lantern Keeper".to_string()], 2, 100);
    assert!(two.len() >= n.len());
}
