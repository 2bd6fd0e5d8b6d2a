//! The stages, one module each, and their registry.
//!
//! A stage module holds everything about its stage: its options type (serde,
//! `deny_unknown_fields`, defaults, a doc comment per option) and their checks, the tables
//! and files it declares, how it splits into tasks ([`Partitioning`]), its cost estimate
//! when it calls the teacher, its `run` and, for stages cut by questions, its `merge`. It
//! implements [`Stage`] and is listed once in [`REGISTRY`]; the engine (the pipeline checks
//! through [`Registry`], [`crate::plan`], [`crate::task`], [`crate::estimate`]) asks the
//! registry and never names a stage. Stages never import each other: what two of them share
//! lives in [`crate::kit`].

pub mod cirag;
pub mod compound;
pub mod corpus;
pub mod export;
pub mod hseq;
pub mod index;
pub mod label;
pub mod planner;
pub mod ras;
pub mod relevance;
pub mod subgraph;
pub mod text2triple;
pub mod triples;

use distillery_core::TableKind;
use distillery_core::spec::{
    Pipeline, SpecErrors, StageCatalog, StageCheck, StageOptions, StageSpec,
};
use futures::future::{BoxFuture, LocalBoxFuture};

use crate::error::ExecError;
use crate::estimate::StageEstimate;
use crate::parts::WrittenPart;
use crate::plan::{Plan, SideFile};
use crate::run::StageOutput;
use crate::store::Location;
use crate::task::{Partitioning, ShardOutput};

/// Every stage this build runs, in the order `distillery` lists them. Adding a stage is its
/// module, its `pub mod` line above and one line here.
pub static REGISTRY: &[&dyn Stage] = &[
    &hseq::Hseq,
    &label::Label,
    &triples::Triples,
    &cirag::Cirag,
    &planner::Planner,
    &relevance::Relevance,
    &ras::Ras,
    &index::IndexStage,
    &corpus::CorpusStage,
    &subgraph::SubgraphStage,
    &text2triple::Text2Triple,
    &export::Export,
    &compound::CompoundStage,
];

/// What a stage's task gets to run with.
pub struct RunCx<'a> {
    pub pipeline: &'a Pipeline,
    pub stage: &'a StageSpec,
    pub out: &'a Location,
    /// The attempt's own directory, relative to `out`: everything the task writes goes under it.
    pub dir: &'a str,
    /// The parts the task reads (its shard's, by the stage's [`Partitioning`]).
    pub parts: &'a [WrittenPart],
    /// The files the stage tasks below it published, each under its task's directory (a
    /// planner's `plans.jsonl`, say): how one stage reads another's declared output files.
    pub upstream: &'a [ShardOutput],
    /// Threads the task may use.
    pub parallelism: usize,
    /// The files it reads besides the inputs, as planning resolved them ([`Stage::resolve`]).
    pub side: &'a [SideFile],
    /// The task's shard (`None` for a stage run as one whole task); the stage's task count is
    /// [`crate::task::partitioning`]'s.
    pub shard: Option<u32>,
}

/// What a stage's merge task gets: the committed outputs of the stage's shard tasks.
pub struct MergeCx<'a> {
    pub pipeline: &'a Pipeline,
    pub stage: &'a StageSpec,
    pub out: &'a Location,
    pub dir: &'a str,
    pub shards: &'a [ShardOutput],
}

/// What `plan --estimate` gives a stage that calls the teacher.
pub struct EstimateCx<'a> {
    pub pipeline: &'a Pipeline,
    pub plan: &'a Plan,
    pub stage: &'a StageSpec,
    /// Passages (or questions) to sample.
    pub sample: usize,
    /// A local `tokenizer.json` counting tokens when the server cannot.
    pub tokenizer: Option<&'a str>,
}

/// The tables and files a stage adds to the output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    pub tables: Vec<TableKind>,
    /// Paths relative to the output.
    pub files: Vec<String>,
}

/// Which of the daily folders its inputs name a stage reads ([`Stage::reads`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Reads {
    /// Every folder (the default).
    All,
    /// Every folder but these (days a `corpus` stage applied before).
    AllBut(std::collections::HashSet<String>),
    /// None: the stage reads none of its inputs' tables (an index fed by a corpus root).
    Nothing,
}

impl Reads {
    /// Whether the stage can do without the daily folder `dir`.
    pub fn skips(&self, dir: &str) -> bool {
        match self {
            Reads::All => false,
            Reads::AllBut(left) => left.contains(dir),
            Reads::Nothing => true,
        }
    }
}

/// A stage.
pub trait Stage: Send + Sync {
    /// The `kind` of its `[[stages]]` entries.
    fn kind(&self) -> &'static str;

    /// Whether it calls the `[llm]` server (the pipeline then needs an `[llm]` section).
    fn uses_llm(&self) -> bool {
        false
    }

