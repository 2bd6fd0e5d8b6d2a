//! `distillery plan --estimate`: what the LLM stages of a pipeline will ask and cost, before
//! anything runs. Each stage that asks a teacher projects its own ([`crate::stages::Stage::estimate`]:
//! the `triples` stage samples its inputs and counts the tokens of its real prompts).

use distillery_core::spec::Pipeline;

pub use crate::contract::{Counter, StageEstimate};

use crate::contract::{EstimateCx, Plan};
use crate::error::ExecError;
use crate::stages::stage_of;
/// Estimates every stage of the pipeline that has an estimate (none: an empty list).
pub async fn estimate(
    p: &Pipeline,
    plan: &Plan,
    sample: usize,
    tokenizer: Option<&str>,
) -> Result<Vec<StageEstimate>, ExecError> {
    let mut out = Vec::new();
    for stage in &p.stages {
        let cx = EstimateCx {
            pipeline: p,
            plan,
            stage,
            sample,
            tokenizer,
        };
        if let Some(projected) = stage_of(stage)?.estimate(cx) {
            out.push(projected.await?);
        }
    }
    Ok(out)
}
