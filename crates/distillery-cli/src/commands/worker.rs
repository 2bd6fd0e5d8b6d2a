//! `distillery worker`: runs tasks for a coordinator until SIGTERM, then drains within
//! `--grace-secs`.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use distillery_cluster::worker::{
    Faults, WorkerConfig, WorkerMetrics, default_worker_id, run_worker,
};
use distillery_exec::run::ProgressMode;
use tokio::sync::watch;
use tracing::info;

use super::shutdown_signal;
use crate::args::WorkerArgs;

pub async fn run(a: &WorkerArgs) -> Result<ExitCode> {
    let cores = distillery_exec::run::cores();
    let parallelism = a
        .parallelism
        .unwrap_or((cores / a.slots.max(1) as usize).max(1));
    let mut label_map = HashMap::new();
    for l in &a.labels {
        let (k, v) = l
            .split_once('=')
            .with_context(|| format!("--label {l}: expected key=value"))?;
        label_map.insert(k.to_string(), v.to_string());
    }
    let cfg = WorkerConfig {
        coordinator: a.conn.coordinator.clone(),
        worker_id: a.worker_id.clone().unwrap_or_else(default_worker_id),
        slots: a.slots.max(1),
        gpus: a.gpus,
        memory_bytes: 0,
        labels: label_map,
        parallelism: parallelism.max(1),
        grace: Duration::from_secs(a.grace_secs),
        mode: ProgressMode::Log,
        faults: Faults::from_env()?,
    };
    let metrics = Arc::new(WorkerMetrics::default());
    if let Some(addr) = a.metrics_listen {
        let m = metrics.clone();
        let ready = metrics.registered.clone();
        distillery_cluster::metrics::serve(
            addr,
            Arc::new(move || m.render()),
            ready,
            None,
            distillery_cluster::http::Limits {
                max_connections: a.metrics_max_connections,
                ..Default::default()
            },
        )
        .await
        .with_context(|| format!("cannot serve metrics on {addr}"))?;
    }
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = tx.send(true);
    });
    info!(worker = %cfg.worker_id, coordinator = %cfg.coordinator, slots = cfg.slots, "worker starting");
    run_worker(cfg, a.conn.client()?, rx, metrics).await?;
    Ok(ExitCode::SUCCESS)
}
