//! The `relevance` stage: HANRAG relevance labels `<Q, D, IS_REL>` from the teacher (see
//! `distillery-distill::relevance`) for every context document of the questions of the
//! stage's QA inputs.
//!
//! Per input: its staged `documents` are read into an id → document map (**memory bound: one
//! input's context documents**), then its questions in part order (at most `max_questions`
//! in all). Each (question, context document) pair is judged through the response cache,
//! `llm.max_concurrency` at a time, consumed in order. Each judgement is one student sample
//! (task `hanrag_relevance`, target `true`/`false`) in the `sft` table
//! (`sft/part-SSSSS-INPUT@STAGE-NNNN.parquet`), `<stage>/train.jsonl`,
//! `<stage>/validation.jsonl` and `<stage>/dataset_info.json`; an answer that is not a
//! judgement goes to `quarantine`. The stage runs as one task per shard of its questions
//! (one when `max_questions` caps it) and a merge task that removes exact duplicates across
//! them ([`crate::kit::sft_out::merge_stage`]).
//!
//! Questions with gold evidence (MuSiQue `is_supporting`, HotpotQA supporting facts, 2Wiki
//! evidences) measure the teacher: `gold.true_positive`, `gold.false_positive`,
//! `gold.false_negative`, `gold.true_negative` count its labels against the documents the
//! gold evidence names. With `sub_queries`, each sub-question of a decomposed question
//! (MuSiQue) is also judged against the paragraphs its decomposition cites
//! (`sub_queries.pairs`, `sub_queries.gold.*`: a step's own paragraphs are the relevant
//! ones). Other counters: `questions`, `pairs`, `labels.relevant`,
//! `labels.irrelevant`, `labels.invalid`, `documents_missing`, `samples.*`,
//! `duplicates_removed`, `llm.*`.

use std::collections::HashSet;
use std::time::Instant;

use distillery_core::id::stable_id;
use distillery_core::schema::{from_batch, to_batch};
use distillery_core::spec::{StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, Message, QuarantineRecord, Question, SftSample, TableKind};
use distillery_distill::relevance::{
    RELEVANCE_SCHEMA, RELEVANCE_TEMPLATE, RelevanceParser, RelevancePrompts, TASK_RELEVANCE,
};
use distillery_llm::Outcome;
use futures::StreamExt;

use crate::contract::options::{QuestionCap, SftSplit};
use crate::contract::{
    Declared, MergeCx, Partitioning, RunCx, SideFile, Stage, StageFuture, StageOutput, stage_tag,
};
use crate::error::ExecError;
use crate::kit::contexts::{context_documents, question_tags};
use crate::kit::sft_out::{SftOut, merge_stage};
use crate::kit::teacher::{Teacher, teacher_name};
use crate::parts::{PartWriters, read_part_rows};
use serde::{Deserialize, Serialize};

fn default_judgement_tokens() -> u32 {
    32
}

/// `relevance` stage options (HANRAG `<Q, D, IS_REL>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RelevanceOptions {
    /// At most this many questions, in part order (see [`QuestionCap`]).
    #[serde(flatten)]
    pub cap: QuestionCap,
    /// `max_tokens` of each judgement.
    #[serde(default = "default_judgement_tokens")]
    pub max_tokens: u32,
    /// Directory of templates replacing the built-in relevance prompts.
    #[serde(default)]
    pub templates: Option<String>,
    /// The validation split and the decontamination (`validation_share`, `decontaminate`,
    /// `decontaminate_formats`: see [`SftSplit`]).
    #[serde(flatten)]
    pub split: SftSplit,
    /// Also judge the sub-questions of questions with a decomposition (MuSiQue), each
    /// worded on its own (`#k` replaced by answer k), against every paragraph a step of the
    /// decomposition cites as support: the same `hanrag_relevance` samples with the
    /// sub-question as the query. Counters `sub_queries.pairs` and `sub_queries.gold.*`
    /// (gold: the step's own supporting paragraphs are relevant, the other steps' are not).
    #[serde(default)]
    pub sub_queries: bool,
}

impl Default for RelevanceOptions {
    fn default() -> Self {
        serde_json::from_value(serde_json::Value::Object(Default::default()))
            .expect("all relevance options have defaults")
    }
}

/// A sub-question of a decomposed question paired with a paragraph a step cites as support.
struct SubPair<'d> {
    /// Index of the question in its batch.
    question: usize,
    /// The sub-question, worded on its own.
    text: String,
    document: &'d Document,
    /// Whether this step cites the paragraph (else another step does).
    supports: bool,
}

