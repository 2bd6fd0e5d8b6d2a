//! The `router` stage: Adaptive-RAG silver labels of a query-complexity router
//! (`distillery_distill::router`). Per question of its QA inputs, the teacher answers
//! closed-book (`A` when right), else from the question's context documents in one step (`B`
//! when right), else the label is `C`; an answer is right when its token F1 against the best
//! gold answer reaches `min_f1`. Each question gives one sample (task `router_silver`: the
//! student's prompt in, the letter out) in `<stage>/train.jsonl`, `validation.jsonl`,
//! `dataset_info.json` and the `sft` table. One task per shard of the questions, and a merge
//! task. Counters: `questions`, `label.a`, `label.b`, `label.c`, `dropped.no_answer`,
//! `answers.invalid`, `samples.*`, `llm.*`.

use std::collections::HashMap;
use std::time::Instant;

use distillery_core::spec::{LlmSpec, StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, Question};
use distillery_distill::metrics::best_f1;
use distillery_distill::ras::{BASE_SCHEMA, BaseAnswerParser};
use distillery_distill::router::{self, RouterPrompts, TASK_ROUTER};
use distillery_llm::Outcome;
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::contract::options::{QuestionCap, SftSplit};
use crate::contract::{Declared, MergeCx, Partitioning, RunCx, SideFile, Stage, StageFuture};
use crate::error::ExecError;
use crate::kit::questions::Questions;
use crate::kit::sft_out::{Lineage, SftOut, merge_stage, sft_declared};
use crate::kit::teacher::{Teacher, teacher_name};

fn default_tokens() -> u32 {
    32
}
fn default_min_f1() -> f64 {
    0.8
}

/// `router` stage options (Adaptive-RAG silver labels).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterOptions {
    /// At most this many questions, in part order (see [`QuestionCap`]).
    #[serde(flatten)]
    pub cap: QuestionCap,
    /// `max_tokens` of each teacher answer.
    #[serde(default = "default_tokens")]
    pub max_tokens: u32,
    /// Token F1 against the best gold answer at or above which the teacher's answer is right.
    #[serde(default = "default_min_f1")]
    pub min_f1: f64,
    /// Directory of templates replacing the built-in router prompts.
    #[serde(default)]
    pub templates: Option<String>,
    /// The validation split and the decontamination (see [`SftSplit`]).
    #[serde(flatten)]
    pub split: SftSplit,
}

/// The `router` stage.
pub struct Router;

impl Stage for Router {
    type Options = RouterOptions;

    fn kind(&self) -> &'static str {
        "router"
    }

    fn uses_llm(&self) -> bool {
        true
    }

    fn check(&self, o: &mut RouterOptions, cx: &mut StageCheck<'_, '_>) {
        if o.max_tokens == 0 || !(0.0..=1.0).contains(&o.min_f1) {
            cx.error("", "`max_tokens` must be at least 1 and `min_f1` in [0, 1]");
        }
        crate::kit::decontam::check(cx, &o.split);
    }

    fn resolve(&self, o: &RouterOptions, stage: &StageSpec) -> Result<Vec<SideFile>, Vec<String>> {
        crate::kit::decontam::resolve(stage, &o.split)
    }

    fn outputs(&self, _o: &RouterOptions, stage: &StageSpec) -> Declared {
        sft_declared(&stage.name, &[])
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Questions
    }

    fn merges(&self) -> bool {
        true
    }

    fn max_tasks(&self, o: &RouterOptions) -> Option<u32> {
        o.cap.max_tasks()
    }

    fn run<'a>(&'a self, o: &'a RouterOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(async move {
            let started = Instant::now();
            let (llm, teacher) = Teacher::for_task(&cx)?;
            let prompts = RouterPrompts::load(o.templates.as_deref())
                .map_err(|e| ExecError::Task(e.to_string()))?;
            let name = &cx.stage.name;
            let mut sft = SftOut::for_split(&cx, name, &o.split).await?;
            let mut summary = StageSummary::new(name);
            let lineage = Lineage {
                method: "router",
                params: serde_json::json!({ "teacher": llm.model, "min_f1": o.min_f1 }).to_string(),
                template_id: "router-silver",
                template_version: prompts.student_version(),
                pipeline_hash: cx.pipeline.hash.clone(),
                teacher: teacher_name(llm),
            };
            let ask = (&teacher, llm, &prompts, o);
            let mut questions = Questions::new(&cx, &o.cap);
            while let Some((batch, shard)) = questions.next(&mut summary).await? {
                let docs = questions.docs();
                let letters: Vec<_> = futures::stream::iter(0..batch.len())
                    .map(|i| label(ask, &batch[i], docs))
                    .buffered(llm.max_concurrency.max(1))
                    .collect()
                    .await;
                let pw = questions.writers()?;
                for (q, r) in batch.iter().zip(letters) {
                    summary.add("questions", 1);
                    let Some((letter, invalid, entries)) = r? else {
                        summary.add("dropped.no_answer", 1);
                        continue;
                    };
                    summary.add("answers.invalid", invalid);
                    summary.add(&format!("label.{}", letter.to_lowercase()), 1);
                    let pair = (prompts.student(q), letter.to_string());
                    let s = lineage.sample(q, TASK_ROUTER, pair, entries);
                    sft.add(s, &q.question, pw.tag(), shard).await?;
                }
                sft.flush(pw).await?;
            }
            sft.shared_bytes_in(questions.context_bytes);
            let files = sft.finish(&mut summary).await?;
            Ok(teacher.finish_shard(summary, questions.written, files, started))
        })
    }

    fn merge<'a>(&'a self, _o: &'a RouterOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(async move { merge_stage(&cx, &cx.stage.name, Vec::new()).await })
    }
}

type Ask<'a> = (
    &'a Teacher,
    &'a LlmSpec,
    &'a RouterPrompts,
    &'a RouterOptions,
);

/// A question's letter, its invalid answers and the cache entries it came from (`None`: no
/// gold answer to judge by).
async fn label(
    (teacher, llm, prompts, o): Ask<'_>,
    q: &Question,
    docs: &HashMap<String, Document>,
) -> Result<Option<(&'static str, u64, Vec<String>)>, ExecError> {
    if q.answers.iter().all(|a| a.trim().is_empty()) {
        return Ok(None);
    }
    let context: Vec<&Document> = q
        .context_documents
        .iter()
        .filter_map(|id| docs.get(id))
        .collect();
    let (mut invalid, mut entries) = (0, Vec::new());
    let steps = [
        ("A", None, router::ROUTER_CLOSED_TEMPLATE),
        ("B", Some(&context[..]), router::ROUTER_OPEN_TEMPLATE),
    ];
    for (i, (letter, docs, template)) in steps.into_iter().enumerate() {
        let req = prompts.request(q, docs, o.max_tokens, llm.seed);
        let version = prompts.teacher_version(i);
        let r = teacher
            .ask(
                (template, &version),
                (&llm.model_revision, BASE_SCHEMA),
                &BaseAnswerParser,
                &req,
            )
            .await?;
        entries.push(r.entry().to_string());
        match r {
            Outcome::Parsed { value, .. } => {
                if best_f1(value["answer"].as_str().unwrap_or_default(), &q.answers) >= o.min_f1 {
                    return Ok(Some((letter, invalid, entries)));
                }
            }
            Outcome::Invalid { .. } => invalid += 1,
        }
    }
    Ok(Some(("C", invalid, entries)))
}
