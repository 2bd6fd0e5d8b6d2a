//! A small HTTP/1.1 server on loopback that answers OpenAI chat completion requests with
//! scripted faults: it stands in front of the client the way a misbehaving server or proxy
//! would. Used by the test binaries of `distillery-llm` and the CLI, and by `distillery-llm`'s
//! `bench_client` example.
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
//!
//! Besides chat and text completions it answers, like vLLM, `GET /v1/models` (the models of
//! [`FaultServer::serve_models`] with their `max_model_len`; 404 when none were given) and
//! `POST /tokenize` (`{"count": N}` by [`FaultServer::tokenize_with`]; 404 without one). These
//! side requests are counted apart (`side_requests`), never consume a fault and are not in
//! `bodies`; a proxy forwards them upstream. With both set, a completion request whose
//! prompt count plus `max_tokens` exceeds its model's `max_model_len` is refused with 400, as
//! vLLM refuses it.

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

/// Counts the prompt tokens of a `/tokenize` body (`{"model", "messages", ...}`).
pub type TokenCounter = Arc<dyn Fn(&serde_json::Value) -> u64 + Send + Sync>;

/// What the server says about models and tokens (see the module docs).
#[derive(Clone, Default)]
struct Side {
    models: Arc<Mutex<Vec<(String, u64)>>>,
    tokenizer: Arc<Mutex<Option<TokenCounter>>>,
    requests: Arc<AtomicUsize>,
}

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
    /// `GET /models` and `/tokenize` requests served.
    pub side_requests: Arc<AtomicUsize>,
    side: Side,
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
        let side = Side::default();
        let side2 = side.clone();
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
                let side = side2.clone();
                tokio::spawn(async move {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(n, Ordering::SeqCst);
                    serve(sock, script, b, a, up, f, side).await;
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
            side_requests: side.requests.clone(),
            side,
        }
    }

    pub fn requests(&self) -> usize {
        self.bodies.lock().unwrap().len()
    }

    /// `GET /v1/models` lists these models (`id`, `max_model_len`).
    pub fn serve_models(&self, models: &[(&str, u64)]) {
        *self.side.models.lock().unwrap() =
            models.iter().map(|(m, n)| (m.to_string(), *n)).collect();
    }

    /// `POST /tokenize` answers `{"count": counter(body)}`.
    pub fn tokenize_with(&self, counter: TokenCounter) {
        *self.side.tokenizer.lock().unwrap() = Some(counter);
    }
}

/// The method and path of a request head.
fn request_line(head: &str) -> (String, String) {
    let mut words = head.lines().next().unwrap_or_default().split_whitespace();
    let method = words.next().unwrap_or("POST").to_string();
    let path = words.next().unwrap_or("/v1/chat/completions").to_string();
    (method, path)
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
            let (_, path) = request_line(head);
            let path = path.strip_prefix("/v1").unwrap_or(&path);
            forward(host, "POST", &format!("{prefix}{path}"), head, body).await
        }
    }
}

/// Sends a request to `host` as it came (method, path, authorization, body) and relays
/// the whole answer.
async fn forward(host: &str, method: &str, path: &str, head: &str, body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(a) = header(head, "authorization") {
        req.push_str(&format!("authorization: {a}\r\n"));
    }
    req.push_str("\r\n");
    let Ok(mut s) = TcpStream::connect(host).await else {
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

/// The answer to `GET /models` or `/tokenize`: from the upstream of a proxy (`/models` under
/// its API prefix, `/tokenize` at its root, as vLLM serves them), else from `side`.
async fn side_answer(
    up: &Upstream,
    side: &Side,
    method: &str,
    path: &str,
    head: &str,
    body: &[u8],
    json: &serde_json::Value,
) -> Vec<u8> {
    let models = path.ends_with("/models");
    if let Upstream::Proxy(host, prefix) = up {
        let target = if models {
            format!("{prefix}/models")
        } else {
            "/tokenize".to_string()
        };
        return forward(host, method, &target, head, body).await;
    }
    let not_found = || {
        let e = r#"{"error": {"message": "Not Found", "code": 404}}"#;
        reply(404, "", e, e.len())
    };
    if models {
        let listed = side.models.lock().unwrap().clone();
        if listed.is_empty() {
            return not_found();
        }
        let data: Vec<serde_json::Value> = listed
            .iter()
            .map(|(id, n)| serde_json::json!({"id": id, "object": "model", "owned_by": "vllm", "root": id, "max_model_len": n}))
            .collect();
        let b = serde_json::json!({"object": "list", "data": data}).to_string();
        return reply(200, "", &b, b.len());
    }
    let counter = side.tokenizer.lock().unwrap().clone();
    match counter {
        Some(count) => {
            let n = count(json);
            let b = serde_json::json!({"count": n, "max_model_len": 0, "tokens": []}).to_string();
            reply(200, "", &b, b.len())
        }
        None => not_found(),
    }
}

/// vLLM's refusal of a prompt that does not fit its model's context: with a listed model
/// and a token counter, the message when the prompt's count plus `max_tokens` exceeds
/// `max_model_len`.
fn too_long(up: &Upstream, side: &Side, json: &serde_json::Value) -> Option<String> {
    if !matches!(up, Upstream::Local(_)) {
        return None;
    }
    let model = json.get("model")?.as_str()?;
    let len = side
        .models
        .lock()
        .unwrap()
        .iter()
        .find(|(m, _)| m == model)
        .map(|(_, n)| *n)?;
    let count = side.tokenizer.lock().unwrap().clone()?;
    let prompt = count(json);
    let answer = json
        .get("max_tokens")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    (prompt + answer > len).then(|| {
        format!(
            "This model's maximum context length is {len} tokens. However, you requested {} tokens ({prompt} in the messages, {answer} in the completion). Please reduce the length of the messages or completion.",
            prompt + answer
        )
    })
}

async fn serve(
    mut sock: TcpStream,
    script: Arc<Mutex<VecDeque<Fault>>>,
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    auth: Arc<Mutex<Vec<Option<String>>>>,
    up: Upstream,
    faults_served: Arc<AtomicUsize>,
    side: Side,
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
    let (method, path) = request_line(&head);
    if (method == "GET" && path.ends_with("/models")) || path.ends_with("/tokenize") {
        side.requests.fetch_add(1, Ordering::SeqCst);
        let out = side_answer(&up, &side, &method, &path, &head, &body, &json).await;
        let _ = sock.write_all(&out).await;
        let _ = sock.shutdown().await;
        return;
    }
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
        None => match too_long(&up, &side, &json) {
            Some(message) => {
                let e = serde_json::json!({"error": {"message": message, "type": "BadRequestError", "param": null, "code": 400}})
                    .to_string();
                reply(400, "", &e, e.len())
            }
            None => normal(&up, &head, &body, &json).await,
        },
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
