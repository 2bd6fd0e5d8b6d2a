use std::sync::Arc;
use std::sync::atomic::Ordering;

use distillery_llm::{
    CacheEntry, CacheKey, Client, Outcome, Parser, ResponseCache, Usage, cached_chat,
};
use object_store::local::LocalFileSystem;
use serde_json::{Value, json};

use crate::client::{fast_config, request};
use distillery_testkit::fault_server::{Fault, FaultServer};

/// Parses a JSON object; version 2 also accepts the object inside prose or a code fence.
struct JsonParser {
    version: &'static str,
}

impl Parser for JsonParser {
    fn version(&self) -> &str {
        self.version
    }

    fn parse(&self, raw: &str) -> Result<Value, String> {
        let text = if self.version == "2" {
            let (a, b) = (raw.find('{'), raw.rfind('}'));
            match (a, b) {
                (Some(a), Some(b)) if a < b => &raw[a..=b],
                _ => raw,
            }
        } else {
            raw
        };
        match serde_json::from_str::<Value>(text) {
            Ok(v) if v.is_object() => Ok(v),
            Ok(_) => Err("not a JSON object".into()),
            Err(e) => Err(format!("not JSON: {e}")),
        }
    }
}

fn cache_in(dir: &std::path::Path) -> ResponseCache {
    ResponseCache::new(
        Arc::new(LocalFileSystem::new_with_prefix(dir).unwrap()),
        "llm-cache",
    )
}

