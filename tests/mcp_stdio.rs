//! `mesh-memory mcp` driven over stdio by a real MCP client nobody here wrote: the official
//! TypeScript SDK (`tests/mcp/client.mjs`, `@modelcontextprotocol/sdk` from npm, installed by
//! `scripts/setup.sh`). Everything the client saw is compared with the database.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{test_db, TestDb, World};
use mesh_memory::store::Topology;
use serde_json::{json, Value};

/// Runs the client against a server bound to `speaker` in `conversation`; returns what it saw.
fn client(db: &TestDb, conversation: &str, speaker: &str, ops: Value) -> Vec<Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "\n==== the MCP client SDK is not installed: run scripts/setup.sh (npm ci in tests/mcp) ====\n"
    );
    let output = Command::new("node")
        .current_dir(&dir)
        .arg("client.mjs")
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_mesh-memory"))
        .arg(&db.url)
        .arg("assistant")
        .arg(conversation)
        .arg(speaker)
        .arg(ops.to_string())
        .env_remove("MESH_EMBEDDER")
        .env("MESH_EMBEDDER", "none")
        .output()
        .expect("node runs (install Node.js 20+)");
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
    world.conversation("C-ENG", Topology::Channel, &[&victor, &priya]).await;

    // Bound to Priya in her direct conversation.
    let seen = client(
        &db,
        "D-PRIYA",
        "U456",
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
        "C-ENG",
        "U123",
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
        "D-PRIYA",
        "U456",
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
