//! `mesh-memory mcp` driven over stdio by a real MCP client nobody here wrote: the official
//! TypeScript SDK (`tests/mcp/client.mjs`, `@modelcontextprotocol/sdk` from npm, installed by
//! `scripts/setup.sh`). Everything the client saw is compared with the database.
//!
//! The server runs as README's host configuration has it: bound by an operator-issued token
//! (`MESH_MCP_TOKEN`), connected as a login of `mesh_runtime` (never an administrator), with the
//! audit digest key (`MESH_AUDIT_DIGEST_KEY`) instead of the master key.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{issue_token, test_db, url_as, TestDb, World};
use mesh_memory::retrieval::DigestKey;
use mesh_memory::store::Topology;
use serde_json::{json, Value};

/// The master key of these tests' runtime; hosts get only its audit digest subkey.
const MASTER_KEY: &str = "0123456789abcdef0123456789abcdef-test-master-key";

/// How a host launches the server.
enum Host<'a> {
    /// README's configuration: a token, a runtime login's URL, the digest key.
    Token { url: &'a str, token: &'a str },
    /// An operator's own scripted use: `--agent --conversation --as` vouched for by `--operator`.
    Vouched { conversation: &'a str, speaker: &'a str, operator: &'a str, password: &'a str },
}

/// Runs the client against a server launched as `host`; returns the process's output.
fn run_client(db: &TestDb, host: &Host, ops: &Value) -> std::process::Output {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "\n==== the MCP client SDK is not installed: run scripts/setup.sh (npm ci in tests/mcp) ====\n"
    );
    let mut command = Command::new("node");
    command.current_dir(&dir).arg("client.mjs").arg("stdio").arg(env!("CARGO_BIN_EXE_mesh-memory"));
    for name in ["MESH_MCP_TOKEN", "MESH_AGENT_MASTER_KEY", "MESH_OPERATOR_ROLE", "MESH_OPERATOR_PASSWORD"] {
        command.env_remove(name);
    }
    command.env("MESH_EMBEDDER", "none");
    match host {
        Host::Token { url, token } => {
            let digest_key = DigestKey::from_master_key(MASTER_KEY.as_bytes()).unwrap().to_hex();
            command.args([url, "-", "-", "-"]).env("MESH_MCP_TOKEN", token).env("MESH_AUDIT_DIGEST_KEY", digest_key);
        }
        Host::Vouched { conversation, speaker, operator, password } => {
            command.args([db.url.as_str(), "assistant", conversation, speaker]);
            if !operator.is_empty() {
                command.env("MESH_OPERATOR_ROLE", operator).env("MESH_OPERATOR_PASSWORD", password);
            }
        }
    }
    command.arg(ops.to_string()).output().expect("node runs (install Node.js 20+)")
}

/// Runs the client (which must succeed); returns what it saw.
fn client(db: &TestDb, host: &Host, ops: Value) -> Vec<Value> {
    let output = run_client(db, host, &ops);
    assert!(
        output.status.success(),
        "the MCP client failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the client printed {stdout:?}: {e}"))
}

/// A login of `mesh_runtime` (what a host's DATABASE_URL names) and its URL.
async fn runtime_url(db: &TestDb) -> String {
    let (role, password, pool) = common::login_role_with_password(db, "mm_host", "mesh_runtime").await;
    pool.close().await;
    url_as(db, &role, &password)
}

async fn scalar(db: &TestDb, sql: &str, bind: uuid::Uuid) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).bind(bind).fetch_one(&db.pool).await.unwrap()
}

