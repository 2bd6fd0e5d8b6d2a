//! The HTTP port of the coordinator and the workers: an axum router served by hyper's
//! HTTP/1 connection code, with a cap on open connections and a header read timeout.
//!
//! The cap is a semaphore taken before each accept: past it, new connections wait in the
//! kernel's backlog instead of costing a task and a descriptor each. The timeout closes a
//! connection that has not sent a whole request head in time (hyper's `header_read_timeout`,
//! which also covers the wait between requests of a kept-alive connection), so idle
//! connections give their slot back: below the cap (2,048 by default) a scrape is answered at
//! once whatever else is open, and past it within the timeout.

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
            max_connections: 2048,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: SocketAddr) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /x HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn idle_connections_past_the_cap_are_closed_and_requests_still_answered() {
        let router = Router::new().route("/x", axum::routing::get(|| async { "ok" }));
        let limits = Limits {
            max_connections: 4,
            header_read_timeout: Duration::from_millis(300),
        };
        let (addr, server) = serve(SocketAddr::from(([127, 0, 0, 1], 0)), router, limits)
            .await
            .unwrap();
        // Twelve connections that never send anything: three times the cap.
        let mut idle = Vec::new();
        for _ in 0..12 {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        let started = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(20), get(addr))
            .await
            .expect("answered once the idle connections were closed");
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"),
            "{answer}"
        );
        // The first idle connections were closed by the server (they read the end).
        let mut buf = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(5), idle[0].read(&mut buf))
            .await
            .expect("closed by the server")
            .unwrap_or(0);
        assert_eq!(n, 0);
        eprintln!("answered after {:?}", started.elapsed());
        server.abort();
    }
}
