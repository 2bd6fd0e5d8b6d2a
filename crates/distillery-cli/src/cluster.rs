//! The cluster subcommands: `coordinator`, `worker`, `submit`, `status`, `cancel`, and the
//! embedded cluster `run` goes through.

use crate::out::outln;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use distillery_cluster::auth::Token;
use distillery_cluster::client::{connect, rpc_err, submit_err};
use distillery_cluster::coordinator::{CoordinatorConfig, CoordinatorService};
use distillery_cluster::local::{TlsFiles, outcome_of, run_embedded, serve, wait_job};
use distillery_cluster::worker::{
    Faults, WorkerConfig, WorkerMetrics, default_worker_id, run_worker,
};
use distillery_cluster::{ClusterError, pb};
use distillery_core::spec::Pipeline;
use distillery_core::summary::{RunSummary, TaskRun};
use distillery_exec::run::ProgressMode;
use tokio::sync::watch;
use tracing::info;

use crate::{EXIT_BUDGET, print_outcome};

/// Connection flags shared by the client commands.
#[derive(clap::Args, Debug, Clone)]
pub struct Conn {
    /// The coordinator's gRPC URL.
    #[arg(
        long,
        env = "DISTILLERY_COORDINATOR",
        default_value = "http://127.0.0.1:7070"
    )]
    pub coordinator: String,
    /// A file holding the shared token (else DISTILLERY_TOKEN).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// PEM of the CA to trust for an https:// coordinator.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
}

impl Conn {
    fn client(&self) -> Result<distillery_cluster::client::Client> {
        let token = Token::load(self.token_file.as_deref())?;
        Ok(connect(&self.coordinator, token, self.tls_ca.as_deref())?)
    }
}

/// Runs a pipeline through the embedded cluster and prints its outcome; exit 3 when the
/// `[llm.budget]` stopped it.
pub async fn run_job(
    file: &str,
    text: &str,
    set: &[String],
    p: &Pipeline,
    mode: ProgressMode,
) -> Result<ExitCode> {
    let parallelism = distillery_exec::run::parallelism(p);
    finish(run_embedded(file, text, set, parallelism, mode).await)
}

fn finish(r: std::result::Result<distillery_exec::RunOutcome, ClusterError>) -> Result<ExitCode> {
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

async fn shutdown_signal() {
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

#[allow(clippy::too_many_arguments)]
pub async fn coordinator(
    listen: SocketAddr,
    state: &str,
    metrics_listen: Option<SocketAddr>,
    token_file: Option<PathBuf>,
    cfg: CoordinatorConfig,
    tls: Option<TlsFiles>,
) -> Result<ExitCode> {
    let token = Token::load(token_file.as_deref())?;
    let svc = CoordinatorService::start(state, cfg).await?;
    let _ticker = svc.spawn_ticker();
    if let Some(addr) = metrics_listen {
        let s = svc.clone();
        distillery_cluster::metrics::serve(addr, Arc::new(move || s.metrics()), svc.ready_flag())
            .await
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    info!(listen = %listener.local_addr()?, generation = svc.generation(), "coordinator listening");
    serve(svc, listener, token, tls, shutdown_signal()).await?;
    info!("coordinator stopped");
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::too_many_arguments)]
pub async fn worker(
    conn: &Conn,
    worker_id: Option<String>,
    slots: u32,
    gpus: u32,
    labels: &[String],
    parallelism: usize,
    grace: Duration,
    metrics_listen: Option<SocketAddr>,
) -> Result<ExitCode> {
    let mut label_map = HashMap::new();
    for l in labels {
        let (k, v) = l
            .split_once('=')
            .with_context(|| format!("--label {l}: expected key=value"))?;
        label_map.insert(k.to_string(), v.to_string());
    }
    let cfg = WorkerConfig {
        coordinator: conn.coordinator.clone(),
        worker_id: worker_id.unwrap_or_else(default_worker_id),
        slots: slots.max(1),
        gpus,
        memory_bytes: 0,
        labels: label_map,
        parallelism: parallelism.max(1),
        grace,
        mode: ProgressMode::Log,
        faults: Faults::from_env()?,
    };
    let metrics = Arc::new(WorkerMetrics::default());
    if let Some(addr) = metrics_listen {
        let m = metrics.clone();
        let ready = metrics.registered.clone();
        distillery_cluster::metrics::serve(addr, Arc::new(move || m.render()), ready)
            .await
            .with_context(|| format!("cannot serve metrics on {addr}"))?;
    }
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = tx.send(true);
    });
    info!(worker = %cfg.worker_id, coordinator = %cfg.coordinator, slots = cfg.slots, "worker starting");
    run_worker(cfg, conn.client()?, rx, metrics).await?;
    Ok(ExitCode::SUCCESS)
}

pub async fn submit(conn: &Conn, file: &PathBuf, set: &[String], wait: bool) -> Result<ExitCode> {
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

fn state_name(s: i32) -> &'static str {
    match pb::JobState::try_from(s).unwrap_or(pb::JobState::Unspecified) {
        pb::JobState::Running => "running",
        pb::JobState::Succeeded => "succeeded",
        pb::JobState::Failed => "failed",
        pb::JobState::Cancelled => "cancelled",
        pb::JobState::Unspecified => "unknown",
    }
}

fn print_status(s: &pb::JobStatus) {
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

pub async fn status(conn: &Conn, job: Option<String>, json: bool) -> Result<ExitCode> {
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

pub async fn cancel(conn: &Conn, job: String) -> Result<ExitCode> {
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
