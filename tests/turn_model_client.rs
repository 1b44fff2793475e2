//! The OpenAI-compatible client against a tiny HTTP server on 127.0.0.1 inside the test (there
//! is no network here): tool calls, the wire format, a timeout, a retried 5xx, no secrets or
//! provider bodies in errors, and a whole turn through the engine with the real client.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mesh_memory::retrieval::{RetrievalConfig, Retriever};
use mesh_memory::store::Topology;
use mesh_memory::turn::{
    ChatMessage, ChatModel, ChatRequest, ModelError, OpenAiCompatibleClient, OpenAiConfig, RetryPolicy, TurnEngine,
    TurnOutcome,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const KEY: &str = "sk-test-secret-key-123";
const PROVIDER_SECRET: &str = "provider-body-with-private-prompt-text";

struct Canned {
    status: u16,
    body: String,
    delay: Duration,
}

fn ok(body: Value) -> Canned {
    Canned { status: 200, body: body.to_string(), delay: Duration::ZERO }
}

fn status(code: u16) -> Canned {
    Canned { status: code, body: json!({"error": {"message": PROVIDER_SECRET}}).to_string(), delay: Duration::ZERO }
}

#[derive(Clone, Debug)]
struct Received {
    head: String,
    body: Value,
}

/// Serves the canned answers in order, one per request, and records every request.
async fn server(answers: Vec<Canned>) -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let answers = Arc::new(Mutex::new(VecDeque::from(answers)));
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let answers = answers.clone();
            let log = log.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body_start) = loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                    if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                        break (String::from_utf8_lossy(&buffer[..at]).to_string(), at + 4);
                    }
                };
                let length: usize = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                while buffer.len() < body_start + length {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buffer.extend_from_slice(&chunk[..n]);
                }
                let body = serde_json::from_slice(&buffer[body_start..]).unwrap_or(Value::Null);
                log.lock().unwrap().push(Received { head, body });
                let answer = answers.lock().unwrap().pop_front();
                let Some(answer) = answer else { return };
                tokio::time::sleep(answer.delay).await;
                let response = format!(
                    "HTTP/1.1 {} Canned\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                    answer.status,
                    answer.body.len(),
                    answer.body
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, received)
}

fn client(url: &str, timeout: Duration, retries: u32) -> OpenAiCompatibleClient {
    let mut config = OpenAiConfig::new(url, Some(KEY.to_owned()), "test-model");
    config.timeout = timeout;
    config.retry = RetryPolicy {
        max_retries: retries,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
    };
    OpenAiCompatibleClient::new(config).unwrap()
}

fn request(tools: bool) -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::System { content: "be truthful".into() },
            ChatMessage::User { content: "Victor (id U123): remember I like tabs".into() },
            ChatMessage::Developer { content: "COMMITTED LEDGER".into() },
        ],
        tools: tools.then(mesh_memory::tools::tool_definitions),
    }
}

fn completion_with_tool_call() -> Value {
    json!({"id": "x", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": null,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "remember", "arguments": "{\"body\":\"Prefers tabs.\"}"}}]}}]})
}

fn completion_text(text: &str) -> Value {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
}

fn assert_clean(error: &ModelError) {
    let text = error.to_string();
    assert!(!text.contains(KEY), "the key never appears in an error: {text}");
    assert!(!text.contains(PROVIDER_SECRET), "the provider body never appears in an error: {text}");
    let debug = format!("{error:?}");
    assert!(!debug.contains(KEY) && !debug.contains(PROVIDER_SECRET));
}

#[tokio::test]
async fn tool_calls_round_trip_in_the_openai_wire_format() {
    let (url, received) = server(vec![ok(completion_with_tool_call())]).await;
    let response = client(&url, Duration::from_secs(5), 0).complete(&request(true)).await.unwrap();
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].id, "call_1");
    assert_eq!(response.tool_calls[0].name, "remember");
    assert_eq!(response.tool_calls[0].arguments, "{\"body\":\"Prefers tabs.\"}");
    let sent = received.lock().unwrap()[0].clone();
    assert!(sent.head.starts_with("POST /v1/chat/completions"));
    assert!(sent.head.to_ascii_lowercase().contains(&format!("authorization: bearer {}", KEY.to_ascii_lowercase())));
    assert_eq!(sent.body["model"], "test-model");
    assert_eq!(sent.body["messages"][2]["role"], "developer");
    assert_eq!(sent.body["tools"].as_array().unwrap().len(), 5);
    assert_eq!(sent.body["tools"][0]["function"]["parameters"]["additionalProperties"], false);
    // Without tools the field is absent, not empty.
    let (url, received) = server(vec![ok(completion_text("hi"))]).await;
    let response = client(&url, Duration::from_secs(5), 0).complete(&request(false)).await.unwrap();
    assert_eq!(response.content.as_deref(), Some("hi"));
    assert!(received.lock().unwrap()[0].body.get("tools").is_none());
}

#[tokio::test]
async fn a_slow_provider_times_out_after_bounded_retries() {
    let slow = || Canned { status: 200, body: completion_text("late").to_string(), delay: Duration::from_secs(120) };
    let (url, received) = server(vec![slow(), slow()]).await;
    let started = std::time::Instant::now();
    let error = client(&url, Duration::from_millis(300), 1).complete(&request(true)).await.unwrap_err();
    assert!(matches!(error, ModelError::Timeout { attempts: 2, timeout_ms: 300 }), "{error:?}");
    // The provider would answer after two minutes: the wait ends long before (a loose bound, so
    // that a loaded machine cannot flake it).
    assert!(started.elapsed() < Duration::from_secs(30), "the timeout bounds the wait");
    assert_eq!(received.lock().unwrap().len(), 2, "one retry");
    assert_clean(&error);
}