/// The sub-question pairs of question `i` (see [`RelevanceOptions::sub_queries`]).
fn sub_pairs<'d>(
    i: usize,
    q: &Question,
    docs: &'d std::collections::HashMap<String, Document>,
) -> Vec<SubPair<'d>> {
    let Some((hops, _)) = distillery_label::hanrag::reasoning_steps(q) else {
        return Vec::new();
    };
    let cited: Vec<usize> = q
        .decomposition
        .iter()
        .flat_map(|s| s.support.iter().filter_map(|&k| usize::try_from(k).ok()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut out = Vec::new();
    for (step, hop) in q.decomposition.iter().zip(&hops) {
        for &k in &cited {
            let Some(d) = q.context_documents.get(k).and_then(|id| docs.get(id)) else {
                continue;
            };
            out.push(SubPair {
                question: i,
                text: hop.question.clone(),
                document: d,
                supports: step
                    .support
                    .iter()
                    .any(|&s| usize::try_from(s).ok() == Some(k)),
            });
        }
    }
    out
}

/// The `relevance` stage.
pub struct Relevance;

impl Stage for Relevance {
    type Options = RelevanceOptions;

    fn kind(&self) -> &'static str {
        "relevance"
    }

    fn uses_llm(&self) -> bool {
        true
    }

    fn check(&self, o: &mut RelevanceOptions, cx: &mut StageCheck<'_, '_>) {
        if o.max_tokens == 0 {
            cx.error("max_tokens", "`max_tokens` must be at least 1");
        }
        crate::kit::decontam::check(cx, &o.split);
    }

    fn resolve(
        &self,
        o: &RelevanceOptions,
        stage: &StageSpec,
    ) -> Result<Vec<SideFile>, Vec<String>> {
        crate::kit::decontam::resolve(stage, &o.split)
    }

    fn outputs(&self, _o: &RelevanceOptions, stage: &StageSpec) -> Declared {
        crate::kit::sft_out::sft_declared(&stage.name, &[])
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Questions
    }

    fn merges(&self) -> bool {
        true
    }

    fn max_tasks(&self, o: &RelevanceOptions) -> Option<u32> {
        o.cap.max_tasks()
    }

    fn run<'a>(&'a self, o: &'a RelevanceOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run_stage(o, cx))
    }

    fn merge<'a>(&'a self, _o: &'a RelevanceOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(async move { merge_stage(&cx, &cx.stage.name, Vec::new()).await })
    }
}