#[tokio::test]
async fn a_real_mcp_client_remembers_recalls_and_forgets_within_its_binding_and_nothing_else() {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let priya = world.person("Priya", "U456").await;
    let victor = world.person("Victor", "U123").await;
    let dm = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let channel = world.conversation("C-ENG", Topology::Channel, &[&victor, &priya]).await;
    let url = runtime_url(&db).await;
    let priya_token = issue_token(&db, world.agent, dm, "U456", "Priya's desktop").await;
    let victor_token = issue_token(&db, world.agent, channel, "U123", "Victor's laptop").await;
    let priya_host = Host::Token { url: &url, token: &priya_token.secret };

    // Bound to Priya in her direct conversation, by her token.
    let seen = client(
        &db,
        &priya_host,
        json!([
            {"op": "tools"},
            {"op": "call", "name": "remember", "args": {"body": "Is interviewing at Initech next month."}},
            {"op": "call", "name": "recall", "args": {"query": "interviewing Initech"}},
            {"op": "prompt", "name": "memory_context", "args": {"message": "Any news on my Initech interviews?"}},
            {"op": "call", "name": "remember", "args": {}},
            {"op": "call", "name": "remember", "args": {"body": "x", "speaker": "U123"}},
            {"op": "call", "name": "amend",
             "args": {"entry_id": "$ENTRY", "expected_revision": 2, "body": "Is interviewing at Globex."}},
        ]),
    );
    assert_eq!(seen[0]["names"], json!(["amend", "forget", "recall", "remember", "request_memory_sharing"]));

    // What the client was told committed is exactly what the store holds.
    let remembered = &seen[1]["json"];
    assert_eq!(remembered["status"], "committed", "{remembered}");
    let short = remembered["entry_id"].as_str().unwrap().to_owned();
    let row: (uuid::Uuid, uuid::Uuid, i32, Option<uuid::Uuid>, Option<uuid::Uuid>, String) = sqlx::query_as(
        "SELECT e.id, r.id, r.revision_number, r.source_actor_id, e.origin_conversation_id, e.state::text
           FROM memory_entries e JOIN memory_entry_revisions r ON r.id = e.current_revision_id
          WHERE e.runtime_agent_id = $1",
    )
    .bind(world.agent.0)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    let (entry, revision) = (row.0, row.1);
    assert!(entry.to_string().ends_with(&short), "the client is shown the entry's short id, {short}");
    assert_eq!(remembered["revision"], row.2);
    assert_eq!(row.3, Some(priya.actor.0), "the source is the bound speaker, from the binding");
    assert_eq!(row.4, Some(dm.0), "learned in the bound conversation");
    let sources =
        scalar(&db, "SELECT count(*) FROM revision_sources WHERE revision_id = $1 AND kind = 'message'", revision)
            .await;
    assert!(sources >= 1, "the call is recorded as Priya's authenticated message and is the memory's evidence");

    // Recall and the prompt find it, through the audited retrieval service.
    let memories = seen[2]["json"]["memories"].as_array().unwrap();
    assert_eq!(memories.len(), 1);
    let line = memories[0].as_str().expect("a memory is one line");
    assert!(line.starts_with(&format!("[{short} rev 1] About ")), "{line}");
    assert!(!line.contains("score") && !line.contains("rrf"), "ranking data is audit data, not for the host's model");
    assert!(seen[3]["text"].as_str().unwrap().contains("Is interviewing at Initech next month."));
    let searches =
        scalar(&db, "SELECT count(*) FROM memory_retrieval_events WHERE current_actor_id = $1", priya.actor.0).await;
    assert_eq!(searches, 2, "the recall and the prompt were both audited as Priya's searches");
    let digests: Vec<Option<Vec<u8>>> = sqlx::query_scalar(
        "SELECT query_digest FROM memory_retrieval_events WHERE current_actor_id = $1 ORDER BY created_at",
    )
    .bind(priya.actor.0)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let key = DigestKey::from_master_key(MASTER_KEY.as_bytes()).unwrap();
    assert_eq!(
        digests[0],
        Some(key.digest("interviewing Initech")),
        "the host's digest key records the runtime's digest without the master key"
    );

    // Malformed calls are errors naming the field, and write nothing.
    assert_eq!(seen[4]["isError"], true);
    assert!(seen[4]["text"].as_str().unwrap().contains("\"body\""), "{}", seen[4]["text"]);
    assert_eq!(seen[5]["isError"], true);
    assert!(seen[5]["text"].as_str().unwrap().contains("\"speaker\""), "{}", seen[5]["text"]);
    let entries = scalar(&db, "SELECT count(*) FROM memory_entries WHERE runtime_agent_id = $1", world.agent.0).await;
    assert_eq!(entries, 1, "no malformed call created anything");
    // An amend against a stale revision is the conflict error, and changes nothing.
    assert_eq!(seen[6]["isError"], true);
    assert!(seen[6]["text"].as_str().unwrap().contains("is at revision 1, not 2"), "{}", seen[6]["text"]);
    assert_eq!(scalar(&db, "SELECT count(*) FROM memory_entry_revisions WHERE entry_id = $1", entry).await, 1);

    // Another binding, in another conversation, cannot see the direct-conversation memory.
    let elsewhere = client(
        &db,
        &Host::Token { url: &url, token: &victor_token.secret },
        json!([
            {"op": "call", "name": "recall", "args": {"query": "interviewing Initech"}},
            {"op": "prompt", "name": "memory_context", "args": {"message": "Is Priya interviewing at Initech?"}},
            {"op": "call", "name": "forget", "args": {"entry_id": short}},
        ]),
    );
    assert_eq!(elsewhere[0]["json"]["memories"], json!([]));
    assert!(!elsewhere[1]["text"].as_str().unwrap().contains("Initech next month"));
    assert_eq!(elsewhere[2]["json"]["status"], "nothing_changed", "{}", elsewhere[2]["text"]);
    assert_eq!(elsewhere[2]["json"]["reason"], "unknown_entry", "a hidden entry reads as unknown");

    // Back in Priya's conversation: forget, then recall returns nothing for it.
    let forgotten = client(
        &db,
        &priya_host,
        json!([
            {"op": "call", "name": "forget", "args": {"entry_id": short}},
            {"op": "call", "name": "recall", "args": {"query": "interviewing Initech"}},
        ]),
    );
    assert_eq!(forgotten[0]["json"]["status"], "committed", "{}", forgotten[0]["text"]);
    assert_eq!(forgotten[0]["json"]["operation"], "forget");
    assert_eq!(forgotten[1]["json"]["memories"], json!([]));
    let state: String = sqlx::query_scalar("SELECT state::text FROM memory_entries WHERE id = $1")
        .bind(entry)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(state, "forgotten");
}

