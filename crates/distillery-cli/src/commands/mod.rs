//! One module per command, each with a `run` that `main` dispatches to, and what several
//! commands share: [`load`] (read and check a pipeline file) and [`shutdown_signal`].

pub mod cache;
pub mod cancel;
pub mod changes;
pub mod coordinator;
pub mod corpus;
pub mod hseq_verify;
pub mod index;
pub mod ingest;
pub mod inspect;
pub mod label;
pub mod plan;
pub mod report;
pub mod report_compound;
pub mod report_html;
pub mod run;
pub mod search;
pub mod status;
pub mod submit;
pub mod validate;
pub mod worker;

use std::path::Path;

use anyhow::{Context, Result};
use distillery_core::spec::Pipeline;

/// Reads and checks a pipeline file with its `--set` overrides: `Ok(Err(text))` holds every
/// problem of the file (missing input files included), as printed.
pub fn load(file: &Path, set: &[String]) -> Result<std::result::Result<Pipeline, String>> {
    // A file far too big to be a pipeline is refused before it is read whole.
    let size = std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    if size > distillery_core::spec::MAX_PIPELINE_BYTES as u64 {
        return Ok(Err(format!(
            "{}: the pipeline file is {size} bytes, over the limit of {} MiB: it travels with \
             every task, so keep data and long prompt templates in files it names\n",
            file.display(),
            distillery_core::spec::MAX_PIPELINE_BYTES >> 20
        )));
    }
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read pipeline file {}", file.display()))?;
    // Missing input files are reported with the file's other problems; a `mediawiki` input's
    // daily folders are checked as the run will (finished, md5 sums).
    let check = |format: &str, paths: &[String]| {
        if format == distillery_core::spec::Format::MediaWiki.name() {
            let (files, mut problems) = distillery_exec::plan::daily_folders(paths);
            problems.extend(distillery_exec::store::resolve_each(&files).1);
            problems
        } else {
            distillery_exec::store::resolve_each(paths).1
        }
    };
    Ok(distillery_exec::stages::parse_pipeline_checking_paths(
        &file.display().to_string(),
        &text,
        set,
        &check,
    )
    .map_err(|e| e.to_string()))
}

/// Resolves on SIGTERM or Ctrl-C: the end of a `coordinator` or the drain of a `worker`.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
