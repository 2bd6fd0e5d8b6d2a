use std::sync::atomic::Ordering;
use std::time::Duration;

use distillery_core::HasKind;
use distillery_llm::{
    ChatMessage, ChatRequest, Client, LlmConfig, LlmError, ResponseFormat, Secret,
};

use distillery_testkit::fault_server::{Fault, FaultServer};

pub fn fast_config(url: &str) -> LlmConfig {
    let mut c = LlmConfig::new(url, "tiny");
    c.backoff_base = Duration::from_millis(2);
    c.backoff_max = Duration::from_millis(20);
    c.timeout = Duration::from_millis(1500);
    c
}

pub fn request(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::new("user", text)],
        temperature: Some(0.0),
        max_tokens: Some(16),
        ..Default::default()
    }
}

#[tokio::test]
async fn retries_through_every_kind_of_fault() {
    let server = FaultServer::start(
        vec![
            Fault::Status(500),
            Fault::TooMany("0"),
            Fault::Status(503),
            Fault::Truncated,
            Fault::NotJson,
            Fault::Drop,
            Fault::Stall(Duration::from_secs(5)),
        ],
        "fine",
    )
    .await;
    let mut cfg = fast_config(&server.url);
    cfg.max_retries = 7;
    let client = Client::new(cfg).unwrap();
    let r = client.chat(&request("hi")).await.unwrap();
    assert_eq!(r.content, "fine");
    assert_eq!(r.attempts, 8);
    assert_eq!(r.usage.prompt_tokens, 7);
    let [calls, retries, failures, prompt, completion] = client.stats().snapshot();
    assert_eq!((calls, retries, failures), (8, 7, 0));
    assert_eq!((prompt, completion), (7, 3));
    assert_eq!(server.requests(), 8);
}

