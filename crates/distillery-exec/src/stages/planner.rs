//! The `planner` stage: HSEQ planner guidance for the questions of the stage's QA inputs
//! (see `distillery-distill::planner`), published as `<stage>/plans.jsonl`, which a later
//! label stage with `plans = "<stage>"` reads from the object store (the two may run on
//! different workers); with `cache`, the plans also go into a local guidance cache directory
//! for label stages of other pipelines (`guidance_cache`, `planner_model` = `llm.model`).
//!
//! Questions are read in part order (at most `max_questions`), planned
//! `llm.max_concurrency` at a time through the response cache (a rerun makes no call), and
//! consumed in order. With `cache`, a plan is written to
//! `<cache>/<model>/<dataset>/<sha1(question)>.txt` only when that file does not exist yet
//! (atomically: temporary file, then a hard link): the cache is keyed by (dataset, question
//! hash, planner model), and a plan already there, written by an earlier run or by hand, is
//! kept (`plans.existing`).
//! `planner/plans.jsonl` in the output lists every question's plan (`question_id`,
//! `dataset`, `cache_key`, `plan`) in part order; answers that are not a plan go to
//! `quarantine`. The stage runs as one task per shard of its questions (one when
//! `max_questions` caps it), each writing its parts' plans as fragments, and a merge task
//! that joins them in part order ([`crate::kit::fragments`]).
//!
//! Counters: `questions`, `plans.written`, `plans.existing`, `plans.invalid`, and the
//! `llm.*` counters of the other teacher stages.

use std::io::Write;
use std::time::Instant;

use distillery_core::id::stable_id;
use distillery_core::schema::{from_batch, to_batch};
use distillery_core::spec::{StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{QuarantineRecord, Question, TableKind};
use distillery_distill::planner::{PLANNER_SCHEMA, PLANNER_TEMPLATE, PlanParser, PlannerPrompts};
use distillery_label::guidance::GuidanceSource;
use distillery_llm::Outcome;
use futures::StreamExt;
use serde_json::json;
use tracing::info;

use crate::contract::options::QuestionCap;
use crate::contract::{
    Declared, MergeCx, Partitioning, RunCx, Stage, StageFuture, StageOutput, stage_tag,
};
use crate::error::ExecError;
use crate::kit::fragments::{Fragments, concat};
use crate::kit::teacher::Teacher;
use crate::parts::{PartWriters, read_part_rows};
use serde::{Deserialize, Serialize};

fn default_plan_tokens() -> u32 {
    256
}

/// `planner` stage options (HSEQ planner guidance, paper 000 9.3.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlannerOptions {
    /// A local guidance cache directory the plans are also written to (plans already there
    /// are kept), for label stages of other pipelines (`guidance_cache`, with
    /// `planner_model` = `llm.model`). A label stage of this pipeline reads the plans from
    /// the object store instead, with `plans` = this stage's name.
    #[serde(default)]
    pub cache: Option<String>,
    /// At most this many questions, in part order (see [`QuestionCap`]).
    #[serde(flatten)]
    pub cap: QuestionCap,
    /// `max_tokens` of each plan.
    #[serde(default = "default_plan_tokens")]
    pub max_tokens: u32,
    /// Directory of templates replacing `planner_system.txt` / `planner_user.txt`.
    #[serde(default)]
    pub templates: Option<String>,
}

/// The `planner` stage.
pub struct Planner;

impl Stage for Planner {
    type Options = PlannerOptions;

    fn kind(&self) -> &'static str {
        "planner"
    }

    fn uses_llm(&self) -> bool {
        true
    }

    fn check(&self, o: &mut PlannerOptions, cx: &mut StageCheck<'_, '_>) {
        if let Some(cache) = &o.cache
            && (cache.contains("://") || cache.trim().is_empty())
        {
            cx.error(
                "cache",
                "`cache` must be a local directory (a guidance cache is read from disk)",
            );
        }
        if o.max_tokens == 0 {
            cx.error("max_tokens", "`max_tokens` must be at least 1");
        }
    }

    fn outputs(&self, _o: &PlannerOptions, stage: &StageSpec) -> Declared {
        Declared {
            tables: Vec::new(),
            files: vec![format!("{}/plans.jsonl", stage.name)],
        }
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Questions
    }

    fn merges(&self) -> bool {
        true
    }

    fn max_tasks(&self, o: &PlannerOptions) -> Option<u32> {
        o.cap.max_tasks()
    }

    fn run<'a>(&'a self, o: &'a PlannerOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run_stage(o, cx))
    }

    fn merge<'a>(&'a self, _o: &'a PlannerOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(async move {
            let started = Instant::now();
            let name = format!("{}/{PLANS}", cx.stage.name);
            let plans = concat(cx.out, cx.dir, cx.shards, &name).await?;
            let mut summary = StageSummary::new(&cx.stage.name);
            summary.bytes_out = plans.bytes;
            summary.seconds = started.elapsed().as_secs_f64();
            Ok(StageOutput {
                summary,
                files: vec![plans],
                ..Default::default()
            })
        })
    }
}

/// The plans, one JSON line per question, under the stage's directory.
const PLANS: &str = "plans.jsonl";

