//! A small HTTP/1.1 server on loopback that answers OpenAI chat completion requests with
//! scripted faults: it stands in front of the client the way a misbehaving server or proxy
//! would. Shared by the test binaries of `distillery-llm` and the CLI (`#[path]` module).
//!
//! Answers come from one of:
//! - a fixed content ([`FaultServer::start`]);
//! - a responder computing the content from the request body ([`FaultServer::start_with`]),
//!   a deterministic stand-in teacher;
//! - a real upstream server ([`FaultServer::proxy`]): the request is forwarded as it came and
//!   the upstream's answer relayed, so faults are injected in front of a real vLLM.
//!
//! The script of faults is consumed one per request, in arrival order; requests after the
//! script are answered normally.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with one request.
#[derive(Debug, Clone)]
pub enum Fault {
    /// An error status with an OpenAI error body.
    Status(u16),
    /// 429 with `Retry-After: SECS`.
    TooMany(&'static str),
    /// Waits this long before answering normally.
    Stall(Duration),
    /// A 200 whose body stops halfway (Content-Length promises more).
    Truncated,
    /// A 200 with an HTML body.
    NotJson,
    /// Closes the connection without answering.
    Drop,
}

/// Computes the answer's content from the request body.
pub type Responder = Arc<dyn Fn(&serde_json::Value) -> String + Send + Sync>;

#[derive(Clone)]
enum Upstream {
    /// Fixed answers on kept-alive connections, no faults: a zero-latency server for
    /// benchmarks.
    KeepAlive(String),
    Local(Responder),
    /// `host:port` and the path prefix of the upstream API (`/v1`).
    Proxy(String, String),
}

/// The server: faults from the script first, then normal answers.
pub struct FaultServer {
    pub url: String,
    pub bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    pub auth: Arc<Mutex<Vec<Option<String>>>>,
    /// The most requests the server ever held at once.
    pub max_in_flight: Arc<AtomicUsize>,
    /// Requests answered with a fault.
    pub faults_served: Arc<AtomicUsize>,
}

impl FaultServer {
    /// Normal answers carry `content`.
    pub async fn start(script: Vec<Fault>, content: &str) -> FaultServer {
        let content = content.to_string();
        FaultServer::start_with(script, Arc::new(move |_| content.clone())).await
    }

    /// Normal answers carry what `responder` computes from the request.
    pub async fn start_with(script: Vec<Fault>, responder: Responder) -> FaultServer {
        FaultServer::launch(script, Upstream::Local(responder)).await
    }

    /// A zero-latency server answering `content` to every request, keeping connections
    /// alive (for client benchmarks; no faults).
    pub async fn keep_alive(content: &str) -> FaultServer {
        FaultServer::launch(Vec::new(), Upstream::KeepAlive(content.to_string())).await
    }

    /// A fault-injecting proxy in front of a real OpenAI-compatible server at `upstream`
    /// (`http://host:port/v1`).
    pub async fn proxy(script: Vec<Fault>, upstream: &str) -> FaultServer {
        let rest = upstream
            .strip_prefix("http://")
            .expect("the proxy forwards to http:// servers");
        let (host, path) = match rest.split_once('/') {
            Some((h, p)) => (h.to_string(), format!("/{}", p.trim_end_matches('/'))),
            None => (rest.to_string(), String::new()),
        };
        FaultServer::launch(script, Upstream::Proxy(host, path)).await
    }

