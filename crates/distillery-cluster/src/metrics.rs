//! Prometheus metrics and the probes, on the coordinator's and workers' HTTP port.
//!
//! Names follow one scheme: `distillery_<component>_<what>[_<unit>][_total]`, where the
//! component is `coordinator`, `worker`, `stage` (per-stage data, labelled `stage`) or
//! `teacher`; counters end in `_total`, gauges do not, histograms end in `_seconds`. The
//! metrics live in `prometheus-client` registries and are written in the Prometheus text
//! format (0.0.4) by that library. The port also answers `/healthz` (the process is up) and
//! `/readyz` (the coordinator loaded its state; the worker registered); it is served by
//! [`crate::http`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::registry::Registry;

use crate::http::{Limits, serve as serve_http};

/// The label set of per-stage metrics.
pub type Stage = [(&'static str, String); 1];

/// Helpers on [`Stage`].
pub trait StageLabel {
    fn of(stage: &str) -> Stage;
}

impl StageLabel for Stage {
    fn of(stage: &str) -> Stage {
        [("stage", stage.to_string())]
    }
}

/// A registry in the Prometheus text format.
pub fn encode(registry: &Registry) -> String {
    let mut s = String::new();
    prometheus_text::encode(&mut s, registry).expect("writing to a string does not fail");
    s
}

/// What the endpoint renders on `/metrics`.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// `/metrics`, `/healthz` and `/readyz`.
pub fn router(render: Render, ready: Arc<AtomicBool>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let render = render.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
                        render(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.load(Ordering::SeqCst);
                async move {
                    if ready {
                        (StatusCode::OK, "ready\n")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
                    }
                }
            }),
        )
}

/// Serves [`router`] (and `extra` routes beside it) on `addr` until the task is dropped.
pub async fn serve(
    addr: SocketAddr,
    render: Render,
    ready: Arc<AtomicBool>,
    extra: Option<Router>,
    limits: Limits,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let mut r = router(render, ready);
    if let Some(extra) = extra {
        r = r.merge(extra);
    }
    serve_http(addr, r, limits).await
}