#[tokio::test]
async fn a_rerun_makes_no_calls_and_gives_the_same_values() {
    let server = FaultServer::start(vec![Fault::Status(500)], "{\"ok\": 1}").await;
    let client = Client::new(fast_config(&server.url)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    let parser = JsonParser { version: "1" };
    let mut first = Vec::new();
    for q in ["a", "b", "c"] {
        first.push(
            cached_chat(
                &client,
                &cache,
                ("t", "1"),
                ("r0", "s1"),
                &parser,
                &request(q),
            )
            .await
            .unwrap(),
        );
    }
    assert_eq!(server.requests(), 4); // one retry
    assert!(
        first
            .iter()
            .all(|o| matches!(o, Outcome::Parsed { cached: false, .. }))
    );

    // A new process: new client, new cache handle over the same files.
    let client = Client::new(fast_config(&server.url)).unwrap();
    let cache = cache_in(dir.path());
    for (q, before) in ["a", "b", "c"].into_iter().zip(&first) {
        let o = cached_chat(
            &client,
            &cache,
            ("t", "1"),
            ("r0", "s1"),
            &parser,
            &request(q),
        )
        .await
        .unwrap();
        let (Outcome::Parsed { value, cached, .. }, Outcome::Parsed { value: v0, .. }) =
            (&o, before)
        else {
            panic!("{o:?}");
        };
        assert!(cached);
        assert_eq!(value, v0);
    }
    assert_eq!(server.requests(), 4, "the rerun called the server");
    assert_eq!(cache.stats().hits.load(Ordering::Relaxed), 3);
    assert_eq!(client.stats().snapshot()[0], 0);

    // Another template version or model revision is another call.
    cached_chat(
        &client,
        &cache,
        ("t", "2"),
        ("r0", "s1"),
        &parser,
        &request("a"),
    )
    .await
    .unwrap();
    cached_chat(
        &client,
        &cache,
        ("t", "1"),
        ("r1", "s1"),
        &parser,
        &request("a"),
    )
    .await
    .unwrap();
    assert_eq!(server.requests(), 6);
}

#[tokio::test]
async fn invalid_answers_are_not_results_and_a_parser_upgrade_reparses_without_calls() {
    let server =
        FaultServer::start(vec![], "Sure! Here it is: {\"ok\": true} hope that helps").await;
    let client = Client::new(fast_config(&server.url)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    let v1 = JsonParser { version: "1" };
    let o = cached_chat(&client, &cache, ("t", "1"), ("r", "s1"), &v1, &request("q"))
        .await
        .unwrap();
    let Outcome::Invalid {
        raw,
        reason,
        cached: false,
        entry,
    } = o
    else {
        panic!("{o:?}")
    };
    // The outcome names the entry that keeps it.
    let file = dir
        .path()
        .join("llm-cache")
        .join(&entry[..2])
        .join(format!("{entry}.json"));
    let kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(kept["raw"].as_str(), Some(raw.as_str()));
    assert!(raw.starts_with("Sure!"));
    assert!(reason.contains("not JSON"), "{reason}");
    // Asked again with the same parser: still invalid, from the cache, no call.
    let o = cached_chat(&client, &cache, ("t", "1"), ("r", "s1"), &v1, &request("q"))
        .await
        .unwrap();
    assert!(matches!(o, Outcome::Invalid { cached: true, .. }), "{o:?}");
    assert_eq!(server.requests(), 1);
    assert_eq!(cache.stats().invalid.load(Ordering::Relaxed), 2);

    // Parser 2 finds the object in the cached raw text.
    let v2 = JsonParser { version: "2" };
    let o = cached_chat(&client, &cache, ("t", "1"), ("r", "s1"), &v2, &request("q")).await;
    let Ok(Outcome::Parsed {
        value,
        cached: true,
        reparsed: true,
        ..
    }) = o
    else {
        panic!("{o:?}")
    };
    assert_eq!(value, json!({"ok": true}));
    assert_eq!(server.requests(), 1, "the upgrade called the server");
    // The entry now records version 2: no second re-parse.
    let o = cached_chat(&client, &cache, ("t", "1"), ("r", "s1"), &v2, &request("q"))
        .await
        .unwrap();
    assert!(
        matches!(
            o,
            Outcome::Parsed {
                reparsed: false,
                cached: true,
                ..
            }
        ),
        "{o:?}"
    );
}

#[tokio::test]
async fn concurrent_writers_of_one_key_keep_the_first_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    let key = CacheKey::new(("t", "1"), "r", "1", &json!({"model": "m", "messages": []}));
    let entry = |raw: &str| CacheEntry {
        key: key.clone(),
        raw: raw.into(),
        parsed: Some(json!({})),
        invalid_reason: None,
        parser_version: "1".into(),
        usage: Usage::default(),
        served_model: "m".into(),
        created_at: 0,
        rejected: None,
    };
    let writers: Vec<_> = (0..8)
        .map(|i| {
            let (cache, e) = (cache.clone(), entry(&format!("writer {i}")));
            tokio::spawn(async move { cache.put(&e).await.unwrap() })
        })
        .collect();
    let mut won = 0;
    for w in writers {
        won += usize::from(w.await.unwrap());
    }
    assert_eq!(won, 1);
    assert_eq!(cache.stats().lost_races.load(Ordering::Relaxed), 7);
    let got = cache.get(&key).await.unwrap().unwrap();
    assert!(got.raw.starts_with("writer "));
    // Batched lookups keep key order; unknown keys are None.
    let other = CacheKey::new(("t", "9"), "r", "1", &json!({"model": "m"}));
    let many = cache
        .get_many(&[other.clone(), key.clone(), other])
        .await
        .unwrap();
    assert!(many[0].is_none() && many[2].is_none());
    assert_eq!(many[1].as_ref().unwrap().raw, got.raw);
}

#[tokio::test]
async fn a_refused_request_is_kept_and_a_rerun_makes_no_call() {
    let server = FaultServer::start(vec![Fault::Status(400)], "{\"ok\": 1}").await;
    let client = Client::new(fast_config(&server.url)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    let ask = |client: Client, cache: ResponseCache, parser: &'static JsonParser| async move {
        cached_chat(
            &client,
            &cache,
            ("t", "1"),
            ("r", "s1"),
            parser,
            &request("far too long"),
        )
        .await
    };
    static V1: JsonParser = JsonParser { version: "1" };
    static V2: JsonParser = JsonParser { version: "2" };
    let first = ask(client.clone(), cache.clone(), &V1).await.unwrap_err();
    assert!(first.is_rejection(), "{first}");
    assert_eq!(server.requests(), 1);
    let entry = cache
        .get(&CacheKey::new(
            ("t", "1"),
            "r",
            "s1",
            &client.request_body(&request("far too long")),
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.raw, "injected 400");
    assert_eq!(entry.parsed, None);
    assert_eq!(entry.rejected.as_ref().map(|r| r.status), Some(400));

    // Again, in this process and in a new one (another parser version too): the same error,
    // from the cache, no call.
    let again = ask(client.clone(), cache.clone(), &V1).await.unwrap_err();
    assert_eq!(again.to_string(), first.to_string());
    let client2 = Client::new(fast_config(&server.url)).unwrap();
    let cache2 = cache_in(dir.path());
    let third = ask(client2.clone(), cache2.clone(), &V2).await.unwrap_err();
    assert!(third.is_rejection());
    assert_eq!(third.to_string(), first.to_string());
    assert_eq!(server.requests(), 1, "a refused request was asked again");
    assert_eq!(cache.stats().rejected.load(Ordering::Relaxed), 2);
    assert_eq!(cache2.stats().hits.load(Ordering::Relaxed), 1);
    assert_eq!(client2.stats().snapshot()[0], 0);

    // Errors that may pass are never kept: a 500 (no retries left) is asked again.
    let flaky = FaultServer::start(vec![Fault::Status(500)], "{\"ok\": 2}").await;
    let mut flaky_cfg = fast_config(&flaky.url);
    flaky_cfg.max_retries = 0;
    let flaky_client = Client::new(flaky_cfg).unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let fresh = cache_in(dir2.path());
    let e = ask(flaky_client.clone(), fresh.clone(), &V1)
        .await
        .unwrap_err();
    assert!(!e.is_rejection(), "{e}");
    let o = ask(flaky_client, fresh, &V1).await.unwrap();
    assert!(matches!(o, Outcome::Parsed { cached: false, .. }), "{o:?}");
    assert_eq!(flaky.requests(), 2);
}

/// One call of `text` through `cache` with the JSON parser.
async fn ask_once(
    client: &Client,
    cache: &ResponseCache,
    text: &str,
) -> Result<Outcome, distillery_llm::LlmError> {
    static V1: JsonParser = JsonParser { version: "1" };
    cached_chat(client, cache, ("t", "1"), ("r", "s1"), &V1, &request(text)).await
}

#[tokio::test]
async fn a_kept_refusal_is_asked_again_once_the_context_grew() {
    let server = FaultServer::start(vec![Fault::Status(400)], "{\"ok\": 1}").await;
    server.serve_models(&[("tiny", 2048)]);
    let dir = tempfile::tempdir().unwrap();
    let fresh = || {
        (
            Client::new(fast_config(&server.url)).unwrap(),
            cache_in(dir.path()),
        )
    };

    let (c1, cache1) = fresh();
    let e = ask_once(&c1, &cache1, "far too long").await.unwrap_err();
    assert!(e.is_rejection(), "{e}");
    let key = CacheKey::new(
        ("t", "1"),
        "r",
        "s1",
        &c1.request_body(&request("far too long")),
    );
    let kept = cache1.get(&key).await.unwrap().unwrap().rejected.unwrap();
    assert_eq!(kept.context_tokens, Some(2048));

    // The same context, another process: the refusal stands, no call.
    let (c2, cache2) = fresh();
    assert!(
        ask_once(&c2, &cache2, "far too long")
            .await
            .unwrap_err()
            .is_rejection()
    );
    assert_eq!(server.requests(), 1);
    assert_eq!(cache2.stats().stale_refusals.load(Ordering::Relaxed), 0);

    // The server now serves a longer context: the request is asked again, answered, and the
    // answer replaces the refusal.
    server.serve_models(&[("tiny", 8192)]);
    let (c3, cache3) = fresh();
    let o = ask_once(&c3, &cache3, "far too long").await.unwrap();
    assert!(matches!(o, Outcome::Parsed { cached: false, .. }), "{o:?}");
    assert_eq!(server.requests(), 2);
    assert_eq!(cache3.stats().stale_refusals.load(Ordering::Relaxed), 1);
    let entry = cache3.get(&key).await.unwrap().unwrap();
    assert_eq!(entry.rejected, None);
    assert_eq!(entry.parsed, Some(json!({"ok": 1})));

    // From then on the answer comes from the cache.
    let (c4, cache4) = fresh();
    let o = ask_once(&c4, &cache4, "far too long").await.unwrap();
    assert!(matches!(o, Outcome::Parsed { cached: true, .. }), "{o:?}");
    assert_eq!(server.requests(), 2);

    // A configured context counts the same way: a refusal under 2048 configured tokens
    // stands for a client configured with 2048 and is asked again with 4096.
    let strict = FaultServer::start(vec![Fault::Status(400), Fault::Status(400)], "{}").await;
    let configured = |n: u64| {
        let mut cfg = fast_config(&strict.url);
        cfg.context_tokens = Some(n);
        Client::new(cfg).unwrap()
    };
    let dir2 = tempfile::tempdir().unwrap();
    let cache = cache_in(dir2.path());
    let refused = |n: u64| {
        let cache = cache.clone();
        let client = configured(n);
        async move {
            ask_once(&client, &cache, "x")
                .await
                .unwrap_err()
                .is_rejection()
        }
    };
    // Refused, then taken from the cache; asked again under a longer context, refused again
    // and kept with it, then taken from the cache.
    for (context, calls) in [(2048, 1), (2048, 1), (4096, 2), (4096, 2)] {
        assert!(refused(context).await);
        assert_eq!(strict.requests(), calls, "context {context}");
    }
    assert_eq!(strict.side_requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_context_length_comes_from_the_server_once_or_from_the_configuration() {
    let server = FaultServer::start(vec![Fault::Status(500)], "{}").await;
    server.serve_models(&[("other", 4096), ("tiny", 2048)]);
    let client = Client::new(fast_config(&server.url)).unwrap();
    assert_eq!(client.max_model_len().await.unwrap(), Some(2048));
    assert_eq!(client.context_tokens().await.unwrap(), Some(2048));
    // Asked once per client (clones share it); side requests consume no fault.
    assert_eq!(client.clone().max_model_len().await.unwrap(), Some(2048));
    assert_eq!(server.side_requests.load(Ordering::SeqCst), 1);
    assert_eq!(
        client.with_model("other").max_model_len().await.unwrap(),
        Some(4096)
    );
    assert_eq!(
        client.with_model("absent").max_model_len().await.unwrap(),
        None
    );
    assert_eq!(server.side_requests.load(Ordering::SeqCst), 3);
    assert_eq!(server.faults_served.load(Ordering::SeqCst), 0);
    // The configured length wins and asks nothing.
    let mut cfg = fast_config(&server.url);
    cfg.context_tokens = Some(100);
    let configured = Client::new(cfg).unwrap();
    assert_eq!(configured.context_tokens().await.unwrap(), Some(100));
    assert_eq!(server.side_requests.load(Ordering::SeqCst), 3);
    // A server without `/models` does not say.
    let bare = FaultServer::start(vec![], "{}").await;
    let c = Client::new(fast_config(&bare.url)).unwrap();
    assert_eq!(c.context_tokens().await.unwrap(), None);
    assert_eq!(bare.requests(), 0);
    // Nor does one that answers 501 Not Implemented (Python's http.server to a GET it has no
    // handler for), asked once: no retry, no error.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let body = "<html>Unsupported method ('GET')</html>";
            let head = format!(
                "HTTP/1.1 501 Unsupported method ('GET')\r\nConnection: close\r\n\
                 Content-Type: text/html\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all((head + body).as_bytes()).await;
        }
    });
    let c = Client::new(fast_config(&url)).unwrap();
    assert_eq!(c.context_tokens().await.unwrap(), None);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
}
