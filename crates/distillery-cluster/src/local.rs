//! Serving the coordinator, and the embedded cluster behind `distillery run`: a coordinator on
//! a loopback port and an in-process worker that reach each other through the same gRPC code
//! as a real cluster, so there is one path to test.

use std::net::SocketAddr;
use std::time::Duration;

use distillery_core::summary::RunSummary;
use distillery_exec::publish::read_manifest;
use distillery_exec::run::{ProgressMode, RunOutcome};
use distillery_exec::store::open_location;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tracing::{info, warn};

use crate::auth::Token;
use crate::client::{Client, connect, rpc_err, submit_err};
use crate::coordinator::{CoordinatorConfig, CoordinatorService};
use crate::pb::coordinator_server::CoordinatorServer;
use crate::worker::{Faults, WorkerConfig, WorkerMetrics, run_worker};
use crate::{ClusterError, pb};

/// TLS for the coordinator's gRPC port: PEM certificate chain and key.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// Serves the coordinator on a bound listener until `shutdown` resolves.
pub async fn serve(
    svc: CoordinatorService,
    listener: TcpListener,
    token: Token,
    tls: Option<TlsFiles>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ClusterError> {
    let mut builder = Server::builder();
    if let Some(t) = tls {
        let read = |p: &std::path::Path| {
            std::fs::read(p)
                .map_err(|e| ClusterError::Config(format!("cannot read {}: {e}", p.display())))
        };
        let identity = Identity::from_pem(read(&t.cert)?, read(&t.key)?);
        builder = builder.tls_config(ServerTlsConfig::new().identity(identity))?;
    }
    let check = move |req: tonic::Request<()>| token.check(req);
    let service = tonic::service::interceptor::InterceptedService::new(
        CoordinatorServer::new(svc)
            .max_decoding_message_size(crate::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(crate::MAX_MESSAGE_BYTES),
        check,
    );
    builder
        .add_service(service)
        .serve_with_incoming_shutdown(
            tokio_stream::wrappers::TcpListenerStream::new(listener),
            shutdown,
        )
        .await?;
    Ok(())
}

/// Waits for a job to end, polling its status. `Ok` with the final status whatever the
/// outcome; the coordinator being unreachable for a while (a restart) is waited out.
pub async fn wait_job(
    client: &mut Client,
    addr: &str,
    job: &str,
    every: Duration,
) -> Result<pb::JobStatus, ClusterError> {
    let mut unreachable_since: Option<std::time::Instant> = None;
    loop {
        match client
            .get_job(pb::GetJobRequest {
                job_id: job.to_string(),
            })
            .await
        {
            Ok(s) => {
                unreachable_since = None;
                let s = s.into_inner();
                if s.state != pb::JobState::Running as i32 {
                    return Ok(s);
                }
            }
            Err(s) if s.code() == tonic::Code::Unavailable => {
                let since = *unreachable_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() > Duration::from_secs(300) {
                    return Err(rpc_err(addr, s));
                }
            }
            Err(s) => return Err(rpc_err(addr, s)),
        }
        tokio::time::sleep(every).await;
    }
}

/// A finished job as a run outcome, or its failure as an error.
pub async fn outcome_of(status: pb::JobStatus) -> Result<RunOutcome, ClusterError> {
    if status.state != pb::JobState::Succeeded as i32 {
        return Err(ClusterError::JobFailed {
            job: status.job_id.clone(),
            kind: pb::ErrorKind::try_from(status.error_kind).unwrap_or(pb::ErrorKind::Fatal),
            message: status.error.clone(),
        });
    }
    let summary: RunSummary = serde_json::from_str(&status.summary_json)
        .map_err(|e| ClusterError::State(format!("bad run summary: {e}")))?;
    let out = open_location(&status.output, false)?;
    let manifest = read_manifest(&out).await?;
    Ok(RunOutcome {
        summary,
        manifest,
        output: status.output,
    })
}

/// Runs a pipeline through an embedded cluster: a coordinator on a loopback port with its
/// state in a temporary directory, and one in-process worker with `parallelism` slots.
pub async fn run_embedded(
    file: &str,
    text: &str,
    overrides: &[String],
    parallelism: usize,
    mode: ProgressMode,
) -> Result<RunOutcome, ClusterError> {
    let state_dir = std::env::temp_dir().join(format!(
        "distillery-run-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let result = run_embedded_in(&state_dir, file, text, overrides, parallelism, mode).await;
    let _ = std::fs::remove_dir_all(&state_dir);
    result
}

async fn run_embedded_in(
    state_dir: &std::path::Path,
    file: &str,
    text: &str,
    overrides: &[String],
    parallelism: usize,
    mode: ProgressMode,
) -> Result<RunOutcome, ClusterError> {
    let cfg = CoordinatorConfig {
        heartbeat: Duration::from_millis(200),
        lease: Duration::from_secs(60),
        // One worker: a copy of a slow task would only compete with it.
        straggler_factor: 0.0,
        ..CoordinatorConfig::default()
    };
    let svc = CoordinatorService::start(&state_dir.display().to_string(), cfg).await?;
    let ticker = svc.spawn_ticker();
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .map_err(|e| ClusterError::Config(format!("cannot bind a loopback port: {e}")))?;
    let addr = format!(
        "http://{}",
        listener
            .local_addr()
            .map_err(|e| ClusterError::Config(e.to_string()))?
    );
    let token = Token::random();
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let svc_done = svc.clone();
    let server = tokio::spawn(serve(svc, listener, token.clone(), None, async move {
        let _ = stop_rx.changed().await;
    }));
    info!(coordinator = %addr, "embedded coordinator started");
    let mut client = connect(&addr, token.clone(), None)?;
    let (worker_stop_tx, worker_stop_rx) = watch::channel(false);
    let wcfg = WorkerConfig {
        coordinator: addr.clone(),
        worker_id: "local".to_string(),
        slots: parallelism.max(1) as u32,
        gpus: 0,
        memory_bytes: 0,
        labels: Default::default(),
        parallelism: parallelism.max(1),
        grace: Duration::from_secs(5),
        mode,
        faults: Faults::default(),
    };
    let worker_client = connect(&addr, token, None)?;
    // Submitted before the worker starts, so that its first pull finds the first tasks
    // instead of waiting a heartbeat (200 ms) for them.
    let job = client
        .submit_job(pb::SubmitJobRequest {
            pipeline_file: file.to_string(),
            pipeline_text: text.to_string(),
            overrides: overrides.to_vec(),
        })
        .await;
    let worker = tokio::spawn(run_worker(
        wcfg,
        worker_client,
        worker_stop_rx,
        std::sync::Arc::new(WorkerMetrics::default()),
    ));
    let result = match job {
        Ok(j) => {
            let job = j.into_inner().job_id;
            match wait_job(&mut client, &addr, &job, Duration::from_millis(50)).await {
                Ok(status) => outcome_of(status).await,
                Err(e) => Err(e),
            }
        }
        Err(s) => Err(submit_err(&addr, s)),
    };
    let _ = worker_stop_tx.send(true);
    let _ = worker.await;
    let _ = stop_tx.send(true);
    let _ = server.await;
    ticker.abort();
    // A failed job's staging is removed in the background: done before the process exits
    // (bounded: a state store that keeps refusing the final record must not hang the run).
    if tokio::time::timeout(Duration::from_secs(60), svc_done.after_jobs_done())
        .await
        .is_err()
    {
        warn!("the failed job's staging is still being removed; leaving it");
    }
    result
}
