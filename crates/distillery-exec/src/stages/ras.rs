//! The `ras` stage: RAS HotpotQA-SUBQ samples (see `distillery-distill::ras`) for the
//! questions of the stage's QA inputs that have gold supporting documents (HotpotQA supporting
//! facts; MuSiQue and 2Wiki evidence work the same way).
//!
//! Per input: its staged `documents` are read into an id → document map (**memory bound: one
//! input's context documents**); its questions, in part order (at most `max_questions` in
//! all), run `llm.max_concurrency` at a time and are consumed in order. Per question:
//! 1. the base model (`base_model`, default the teacher) answers without context; the
//!    answer's and the gold answer's embeddings (`embedding_model`, candle BERT, mean
//!    pooling) at cosine ≥ `similarity` make it a `[NO_RETRIEVAL]` question;
//! 2. else the supporting documents (in the order of the gold evidence) are filtered by the
//!    teacher (the relevance judgement of the `relevance` stage, same cache); a judgement
//!    that does not parse keeps the document (it is gold evidence) and is counted; a
//!    question left with no document is dropped and counted;
//! 3. one sub-query per kept document from the teacher, given the earlier ones (one stricter
//!    retry, then the fallback, both counted);
//! 4. each kept document's triples through the `triples` stage's extractor and cache
//!    (`triple_max_tokens` must match that stage's `max_tokens` for its answers to be
//!    reused); a document too long for the teacher's context is extracted as pieces that
//!    fit (`distillery_triples::fit`, counted as `triples.split_documents`) and its graph is
//!    their triples; a piece whose extraction fails adds nothing (`triples.failed_pieces`),
//!    and a document none of whose pieces gave triples has an empty graph
//!    (`triples.failed_documents`).
//!
//! Samples (`ras_planner`, `ras_answerer`; user turn = the RAS input, assistant = the label
//! or the gold answer) go to `<stage>/train.jsonl`, `<stage>/validation.jsonl`,
//! `<stage>/dataset_info.json` and the `sft` table. The stage runs as one task per shard of
//! its questions (one when `max_questions` caps it) and a merge task that removes exact
//! duplicates across them ([`crate::kit::sft_out::merge_stage`]). Counters: `questions`, `no_retrieval`,
//! `chains`, `dropped.no_answer`, `dropped.no_supporting_documents`, `dropped.filtered_out`,
//! `documents.kept`, `documents.filtered`, `filter.invalid`, `subq.teacher`, `subq.retried`,
//! `subq.fallback`, `triples.failed_documents`, `triples.split_documents`,
//! `triples.failed_pieces`, `samples.*`, `duplicates_removed`, `llm.*`
//! (teacher and base model together: the base model is the same server under another model
//! name, sharing the teacher's concurrency limit, budget and counters).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use distillery_core::id::stable_id;
use distillery_core::schema::from_batch;
use distillery_core::spec::{StageCheck, StageSpec};
use distillery_core::summary::StageSummary;
use distillery_core::{Document, Message, Question, SftSample, TableKind};
use distillery_distill::ras::{
    BASE_SCHEMA, BASE_TEMPLATE, BaseAnswerParser, RasPrompts, SUBQUERY_SCHEMA, SUBQUERY_TEMPLATE,
    SUFFICIENT, SubqueryParser, fallback_subquery, graph_repr, samples,
};
use distillery_distill::relevance::{
    RELEVANCE_SCHEMA, RELEVANCE_TEMPLATE, RelevanceParser, RelevancePrompts,
};
use distillery_embed::{Embedder, cosine};
use distillery_llm::Outcome;
use distillery_triples::fit::Fitter;
use distillery_triples::{Extraction, TriplesOptions, Unit, passages};
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

fn default_answer_tokens() -> u32 {
    512
}
fn default_similarity() -> f64 {
    0.8
}
fn default_ras_tokens() -> u32 {
    128
}

/// `ras` stage options (RAS HotpotQA-SUBQ, paper 002 appendix B).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RasOptions {
    /// The sentence-embedding model deciding `[NO_RETRIEVAL]`: a directory with
    /// `config.json`, `tokenizer.json` and `model.safetensors`, or a model id in the Hugging
    /// Face cache (e.g. `sentence-transformers/all-MiniLM-L6-v2`).
    pub embedding_model: String,
    /// The base model answering without context (served by the same server; default the
    /// teacher `llm.model`).
    #[serde(default)]
    pub base_model: Option<String>,
    /// Cosine similarity of the base answer's and the gold answer's embeddings at or above
    /// which a question needs no retrieval.
    #[serde(default = "default_similarity")]
    pub similarity: f64,
    /// At most this many questions, in part order (see [`QuestionCap`]).
    #[serde(flatten)]
    pub cap: QuestionCap,
    /// `max_tokens` of each teacher answer (sub-queries, filtering, base answers).
    #[serde(default = "default_ras_tokens")]
    pub max_tokens: u32,
    /// `max_tokens` of the triple extraction answers (the `triples` stage's, to share its cache).
    #[serde(default = "default_answer_tokens")]
    pub triple_max_tokens: u32,
    /// Directory of templates replacing the built-in RAS prompts.
    #[serde(default)]
    pub templates: Option<String>,
    /// Directory of templates replacing the built-in triple extraction prompts.
    #[serde(default)]
    pub triple_templates: Option<String>,
    /// The validation split and the decontamination (`validation_share`, `decontaminate`,
    /// `decontaminate_formats`: see [`SftSplit`]).
    #[serde(flatten)]
    pub split: SftSplit,
}

