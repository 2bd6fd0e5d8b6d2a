//! `distillery hseq verify URL`: decodes every source of an output from its segments and
//! compares it with the source; exit non-zero on any mismatch.

use std::process::ExitCode;

use anyhow::Result;

use crate::out::outln;

pub async fn run(url: &str) -> Result<ExitCode> {
    let report = distillery_exec::verify::verify_output(url).await?;
    outln!("{report}");
    if report.failed() > 0 {
        eprintln!("error: {} source(s) do not round-trip", report.failed());
        Ok(ExitCode::FAILURE)
    } else {
        Ok(ExitCode::SUCCESS)
    }
}
