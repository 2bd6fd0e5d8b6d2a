//! A small HTTP/1.1 server on loopback that answers chat completion requests with scripted
//! faults: it stands in front of the client the way a misbehaving server or proxy would.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

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

/// The server: faults from the script first, then normal answers with `content`.
pub struct FaultServer {
    pub url: String,
    pub bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    pub auth: Arc<Mutex<Vec<Option<String>>>>,
    /// The most requests the server ever held at once.
    pub max_in_flight: Arc<AtomicUsize>,
}

impl FaultServer {
    pub async fn start(script: Vec<Fault>, content: &str) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let auth = Arc::new(Mutex::new(Vec::new()));
        let max_in_flight = Arc::new(AtomicUsize::new(0));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let (b, a, content) = (bodies.clone(), auth.clone(), content.to_string());
        let max = max_in_flight.clone();
        tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let (script, b, a, content) =
                    (script.clone(), b.clone(), a.clone(), content.clone());
                let (now, max) = (in_flight.clone(), max.clone());
                tokio::spawn(async move {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(n, Ordering::SeqCst);
                    serve(sock, script, b, a, &content).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        FaultServer {
            url,
            bodies,
            auth,
            max_in_flight,
        }
    }

    pub fn requests(&self) -> usize {
        self.bodies.lock().unwrap().len()
    }
}

async fn serve(
    mut sock: tokio::net::TcpStream,
    script: Arc<Mutex<VecDeque<Fault>>>,
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    auth: Arc<Mutex<Vec<Option<String>>>>,
    content: &str,
) {
    // Read the head, then Content-Length bytes of body.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let Ok(n) = sock.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let Ok(n) = sock.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: serde_json::Value =
        serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or_default();
    bodies.lock().unwrap().push(body);
    auth.lock().unwrap().push(header("authorization"));
    let fault = script.lock().unwrap().pop_front();
    let ok_body = serde_json::json!({
        "id": "x", "object": "chat.completion", "model": "fault-server",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    })
    .to_string();
    let reply = |status: u16, extra: &str, body: &str, promised: usize| {
        format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {promised}\r\nconnection: close\r\n{extra}\r\n{body}"
        )
    };
    let error = |status: u16| {
        serde_json::json!({"error": {"message": format!("injected {status}"), "type": "x", "param": null, "code": status}})
            .to_string()
    };
    let out = match fault {
        None => reply(200, "", &ok_body, ok_body.len()),
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
            reply(200, "", &ok_body, ok_body.len())
        }
        Some(Fault::Truncated) => reply(200, "", &ok_body[..ok_body.len() / 2], ok_body.len()),
        Some(Fault::NotJson) => reply(200, "", "<html>bad gateway</html>", 24),
        Some(Fault::Drop) => return,
    };
    let _ = sock.write_all(out.as_bytes()).await;
    let _ = sock.shutdown().await;
}
