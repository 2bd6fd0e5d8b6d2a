//! The stage contract: what a stage module implements ([`Stage`]) and everything it is handed
//! or hands back, in one place below both the engine and the stages.
//!
//! A stage declares its options type (`type Options`: serde with `deny_unknown_fields`,
//! defaults, a doc comment per option) and gets them parsed once, when the pipeline is
//! checked; every other method receives them typed. The engine holds stages as
//! [`AnyStage`] (options erased), which every [`Stage`] is through one blanket impl, and finds
//! them by kind in `stages::REGISTRY`. The option groups several stages share
//! (SFT output, decontamination, question caps, sampling) are typed structs in
//! [`options`], flattened into each stage's options.
//!
//! Nothing here imports the engine (`plan`, `task`, `run`, `estimate`) or a stage: those
//! import this module, so the crate's imports form no circle (a test checks).

mod estimate;
pub mod options;
mod output;
mod plan;

pub use estimate::{Counter, StageEstimate};
pub use output::{
    AdoptedFile, IngestCounts, Partitioning, SPENT_COST, SPENT_TOKENS, ShardOutput, StageOutput,
    TaskOutput,
};
pub use plan::{Plan, PlannedFile, SideFile, SideFiles, stage_tag};

use distillery_core::TableKind;
use distillery_core::spec::{Pipeline, StageCheck, StageOptions, StageSpec};
use futures::future::{BoxFuture, LocalBoxFuture};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ExecError;
use crate::parts::WrittenPart;
use crate::store::Location;

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
    /// `task::partitioning`'s.
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

/// Future of a stage's task.
pub type StageFuture<'a> = BoxFuture<'a, Result<StageOutput, ExecError>>;

/// A stage, its options typed. Only `Options`, `kind`, `outputs` and `run` are required.
pub trait Stage: Send + Sync + 'static {
    /// Its options (the `options` table of its `[[stages]]` entries).
    type Options: DeserializeOwned + Serialize + schemars::JsonSchema + Send + Sync + 'static;

    /// The `kind` of its `[[stages]]` entries.
    fn kind(&self) -> &'static str;

    /// Whether it calls the `[llm]` server (the pipeline then needs an `[llm]` section).
    fn uses_llm(&self) -> bool {
        false
    }

    /// Checks what serde cannot (ranges, files, other stages), reporting every problem
    /// through `cx`; may normalise the options before they are kept.
    fn check(&self, _o: &mut Self::Options, _cx: &mut StageCheck<'_, '_>) {}

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
    fn max_tasks(&self, _o: &Self::Options) -> Option<u32> {
        None
    }

    /// The tables and files it writes.
    fn outputs(&self, o: &Self::Options, stage: &StageSpec) -> Declared;

    /// The files it reads besides the pipeline's inputs (evaluation files, say), resolved
    /// at planning so a run does not start without them; or every problem with them. Its
    /// tasks get what planning resolved ([`RunCx::side`]), never the patterns again.
    fn resolve(
        &self,
        _o: &Self::Options,
        _stage: &StageSpec,
    ) -> Result<Vec<SideFile>, Vec<String>> {
        Ok(Vec::new())
    }

    /// Which of its inputs' daily folders it reads, asked once before a job is planned: a
    /// folder that no stage reading its input needs is left out of the plan, so a night
    /// given a day applied before does not parse it again.
    fn reads<'a>(
        &'a self,
        _o: &'a Self::Options,
        _stage: &'a StageSpec,
        _pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, Result<Reads, ExecError>> {
        Box::pin(async { Ok(Reads::All) })
    }

    /// Runs one task of the stage.
    fn run<'a>(&'a self, o: &'a Self::Options, cx: RunCx<'a>) -> StageFuture<'a>;

    /// Joins what its tasks staged (a stage whose [`Stage::merges`] is true), on the level
    /// after them.
    fn merge<'a>(&'a self, _o: &'a Self::Options, cx: MergeCx<'a>) -> StageFuture<'a> {
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
        _o: &'a Self::Options,
        _cx: EstimateCx<'a>,
    ) -> Option<LocalBoxFuture<'a, Result<StageEstimate, ExecError>>> {
        None
    }
}

