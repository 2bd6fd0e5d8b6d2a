//! The client's pace against the stand-in server of `examples/pace_bench`
//! ([`distillery_testkit::pace_stand_in`]: a known capacity that shrinks mid-run, 503 past a
//! short queue): every request answered once with its own answer, never more in flight than
//! the pace allows, and the adaptive limit down after the server shrank. Throughput against fixed settings is measured by
//! `scripts/bench-teacher-pace.sh`, not asserted here.

use std::time::Duration;

use distillery_llm::{ChatMessage, ChatRequest, Client, LlmConfig};
use distillery_testkit::pace_stand_in::{Model, StandIn};
use futures::StreamExt;

fn config(url: &str, max: usize, adaptive: bool) -> LlmConfig {
    let mut cfg = LlmConfig::new(url, "stand-in");
    cfg.max_concurrency = max;
    cfg.adaptive = adaptive;
    cfg.max_retries = 50;
    cfg.backoff_base = Duration::from_millis(20);
    cfg.backoff_max = Duration::from_millis(200);
    cfg
}

/// Sends `n` requests, 64 offered at once; returns the limits seen after each answer.
async fn send(client: &Client, n: usize) -> Vec<usize> {
    let answers: Vec<(usize, String, usize)> = futures::stream::iter(0..n)
        .map(|i| {
            let c = client.clone();
            async move {
                let req = ChatRequest {
                    messages: vec![ChatMessage::new("user", format!("request {i}"))],
                    ..Default::default()
                };
                let r = c.chat(&req).await.expect("answered");
                (i, r.content, c.concurrency())
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    for (i, content, _) in &answers {
        assert_eq!(
            content,
            &format!("request {i}"),
            "an answer went to another request"
        );
    }
    answers.into_iter().map(|a| a.2).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pace_answers_every_request_once_and_follows_a_shrinking_server() {
    let model = Model {
        capacity: vec![(0.0, 24), (1.5, 3)],
        service: 0.04,
        queue: 3,
    };
    let s = StandIn::start(model.clone()).await;
    let client = Client::new(config(&s.url, 48, true)).unwrap();
    // About 900 answered before the server shrinks, 200 after.
    let limits = send(&client, 1100).await;
    let served = s.served();
    assert_eq!(served.len(), 1100, "a request was never served");
    assert!(
        served.values().all(|&n| n == 1),
        "a request was served twice"
    );
    assert!(s.peak() <= 48, "{} held at once", s.peak());
    // The limit rose above the shrunk server's 6 places (3 served, 3 waiting) and came back
    // under them once it refused requests.
    let peak = *limits.iter().max().unwrap();
    assert!(peak > 6, "{limits:?}");
    assert!(*limits.last().unwrap() < peak, "{limits:?}");
    assert!(s.refused() > 0);

    // A fixed pace keeps exactly its number in flight, whatever the server says.
    let s = StandIn::start(model).await;
    let client = Client::new(config(&s.url, 5, false)).unwrap();
    let limits = send(&client, 200).await;
    assert!(limits.iter().all(|&l| l == 5));
    assert_eq!(s.served().len(), 200);
    assert!(s.peak() <= 5, "{} held at once", s.peak());
}
