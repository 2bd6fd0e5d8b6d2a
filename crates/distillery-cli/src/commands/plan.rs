//! `distillery plan FILE [--estimate]`: the files, shards, stages and outputs a run would
//! produce, and with `--estimate` the LLM calls, tokens and cost of its teacher stages.

use std::process::ExitCode;

use anyhow::Result;
use distillery_exec::run::plan_pipeline;

use super::load;
use crate::args::PlanArgs;
use crate::out::outln;

pub async fn run(a: &PlanArgs) -> Result<ExitCode> {
    match load(&a.file, &a.set)? {
        Err(errors) => {
            eprint!("{errors}");
            Ok(ExitCode::FAILURE)
        }
        Ok(p) => {
            let plan = plan_pipeline(&p)?;
            outln!("{plan}");
            if a.estimate {
                let est = distillery_exec::estimate::estimate(
                    &p,
                    &plan,
                    a.sample.max(1),
                    a.tokenizer.as_deref(),
                )
                .await?;
                if est.is_empty() {
                    outln!("estimate: no stage of this pipeline calls an LLM");
                }
                for e in &est {
                    outln!("{e}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
