//! `distillery status [JOB]`: a job's progress per stage, its workers and failures, as a table
//! or as JSON (all jobs without JOB).

use std::process::ExitCode;

use anyhow::Result;
use distillery_cluster::client::rpc_err;
use distillery_cluster::pb;
use distillery_core::summary::TaskRun;

use crate::args::{ReportFormat, StatusArgs};
use crate::out::outln;

pub async fn run(a: StatusArgs) -> Result<ExitCode> {
    if a.format == ReportFormat::Html {
        anyhow::bail!(
            "`status` has no html format: the coordinator serves each job's page on its \
             --metrics-listen port, at /jobs/<job id>"
        );
    }
    let (conn, job, json) = (&a.conn, a.job, a.format == ReportFormat::Json);
    let mut client = conn.client()?;
    let ids: Vec<String> = match job {
        Some(id) => vec![id],
        None => client
            .list_jobs(pb::ListJobsRequest {})
            .await
            .map_err(|s| rpc_err(&conn.coordinator, s))?
            .into_inner()
            .jobs
            .into_iter()
            .map(|j| j.job_id)
            .collect(),
    };
    let mut jobs = Vec::with_capacity(ids.len());
    for id in ids {
        // The table shows per-stage counts; JSON lists every task, a page at a time.
        let limit = if json { TASK_PAGE } else { 0 };
        jobs.push(job_status(&mut client, &conn.coordinator, &id, limit).await?);
    }
    if json {
        // One object a line, whatever the number of jobs.
        for s in &jobs {
            outln!("{}", status_json(s));
        }
        return Ok(ExitCode::SUCCESS);
    }
    if jobs.is_empty() {
        outln!("no jobs");
    }
    for s in &jobs {
        print_status(s);
    }
    Ok(ExitCode::SUCCESS)
}

/// Task rows asked for a page.
const TASK_PAGE: u32 = 10_000;

/// A job's status, with its task rows fetched `limit` at a time and gathered into their
/// stages (none with a limit of 0): one answer stays small for a job of any size.
async fn job_status(
    client: &mut distillery_cluster::client::Client,
    addr: &str,
    id: &str,
    limit: u32,
) -> Result<pb::JobStatus> {
    let ask = |task_offset| pb::GetJobRequest {
        job_id: id.to_string(),
        task_offset,
        task_limit: limit,
    };
    let err = |s| rpc_err(addr, s);
    let mut status = client.get_job(ask(0)).await.map_err(err)?.into_inner();
    while status.task_next > 0 {
        let page = client
            .get_job(ask(status.task_next))
            .await
            .map_err(err)?
            .into_inner();
        for (st, more) in status.stages.iter_mut().zip(page.stages) {
            st.task_list.extend(more.task_list);
        }
        status.task_next = page.task_next;
    }
    Ok(status)
}

fn state_name(s: i32) -> &'static str {
    match pb::JobState::try_from(s).unwrap_or(pb::JobState::Unspecified) {
        pb::JobState::Running => "running",
        pb::JobState::Succeeded => "succeeded",
        pb::JobState::Failed => "failed",
        pb::JobState::Cancelled => "cancelled",
        pb::JobState::Unspecified => "unknown",
    }
}

/// A job's state, stages, workers and failed tasks, as a table.
pub fn print_status(s: &pb::JobStatus) {
    outln!(
        "job {}  pipeline {}  {}  {}/{} tasks  output {}",
        s.job_id,
        s.pipeline,
        state_name(s.state),
        s.tasks_done,
        s.tasks_total,
        s.output
    );
    if !s.stages.is_empty() {
        outln!(
            "  {:<24} {:>7} {:>7} {:>8} {:>12} {:>14}",
            "stage",
            "tasks",
            "done",
            "running",
            "records",
            "bytes"
        );
        for st in &s.stages {
            outln!(
                "  {:<24} {:>7} {:>7} {:>8} {:>12} {:>14}",
                st.stage,
                st.tasks,
                st.done,
                st.running,
                st.records,
                st.bytes
            );
        }
    }
    if !s.workers.is_empty() {
        outln!("  workers:");
        for w in &s.workers {
            outln!(
                "    {:<32} slots {:>3} gpus {:>2} running {:>3}{}",
                w.worker_id,
                w.slots,
                w.gpus,
                w.running,
                if w.draining { " draining" } else { "" }
            );
        }
    }
    for f in &s.failures {
        outln!("  task {} ({}):", f.task_id, f.state);
        for a in &f.attempts {
            outln!(
                "    {} on {}: {} {}",
                a.attempt_id,
                a.worker_id,
                a.outcome,
                a.error
            );
        }
    }
    if !s.error.is_empty() {
        outln!("  error: {}", s.error);
    }
}

/// A job's status as JSON: its state, stages and each stage's tasks (of a job known only by its
/// final record, from its published summary).
fn status_json(s: &pb::JobStatus) -> serde_json::Value {
    let stages: Vec<serde_json::Value> = s
        .stages
        .iter()
        .map(|st| {
            let tasks: Vec<serde_json::Value> = st
                .task_list
                .iter()
                .map(|t| {
                    let run = TaskRun {
                        task: t.task.clone(),
                        worker: t.worker.clone(),
                        attempts: t.attempts,
                        records_out: t.records_out,
                        seconds: t.seconds,
                        started_ms: 0,
                    };
                    task_json(&run, &t.state)
                })
                .collect();
            serde_json::json!({
                "stage": st.stage,
                "tasks": tasks,
                "done": st.done,
                "running": st.running,
                "records": st.records,
                "bytes": st.bytes,
            })
        })
        .collect();
    job_json(s, stages)
}

fn task_json(t: &TaskRun, state: &str) -> serde_json::Value {
    serde_json::json!({
        "task": t.task,
        "state": state,
        "worker": t.worker,
        "attempts": t.attempts,
        "records_out": t.records_out,
        "seconds": t.seconds,
    })
}

fn job_json(s: &pb::JobStatus, stages: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({
        "job": s.job_id,
        "pipeline": s.pipeline,
        "state": state_name(s.state),
        "output": s.output,
        "tasks_total": s.tasks_total,
        "tasks_done": s.tasks_done,
        "stages": stages,
        "error": s.error,
    })
}
