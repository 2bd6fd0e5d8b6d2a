//! `distillery status [JOB]`: a job's progress per stage, its workers and failures, as a table
//! or as JSON (all jobs without JOB).

use std::process::ExitCode;

use anyhow::Result;
use distillery_cluster::client::rpc_err;
use distillery_cluster::pb;
use distillery_core::summary::{RunSummary, TaskRun};

use crate::args::{ReportFormat, StatusArgs};
use crate::out::outln;

pub async fn run(a: StatusArgs) -> Result<ExitCode> {
    let (conn, job, json) = (&a.conn, a.job, a.format == ReportFormat::Json);
    let mut client = conn.client()?;
    let jobs = match job {
        Some(id) => vec![
            client
                .get_job(pb::GetJobRequest { job_id: id })
                .await
                .map_err(|s| rpc_err(&conn.coordinator, s))?
                .into_inner(),
        ],
        None => {
            client
                .list_jobs(pb::ListJobsRequest {})
                .await
                .map_err(|s| rpc_err(&conn.coordinator, s))?
                .into_inner()
                .jobs
        }
    };
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

/// A job's status as JSON: its state, stages and each stage's tasks (of a finished job, from
/// its published summary).
fn status_json(s: &pb::JobStatus) -> serde_json::Value {
    let published: Option<RunSummary> = (s.stages.is_empty() && !s.summary_json.is_empty())
        .then(|| serde_json::from_str(&s.summary_json).ok())
        .flatten();
    if let Some(summary) = published {
        let stages: Vec<serde_json::Value> = summary
            .stages
            .iter()
            .map(|st| {
                let tasks: Vec<serde_json::Value> =
                    st.tasks.iter().map(|t| task_json(t, "committed")).collect();
                serde_json::json!({
                    "stage": st.stage,
                    "tasks": tasks,
                    "done": st.tasks.len(),
                    "running": 0,
                    "records": st.records_out,
                    "bytes": st.bytes_out,
                })
            })
            .collect();
        return job_json(s, stages);
    }
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