#[tokio::test]
async fn gives_up_after_the_retry_budget_with_a_retryable_error() {
    let server = FaultServer::start(vec![Fault::Status(502); 10], "never").await;
    let mut cfg = fast_config(&server.url);
    cfg.max_retries = 2;
    let client = Client::new(cfg).unwrap();
    let e = client.chat(&request("hi")).await.unwrap_err();
    assert!(matches!(e, LlmError::Http { status: 502, .. }), "{e}");
    assert!(e.is_retryable());
    assert!(e.to_string().contains("injected 502"), "{e}");
    assert_eq!(server.requests(), 3);
    assert_eq!(client.stats().failures.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn a_stalled_answer_times_out_as_a_retryable_transport_error() {
    let server = FaultServer::start(vec![Fault::Stall(Duration::from_secs(5)); 2], "late").await;
    let mut cfg = fast_config(&server.url);
    cfg.max_retries = 0;
    cfg.timeout = Duration::from_millis(200);
    let client = Client::new(cfg).unwrap();
    // Had the timeout not fired, the server's answer would have come after 5 s.
    let e = client.chat(&request("hi")).await.unwrap_err();
    assert!(matches!(e, LlmError::Transport { .. }), "{e}");
    assert!(e.to_string().contains("timed out after 200ms"), "{e}");
    assert!(e.is_retryable());
    assert_eq!(client.stats().failures.load(Ordering::Relaxed), 1);
}

#[tokio::test]
async fn client_errors_are_fatal_and_not_retried() {
    let server = FaultServer::start(vec![Fault::Status(400)], "never").await;
    let client = Client::new(fast_config(&server.url)).unwrap();
    let e = client.chat(&request("hi")).await.unwrap_err();
    assert!(matches!(e, LlmError::Http { status: 400, .. }), "{e}");
    assert!(!e.is_retryable());
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn connection_refused_is_a_retryable_transport_error() {
    // A port nothing listens on.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    drop(l);
    let mut cfg = fast_config(&url);
    cfg.max_retries = 1;
    let e = Client::new(cfg)
        .unwrap()
        .chat(&request("hi"))
        .await
        .unwrap_err();
    assert!(matches!(e, LlmError::Transport { .. }), "{e}");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn sends_the_key_and_structured_output_but_never_shows_the_key() {
    let server = FaultServer::start(vec![], "{\"ok\":true}").await;
    let mut cfg = fast_config(&server.url);
    cfg.api_key = Some(Secret::new("sk-test-123"));
    let client = Client::new(cfg).unwrap();
    let mut req = request("json please");
    req.response_format = Some(ResponseFormat::JsonObject);
    client.chat(&req).await.unwrap();
    let body = server.bodies.lock().unwrap()[0].clone();
    assert_eq!(body["response_format"]["type"], "json_object");
    assert!(body.get("guided_json").is_none());
    assert_eq!(
        server.auth.lock().unwrap()[0].as_deref(),
        Some("Bearer sk-test-123")
    );
    assert!(!format!("{client:?}").contains("sk-test-123"));
}

#[tokio::test]
async fn concurrency_is_limited_per_client() {
    let server = FaultServer::start(vec![Fault::Stall(Duration::from_millis(200)); 4], "ok").await;
    let mut cfg = fast_config(&server.url);
    cfg.max_concurrency = 1;
    let client = Client::new(cfg).unwrap();
    let req = request("x");
    let (a, b, c) = tokio::join!(client.chat(&req), client.chat(&req), client.chat(&req));
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    assert_eq!(server.requests(), 3);
    assert_eq!(server.max_in_flight.load(Ordering::SeqCst), 1);

    // The same requests with two permits do overlap.
    let server = FaultServer::start(vec![Fault::Stall(Duration::from_millis(300)); 2], "ok").await;
    let mut cfg = fast_config(&server.url);
    cfg.max_concurrency = 2;
    let client = Client::new(cfg).unwrap();
    let (a, b) = tokio::join!(client.chat(&req), client.chat(&req));
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(server.max_in_flight.load(Ordering::SeqCst), 2);
}

#[test]
fn a_missing_key_variable_is_named() {
    let e = LlmConfig::new("http://x/v1", "m")
        .api_key_from_env("DISTILLERY_TEST_SURELY_UNSET_KEY")
        .unwrap_err();
    assert!(e.to_string().contains("DISTILLERY_TEST_SURELY_UNSET_KEY"));
    assert!(Client::new(LlmConfig::new("ftp://x", "m")).is_err());
}

#[tokio::test]
async fn text_completions_go_to_the_completions_endpoint() {
    let server = FaultServer::start(vec![Fault::Status(500)], "Paris").await;
    let client = Client::new(fast_config(&server.url)).unwrap();
    let req = ChatRequest {
        prompt: Some("The capital of France is".into()),
        max_tokens: Some(4),
        temperature: Some(0.0),
        ..Default::default()
    };
    let body = client.request_body(&req);
    assert_eq!(body["prompt"], "The capital of France is");
    assert!(body.get("messages").is_none());
    let r = client.chat(&req).await.unwrap();
    assert_eq!(r.content, "Paris");
    assert_eq!(r.attempts, 2);
    assert_eq!(
        server.bodies.lock().unwrap()[1]["prompt"],
        "The capital of France is"
    );
}

#[tokio::test]
async fn another_model_on_the_same_server_shares_limits_and_counters() {
    let server = FaultServer::start(vec![], "ok").await;
    let teacher = Client::new(fast_config(&server.url)).unwrap();
    let base = teacher.with_model("base-7b");
    base.chat(&request("a")).await.unwrap();
    teacher.chat(&request("b")).await.unwrap();
    let bodies = server.bodies.lock().unwrap().clone();
    assert_eq!(bodies[0]["model"], "base-7b");
    assert_eq!(bodies[1]["model"], "tiny");
    assert_eq!(teacher.stats().snapshot()[0], 2);
    assert_eq!(base.stats().snapshot()[0], 2);
}