/// The `ras` stage.
pub struct Ras;

impl Stage for Ras {
    type Options = RasOptions;

    fn kind(&self) -> &'static str {
        "ras"
    }

    fn uses_llm(&self) -> bool {
        true
    }

    fn check(&self, o: &mut RasOptions, cx: &mut StageCheck<'_, '_>) {
        if !(0.0..=1.0).contains(&o.similarity) || o.max_tokens == 0 || o.triple_max_tokens == 0 {
            cx.error(
                "",
                "`similarity` must be in [0, 1], `max_tokens` and `triple_max_tokens` at least 1",
            );
        }
        crate::kit::decontam::check(cx, &o.split);
    }

    fn resolve(&self, o: &RasOptions, stage: &StageSpec) -> Result<Vec<SideFile>, Vec<String>> {
        crate::kit::decontam::resolve(stage, &o.split)
    }

    fn outputs(&self, _o: &RasOptions, stage: &StageSpec) -> Declared {
        crate::kit::sft_out::sft_declared(&stage.name, &[])
    }

    fn partitioning(&self) -> Partitioning {
        Partitioning::Questions
    }

    fn merges(&self) -> bool {
        true
    }

    fn max_tasks(&self, o: &RasOptions) -> Option<u32> {
        o.cap.max_tasks()
    }

    fn run<'a>(&'a self, o: &'a RasOptions, cx: RunCx<'a>) -> StageFuture<'a> {
        Box::pin(run_stage(o, cx))
    }

    fn merge<'a>(&'a self, _o: &'a RasOptions, cx: MergeCx<'a>) -> StageFuture<'a> {
        Box::pin(async move { merge_stage(&cx, &cx.stage.name, Vec::new()).await })
    }
}

/// What a question gave.
/// What one question built; `entries` are the response-cache entries its samples came from
/// (the base answer, the filter's judgements, the sub-queries), in the order asked.
enum Built {
    NoRetrieval {
        entries: Vec<String>,
    },
    Chain {
        pairs: Vec<(String, String)>,
        docs: Vec<String>,
        entries: Vec<String>,
    },
    Dropped(&'static str),
}

struct Ctx<'a> {
    opts: &'a RasOptions,
    teacher: &'a Teacher,
    base: &'a Teacher,
    base_seed: Option<u64>,
    model_revision: &'a str,
    prompts: &'a RasPrompts,
    relevance: &'a RelevancePrompts,
    versions: (String, String, String),
    fitter: &'a Fitter,
    embedder: &'a Embedder,
    docs: &'a HashMap<String, Document>,
}

