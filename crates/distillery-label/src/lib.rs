//! Teacher-free training data for the HSEQ iteration agent and HANRAG's Revelator.
//!
//! Per question ([`Labeller::label_question`]):
//! 1. [`sh`]: build the question's hierarchical sequence S_h from its context (HotpotQA/2Wiki
//!    paragraphs, MuSiQue paragraphs, HybridQA table + linked passages, TAT-QA table +
//!    paragraphs, MetaQA k-hop KB subgraph) with the `distillery-hseq` adapters, in stream
//!    order ρ;
//! 2. [`positives`]: weak positives by one or more [`positives::Method`]s — `hseq-paper`
//!    (HSEQ appendix 9.2: level priority, capped candidates, exact/substring answer match after
//!    [`normalize`]ation, Jaccard fallback, low-confidence flag) and `answer-aware` (a better
//!    teacher-free labeller);
//! 3. [`trajectory`]: the target trajectory (window W, up to k picks a step, sufficiency
//!    threshold u, step cap T_max, lower weights for lexical picks);
//! 4. [`guidance`] and [`prompt`]: guidance by question type or from the planner cache, and
//!    the iteration-agent prompt within the token budget;
//! 5. [`sft`]: the SFT samples (chat messages; the assistant turn is the exact target JSON);
//! 6. [`hanrag`]: refiner, ending-discriminator and router samples from decompositions;
//! 7. [`head`] (option `head`): HSEQ-H head-agent samples, the answer from the canonicalized
//!    evidence package κ(M) of a sufficient trajectory.
//!
//! A question's KB edges come from a [`sh::KbIndex`] (a whole KB in memory) or from a
//! `subgraph` stage's rows ([`subgraphs`]).
//!
//! [`report`] compares labels with gold evidence (precision/recall/F1 per dataset, method,
//! question type and level).
//!
//! Dependencies: `schemars` (the schema of [`LabelOptions`] for `docs/pipelines.md`),
//! `distillery-core` (records, options, stable ids) and `distillery-hseq` (the
//! S_h encoders and the stream order); `serde`/`serde_json` (records, `params` JSON, the
//! report); `tokenizers` (exact prompt token counts when a pipeline names a `tokenizer.json`);
//! `memchr` (the SIMD substring search behind whole-word answer matching); `foldhash` (a fast
//! non-cryptographic hasher for the per-question maps and sets, which take a lookup per word
//! or segment; `hashbrown` already builds it); `rust-stemmers` (Snowball English stems, so
//! `answer-aware` matches a question's terms to other forms of the same word; the stemmer
//! tantivy's English analyzer uses); `thiserror` (typed errors).

pub mod guidance;
pub mod hanrag;
pub mod head;
pub mod normalize;
pub mod options;
pub mod positives;
pub mod prompt;
pub mod report;
pub mod sft;
pub mod sh;
pub mod subgraphs;
pub mod trajectory;

pub use options::{LABEL_METHODS, LABEL_PRESETS, LabelOptions};

use std::sync::Arc;

use distillery_core::{Document, LabelRecord, Question, SftSample, Table, Triple};

/// Everything known about one question: the question and the records its context refers to.
#[derive(Debug, Clone, Copy)]
pub struct QuestionContext<'a> {
    pub question: &'a Question,
    /// The question's context documents, in `question.context_documents` order (missing ids
    /// are skipped by the caller and counted). Borrowed: the caller's store of documents is
    /// shared by every question that cites them, nothing is copied per question.
    pub documents: &'a [&'a Document],
    /// The question's context tables, in `question.context_tables` order.
    pub tables: &'a [&'a Table],
    /// KB edges around the question's topic entities (MetaQA): the caller passes the k-hop
    /// neighbourhood it extracted with [`sh::KbIndex`], or nothing.
    pub triples: &'a [Triple],
    /// The segment ids of `triples` in the output's `segments` table, one each
    /// ([`sh::KbIndex::neighbourhood_with_ids`]), or nothing: then the edges are numbered as
    /// if they were the whole KB.
    pub kg_ids: &'a [sh::KgIds],
}

/// What labelling one question produced.
#[derive(Debug, Clone, Default)]
pub struct LabelOutput {
    /// One record per method.
    pub labels: Vec<LabelRecord>,
    /// Iteration-agent samples (of `sft_method`) and HANRAG samples.
    pub samples: Vec<SftSample>,
    /// The time each phase of labelling this question took.
    pub phases: Phases,
}