/// A stage as the engine and the registry hold it: the same methods, its options read back
/// from the checked [`StageSpec`].
pub trait AnyStage: Send + Sync {
    fn kind(&self) -> &'static str;
    fn uses_llm(&self) -> bool;
    /// Parses and checks its options, reporting every problem through `cx`.
    fn check(&self, cx: &mut StageCheck<'_, '_>) -> Option<StageOptions>;
    /// The JSON schema of its options, from which `docs/pipelines.md` is generated.
    fn options_schema(&self) -> schemars::Schema;
    fn partitioning(&self) -> Partitioning;
    fn merges(&self) -> bool;
    fn max_tasks(&self, stage: &StageSpec) -> Option<u32>;
    fn outputs(&self, stage: &StageSpec) -> Declared;
    fn resolve(&self, stage: &StageSpec) -> Result<Vec<SideFile>, Vec<String>>;
    fn reads<'a>(
        &'a self,
        stage: &'a StageSpec,
        pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, Result<Reads, ExecError>>;
    fn run<'a>(&'a self, cx: RunCx<'a>) -> StageFuture<'a>;
    fn merge<'a>(&'a self, cx: MergeCx<'a>) -> StageFuture<'a>;
    fn estimate<'a>(
        &'a self,
        cx: EstimateCx<'a>,
    ) -> Option<LocalBoxFuture<'a, Result<StageEstimate, ExecError>>>;
}

/// The options `stage` was checked with, as `S` declares them: the only place options are
/// read back, and a stage spec is only ever checked by the stage of its kind.
fn typed<S: Stage>(stage: &StageSpec) -> Result<&S::Options, ExecError> {
    stage.options.get::<S::Options>().ok_or_else(|| {
        ExecError::Task(format!(
            "stage `{}`: its options are not those of a `{}` stage",
            stage.name, stage.kind
        ))
    })
}

/// The option names an options schema lists (flattened groups' included), in order.
fn option_names(schema: &schemars::Schema) -> Vec<String> {
    schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

impl<S: Stage> AnyStage for S {
    fn kind(&self) -> &'static str {
        Stage::kind(self)
    }

    fn uses_llm(&self) -> bool {
        Stage::uses_llm(self)
    }

    fn check(&self, cx: &mut StageCheck<'_, '_>) -> Option<StageOptions> {
        let known = option_names(&AnyStage::options_schema(self));
        let mut o: S::Options = cx.options_of(&known)?;
        Stage::check(self, &mut o, cx);
        Some(StageOptions::new(o))
    }

    fn options_schema(&self) -> schemars::Schema {
        schemars::schema_for!(S::Options)
    }

    fn partitioning(&self) -> Partitioning {
        Stage::partitioning(self)
    }

    fn merges(&self) -> bool {
        Stage::merges(self)
    }

    fn max_tasks(&self, stage: &StageSpec) -> Option<u32> {
        Stage::max_tasks(self, typed::<S>(stage).ok()?)
    }

    fn outputs(&self, stage: &StageSpec) -> Declared {
        typed::<S>(stage).map_or_else(|_| Declared::default(), |o| Stage::outputs(self, o, stage))
    }

    fn resolve(&self, stage: &StageSpec) -> Result<Vec<SideFile>, Vec<String>> {
        let o = typed::<S>(stage).map_err(|e| vec![e.to_string()])?;
        Stage::resolve(self, o, stage)
    }

    fn reads<'a>(
        &'a self,
        stage: &'a StageSpec,
        pipeline: &'a Pipeline,
    ) -> BoxFuture<'a, Result<Reads, ExecError>> {
        match typed::<S>(stage) {
            Ok(o) => Stage::reads(self, o, stage, pipeline),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn run<'a>(&'a self, cx: RunCx<'a>) -> StageFuture<'a> {
        match typed::<S>(cx.stage) {
            Ok(o) => Stage::run(self, o, cx),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn merge<'a>(&'a self, cx: MergeCx<'a>) -> StageFuture<'a> {
        match typed::<S>(cx.stage) {
            Ok(o) => Stage::merge(self, o, cx),
            Err(e) => Box::pin(async move { Err(e) }),
        }
    }

    fn estimate<'a>(
        &'a self,
        cx: EstimateCx<'a>,
    ) -> Option<LocalBoxFuture<'a, Result<StageEstimate, ExecError>>> {
        let o = typed::<S>(cx.stage).ok()?;
        Stage::estimate(self, o, cx)
    }
}
