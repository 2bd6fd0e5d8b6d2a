//! The adaptive pace against every fixed number of requests in flight, on the same server in
//! the same run: `scripts/bench-teacher-pace.sh` runs it.
//!
//! ```text
//! cargo run --release -p distillery-llm --example pace_bench -- stand-in [SECONDS]
//! cargo run --release -p distillery-llm --example pace_bench -- server URL MODEL [SECONDS]
//! ```
//!
//! `stand-in` runs two scenarios of the stand-in server
//! ([`distillery_testkit::pace_stand_in`]): `steady` (24 served at once, an unbounded queue,
//! like vLLM) and `shrinking` (32 at once, then 8 from half-way, and 503 past 16 waiting). `server` runs against a real OpenAI-compatible server (vLLM),
//! short completions. Each setting runs for SECONDS (default 12) from a fresh start, offering
//! 64 requests at once (as a teacher stage buffers `max_concurrency` of them); throughput is
//! the answers received before the time is up. Prints a line per setting and, per scenario,
//! the adaptive throughput as a share of the best fixed one, and checks that no request was
//! lost and (on the stand-in) none served twice.

use std::time::{Duration, Instant};

use distillery_llm::{ChatMessage, ChatRequest, Client, LlmConfig};
use distillery_testkit::pace_stand_in::{Model, StandIn};
use futures::StreamExt;

const OFFERED: usize = 64;
const FIXED: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

struct Outcome {
    in_time: usize,
    issued: usize,
    lost: usize,
    limit: usize,
}

fn request(i: usize) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::new(
            "user",
            format!("Count to three, then say {i}."),
        )],
        temperature: Some(0.0),
        top_p: None,
        max_tokens: Some(16),
        seed: Some(7),
        response_format: None,
        prompt: None,
    }
}

/// Offers requests for `secs` seconds through a client with this pace (`None`: adaptive).
async fn drive(url: &str, model: &str, fixed: Option<usize>, secs: f64) -> Outcome {
    let mut cfg = LlmConfig::new(url, model);
    cfg.max_concurrency = fixed.unwrap_or(OFFERED);
    cfg.adaptive = fixed.is_none();
    cfg.max_retries = 50;
    cfg.backoff_base = Duration::from_millis(50);
    cfg.backoff_max = Duration::from_secs(1);
    let client = Client::new(cfg).unwrap();
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(secs);
    // PACE_TRACE=1: the limit every half second.
    let tracer = std::env::var_os("PACE_TRACE").map(|_| {
        let c = client.clone();
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while Instant::now() < deadline {
                seen.push(c.concurrency());
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            eprintln!("limits every 0.5 s: {seen:?}");
        })
    });
    let results: Vec<(usize, bool, Instant)> = futures::stream::iter(0..)
        .take_while(|_| std::future::ready(Instant::now() < deadline))
        .map(|i| {
            let c = client.clone();
            async move {
                let r = c.chat(&request(i)).await;
                let ok = r.is_ok();
                (i, ok, Instant::now())
            }
        })
        .buffer_unordered(OFFERED)
        .collect()
        .await;
    if let Some(t) = tracer {
        let _ = t.await;
    }
    Outcome {
        in_time: results.iter().filter(|r| r.1 && r.2 <= deadline).count(),
        issued: results.len(),
        lost: results.iter().filter(|r| !r.1).count(),
        limit: client.concurrency(),
    }
}

/// Every fixed setting and the adaptive pace; returns the adaptive share of the best.
async fn scenario(
    name: &str,
    secs: f64,
    mut server: impl AsyncFnMut() -> (String, String, Option<StandIn>),
) -> f64 {
    let mut best = (0usize, 0.0f64);
    let mut adaptive = 0.0;
    for fixed in FIXED.iter().map(|&n| Some(n)).chain([None]) {
        let (url, model, stand_in) = server().await;
        let o = drive(&url, &model, fixed, secs).await;
        let per_sec = o.in_time as f64 / secs;
        let (twice, refused) = match &stand_in {
            Some(s) => {
                let served = s.served();
                let twice = served.values().filter(|&&n| n > 1).count();
                assert_eq!(
                    served.len(),
                    o.issued - o.lost,
                    "{name}: answers and served differ"
                );
                (twice, s.refused())
            }
            None => (0, 0),
        };
        let label = fixed.map_or("adaptive".to_string(), |n| format!("fixed {n}"));
        println!(
            "{name:10} {label:10} {per_sec:8.1} answers/s  issued {:6}  lost {}  served twice {twice}  refused {refused}  limit at the end {}",
            o.issued, o.lost, o.limit
        );
        assert_eq!(
            (o.lost, twice),
            (0, 0),
            "{name} {label}: a request lost or answered twice"
        );
        match fixed {
            Some(n) if per_sec > best.1 => best = (n, per_sec),
            Some(_) => {}
            None => adaptive = per_sec,
        }
    }
    let share = adaptive / best.1;
    println!(
        "{name:10} adaptive {adaptive:.1}/s = {:.1}% of the best fixed setting ({} in flight, {:.1}/s)",
        share * 100.0,
        best.0,
        best.1
    );
    share
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("stand-in") => {
            let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(12.0);
            let steady = Model {
                capacity: vec![(0.0, 24)],
                service: 0.1,
                queue: 10_000,
            };
            let shrinking = Model {
                capacity: vec![(0.0, 32), (secs / 2.0, 8)],
                service: 0.1,
                queue: 16,
            };
            for (name, m) in [("steady", steady), ("shrinking", shrinking)] {
                scenario(name, secs, async || {
                    let s = StandIn::start(m.clone()).await;
                    (s.url.clone(), "stand-in".to_string(), Some(s))
                })
                .await;
            }
        }
        Some("server") if args.len() >= 3 => {
            let secs: f64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(12.0);
            let (url, model) = (args[1].clone(), args[2].clone());
            scenario("server", secs, async || (url.clone(), model.clone(), None)).await;
        }
        _ => {
            eprintln!(
                "usage: pace_bench stand-in [SECONDS] | pace_bench server URL MODEL [SECONDS]"
            );
            std::process::exit(2);
        }
    }
}
