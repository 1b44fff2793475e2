//! Every malformed message gets an answer (issue 35): `mesh-memory mcp` driven with raw bytes, as a
//! hostile host would, over stdio and over HTTP. Each malformed message must be answered with a
//! JSON-RPC error within a second (a host waiting for an answer must never hang), the same
//! connection must then answer a normal call, and nothing may be written (checked in SQL) until
//! the closing call that succeeds.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{mcp_footprint as footprint, serve_mcp_http, test_db, TestDb, World};
use mesh_memory::mcp::MAX_MESSAGE_BYTES;
use mesh_memory::store::{Topology, MAX_BODY_CHARS};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::time::timeout;

/// The bound on each error answer: generous for a loaded machine, far short of a hang.
const ANSWER: Duration = Duration::from_secs(1);
/// The bound on a normal call (it may start the server or touch the database).
const CALL: Duration = Duration::from_secs(30);

/// A malformed message: what it is, its bytes, the JSON-RPC code it must be answered with, and
/// the id the answer must carry (null where none could be read).
struct Malformed {
    what: &'static str,
    bytes: Vec<u8>,
    code: i64,
    id: Value,
}

/// The hostile messages of issue 35, and two more a host could send: a batch, and a served
/// method whose params do not fit (answered with its id).
fn malformed() -> Vec<Malformed> {
    let call = |tool: &str, arguments: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
        )
    };
    let mut invalid_utf8 = call("remember", r#"{"body":"Likes ~ tea"}"#).into_bytes();
    let at = invalid_utf8.iter().position(|b| *b == b'~').unwrap();
    invalid_utf8.splice(at..=at, [0xff, 0xfe, 0xc3]);
    let deep = format!(r#"{{"body":{}"x"{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
    // 5 MB of pseudo-random bytes (any but a newline): invalid UTF-8, never JSON.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let garbage: Vec<u8> = (0..5 * 1024 * 1024)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            match (state >> 32) as u8 {
                b'\n' => b'?',
                b => b,
            }
        })
        .collect();
    let m = |what, bytes: Vec<u8>, code, id| Malformed { what, bytes, code, id };
    vec![
        m("not JSON", b"remember that Priya likes tea".to_vec(), -32700, Value::Null),
        m("a lone surrogate", call("remember", r#"{"body":"\ud800"}"#).into_bytes(), -32700, Value::Null),
        m("invalid UTF-8", invalid_utf8, -32700, Value::Null),
        m("arguments nested 100,000 deep", call("remember", &deep).into_bytes(), -32700, Value::Null),
        m(
            "a number out of range",
            call("recall", r#"{"query":"tea","limit":1e400}"#).into_bytes(),
            -32700,
            Value::Null,
        ),
        m("an object as id", br#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#.to_vec(), -32600, Value::Null),
        m("5 MB of garbage", garbage, -32600, Value::Null),
        m("a batch", br#"[{"jsonrpc":"2.0","id":8,"method":"tools/list"}]"#.to_vec(), -32600, Value::Null),
        m(
            "params that do not fit",
            br#"{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":5}}"#.to_vec(),
            -32602,
            json!("p"),
        ),
    ]
}

/// A `memory_context` request whose message is 1,000,000 characters (inside the message limit,
/// far past the one text limit).
fn huge_context(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "prompts/get",
           "params": {"name": "memory_context", "arguments": {"message": "a".repeat(1_000_000)}}})
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn initialize() -> Value {
    request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "hostile-host", "version": "1"}}),
    )
}

fn remember() -> Value {
    request(99, "tools/call", json!({"name": "remember", "arguments": {"body": "Is interviewing at Initech."}}))
}

/// Checks an error answer: the code, the id, and (for the text limit) that it names the limit.
fn assert_error(answer: &Value, code: i64, id: &Value, what: &str) {
    assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
    assert_eq!(answer["error"]["code"], code, "{what}: {answer}");
    assert_eq!(answer.get("id"), Some(id), "{what}: the id is {id} (present, as JSON-RPC asks): {answer}");
    assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {answer}");
}