    /// Deserializes and checks its options (`cx.options::<T>()`), reporting every problem
    /// through `cx`.
    fn check(&self, cx: &mut StageCheck<'_, '_>) -> Option<StageOptions>;

    /// The JSON schema of its options type (`schemars::schema_for!`): names, types, defaults
    /// and the doc comment of every option, from which `docs/pipelines.md` is generated.
    fn options_schema(&self) -> schemars::Schema;

    /// How its work is cut into tasks.
    fn partitioning(&self) -> Partitioning {
        Partitioning::Whole
    }

    /// Whether a merge task joins what its tasks staged (see [`Stage::merge`]); only for a
    /// stage that splits.
    fn merges(&self) -> bool {
        false
    }

    /// The most tasks this stage may run as (`None`: `tasks`, else `run.shards`). A stage
    /// capped "in part order" (`max_questions`, `max_passages`) says 1: which records fall
    /// under a cap must not depend on the task count.
    fn max_tasks(&self, _stage: &StageSpec) -> Option<u32> {
        None
    }

    /// The tables and files it writes.
    fn outputs(&self, stage: &StageSpec) -> Declared;

    /// The files it reads besides the pipeline's inputs (evaluation files, say), resolved
    /// at planning so a run does not start without them; or every problem with them. Its
    /// tasks get what planning resolved ([`RunCx::side`]), never the patterns again.
    fn resolve(&self, _stage: &StageSpec) -> Result<Vec<SideFile>, Vec<String>> {
        Ok(Vec::new())
    }

    /// Which of its inputs' daily folders it reads, asked once before a job is planned: a
    /// folder that no stage reading its input needs is left out of the plan, so a night
    /// given a day applied before does not parse it again.
    fn reads<'a>(
        &'a self,
        _stage: &'a StageSpec,
        _pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, Result<Reads, ExecError>> {
        Box::pin(async { Ok(Reads::All) })
    }

    /// Runs one task of the stage.
    fn run<'a>(&'a self, cx: RunCx<'a>) -> BoxFuture<'a, Result<StageOutput, ExecError>>;

    /// Joins what its tasks staged (a stage whose [`Stage::merges`] is true), on the level
    /// after them.
    fn merge<'a>(&'a self, cx: MergeCx<'a>) -> BoxFuture<'a, Result<StageOutput, ExecError>> {
        Box::pin(async move {
            Err(ExecError::Task(format!(
                "stage `{}` has no merge step",
                cx.stage.name
            )))
        })
    }

    /// Projects its calls, tokens and cost (`plan --estimate`, awaited where it is asked, so
    /// the future need not be `Send`); `None` for a stage that asks no teacher or has no
    /// estimate.
    fn estimate<'a>(
        &'a self,
        _cx: EstimateCx<'a>,
    ) -> Option<LocalBoxFuture<'a, Result<StageEstimate, ExecError>>> {
        None
    }
}

/// The stage of `kind`.
pub fn stage(kind: &str) -> Option<&'static dyn Stage> {
    REGISTRY.iter().copied().find(|s| s.kind() == kind)
}

/// The stage module of a pipeline's stage (the pipeline checks guarantee one exists).
pub fn stage_of(spec: &StageSpec) -> Result<&'static dyn Stage, ExecError> {
    stage(&spec.kind)
        .ok_or_else(|| ExecError::Task(format!("no stage kind `{}` in this build", spec.kind)))
}

/// A stage's typed options.
pub fn options<T: 'static>(spec: &StageSpec) -> Result<&T, ExecError> {
    spec.options.get::<T>().ok_or_else(|| {
        ExecError::Task(format!(
            "stage `{}`: its options are not those of a `{}` stage",
            spec.name, spec.kind
        ))
    })
}

/// The registry as the pipeline checks see it.
pub struct Registry;

impl StageCatalog for Registry {
    fn kinds(&self) -> Vec<&'static str> {
        REGISTRY.iter().map(|s| s.kind()).collect()
    }

    fn uses_llm(&self, kind: &str) -> bool {
        stage(kind).is_some_and(|s| s.uses_llm())
    }

    fn check(&self, kind: &str, cx: &mut StageCheck<'_, '_>) -> Option<StageOptions> {
        stage(kind)?.check(cx)
    }
}

/// [`Pipeline::parse`] with this build's stages.
pub fn parse_pipeline(
    file: &str,
    text: &str,
    overrides: &[String],
) -> Result<Pipeline, SpecErrors> {
    Pipeline::parse(&Registry, file, text, overrides)
}

/// [`Pipeline::parse_checking_paths`] with this build's stages.
pub fn parse_pipeline_checking_paths(
    file: &str,
    text: &str,
    overrides: &[String],
    check_paths: &dyn Fn(&str, &[String]) -> Vec<String>,
) -> Result<Pipeline, SpecErrors> {
    Pipeline::parse_checking_paths(&Registry, file, text, overrides, check_paths)
}

#[cfg(test)]
mod tests;
