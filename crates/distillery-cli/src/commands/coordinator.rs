//! `distillery coordinator`: serves the coordinator, which plans submitted jobs into tasks for
//! workers, with its durable state under `--state`, until SIGTERM.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use distillery_cluster::auth::Token;
use distillery_cluster::coordinator::{CoordinatorConfig, CoordinatorService};
use distillery_cluster::http::Limits;
use distillery_cluster::local::{TlsFiles, serve};
use tracing::info;

use super::shutdown_signal;
use crate::args::CoordinatorArgs;

pub async fn run(a: CoordinatorArgs) -> Result<ExitCode> {
    let cfg = CoordinatorConfig {
        lease: Duration::from_secs_f64(a.lease_secs.max(0.1)),
        heartbeat: Duration::from_millis(a.heartbeat_ms.max(10)),
        max_attempts: a.max_attempts.max(1),
        backoff: Duration::from_millis(a.backoff_ms),
        straggler_factor: a.straggler_factor,
        straggler_min: Duration::from_secs_f64(a.straggler_min_secs.max(0.0)),
    };
    let tls = match (a.tls_cert, a.tls_key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        _ => None,
    };
    let (listen, metrics_listen) = (a.listen, a.metrics_listen);
    let token = Token::load(a.token_file.as_deref())?;
    let svc = CoordinatorService::start(&a.state, cfg).await?;
    let _ticker = svc.spawn_ticker();
    if let Some(addr) = metrics_listen {
        let s = svc.clone();
        distillery_cluster::metrics::serve(
            addr,
            Arc::new(move || s.metrics()),
            svc.ready_flag(),
            Some(svc.pages()),
            Limits {
                max_connections: a.metrics_max_connections,
                ..Limits::default()
            },
        )
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