/// Time one or more questions spent in each phase of [`Labeller::label_question`], so that a
/// stage can say where its time goes: monotonic-clock laps
/// ([`distillery_core::cpu::WallLap`], usually no system call), which a caller turns into CPU
/// time by the thread's CPU-to-wall ratio over a longer interval ([`Phases::scaled`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Phases {
    /// Building S_h, the candidate stream and the methods' shared per-segment work (HSEQ).
    pub hseq: std::time::Duration,
    /// Weak positives of every method and their trajectories (the label records).
    pub label: std::time::Duration,
    /// Rendering the SFT samples: iteration-agent prompts and targets, HANRAG samples.
    pub samples: std::time::Duration,
}

impl Phases {
    /// Every phase times `factor`.
    pub fn scaled(&self, factor: f64) -> Phases {
        Phases {
            hseq: self.hseq.mul_f64(factor),
            label: self.label.mul_f64(factor),
            samples: self.samples.mul_f64(factor),
        }
    }
}

impl std::ops::AddAssign for Phases {
    fn add_assign(&mut self, o: Phases) {
        self.hseq += o.hseq;
        self.label += o.label;
        self.samples += o.samples;
    }
}

/// Errors of labelling (configuration and template problems; bad questions are not errors:
/// they produce no samples and are counted).
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    #[error("tokenizer {path}: {message}")]
    Tokenizer { path: String, message: String },
    #[error("template {path}: {message}")]
    Template { path: String, message: String },
    #[error("guidance cache {path}: {message}")]
    Guidance { path: String, message: String },
}

impl distillery_core::HasKind for LabelError {
    fn kind(&self) -> distillery_core::ErrorKind {
        distillery_core::ErrorKind::Fatal
    }
}

/// Everything that is loaded once per stage: options, the tokenizer, templates, the guidance
/// cache, the pipeline hash for lineage.
pub struct Labeller {
    pub options: LabelOptions,
    pub pipeline_hash: String,
    pub prompts: prompt::Prompts,
    pub counter: prompt::TokenCounter,
    pub guidance: guidance::GuidanceSource,
    methods: Vec<Box<dyn positives::Method + Send + Sync>>,
    /// The method whose trajectories become SFT samples ([`LabelOptions::sft_method`], or its
    /// verified form after [`Labeller::with_verifier`]).
    sft_method: Option<String>,
}

impl Labeller {
    /// Loads the tokenizer, templates and guidance cache named by the options.
    pub fn new(options: LabelOptions, pipeline_hash: &str) -> Result<Labeller, LabelError> {
        let prompts = prompt::Prompts::load(options.templates.as_deref())?;
        let counter =
            prompt::TokenCounter::new(options.tokenizer.as_deref(), options.chars_per_token)?;
        let guidance = guidance::GuidanceSource::new(
            options.guidance_cache.as_deref(),
            options.planner_model.as_deref(),
        )?;
        let methods = options
            .methods
            .iter()
            .map(|m| positives::by_name(m, &options))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| LabelError::Template {
                path: "methods".into(),
                message: "unknown labelling method".into(),
            })?;
        Ok(Labeller {
            sft_method: options.sft_method().map(str::to_string),
            options,
            pipeline_hash: pipeline_hash.to_string(),
            prompts,
            counter,
            guidance,
            methods,
        })
    }

    /// Adds the SFT method checked by `verifier` as one more method, `<method>+verify`
    /// ([`positives::verify::Verified`]), whose trajectories then become the SFT samples.
    pub fn with_verifier(mut self, verifier: Arc<dyn positives::verify::Verifier>) -> Labeller {
        if let Some(inner) = self
            .sft_method
            .as_deref()
            .and_then(|m| positives::by_name(m, &self.options))
        {
            let min = self.options.min_positives as usize;
            let v = positives::verify::Verified::new(inner, verifier, min);
            self.sft_method = Some(positives::Method::name(&v).to_string());
            self.methods.push(Box::new(v));
        }
        self
    }

    /// The names of the methods labelled, in order.
    pub fn method_names(&self) -> Vec<&str> {
        self.methods.iter().map(|m| m.name()).collect()
    }

    /// The method whose trajectories become SFT samples.
    pub fn sft_method(&self) -> Option<&str> {
        self.sft_method.as_deref()
    }

    /// Labels one question with every method and renders its samples.
    pub fn label_question(&self, ctx: &QuestionContext<'_>) -> LabelOutput {
        sft::label_question(self, &self.methods, ctx)
    }
}
