//! `distillery run FILE`: a pipeline on this machine, through an embedded coordinator and
//! worker on loopback; and what `ingest`, `label` and `submit --wait` share with it: running
//! a checked pipeline ([`run_job`]) and printing its outcome ([`finish`]).

use std::process::ExitCode;

use anyhow::Result;
use distillery_cluster::local::run_embedded;
use distillery_cluster::{ClusterError, pb};
use distillery_core::spec::Pipeline;
use distillery_exec::run::{ProgressMode, RunOutcome};

use super::load;
use crate::args::RunArgs;
use crate::out::outln;

/// Exit status of a run stopped by `[llm.budget]`.
const EXIT_BUDGET: u8 = 3;

pub async fn run(a: &RunArgs, mode: ProgressMode) -> Result<ExitCode> {
    let file = &a.file;
    match load(file, &a.set)? {
        Err(errors) => {
            eprint!("{errors}");
            Ok(ExitCode::FAILURE)
        }
        Ok(p) => {
            let text = std::fs::read_to_string(file)?;
            run_job(&file.display().to_string(), &text, &a.set, &p, mode, a.ui).await
        }
    }
}

/// Runs a pipeline through the embedded cluster (its job page served on `ui` when given) and
/// prints its outcome; exit 3 when the `[llm.budget]` stopped it.
pub async fn run_job(
    file: &str,
    text: &str,
    set: &[String],
    p: &Pipeline,
    mode: ProgressMode,
    ui: Option<std::net::SocketAddr>,
) -> Result<ExitCode> {
    let parallelism = distillery_exec::run::parallelism(p);
    finish(run_embedded(file, text, set, parallelism, mode, ui).await)
}

/// Prints the outcome of a run; exit 3 when the `[llm.budget]` stopped it.
pub fn finish(r: std::result::Result<RunOutcome, ClusterError>) -> Result<ExitCode> {
    match r {
        Ok(o) => {
            print_outcome(&o);
            Ok(ExitCode::SUCCESS)
        }
        // A spending limit is a clean stop, not a failure: exit 3 so a scheduler can tell it
        // apart and resume later.
        Err(ClusterError::JobFailed {
            kind: pb::ErrorKind::Budget,
            message,
            ..
        }) => {
            eprintln!("stopped: {message}");
            Ok(ExitCode::from(EXIT_BUDGET))
        }
        Err(e) => Err(e.into()),
    }
}

/// The stages (records, bytes, seconds, counters), tables and files of a published run.
fn print_outcome(o: &RunOutcome) {
    outln!(
        "{:<22} {:>10} {:>10} {:>8} {:>11} {:>11} {:>8}",
        "stage",
        "in",
        "out",
        "bad",
        "bytes in",
        "bytes out",
        "seconds"
    );
    for s in &o.summary.stages {
        outln!(
            "{:<22} {:>10} {:>10} {:>8} {:>11} {:>11} {:>8.2}",
            s.stage,
            s.records_in,
            s.records_out,
            s.quarantined,
            s.bytes_in,
            s.bytes_out,
            s.seconds
        );
        let interesting: Vec<String> = s
            .counters
            .iter()
            .filter(|(k, _)| !k.starts_with("rows."))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !interesting.is_empty() {
            outln!("{:<22} {}", "", interesting.join(" "));
        }
    }
    outln!("tables:");
    for t in &o.manifest.tables {
        outln!(
            "  {:<12} {:>10} rows in {} file(s)",
            t.name,
            t.rows,
            t.files.len()
        );
    }
    if !o.manifest.files.is_empty() {
        outln!("files:");
        for f in &o.manifest.files {
            outln!("  {:<24} {:>10} rows {:>11} bytes", f.path, f.rows, f.bytes);
        }
    }
    outln!("published {} ({:.2} s)", o.output, o.summary.seconds);
}
