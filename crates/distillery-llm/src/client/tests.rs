use super::*;
use distillery_core::retry::RetryPolicy;

#[test]
fn the_server_wait_replaces_the_backoff() {
    let p = RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1));
    let mut d = p.delays();
    let http = |retry_after| LlmError::Http {
        url: "u".into(),
        status: 429,
        message: String::new(),
        retry_after,
    };
    assert_eq!(
        retry_delay(&mut d, &http(Some(0.25))),
        Duration::from_millis(250)
    );
    assert_eq!(
        retry_delay(&mut d, &http(Some(60.0))),
        Duration::from_secs(1)
    );
    for _ in 0..20 {
        assert!(retry_delay(&mut d, &http(None)) <= Duration::from_secs(1));
    }
}

#[test]
fn secrets_do_not_print() {
    let mut c = LlmConfig::new("http://x/v1", "m");
    c.api_key = Some(Secret::new("sk-very-secret"));
    let shown = format!("{c:?}");
    assert!(!shown.contains("sk-very-secret"), "{shown}");
    assert!(shown.contains("***"));
}

#[test]
fn request_body_uses_response_format_not_guided_json() {
    let client = Client::new(LlmConfig::new("http://127.0.0.1:1/v1", "tiny")).unwrap();
    let body = client.request_body(&ChatRequest {
        messages: vec![ChatMessage::new("user", "hi")],
        temperature: Some(0.0),
        max_tokens: Some(8),
        response_format: Some(ResponseFormat::JsonSchema {
            name: "t".into(),
            schema: json!({"type": "object"}),
            strict: true,
        }),
        ..Default::default()
    });
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert!(body.get("guided_json").is_none());
    assert_eq!(body["model"], "tiny");
}

#[test]
fn embeddings_parse_in_input_order_or_say_why_not() {
    let ok = br#"{"data":[{"index":1,"embedding":[0.0,1.0]},{"index":0,"embedding":[1.0,0.5]}],"usage":{"prompt_tokens":7}}"#;
    let (v, tokens) = parse_embeddings(ok, 2).unwrap();
    assert_eq!(v, vec![vec![1.0, 0.5], vec![0.0, 1.0]]);
    assert_eq!(tokens, 7);
    let short = br#"{"data":[{"index":0,"embedding":[1.0]}]}"#;
    assert!(parse_embeddings(short, 2).unwrap_err().contains("input 1"));
    let bad = br#"{"data":[{"index":0,"embedding":["x"]}]}"#;
    assert!(parse_embeddings(bad, 1).unwrap_err().contains("numbers"));
    assert!(parse_embeddings(b"{}", 1).unwrap_err().contains("data"));
}

#[test]
fn request_bytes_are_the_request_body() {
    let client = Client::new(LlmConfig::new("http://127.0.0.1:1/v1", "tiny")).unwrap();
    let chat = ChatRequest {
        messages: vec![
            ChatMessage::new("system", "Find \"entities\".\n"),
            ChatMessage::new("user", "Ada ✓"),
        ],
        temperature: Some(0.1),
        top_p: Some(0.95),
        max_tokens: Some(64),
        seed: Some(7),
        response_format: Some(ResponseFormat::JsonSchema {
            name: "t".into(),
            schema: json!({"type": "object", "properties": {"b": {}, "a": {}}}),
            strict: true,
        }),
        prompt: None,
    };
    let text = ChatRequest {
        prompt: Some("Q: 1+1?".into()),
        temperature: Some(f64::NAN),
        response_format: Some(ResponseFormat::JsonObject),
        ..chat.clone()
    };
    for req in [chat, text, ChatRequest::default()] {
        assert_eq!(
            String::from_utf8(client.request_bytes(&req)).unwrap(),
            serde_json::to_string(&client.request_body(&req)).unwrap()
        );
    }
}

#[test]
fn completions_of_every_shape_parse_as_through_a_value() {
    let bodies: [&[u8]; 9] = [
        br#"{"model":"tiny","choices":[{"message":{"content":"a\"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
        br#"{"choices":[{"text":"t","finish_reason":null}],"usage":{"prompt_tokens":3}}"#,
        br#"{"choices":[{"message":{"content":null},"text":"x"}],"usage":{"prompt_tokens":1.5,"completion_tokens":1}}"#,
        br#"{"choices":[{"message":{}}]}"#,
        br#"{"choices":{"0":{}}}"#,
        br#"{"choices":[{"message":{"content":"c"}}],"model":7}"#,
        br#"{"choices":[{"message":{"content":"c"}}],"usage":null}"#,
        br#"[]"#,
        br#"{"choices":[{"message":{"content":"c"}}], "#,
    ];
    for b in bodies {
        assert_eq!(
            parse_completion(b),
            parse_completion_value(b),
            "{}",
            String::from_utf8_lossy(b)
        );
    }
}

#[test]
fn completions_parse_or_say_why_not() {
    let ok = br#"{"model":"tiny","choices":[{"message":{"role":"assistant","content":"hey"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
    let r = parse_completion(ok).unwrap();
    assert_eq!((r.content.as_str(), r.usage.prompt_tokens), ("hey", 3));
    assert!(
        parse_completion(b"{\"choices\":[]}")
            .unwrap_err()
            .contains("no choices")
    );
    assert!(
        parse_completion(b"<html>")
            .unwrap_err()
            .contains("not JSON")
    );
    assert!(
        parse_completion(&ok[..40])
            .unwrap_err()
            .contains("not JSON")
    );
}
