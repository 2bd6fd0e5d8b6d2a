//! Prometheus text exposition and the small HTTP endpoint that serves it.
//!
//! Names follow one scheme: `distillery_<component>_<what>[_<unit>][_total]`, where the
//! component is `coordinator`, `worker` or `stage` (per-stage data, labelled `stage`);
//! counters end in `_total`, gauges do not. The endpoint also answers `/healthz` (the process
//! is up) and `/readyz` (the coordinator loaded its state; the worker registered).
//!
//! The text format is small and stable, so it is written here rather than through a metrics
//! registry crate; the HTTP side is a minimal HTTP/1.1 responder on tokio for three paths.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tracing::{debug, info};

/// A Prometheus text document being written.
#[derive(Default)]
pub struct Text(String);

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Text {
    pub fn gauge_header(&mut self, name: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} gauge");
    }

    pub fn counter_header(&mut self, name: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} counter");
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape(val));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {v}");
    }

    pub fn gauge(&mut self, name: &str, help: &str, v: f64) {
        self.gauge_header(name, help);
        self.sample(name, &[], v);
    }

    pub fn counter(&mut self, name: &str, help: &str, v: u64) {
        self.counter_header(name, help);
        self.sample(name, &[], v as f64);
    }

    pub fn finish(self) -> String {
        self.0
    }
}

/// What the endpoint renders on `/metrics`.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves `/metrics`, `/healthz` and `/readyz` on `addr` until the task is dropped.
pub async fn serve(
    addr: SocketAddr,
    render: Render,
    ready: Arc<AtomicBool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    info!(addr = %local, "metrics endpoint listening");
    let handle = tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                continue;
            };
            let render = render.clone();
            let ready = ready.clone();
            tokio::spawn(async move {
                // Read the whole request head: closing a socket with unread bytes would
                // reset the connection under the response.
                let mut buf = vec![0u8; 8192];
                let mut n = 0;
                while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf[n..]).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => n += k,
                    }
                }
                let head = String::from_utf8_lossy(&buf[..n]);
                let path = head.split_whitespace().nth(1).unwrap_or("/");
                let (status, ctype, body) = match path {
                    "/metrics" => ("200 OK", "text/plain; version=0.0.4", render()),
                    "/healthz" => ("200 OK", "text/plain", "ok\n".to_string()),
                    "/readyz" if ready.load(Ordering::SeqCst) => {
                        ("200 OK", "text/plain", "ready\n".to_string())
                    }
                    "/readyz" => (
                        "503 Service Unavailable",
                        "text/plain",
                        "not ready\n".to_string(),
                    ),
                    _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                if let Err(e) = sock.write_all(resp.as_bytes()).await {
                    debug!(error = %e, "metrics response not sent");
                }
                let _ = sock.shutdown().await;
            });
        }
    });
    Ok((local, handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format_escapes_labels() {
        let mut t = Text::default();
        t.counter_header("distillery_x_total", "x");
        t.sample("distillery_x_total", &[("stage", "a\"b")], 3.0);
        let s = t.finish();
        assert!(s.contains("# TYPE distillery_x_total counter"));
        assert!(s.contains("distillery_x_total{stage=\"a\\\"b\"} 3"));
    }
}
