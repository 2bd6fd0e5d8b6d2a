//! `distillery cancel JOB`: cancels a job and prints its final status.

use std::process::ExitCode;

use anyhow::{Result, bail};
use distillery_cluster::client::rpc_err;
use distillery_cluster::pb;

use super::status::print_status;
use crate::args::CancelArgs;

pub async fn run(a: CancelArgs) -> Result<ExitCode> {
    let (conn, job) = (&a.conn, a.job);
    let mut client = conn.client()?;
    let s = client
        .cancel_job(pb::CancelJobRequest { job_id: job })
        .await
        .map_err(|s| rpc_err(&conn.coordinator, s))?
        .into_inner();
    if s.state == pb::JobState::Running as i32 {
        bail!("job {} is still running", s.job_id);
    }
    print_status(&s);
    Ok(ExitCode::SUCCESS)
}