#[tokio::test]
async fn a_5xx_is_retried_and_then_succeeds() {
    let (url, received) = server(vec![status(503), status(502), ok(completion_text("recovered"))]).await;
    let response = client(&url, Duration::from_secs(5), 2).complete(&request(true)).await.unwrap();
    assert_eq!(response.content.as_deref(), Some("recovered"));
    assert_eq!(received.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn persistent_errors_are_typed_and_never_leak_the_body_or_key() {
    let (url, received) = server(vec![status(500), status(500), status(500)]).await;
    let error = client(&url, Duration::from_secs(5), 2).complete(&request(true)).await.unwrap_err();
    assert_eq!(error, ModelError::Status { status: 500, attempts: 3 });
    assert_eq!(received.lock().unwrap().len(), 3);
    assert_clean(&error);

    let (url, received) = server(vec![status(401)]).await;
    let error = client(&url, Duration::from_secs(5), 2).complete(&request(true)).await.unwrap_err();
    assert_eq!(error, ModelError::Unauthorized { status: 401 });
    assert_eq!(received.lock().unwrap().len(), 1, "credentials errors are not retried");
    assert_clean(&error);

    let (url, _) = server(vec![status(400)]).await;
    let error = client(&url, Duration::from_secs(5), 2).complete(&request(true)).await.unwrap_err();
    assert_eq!(error, ModelError::Status { status: 400, attempts: 1 });
    assert_clean(&error);

    let (url, _) = server(vec![ok(json!({"choices": []}))]).await;
    let error = client(&url, Duration::from_secs(5), 0).complete(&request(true)).await.unwrap_err();
    assert!(matches!(error, ModelError::Malformed { .. }));

    // Nothing listens on this port: unreachable, typed.
    let free = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", free.local_addr().unwrap());
    drop(free);
    let error = client(&url, Duration::from_secs(2), 1).complete(&request(true)).await.unwrap_err();
    assert_eq!(error, ModelError::Unreachable { attempts: 2 });

    let config = OpenAiConfig::new("not a url", Some(KEY.into()), "m");
    assert!(format!("{config:?}").contains("<redacted>") && !format!("{config:?}").contains(KEY));
    assert!(matches!(OpenAiCompatibleClient::new(config), Err(ModelError::Config { .. })));
}

#[tokio::test]
async fn a_whole_turn_runs_through_the_real_client() {
    let db = common::test_db().await;
    let mut world = common::World::new(&db.store, "assistant").await;
    let victor = world.person("Victor", "U123").await;
    let engineering = world.conversation("C-ENG", Topology::Channel, &[&victor]).await;
    let inbound = world.say(engineering, &victor, "Remember that I prefer tabs.").await;
    let (url, received) = server(vec![
        status(503),
        ok(completion_with_tool_call()),
        ok(completion_text("I stored that you prefer tabs.")),
    ])
    .await;
    let model = Arc::new(client(&url, Duration::from_secs(5), 2));
    let engine = TurnEngine::new(db.store.clone(), Retriever::new(db.store.clone(), RetrievalConfig::default()), model);
    let report = engine.run_turn(inbound).await.unwrap();
    assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }), "{:?}", report.outcome);
    assert_eq!(report.ledger.writes.len(), 1);
    let requests = received.lock().unwrap().clone();
    assert_eq!(requests.len(), 3);
    let last = &requests[2].body["messages"];
    let last = last.as_array().unwrap();
    assert_eq!(last[last.len() - 1]["role"], "developer");
    assert!(last[last.len() - 1]["content"]
        .as_str()
        .unwrap()
        .contains(&report.ledger.writes[0].entry_id().short().to_string()));
    assert!(last.iter().any(|m| m["role"] == "tool" && m["tool_call_id"] == "call_1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_cli_runs_turns_against_the_configured_model() {
    let db = common::test_db().await;
    let world = common::World::new(&db.store, "assistant").await;
    let victor = world.person("Victor", "U123").await;
    world.conversation("C-ENG", Topology::Channel, &[&victor]).await;
    let (url, received) =
        server(vec![ok(completion_with_tool_call()), ok(completion_text("I stored that you prefer tabs."))]).await;
    let database_url = db.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
            .args(["chat", "--agent", "assistant", "--conversation", "C-ENG", "--as", "U123"])
            .env("DATABASE_URL", database_url)
            .env("MESH_MODEL_BASE_URL", url)
            .env("MESH_MODEL_API_KEY", KEY)
            .env("MESH_MODEL", "test-model")
            .env_remove("MESH_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"Remember that I prefer tabs.\n/quit\n").unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("I stored that you prefer tabs."), "{stdout}");
    assert!(!stderr.contains(KEY) && !stdout.contains(KEY));
    assert_eq!(received.lock().unwrap().len(), 2);
    let (source,): (uuid::Uuid,) =
        sqlx::query_as("SELECT source_actor_id FROM memory_entry_revisions").fetch_one(&db.pool).await.unwrap();
    assert_eq!(source, victor.actor.0, "the source is the authenticated speaker");
}
