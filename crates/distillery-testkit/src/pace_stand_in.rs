//! A stand-in OpenAI-compatible server whose capacity is known and changes on a schedule,
//! for the adaptive pace's bench and test: like vLLM's continuous batching, up to
//! `capacity(t)` requests are served at once, each step slower the fuller the batch (a
//! request takes `service · (0.6 + 0.4 · batch / capacity)`), more wait in a queue, and past
//! `queue` waiting a request is refused with 503. Each answer's content is the request's own
//! last message, and the server counts how often it served each one. Used by `distillery-llm`'s
//! `pace_bench` example and its `llm` test binary (`pace`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// How the server behaves.
#[derive(Debug, Clone)]
pub struct Model {
    /// (from this second on, this many served at once), in time order.
    pub capacity: Vec<(f64, usize)>,
    /// Seconds a request takes when it is alone.
    pub service: f64,
    /// Requests that may wait for a place; more are refused with 503.
    pub queue: usize,
}

impl Model {
    fn capacity_at(&self, secs: f64) -> usize {
        self.capacity
            .iter()
            .rev()
            .find(|(from, _)| secs >= *from)
            .map_or(1, |c| c.1)
            .max(1)
    }
}

#[derive(Debug, Default)]
struct Load {
    active: usize,
    waiting: usize,
    /// The most requests the server held at once (served and waiting).
    peak: usize,
}

struct Server {
    model: Model,
    started: Instant,
    load: Mutex<Load>,
    freed: Notify,
    served: Mutex<HashMap<String, u32>>,
    refused: Mutex<u64>,
}

/// A running stand-in.
pub struct StandIn {
    pub url: String,
    server: Arc<Server>,
    task: tokio::task::JoinHandle<()>,
}

impl StandIn {
    pub async fn start(model: Model) -> StandIn {
        let server = Arc::new(Server {
            model,
            started: Instant::now(),
            load: Mutex::default(),
            freed: Notify::new(),
            served: Mutex::default(),
            refused: Mutex::default(),
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(server.clone());
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        StandIn { url, server, task }
    }

    /// How often each request content was served.
    pub fn served(&self) -> HashMap<String, u32> {
        self.server.served.lock().unwrap().clone()
    }

    /// The most requests the server held at once (served and waiting).
    pub fn peak(&self) -> usize {
        self.server.load.lock().unwrap().peak
    }

    /// Requests refused with 503.
    pub fn refused(&self) -> u64 {
        *self.server.refused.lock().unwrap()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn chat(State(s): State<Arc<Server>>, Json(body): Json<Value>) -> Response {
    let content = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    // A place in the batch, or in the queue, or a 503.
    let batch = loop {
        let notified = s.freed.notified();
        {
            let mut l = s.load.lock().unwrap();
            let cap = s.model.capacity_at(s.started.elapsed().as_secs_f64());
            if l.active < cap {
                l.active += 1;
                l.peak = l.peak.max(l.active + l.waiting);
                break (l.active, cap);
            }
            if l.waiting >= s.model.queue {
                drop(l);
                *s.refused.lock().unwrap() += 1;
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Json(json!({"error": {"message": "queue full", "type": "overloaded"}})),
                )
                    .into_response();
            }
            l.waiting += 1;
            l.peak = l.peak.max(l.active + l.waiting);
        }
        // Capacity can also grow with time: look again now and then.
        let _ = tokio::time::timeout(Duration::from_millis(20), notified).await;
        s.load.lock().unwrap().waiting -= 1;
    };
    let (active, cap) = batch;
    let secs = s.model.service * (0.6 + 0.4 * active.min(cap) as f64 / cap as f64);
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    s.load.lock().unwrap().active -= 1;
    s.freed.notify_waiters();
    *s.served.lock().unwrap().entry(content.clone()).or_default() += 1;
    Json(json!({
        "id": "stand-in",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    }))
    .into_response()
}
