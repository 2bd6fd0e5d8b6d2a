//! Client and cache overhead, each against a named baseline in the same run on the same
//! machine (`scripts/bench-llm.sh` runs it in release), every figure the median of ROUNDS
//! rounds (baselines and measured code alternate within each round):
//!
//! 1. chat requests per second through [`Client::chat`] (a fixed pace, timeout, retry loop, body
//!    serialization, response parsing, usage counters, telemetry) against a zero-latency
//!    loopback server with kept-alive connections, against **raw reqwest** posting the same
//!    body to the same server with the same number in flight and only reading the bytes;
//! 2. cache lookups per second of KEYS distinct keys, each looked up once per round, found
//!    and returned as an entry `cached_chat` uses:
//!    - **raw object_store get** (baseline): one `get` + read of each entry's loose object
//!      on local disk, 64 in flight;
//!    - **loose layout**: [`ResponseCache::get_many`] (key digest, object path, get, JSON
//!      decoding of the entry) over the one-object-per-entry layout, before packing;
//!    - **packed, warm**: after [`ResponseCache::pack`], a new cache handle per round whose
//!      packs were read by a first lookup (timed apart: "pack load"), then
//!      [`ResponseCache::get`] of every key in turn (key digest, in-memory index, an owned
//!      copy of the entry) and [`ResponseCache::lookup`] (the same, the entry shared).
//!
//! Both sides run on jemalloc, the allocator the `distillery` binary ships with (with the
//! workspace's `thp:always`), and borrow what every request shares (the client and the
//! request; reqwest's client, the URL and the body), so neither pays for the harness's copies.
//!
//! `cargo run --release -p distillery-llm --example bench_client -- [REQUESTS] [IN_FLIGHT] [KEYS] [ROUNDS]`

use std::sync::Arc;
use std::time::Instant;

use distillery_llm::{
    CacheEntry, CacheKey, ChatMessage, ChatRequest, Client, LlmConfig, ResponseCache, Source, Usage,
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

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `n` operations in `t` seconds, per second.
fn rate(n: usize, t: Instant) -> f64 {
    n as f64 / t.elapsed().as_secs_f64()
}

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() {
    let (requests, in_flight, keys, rounds) =
        (arg(1, 20_000), arg(2, 64), arg(3, 20_000), arg(4, 5).max(1));
    let server = FaultServer::keep_alive("{\"named_entities\": [\"Ada\"]}").await;

    // --- 1. requests per second ---
    let mut cfg = LlmConfig::new(&server.url, "bench");
    cfg.max_concurrency = in_flight;
    // A fixed pace: IN_FLIGHT requests in flight, as the baseline has. (The default adaptive
    // pace settles lower against this server, whose rate does not grow with requests in
    // flight: it measures the pace's choice, not the client's overhead.)
    cfg.adaptive = false;
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
    let run_client = |n: usize| {
        futures::stream::iter(0..n)
            .map(|_| async { client.chat(&req).await.unwrap().content.len() })
            .buffer_unordered(in_flight)
            .for_each(|_| async {})
    };
    let run_raw = |n: usize| {
        futures::stream::iter(0..n)
            .map(|_| {
                let body = body.clone();
                async {
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
    };
    run_client(requests / 4).await;
    run_raw(requests / 4).await;
    let (mut raw_r, mut client_r, mut ratio_r) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        run_raw(requests).await;
        let r = rate(requests, t);
        let t = Instant::now();
        run_client(requests).await;
        let c = rate(requests, t);
        println!(
            "  round: raw {r:>8.0}/s  client {c:>8.0}/s  ratio {:.3}",
            c / r
        );
        raw_r.push(r);
        client_r.push(c);
        ratio_r.push(c / r);
    }
    println!(
        "chat requests/s, {requests} requests x {rounds} rounds, {in_flight} in flight, zero-latency loopback server (medians):"
    );
    println!("  raw reqwest (baseline)  {:>10.0}", median(raw_r));
    println!(
        "  distillery-llm Client   {:>10.0}   ratio {:.2}x of baseline (median of per-round ratios)",
        median(client_r),
        median(ratio_r)
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

    let raw_gets = || async {
        let t = Instant::now();
        futures::stream::iter(paths.iter().cloned())
            .map(|p| {
                let store = store.clone();
                async move { store.get(&p).await.unwrap().bytes().await.unwrap().len() }
            })
            .buffer_unordered(64)
            .for_each(|_| async {})
            .await;
        rate(keys, t)
    };
    let (mut raw_g, mut loose_g) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        raw_g.push(raw_gets().await);
        let cache = ResponseCache::new(store.clone(), "cache");
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
        loose_g.push(rate(keys, t));
        assert_eq!(found, keys);
    }

    let t = Instant::now();
    let report = cache.pack(false).await.unwrap();
    let pack_s = t.elapsed().as_secs_f64();
    assert_eq!(report.packed, keys);
    let (mut load_s, mut packed_get, mut packed_lookup) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let cache = ResponseCache::new(store.clone(), "cache");
        let t = Instant::now();
        assert!(cache.lookup(&all[0]).await.unwrap().is_some());
        load_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut bytes = 0;
        for k in &all {
            bytes += cache.get(k).await.unwrap().unwrap().raw.len();
        }
        packed_get.push(rate(keys, t));
        assert!(bytes > 0);
        let t = Instant::now();
        let mut packed = 0;
        for k in &all {
            let (e, source) = cache.lookup(k).await.unwrap().unwrap();
            packed += usize::from(source == Source::Packed && !e.raw.is_empty());
        }
        packed_lookup.push(rate(keys, t));
        assert_eq!(packed, keys);
    }
    let (raw_m, loose_m) = (median(raw_g), median(loose_g));
    let (get_m, lookup_m) = (median(packed_get), median(packed_lookup));
    println!("cache lookups/s, {keys} entries on local disk, {rounds} rounds (medians):");
    println!("  raw object_store get (baseline)     {raw_m:>10.0}");
    println!(
        "  loose layout, get_many               {loose_m:>10.0}   {:.2}x raw get",
        loose_m / raw_m
    );
    println!(
        "  packed warm, get (owned entry)       {get_m:>10.0}   {:.1}x raw get, {:.1}x loose",
        get_m / raw_m,
        get_m / loose_m
    );
    println!(
        "  packed warm, lookup (shared entry)   {lookup_m:>10.0}   {:.1}x raw get, {:.1}x loose",
        lookup_m / raw_m,
        lookup_m / loose_m
    );
    println!(
        "  packing {keys} loose entries: {pack_s:.2} s ({} packs); pack load at the first lookup: {:.1} ms median",
        report.packs.len(),
        median(load_s) * 1e3
    );
}
