//! The stages, one module each, and their registry.
//!
//! A stage module holds everything about its stage: its options type (serde,
//! `deny_unknown_fields`, defaults, a doc comment per option) and their checks, the tables
//! and files it declares, how it splits into tasks, its cost estimate when it calls the
//! teacher, its `run` and, for stages cut by questions, its `merge`. It implements
//! [`crate::contract::Stage`] and is listed once in [`REGISTRY`]; the engine (the pipeline
//! checks through [`Registry`], [`crate::plan`], [`crate::task`], [`crate::estimate`]) asks
//! the registry and never names a stage. Stages import the contract and never each other:
//! what two of them share lives in [`crate::kit`].

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
pub mod router;
pub mod subgraph;
pub mod text2triple;
pub mod triples;

use distillery_core::spec::{
    Pipeline, SpecErrors, StageCatalog, StageCheck, StageOptions, StageSpec,
};

use crate::contract::AnyStage;
use crate::error::ExecError;

/// Every stage this build runs, in the order `distillery` lists them. Adding a stage is its
/// module, its `pub mod` line above and one line here.
pub static REGISTRY: &[&dyn AnyStage] = &[
    &hseq::Hseq,
    &label::Label,
    &triples::Triples,
    &cirag::Cirag,
    &planner::Planner,
    &relevance::Relevance,
    &router::Router,
    &ras::Ras,
    &index::IndexStage,
    &corpus::CorpusStage,
    &subgraph::SubgraphStage,
    &text2triple::Text2Triple,
    &export::Export,
    &compound::CompoundStage,
];

/// The stage of `kind`.
pub fn stage(kind: &str) -> Option<&'static dyn AnyStage> {
    REGISTRY.iter().copied().find(|s| s.kind() == kind)
}

/// The stage module of a pipeline's stage (the pipeline checks guarantee one exists).
pub fn stage_of(spec: &StageSpec) -> Result<&'static dyn AnyStage, ExecError> {
    stage(&spec.kind)
        .ok_or_else(|| ExecError::Task(format!("no stage kind `{}` in this build", spec.kind)))
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