fn assert_tools(answer: &Value, id: i64, after: &str) {
    assert_eq!(answer["id"], id, "after {after}: {answer}");
    assert_eq!(answer["result"]["tools"].as_array().map(Vec::len), Some(5), "after {after}: {answer}");
}

fn assert_committed(answer: &Value) {
    let text = answer["result"]["content"][0]["text"].as_str().unwrap_or_else(|| panic!("{answer}"));
    let result: Value = serde_json::from_str(text).unwrap();
    assert_eq!(result["status"], "committed", "{result}");
}

/// Priya, bound in her direct conversation; returns her HTTP access token.
async fn world(db: &TestDb) -> String {
    let world = World::new(&db.store, "assistant").await;
    let priya = world.person("Priya", "U456").await;
    let dm = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    common::issue_token(db, world.agent, dm, "U456", "hostile host").await.secret
}

/// `mesh-memory mcp` on stdio, written to and read from as raw lines.
struct StdioServer {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl StdioServer {
    /// Bound by `token`, as README's host configuration binds it.
    fn start(db: &TestDb, token: &str) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
            .args(["--database-url", &db.url, "mcp"])
            .env("MESH_EMBEDDER", "none")
            .env("MESH_MCP_TOKEN", token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        StdioServer { _child: child, stdin, stdout }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next line the server writes, within `within`.
    async fn answer(&mut self, within: Duration, what: &str) -> Value {
        let line = timeout(within, self.stdout.next_line())
            .await
            .unwrap_or_else(|_| panic!("{what}: no answer within {within:?}"))
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: the server closed stdout"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{what}: the answer is not JSON ({e}): {line}"))
    }

    async fn call(&mut self, message: &Value, within: Duration, what: &str) -> Value {
        self.send(message.to_string().as_bytes()).await;
        self.answer(within, what).await
    }
}

#[tokio::test]
async fn every_malformed_line_on_stdio_is_answered_and_the_server_keeps_serving() {
    let db = test_db().await;
    let token = world(&db).await;
    let mut server = StdioServer::start(&db, &token);
    // Even before the handshake.
    server.send(b"{").await;
    assert_error(&server.answer(CALL, "before initialize").await, -32700, &Value::Null, "before initialize");
    let initialized = server.call(&initialize(), CALL, "initialize").await;
    assert_eq!(initialized["id"], 0, "{initialized}");
    server.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;

    let before = footprint(&db).await;
    for (n, m) in (1..).zip(malformed()) {
        server.send(&m.bytes).await;
        let answer = server.answer(ANSWER, m.what).await;
        assert_error(&answer, m.code, &m.id, m.what);
        // The same connection answers a normal call at once.
        let tools = server.call(&request(100 + n, "tools/list", json!({})), CALL, m.what).await;
        assert_tools(&tools, 100 + n, m.what);
    }
    // A line longer than the limit is answered before its end arrives: a host waiting for the
    // answer before it sends the newline is not left hanging either.
    server.stdin.write_all(&vec![b' '; MAX_MESSAGE_BYTES + 64]).await.unwrap();
    server.stdin.flush().await.unwrap();
    assert_error(&server.answer(ANSWER, "an unfinished long line").await, -32600, &Value::Null, "a long line");
    server.send(b"}").await;
    assert_tools(&server.call(&request(200, "tools/list", json!({})), CALL, "a long line").await, 200, "a long line");

    // A prompt message past the one text limit is refused naming it, and is not stored.
    let refused = server.call(&huge_context(300), ANSWER, "a 1 MB memory_context message").await;
    assert_error(&refused, -32602, &json!(300), "a 1 MB memory_context message");
    assert!(refused["error"]["message"].as_str().unwrap().contains(&MAX_BODY_CHARS.to_string()), "{refused}");
    assert_eq!(footprint(&db).await, before, "no malformed message read or wrote anything");

    assert_committed(&server.call(&remember(), CALL, "remember").await);
    let after = footprint(&db).await;
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1), "the normal call recorded its message and memory");
}

