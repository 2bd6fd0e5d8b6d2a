//! `distillery validate FILE`: checks a pipeline file and its inputs, printing every problem.

use std::process::ExitCode;

use anyhow::Result;
use distillery_exec::claim::check_output;
use distillery_exec::run::plan_pipeline;

use super::load;
use crate::args::ValidateArgs;
use crate::out::outln;

pub async fn run(a: &ValidateArgs) -> Result<ExitCode> {
    let file = &a.file;
    match load(file, &a.set)? {
        Err(errors) => {
            eprint!("{errors}");
            Ok(ExitCode::FAILURE)
        }
        Ok(p) => match plan_pipeline(&p) {
            Ok(plan) => {
                // The output a run would refuse (on /proc, read-only, a directory of the
                // user's).
                if let Err(e) = check_output(&p.output).await {
                    eprintln!("{}: {e}", file.display());
                    return Ok(ExitCode::FAILURE);
                }
                outln!(
                    "{}: ok (pipeline `{}`, {} input file(s), {} stage(s), output {})",
                    file.display(),
                    p.name,
                    plan.files.len(),
                    plan.stages.len(),
                    p.output
                );
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                Ok(ExitCode::FAILURE)
            }
        },
    }
}