    async fn launch(script: Vec<Fault>, upstream: Upstream) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let auth = Arc::new(Mutex::new(Vec::new()));
        let max_in_flight = Arc::new(AtomicUsize::new(0));
        let faults_served = Arc::new(AtomicUsize::new(0));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let (b, a, max, f) = (
            bodies.clone(),
            auth.clone(),
            max_in_flight.clone(),
            faults_served.clone(),
        );
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let (script, b, a, up) = (script.clone(), b.clone(), a.clone(), upstream.clone());
                let (now, max, f) = (in_flight.clone(), max.clone(), f.clone());
                tokio::spawn(async move {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(n, Ordering::SeqCst);
                    serve(sock, script, b, a, up, f).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        FaultServer {
            url,
            bodies,
            auth,
            max_in_flight,
            faults_served,
        }
    }

    pub fn requests(&self) -> usize {
        self.bodies.lock().unwrap().len()
    }
}

/// Reads one HTTP request: (head, body bytes). `None` when the peer went away.
async fn read_request(sock: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some((head, buf[head_end..head_end + len].to_vec()))
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

fn reply(status: u16, extra: &str, body: &str, promised: usize) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {promised}\r\nconnection: close\r\n{extra}\r\n{body}"
    )
    .into_bytes()
}

/// A chat completion body carrying `content` (usage: 7 prompt, 3 completion tokens).
fn chat_body(content: &str) -> String {
    serde_json::json!({
        "id": "x", "object": "chat.completion", "model": "fault-server",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    })
    .to_string()
}

/// A text completion body (`/v1/completions`) carrying `text`.
fn text_body(text: &str) -> String {
    serde_json::json!({
        "id": "x", "object": "text_completion", "model": "fault-server",
        "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    })
    .to_string()
}

fn is_text_completion(head: &str) -> bool {
    head.lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .is_some_and(|p| p.ends_with("/completions") && !p.ends_with("/chat/completions"))
}

/// The normal answer: a whole HTTP response.
async fn normal(up: &Upstream, head: &str, body: &[u8], json: &serde_json::Value) -> Vec<u8> {
    match up {
        Upstream::Local(responder) => {
            let content = responder(json);
            let ok_body = if is_text_completion(head) {
                text_body(&content)
            } else {
                chat_body(&content)
            };
            reply(200, "", &ok_body, ok_body.len())
        }
        Upstream::KeepAlive(content) => {
            let ok_body = chat_body(content);
            reply(200, "", &ok_body, ok_body.len())
        }
        Upstream::Proxy(host, prefix) => {
            let path = head
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .unwrap_or("/v1/chat/completions");
            let path = path.strip_prefix("/v1").unwrap_or(path);
            let mut req = format!(
                "POST {prefix}{path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            if let Some(a) = header(head, "authorization") {
                req.push_str(&format!("authorization: {a}\r\n"));
            }
            req.push_str("\r\n");
            let Ok(mut s) = TcpStream::connect(host.as_str()).await else {
                let e = r#"{"error": {"message": "upstream down"}}"#;
                return reply(502, "", e, e.len());
            };
            let mut out = Vec::new();
            if s.write_all(req.as_bytes()).await.is_err()
                || s.write_all(body).await.is_err()
                || s.read_to_end(&mut out).await.is_err()
            {
                let e = r#"{"error": {"message": "upstream broke"}}"#;
                return reply(502, "", e, e.len());
            }
            out
        }
    }
}

async fn serve(
    mut sock: TcpStream,
    script: Arc<Mutex<VecDeque<Fault>>>,
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    auth: Arc<Mutex<Vec<Option<String>>>>,
    up: Upstream,
    faults_served: Arc<AtomicUsize>,
) {
    if let Upstream::KeepAlive(content) = &up {
        let ok_body = chat_body(content);
        let out = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{ok_body}",
            ok_body.len()
        );
        while let Some((head, _)) = read_request(&mut sock).await {
            if sock.write_all(out.as_bytes()).await.is_err() {
                return;
            }
            if header(&head, "connection").is_some_and(|c| c.eq_ignore_ascii_case("close")) {
                return;
            }
        }
        return;
    }
    let Some((head, body)) = read_request(&mut sock).await else {
        return;
    };
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    bodies.lock().unwrap().push(json.clone());
    auth.lock().unwrap().push(header(&head, "authorization"));
    let fault = script.lock().unwrap().pop_front();
    if fault.is_some() {
        faults_served.fetch_add(1, Ordering::SeqCst);
    }
    let error = |status: u16| {
        serde_json::json!({"error": {"message": format!("injected {status}"), "type": "x", "param": null, "code": status}})
            .to_string()
    };
    let out = match fault {
        None => normal(&up, &head, &body, &json).await,
        Some(Fault::Status(s)) => {
            let e = error(s);
            reply(s, "", &e, e.len())
        }
        Some(Fault::TooMany(secs)) => {
            let e = error(429);
            reply(429, &format!("retry-after: {secs}\r\n"), &e, e.len())
        }
        Some(Fault::Stall(d)) => {
            tokio::time::sleep(d).await;
            normal(&up, &head, &body, &json).await
        }
        Some(Fault::Truncated) => {
            // The head as it is (its Content-Length promises the whole body), half the body.
            let full = normal(&up, &head, &body, &json).await;
            let split = full
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map_or(full.len(), |p| p + 4);
            let keep = split + (full.len() - split) / 2;
            full[..keep].to_vec()
        }
        Some(Fault::NotJson) => reply(200, "", "<html>bad gateway</html>", 24),
        Some(Fault::Drop) => return,
    };
    let _ = sock.write_all(&out).await;
    let _ = sock.shutdown().await;
}