#[tokio::test]
async fn a_binding_by_arguments_needs_an_operator_to_vouch_for_it() {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let priya = world.person("Priya", "U456").await;
    world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let recall = json!([{"op": "call", "name": "recall", "args": {"query": "tea"}}]);

    // Arguments alone bind nothing: whoever writes a host configuration could name anyone.
    let unvouched = Host::Vouched { conversation: "D-PRIYA", speaker: "U456", operator: "", password: "" };
    let refused = run_client(&db, &unvouched, &recall);
    assert!(!refused.status.success(), "--as without --operator must not serve");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--operator"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // A browse-only role may not vouch (it may not issue tokens either).
    let (reader, reader_password, _) = common::login_role_with_password(&db, "mm_rd", "mesh_console_reader").await;
    let by_reader =
        Host::Vouched { conversation: "D-PRIYA", speaker: "U456", operator: &reader, password: &reader_password };
    let refused = run_client(&db, &by_reader, &recall);
    assert!(!refused.status.success(), "a reader may not vouch for a binding");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not a member of mesh_operator"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    // An operator may.
    let (operator, password, _) = common::login_role_with_password(&db, "mm_op", "mesh_operator").await;
    let vouched = Host::Vouched { conversation: "D-PRIYA", speaker: "U456", operator: &operator, password: &password };
    let seen = client(&db, &vouched, recall);
    assert_eq!(seen[0]["json"]["memories"], json!([]), "{}", seen[0]);
}

/// `mesh-memory mcp` on stdio bound by `token`, connected as `url`, written to as raw lines.
struct RawStdio {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawStdio {
    fn start(url: &str, token: &str) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
            .args(["--database-url", url, "mcp"])
            .env("MESH_EMBEDDER", "none")
            .env("MESH_MCP_TOKEN", token)
            .env_remove("MESH_AGENT_MASTER_KEY")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
        RawStdio { child, stdin, stdout }
    }

    async fn send(&mut self, message: Value) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(format!("{message}\n").as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn call(&mut self, message: Value) -> Value {
        self.send(message).await;
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), self.stdout.next_line())
            .await
            .expect("an answer")
            .unwrap()
            .expect("the server keeps serving");
        serde_json::from_str(&line).unwrap()
    }

    async fn handshake(&mut self) {
        let init = self
            .call(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test", "version": "1"}}}))
            .await;
        assert!(init.get("result").is_some(), "{init}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    }
}

fn recall_request(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "recall", "arguments": {"query": "tea"}}})
}

#[tokio::test]
async fn a_revoked_or_expired_token_ends_a_stdio_session_at_once_and_writes_nothing() {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let priya = world.person("Priya", "U456").await;
    let dm = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let url = runtime_url(&db).await;
    let revoked = issue_token(&db, world.agent, dm, "U456", "revoked while serving").await;
    let expiring = issue_token(&db, world.agent, dm, "U456", "expires while serving").await;

    // Revoked by an operator while the host is connected: the next call is refused.
    let mut server = RawStdio::start(&url, &revoked.secret);
    server.handshake().await;
    assert!(server.call(recall_request(1)).await.get("result").is_some());
    let (role, password, _) = common::login_role_with_password(&db, "mm_rv", "mesh_operator").await;
    let session = mesh_memory::operator::OperatorSession::sign_in(&db.options, &role, &password).await.unwrap();
    session.revoke_access_token(revoked.id, "laptop lost").await.unwrap();
    let before = common::mcp_footprint(&db).await;
    let answer = server.call(recall_request(2)).await;
    assert!(answer["error"]["message"].as_str().unwrap().contains("revoked or expired"), "{answer}");
    assert_eq!(common::mcp_footprint(&db).await, before, "a refused call reads and writes nothing");

    // Expired while the host is connected: the same.
    let mut server = RawStdio::start(&url, &expiring.secret);
    server.handshake().await;
    assert!(server.call(recall_request(1)).await.get("result").is_some());
    sqlx::query(
        "UPDATE mcp_access_tokens SET created_at = now() - interval '2 days', expires_at = now() - interval '1 second'
          WHERE id = $1",
    )
    .bind(expiring.id)
    .execute(&db.pool)
    .await
    .unwrap();
    let before = common::mcp_footprint(&db).await;
    let answer = server.call(recall_request(2)).await;
    assert!(answer["error"]["message"].as_str().unwrap().contains("revoked or expired"), "{answer}");
    assert_eq!(common::mcp_footprint(&db).await, before, "a refused call reads and writes nothing");

    // A server started with either token refuses to start, saying why.
    for token in [&revoked.secret, &expiring.secret] {
        let server = RawStdio::start(&url, token);
        let output = server.child.wait_with_output().await.unwrap();
        assert!(!output.status.success());
        assert!(String::from_utf8_lossy(&output.stderr).contains("MESH_MCP_TOKEN is not a valid access token"));
    }
}