/// Runs one task of the stage: the questions of its shard.
pub async fn run_stage(opts: &PlannerOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (stage, out, staging, parts) = (cx.stage, cx.out, cx.dir, cx.parts);
    let started = Instant::now();
    let (llm, teacher) = Teacher::for_task(&cx)?;
    let prompts = PlannerPrompts::load(opts.templates.as_deref())
        .map_err(|e| ExecError::Task(e.to_string()))?;
    let version = prompts.version();
    let guidance = GuidanceSource::new(opts.cache.as_deref(), Some(&llm.model))?;
    let mut summary = StageSummary::with_counters(
        &stage.name,
        &[
            "questions",
            "plans.written",
            "plans.existing",
            "plans.invalid",
            "llm.quarantined",
        ],
    );
    let mut list = Fragments::new(out, staging, &format!("{}/{PLANS}", stage.name));

    let qparts = crate::kit::contexts::parts_of(parts, TableKind::Questions, &stage.inputs);

    let mut written = Vec::new();
    let mut left = opts.cap.budget();
    'parts: for (tag, shard, part) in qparts {
        let mut pw = PartWriters::new(out.clone(), staging, &stage_tag(&tag, &stage.name));
        summary.bytes_in += part.bytes;
        let mut stream = Box::pin(read_part_rows(out, &part.path(), 256).await?);
        while let Some(batch) = stream.next().await {
            if left == 0 {
                written.extend(pw.finish().await?);
                break 'parts;
            }
            let mut questions: Vec<Question> = from_batch(TableKind::Questions, &batch?)?;
            questions.truncate(left.min(questions.len() as u64) as usize);
            left -= questions.len() as u64;
            let results: Vec<(Question, Result<Outcome, ExecError>)> =
                futures::stream::iter(questions)
                    .map(|q| {
                        let (teacher, prompts, version) = (&teacher, &prompts, &version);
                        async move {
                            let req = prompts.request(&q, opts.max_tokens, llm.seed);
                            let r = teacher
                                .ask(
                                    (PLANNER_TEMPLATE, version),
                                    (&llm.model_revision, PLANNER_SCHEMA),
                                    &PlanParser,
                                    &req,
                                )
                                .await;
                            (q, r)
                        }
                    })
                    .buffered(llm.max_concurrency.max(1))
                    .collect()
                    .await;
            let mut bad = Vec::new();
            for (q, r) in results {
                summary.records_in += 1;
                summary.add("questions", 1);
                let key = guidance.cache_key(&q, Some(&llm.model));
                let r = r?;
                let entry = r.entry().to_string();
                match r {
                    Outcome::Parsed { value, .. } => {
                        let plan = value["plan"].as_str().unwrap_or_default().to_string();
                        let lineage = json!({
                            "teacher": crate::kit::teacher::teacher_name(llm),
                            "cache_entry": entry,
                        })
                        .to_string();
                        match guidance.cache_path(&q) {
                            Some(path) if !write_new(&path, &plan)? => {
                                summary.add("plans.existing", 1)
                            }
                            Some(path) => {
                                // The plan's lineage beside it, for the samples it guides.
                                write_new(&path.with_extension("json"), &lineage)?;
                                summary.add("plans.written", 1)
                            }
                            None => summary.add("plans.written", 1),
                        }
                        summary.records_out += 1;
                        let mut line = json!({
                            "question_id": q.id, "dataset": q.dataset,
                            "cache_key": key, "plan": plan,
                            "teacher": crate::kit::teacher::teacher_name(llm),
                            "cache_entry": entry,
                        })
                        .to_string();
                        line.push('\n');
                        list.write(&tag, shard, &line).await?;
                    }
                    Outcome::Invalid { raw, reason, .. } => {
                        summary.add("plans.invalid", 1);
                        summary.add("llm.quarantined", 1);
                        summary.quarantined += 1;
                        bad.push(QuarantineRecord {
                            id: stable_id(&[&q.id, PLANNER_TEMPLATE]),
                            dataset: "planner".into(),
                            source: q.id.clone(),
                            reason: "llm_invalid_answer".into(),
                            detail: format!("{PLANNER_TEMPLATE}: {reason}"),
                            excerpt: raw.chars().take(512).collect(),
                            ..Default::default()
                        });
                    }
                }
            }
            if !bad.is_empty() {
                pw.write(
                    TableKind::Quarantine,
                    shard,
                    &to_batch(TableKind::Quarantine, &bad)?,
                )
                .await?;
            }
        }
        written.extend(pw.finish().await?);
    }
    let files = list.finish().await?;
    info!(stage = %stage.name, cache = ?opts.cache, "plans written");
    Ok(teacher.finish_shard(summary, written, files, started))
}

/// Writes a plan unless the file exists, atomically: the plan goes to a temporary file that
/// is then hard-linked into place (linking fails when the name exists), so a reader never
/// sees half a plan and concurrent runs keep the first. `Ok(false)` when it was there.
fn write_new(path: &std::path::Path, plan: &str) -> Result<bool, ExecError> {
    let show = path.display().to_string();
    let err = |e: std::io::Error| ExecError::output(&show, e.to_string());
    if path.exists() {
        return Ok(false);
    }
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).map_err(err)?;
    // Unique per call: the tasks of a worker share its pid, and two of them may plan the
    // same question text (a duplicate question in another shard) at once.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{}.{}.{n}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("plan"),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp).map_err(err)?;
    f.write_all(plan.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    drop(f);
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(err(e)),
    }
}
