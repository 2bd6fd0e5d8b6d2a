//! `distillery submit FILE`: sends a pipeline to a coordinator; with `--wait`, follows the
//! job and exits 0 only if it succeeded.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use distillery_cluster::client::submit_err;
use distillery_cluster::local::{outcome_of, wait_job};
use distillery_cluster::pb;

use super::run::finish;
use crate::args::SubmitArgs;
use crate::out::outln;

pub async fn run(a: &SubmitArgs) -> Result<ExitCode> {
    let (conn, file, set, wait) = (&a.conn, &a.file, a.set.as_slice(), a.wait);
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read pipeline file {}", file.display()))?;
    // Checked here too, so a bad file is reported before anything is sent.
    if let Err(errors) =
        distillery_exec::stages::parse_pipeline(&file.display().to_string(), &text, set)
    {
        eprint!("{errors}");
        return Ok(ExitCode::FAILURE);
    }
    let mut client = conn.client()?;
    let job = client
        .submit_job(pb::SubmitJobRequest {
            pipeline_file: file.display().to_string(),
            pipeline_text: text,
            overrides: set.to_vec(),
        })
        .await
        .map_err(|s| submit_err(&conn.coordinator, s))?
        .into_inner()
        .job_id;
    outln!("{job}");
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let status = wait_job(
        &mut client,
        &conn.coordinator,
        &job,
        Duration::from_millis(500),
    )
    .await?;
    finish(outcome_of(status).await)
}
