//! Client and cache overhead, each against a named baseline in the same run on the same
//! machine (`scripts/bench-llm.sh` runs it in release):
//!
//! 1. chat requests per second through [`Client::chat`] (semaphore, timeout, retry loop,
//!    response parsing, usage counters) against a zero-latency loopback server with kept-alive
//!    connections, against **raw reqwest** posting the same body to the same server with the
//!    same number in flight and only reading the bytes;
//! 2. cache lookups per second through [`ResponseCache::get_many`] (key digest, object path,
//!    JSON decoding of the entry) against **raw object_store gets** of the same objects on
//!    the same local disk.
//!
//! `cargo run --release -p distillery-llm --example bench_client -- [REQUESTS] [IN_FLIGHT] [KEYS]`

use std::sync::Arc;
use std::time::Instant;

use distillery_llm::{
    CacheEntry, CacheKey, ChatMessage, ChatRequest, Client, LlmConfig, ResponseCache, Usage,
};
use distillery_testkit::fault_server::FaultServer;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::json;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() {
    let (requests, in_flight, keys) = (arg(1, 20_000), arg(2, 64), arg(3, 20_000));
    let server = FaultServer::keep_alive("{\"named_entities\": [\"Ada\"]}").await;

    // --- 1. requests per second ---
    let mut cfg = LlmConfig::new(&server.url, "bench");
    cfg.max_concurrency = in_flight;
    let client = Client::new(cfg).unwrap();
    let req = ChatRequest {
        messages: vec![
            ChatMessage::new("system", "Find the named entities."),
            ChatMessage::new("user", "Ada Lovelace was born in London in 1815."),
        ],
        temperature: Some(0.0),
        max_tokens: Some(64),
        ..Default::default()
    };
    let body = serde_json::to_vec(&client.request_body(&req)).unwrap();
    let raw = reqwest::Client::new();
    let url = format!("{}/chat/completions", server.url);
    // Warm both connection pools.
    for _ in 0..in_flight {
        client.chat(&req).await.unwrap();
    }

    let t = Instant::now();
    futures::stream::iter(0..requests)
        .map(|_| {
            let (raw, url, body) = (raw.clone(), url.clone(), body.clone());
            async move {
                let r = raw
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                r.bytes().await.unwrap().len()
            }
        })
        .buffer_unordered(in_flight)
        .for_each(|_| async {})
        .await;
    let raw_rps = requests as f64 / t.elapsed().as_secs_f64();

    let t = Instant::now();
    futures::stream::iter(0..requests)
        .map(|_| {
            let (client, req) = (client.clone(), req.clone());
            async move { client.chat(&req).await.unwrap().content.len() }
        })
        .buffer_unordered(in_flight)
        .for_each(|_| async {})
        .await;
    let client_rps = requests as f64 / t.elapsed().as_secs_f64();

    println!(
        "chat requests/s, {requests} requests, {in_flight} in flight, zero-latency loopback server:"
    );
    println!("  raw reqwest (baseline)  {raw_rps:>10.0}");
    println!(
        "  distillery-llm Client   {client_rps:>10.0}   ratio {:.2}x of baseline",
        client_rps / raw_rps
    );

    // --- 2. cache lookups per second ---
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let cache = ResponseCache::new(store.clone(), "cache");
    let all: Vec<CacheKey> = (0..keys)
        .map(|i| {
            let mut r = req.clone();
            r.messages[1].content = format!("Passage number {i}.");
            CacheKey::new(("ner", "1"), "r1", "s1", &client.request_body(&r))
        })
        .collect();
    futures::stream::iter(all.iter().cloned())
        .map(|key| {
            let cache = &cache;
            async move {
                cache
                    .put(&CacheEntry {
                        key,
                        raw: "{\"named_entities\": [\"Ada\"]}".into(),
                        parsed: Some(json!({"named_entities": ["Ada"]})),
                        invalid_reason: None,
                        parser_version: "p1".into(),
                        usage: Usage::default(),
                        served_model: "bench".into(),
                        created_at: 0,
                        rejected: None,
                    })
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(64)
        .for_each(|_| async {})
        .await;
    let paths: Vec<object_store::path::Path> = {
        let mut v = Vec::new();
        let mut list = store.list(Some(&object_store::path::Path::from("cache")));
        while let Some(m) = list.next().await {
            v.push(m.unwrap().location);
        }
        v
    };
    assert_eq!(paths.len(), keys);

    let t = Instant::now();
    futures::stream::iter(paths)
        .map(|p| {
            let store = store.clone();
            async move { store.get(&p).await.unwrap().bytes().await.unwrap().len() }
        })
        .buffer_unordered(64)
        .for_each(|_| async {})
        .await;
    let raw_gets = keys as f64 / t.elapsed().as_secs_f64();

    let t = Instant::now();
    let mut found = 0;
    for batch in all.chunks(1024) {
        found += cache
            .get_many(batch)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.is_some())
            .count();
    }
    let lookups = keys as f64 / t.elapsed().as_secs_f64();
    assert_eq!(found, keys);
    println!("cache lookups/s, {keys} entries on local disk:");
    println!("  raw object_store get (baseline)  {raw_gets:>10.0}");
    println!(
        "  ResponseCache::get_many          {lookups:>10.0}   ratio {:.2}x of baseline",
        lookups / raw_gets
    );
}