/// Runs one task of the stage: the questions of its shard.
pub async fn run_stage(opts: &RelevanceOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (p, stage, out, staging, parts) = (cx.pipeline, cx.stage, cx.out, cx.dir, cx.parts);
    let started = Instant::now();
    let (llm, teacher) = Teacher::for_task(&cx)?;
    let prompts = RelevancePrompts::load(opts.templates.as_deref())
        .map_err(|e| ExecError::Task(e.to_string()))?;
    let (teacher_version, student_version) = (prompts.teacher_version(), prompts.student_version());
    let mut summary = StageSummary::with_counters(
        &stage.name,
        &[
            "questions",
            "pairs",
            "sub_queries.pairs",
            "labels.relevant",
            "labels.irrelevant",
            "labels.invalid",
            "documents_missing",
            "gold.true_positive",
            "gold.false_positive",
            "gold.false_negative",
            "gold.true_negative",
            "samples.train",
            "samples.validation",
            "duplicates_removed",
            "llm.quarantined",
        ],
    );
    let mut sft = SftOut::new(out, staging, &stage.name, opts.split.validation_share)
        .decontaminated_by(
            crate::kit::decontam::load(
                &opts.split.decontaminate,
                &opts.split.decontaminate_formats,
                cx.side,
            )
            .await?,
        );
    let params = serde_json::json!({ "teacher": llm.model }).to_string();
    let mut written = Vec::new();
    let mut left = opts.cap.budget();

    for input in &stage.inputs {
        if left == 0 {
            break;
        }
        // The input's context documents.
        let (docs, doc_bytes) = context_documents(out, parts, input).await?;
        sft.shared_bytes_in(doc_bytes);
        for (tag, qparts) in question_tags(parts, input) {
            let mut pw = PartWriters::new(out.clone(), staging, &stage_tag(&tag, &stage.name));
            for part in qparts {
                summary.bytes_in += part.bytes;
                let mut stream = Box::pin(read_part_rows(out, &part.path(), 64).await?);
                while let Some(batch) = stream.next().await {
                    if left == 0 {
                        break;
                    }
                    let mut questions: Vec<Question> = from_batch(TableKind::Questions, &batch?)?;
                    questions.truncate(left.min(questions.len() as u64) as usize);
                    left -= questions.len() as u64;
                    let mut pairs: Vec<(usize, &Document)> = Vec::new();
                    let mut subs: Vec<SubPair<'_>> = Vec::new();
                    for (i, q) in questions.iter().enumerate() {
                        summary.records_in += 1;
                        summary.add("questions", 1);
                        let mut seen = HashSet::new();
                        for id in &q.context_documents {
                            match docs.get(id) {
                                Some(d) if seen.insert(id.as_str()) => pairs.push((i, d)),
                                Some(_) => {}
                                None => summary.add("documents_missing", 1),
                            }
                        }
                        if opts.sub_queries {
                            subs.extend(sub_pairs(i, q, &docs));
                        }
                    }
                    // Sub-question pairs are judged as questions of their own.
                    let sub_questions: Vec<Question> = subs
                        .iter()
                        .map(|s| Question {
                            question: s.text.clone(),
                            ..questions[s.question].clone()
                        })
                        .collect();
                    let n_whole = pairs.len();
                    let mut gold_of: Vec<Option<bool>> = vec![None; n_whole];
                    let mut asked: Vec<&Question> =
                        pairs.iter().map(|(i, _)| &questions[*i]).collect();
                    for (s, q) in subs.iter().zip(&sub_questions) {
                        pairs.push((s.question, s.document));
                        gold_of.push(Some(s.supports));
                        asked.push(q);
                    }
                    let results: Vec<Result<Outcome, ExecError>> =
                        futures::stream::iter(0..pairs.len())
                            .map(|k| {
                                let (_, d) = pairs[k];
                                let (teacher, prompts, version) =
                                    (&teacher, &prompts, &teacher_version);
                                let q = asked[k];
                                async move {
                                    let req = prompts.request(q, d, opts.max_tokens, llm.seed);
                                    teacher
                                        .ask(
                                            (RELEVANCE_TEMPLATE, version),
                                            (&llm.model_revision, RELEVANCE_SCHEMA),
                                            &RelevanceParser,
                                            &req,
                                        )
                                        .await
                                }
                            })
                            .buffered(llm.max_concurrency.max(1))
                            .collect()
                            .await;
                    let mut bad = Vec::new();
                    for (k, ((_, d), r)) in pairs.iter().zip(results).enumerate() {
                        let q = asked[k];
                        let sub_query = k >= n_whole;
                        summary.add(
                            if sub_query {
                                "sub_queries.pairs"
                            } else {
                                "pairs"
                            },
                            1,
                        );
                        let r = r?;
                        let entry = r.entry().to_string();
                        let relevant = match r {
                            Outcome::Parsed { value, .. } => {
                                value["relevant"].as_bool().unwrap_or(false)
                            }
                            Outcome::Invalid { raw, reason, .. } => {
                                summary.add("labels.invalid", 1);
                                summary.add("llm.quarantined", 1);
                                summary.quarantined += 1;
                                bad.push(QuarantineRecord {
                                    id: stable_id(&[&q.id, &d.id, &q.question, RELEVANCE_TEMPLATE]),
                                    dataset: "relevance".into(),
                                    source: format!("{} / {}", q.id, d.id),
                                    reason: "llm_invalid_answer".into(),
                                    detail: format!("{RELEVANCE_TEMPLATE}: {reason}"),
                                    excerpt: raw.chars().take(512).collect(),
                                    ..Default::default()
                                });
                                continue;
                            }
                        };
                        summary.add(
                            if relevant {
                                "labels.relevant"
                            } else {
                                "labels.irrelevant"
                            },
                            1,
                        );
                        let gold = gold_of[k].or_else(|| {
                            (!q.evidence.is_empty()).then(|| {
                                q.evidence
                                    .iter()
                                    .any(|e| e.record_id.as_deref() == Some(d.id.as_str()))
                            })
                        });
                        if let Some(gold) = gold {
                            let cell = match (relevant, gold) {
                                (true, true) => "true_positive",
                                (true, false) => "false_positive",
                                (false, true) => "false_negative",
                                (false, false) => "true_negative",
                            };
                            let prefix = if sub_query {
                                "sub_queries.gold"
                            } else {
                                "gold"
                            };
                            summary.add(&format!("{prefix}.{cell}"), 1);
                        }
                        let messages: Vec<Message> = prompts
                            .student(q, d, relevant)
                            .into_iter()
                            .map(|(role, content)| Message { role, content })
                            .collect();
                        let chars = |s: &str| s.chars().count().div_ceil(4) as u32;
                        let n = messages.len();
                        let s = SftSample {
                            id: stable_id(&[
                                &q.id,
                                TASK_RELEVANCE,
                                &d.id,
                                &q.question,
                                &messages[n - 1].content,
                            ]),
                            task: TASK_RELEVANCE.into(),
                            prompt_tokens: messages[..n - 1]
                                .iter()
                                .map(|m| chars(&m.content))
                                .sum(),
                            target_tokens: chars(&messages[n - 1].content),
                            messages,
                            weight: 1.0,
                            split: String::new(),
                            dataset: q.dataset.clone(),
                            question_id: q.id.clone(),
                            segment_ids: vec![d.id.clone()],
                            // A QA dataset's contexts name no page revision.
                            revisions: Vec::new(),
                            method: "teacher".into(),
                            params: params.clone(),
                            template_id: "hanrag-relevance".into(),
                            template_version: student_version.clone(),
                            pipeline_hash: p.hash.clone(),
                            step: None,
                            steps: None,
                            sufficient: None,
                            teacher: Some(teacher_name(llm)),
                            cache_entries: vec![entry],
                        };
                        sft.add(s, &q.question, pw.tag(), part.shard).await?;
                    }
                    sft.flush(&mut pw).await?;
                    if !bad.is_empty() {
                        pw.write(
                            TableKind::Quarantine,
                            part.shard,
                            &to_batch(TableKind::Quarantine, &bad)?,
                        )
                        .await?;
                    }
                }
            }
            written.extend(pw.finish().await?);
        }
    }
    let files = sft.finish(&mut summary).await?;
    Ok(teacher.finish_shard(summary, written, files, started))
}
