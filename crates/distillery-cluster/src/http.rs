//! The HTTP port of the coordinator and the workers: an axum router served by hyper's
//! HTTP/1 connection code, with a cap on open connections and a header read timeout.
//!
//! The cap is a semaphore taken before each accept: past it, new connections wait in the
//! kernel's backlog instead of costing a task each. The timeout closes a connection that has
//! not sent a whole request head in time (hyper's `header_read_timeout`, which also covers the
//! wait between requests of a kept-alive connection), so idle connections give their slot
//! back and a Prometheus scrape always gets through.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, info};

/// How many connections the port keeps open and how long one may stay idle.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once; more wait to be accepted.
    pub max_connections: usize,
    /// A connection that sends no complete request head within this is closed.
    pub header_read_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            header_read_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `router` on `addr` until the returned task is aborted.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    limits: Limits,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    info!(addr = %local, max_connections = limits.max_connections, "http endpoint listening");
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let handle = tokio::spawn(async move {
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                return;
            };
            let sock = match listener.accept().await {
                Ok((sock, _)) => sock,
                Err(e) => {
                    // Out of descriptors and the like: wait a little rather than spin.
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let svc = TowerToHyperService::new(router.clone());
            tokio::spawn(async move {
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_read_timeout)
                    .serve_connection(TokioIo::new(sock), svc);
                if let Err(e) = conn.await {
                    debug!(error = %e, "http connection ended");
                }
                drop(permit);
            });
        }
    });
    Ok((local, handle))
}