impl Ctx<'_> {
    /// Builds one question, adding its counters to `c`.
    async fn build(
        &self,
        q: &Question,
        c: &mut BTreeMap<&'static str, u64>,
    ) -> Result<Built, ExecError> {
        let mut bump = |k: &'static str| *c.entry(k).or_default() += 1;
        let Some(gold) = q.answers.first().filter(|a| !a.trim().is_empty()) else {
            return Ok(Built::Dropped("dropped.no_answer"));
        };
        let (base_v, subq_v, rel_v) = (&self.versions.0, &self.versions.1, &self.versions.2);
        let max = self.opts.max_tokens;
        // 1. no retrieval?
        let base = self
            .base
            .ask(
                (BASE_TEMPLATE, base_v),
                (self.model_revision, BASE_SCHEMA),
                &BaseAnswerParser,
                &self.prompts.base_request(&q.question, max, self.base_seed),
            )
            .await?;
        let mut entries = vec![base.entry().to_string()];
        if let Outcome::Parsed { value, .. } = base {
            let answer = value["answer"].as_str().unwrap_or_default().to_string();
            let v = tokio::task::block_in_place(|| self.embedder.embed(&[&answer, gold]))
                .map_err(|e| ExecError::Task(e.to_string()))?;
            if f64::from(cosine(&v[0], &v[1])) >= self.opts.similarity {
                return Ok(Built::NoRetrieval { entries });
            }
        }
        // 2. supporting documents, filtered by the teacher.
        let mut seen = HashSet::new();
        let support: Vec<&Document> = q
            .evidence
            .iter()
            .filter_map(|e| e.record_id.as_deref())
            .filter(|id| seen.insert(*id))
            .filter_map(|id| self.docs.get(id))
            .collect();
        if support.is_empty() {
            return Ok(Built::Dropped("dropped.no_supporting_documents"));
        }
        let mut kept = Vec::new();
        for d in support {
            let r = self
                .teacher
                .ask(
                    (RELEVANCE_TEMPLATE, rel_v),
                    (self.model_revision, RELEVANCE_SCHEMA),
                    &RelevanceParser,
                    &self.relevance.request(q, d, max, self.base_seed),
                )
                .await?;
            entries.push(r.entry().to_string());
            match r {
                Outcome::Parsed { value, .. } if value["relevant"] == false => {
                    bump("documents.filtered")
                }
                Outcome::Parsed { .. } => kept.push(d),
                Outcome::Invalid { .. } => {
                    bump("filter.invalid");
                    kept.push(d);
                }
            }
        }
        if kept.is_empty() {
            return Ok(Built::Dropped("dropped.filtered_out"));
        }
        // 3. sub-queries, 4. triples.
        let mut subqs: Vec<String> = Vec::new();
        let mut pairs = Vec::new();
        for (i, d) in kept.iter().enumerate() {
            bump("documents.kept");
            let mut subq = None;
            for strict in [false, true] {
                let req = self.prompts.subquery_request(
                    &q.question,
                    &d.title,
                    &d.text,
                    &subqs,
                    strict,
                    (max, self.base_seed),
                );
                let r = self
                    .teacher
                    .ask(
                        (SUBQUERY_TEMPLATE, subq_v),
                        (self.model_revision, SUBQUERY_SCHEMA),
                        &SubqueryParser,
                        &req,
                    )
                    .await?;
                entries.push(r.entry().to_string());
                if let Outcome::Parsed { value, .. } = r {
                    subq = value["subquery"].as_str().map(str::to_string);
                    bump(if strict {
                        "subq.retried"
                    } else {
                        "subq.teacher"
                    });
                    break;
                }
            }
            let subq = subq.unwrap_or_else(|| {
                bump("subq.fallback");
                fallback_subquery(i, &q.question, &d.title)
            });
            let mut triples: Vec<[String; 3]> = Vec::new();
            if let Some(p) = passages(d, Unit::Document).first() {
                // A document too long for the context is extracted as pieces; its graph is
                // their triples in piece order, each once.
                let pieces = self.fitter.extract(p).await?;
                if pieces.len() > 1 {
                    bump("triples.split_documents");
                }
                let mut done = 0;
                for (_, x) in &pieces {
                    match x {
                        Extraction::Done { triples: ts, .. } => {
                            done += 1;
                            for t in ts {
                                if !triples.contains(t) {
                                    triples.push(t.clone());
                                }
                            }
                        }
                        Extraction::Invalid { .. } => bump("triples.failed_pieces"),
                    }
                }
                if done == 0 {
                    bump("triples.failed_documents");
                }
            }
            subqs.push(subq.clone());
            pairs.push((subq, graph_repr(&triples)));
        }
        Ok(Built::Chain {
            pairs,
            docs: kept.iter().map(|d| d.id.clone()).collect(),
            entries,
        })
    }
}