/// The messages of one HTTP answer: the body as JSON, or each `data:` line of an SSE stream.
fn messages(content_type: &str, body: &str) -> Vec<Value> {
    if content_type.starts_with("application/json") {
        return vec![serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))];
    }
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

/// A raw streamable-HTTP client with a lower-case `bearer` scheme (which must be accepted).
struct HttpHost {
    client: reqwest::Client,
    endpoint: String,
    token: String,
    session: Option<String>,
}

impl HttpHost {
    /// Posts `body`; the status and the JSON-RPC answer (the one carrying an id or an error).
    async fn post(&mut self, body: Vec<u8>, within: Duration, what: &str) -> (u16, Option<Value>) {
        let mut request = self
            .client
            .post(&self.endpoint)
            .header("authorization", format!("bearer {}", self.token))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .timeout(within);
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        let response = request.send().await.unwrap_or_else(|e| panic!("{what}: no answer within {within:?}: {e}"));
        let status = response.status().as_u16();
        if let Some(session) = response.headers().get("mcp-session-id") {
            self.session = Some(session.to_str().unwrap().to_owned());
        }
        let content_type =
            response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        let body = response.text().await.unwrap_or_else(|e| panic!("{what}: the answer did not finish: {e}"));
        let answer =
            messages(&content_type, &body).into_iter().find(|m| m.get("id").is_some() || m.get("error").is_some());
        (status, answer)
    }

    async fn call(&mut self, message: &Value, within: Duration, what: &str) -> (u16, Value) {
        let (status, answer) = self.post(message.to_string().into_bytes(), within, what).await;
        (status, answer.unwrap_or_else(|| panic!("{what}: no JSON-RPC answer (HTTP {status})")))
    }
}

#[tokio::test]
async fn every_malformed_http_body_is_answered_with_a_json_rpc_error_and_the_session_keeps_serving() {
    let db = test_db().await;
    let token = world(&db).await;
    let server = serve_mcp_http(&db);
    let mut host = HttpHost { client: reqwest::Client::new(), endpoint: server.endpoint.clone(), token, session: None };
    let (status, initialized) = host.call(&initialize(), CALL, "initialize").await;
    assert_eq!((status, &initialized["id"]), (200, &json!(0)), "a lower-case bearer scheme is accepted: {initialized}");
    assert!(host.session.is_some(), "the server opened a session");
    let (status, _) =
        host.post(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(), CALL, "initialized").await;
    assert_eq!(status, 202);

    let before = footprint(&db).await;
    for (n, m) in (1..).zip(malformed()) {
        // Refused before the MCP layer: 400, or 413 for a body past the limit.
        let expected = if m.bytes.len() > MAX_MESSAGE_BYTES { 413 } else { 400 };
        let (status, answer) = host.post(m.bytes, ANSWER, m.what).await;
        let answer = answer.unwrap_or_else(|| panic!("{}: HTTP {status} without a JSON-RPC error", m.what));
        assert_eq!(status, expected, "{}: {answer}", m.what);
        assert_error(&answer, m.code, &m.id, m.what);
        let (status, tools) = host.call(&request(100 + n, "tools/list", json!({})), CALL, m.what).await;
        assert_eq!(status, 200, "after {}", m.what);
        assert_tools(&tools, 100 + n, m.what);
    }

    let (_, refused) = host.call(&huge_context(300), ANSWER, "a 1 MB memory_context message").await;
    assert_error(&refused, -32602, &json!(300), "a 1 MB memory_context message");
    assert!(refused["error"]["message"].as_str().unwrap().contains(&MAX_BODY_CHARS.to_string()), "{refused}");
    assert_eq!(footprint(&db).await, before, "no malformed message read or wrote anything");

    let (status, remembered) = host.call(&remember(), CALL, "remember").await;
    assert_eq!(status, 200);
    assert_committed(&remembered);
    let after = footprint(&db).await;
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1), "the normal call recorded its message and memory");
}