/// Runs the stage over the parts staged so far.
pub async fn run_stage(opts: &RasOptions, cx: RunCx<'_>) -> Result<StageOutput, ExecError> {
    let (p, stage, out, staging, parts) = (cx.pipeline, cx.stage, cx.out, cx.dir, cx.parts);
    let started = Instant::now();
    let (llm, teacher) = Teacher::for_task(&cx)?;
    let base_model = opts.base_model.clone().unwrap_or_else(|| llm.model.clone());
    let base = teacher.with_model(&base_model);
    let prompts =
        RasPrompts::load(opts.templates.as_deref()).map_err(|e| ExecError::Task(e.to_string()))?;
    let relevance = RelevancePrompts::load(None).map_err(|e| ExecError::Task(e.to_string()))?;
    let triple_opts = TriplesOptions {
        max_tokens: opts.triple_max_tokens,
        templates: opts.triple_templates.clone(),
        ..TriplesOptions::default()
    };
    let extractor = teacher.extractor(
        llm,
        &triple_opts,
        distillery_triples::prompt::Prompts::load(opts.triple_templates.as_deref())?,
    );
    let fitter = Fitter::new(extractor);
    let model = opts.embedding_model.clone();
    let embedder = Arc::new(
        tokio::task::spawn_blocking(move || Embedder::load(&model))
            .await
            .map_err(|e| ExecError::Task(e.to_string()))?
            .map_err(|e| ExecError::Task(e.to_string()))?,
    );
    const COUNTERS: [&str; 18] = [
        "questions",
        "no_retrieval",
        "chains",
        "dropped.no_answer",
        "dropped.no_supporting_documents",
        "dropped.filtered_out",
        "documents.kept",
        "documents.filtered",
        "filter.invalid",
        "subq.teacher",
        "subq.retried",
        "subq.fallback",
        "triples.failed_documents",
        "triples.split_documents",
        "triples.failed_pieces",
        "samples.train",
        "samples.validation",
        "duplicates_removed",
    ];
    let mut summary = StageSummary::with_counters(&stage.name, &COUNTERS);
    let mut sft = SftOut::new(out, staging, &stage.name, opts.split.validation_share)
        .decontaminated_by(
            crate::kit::decontam::load(
                &opts.split.decontaminate,
                &opts.split.decontaminate_formats,
                cx.side,
            )
            .await?,
        );
    let params = serde_json::json!({
        "teacher": llm.model, "base_model": base_model, "similarity": opts.similarity,
        "embedding_model": opts.embedding_model,
    })
    .to_string();
    let versions = (
        prompts.base_version(),
        prompts.subquery_version(),
        relevance.teacher_version(),
    );
    let sample_version = prompts.sample_version();
    let teacher_label = teacher_name(llm);
    let mut written = Vec::new();
    let mut left = opts.cap.budget();

    for input in &stage.inputs {
        if left == 0 {
            break;
        }
        let (docs, doc_bytes) = context_documents(out, parts, input).await?;
        sft.shared_bytes_in(doc_bytes);
        let ctx = Ctx {
            opts,
            teacher: &teacher,
            base: &base,
            base_seed: llm.seed,
            model_revision: &llm.model_revision,
            prompts: &prompts,
            relevance: &relevance,
            versions: versions.clone(),
            fitter: &fitter,
            embedder: &embedder,
            docs: &docs,
        };
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
                    let results: Vec<_> = futures::stream::iter(questions)
                        .map(|q| {
                            let ctx = &ctx;
                            async move {
                                let mut c = BTreeMap::new();
                                let b = ctx.build(&q, &mut c).await;
                                (q, b, c)
                            }
                        })
                        .buffered(llm.max_concurrency.max(1))
                        .collect()
                        .await;
                    for (q, built, counts) in results {
                        let built = built?;
                        summary.records_in += 1;
                        summary.add("questions", 1);
                        for (k, n) in counts {
                            summary.add(k, n);
                        }
                        let gold = q.answers.first().cloned().unwrap_or_default();
                        let (made, seg_ids, entries) = match built {
                            Built::Dropped(why) => {
                                summary.add(why, 1);
                                continue;
                            }
                            Built::NoRetrieval { entries } => {
                                summary.add("no_retrieval", 1);
                                let made = samples(&prompts, &q.question, &gold, None);
                                (made, Vec::new(), entries)
                            }
                            Built::Chain {
                                pairs,
                                docs,
                                entries,
                            } => {
                                summary.add("chains", 1);
                                let made = samples(&prompts, &q.question, &gold, Some(&pairs));
                                (made, docs, entries)
                            }
                        };
                        let steps = made.len() as u32;
                        for (task, step, input, label) in made {
                            let chars = |s: &str| s.chars().count().div_ceil(4) as u32;
                            let s = SftSample {
                                id: stable_id(&[&q.id, task, &step.to_string(), &label]),
                                task: task.into(),
                                prompt_tokens: chars(&input),
                                target_tokens: chars(&label),
                                sufficient: Some(label == SUFFICIENT),
                                messages: vec![
                                    Message {
                                        role: "user".into(),
                                        content: input,
                                    },
                                    Message {
                                        role: "assistant".into(),
                                        content: label,
                                    },
                                ],
                                weight: 1.0,
                                split: String::new(),
                                dataset: q.dataset.clone(),
                                question_id: q.id.clone(),
                                segment_ids: seg_ids.clone(),
                                // A QA dataset's contexts name no page revision.
                                revisions: Vec::new(),
                                method: "ras".into(),
                                params: params.clone(),
                                template_id: "ras-hotpotqa-subq".into(),
                                template_version: sample_version.clone(),
                                pipeline_hash: p.hash.clone(),
                                step: Some(step),
                                steps: Some(steps),
                                teacher: Some(teacher_label.clone()),
                                cache_entries: entries.clone(),
                            };
                            sft.add(s, &q.question, pw.tag(), part.shard).await?;
                        }
                    }
                    sft.flush(&mut pw).await?;
                }
            }
            written.extend(pw.finish().await?);
        }
    }
    let files = sft.finish(&mut summary).await?;
    // The base model's client shares the teacher's counters.
    Ok(teacher.finish_shard(summary, written, files, started))
}
