//! `mesh-memory mcp --http` driven by the official TypeScript SDK's streamable-HTTP client
//! (`tests/mcp/client.mjs`): requests are bound by operator-issued bearer tokens; without a valid
//! one the server answers 401 and nothing is read or written (checked in SQL).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{mcp_footprint as footprint, serve_mcp_http, test_db, TestDb, World};
use mesh_memory::operator::{OperatorError, OperatorSession};
use mesh_memory::store::{StoreError, Topology};
use serde_json::{json, Value};

fn node(args: &[&str]) -> Value {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "\n==== the MCP client SDK is not installed: run scripts/setup.sh (npm ci in tests/mcp) ====\n"
    );
    let output = Command::new("node").current_dir(&dir).arg("client.mjs").args(args).output().expect("node runs");
    assert!(
        output.status.success(),
        "the MCP client failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap_or_else(|e| panic!("{stdout:?}: {e}"))
}

#[tokio::test]
async fn bearer_tokens_bind_http_requests_and_bad_ones_get_401_with_nothing_written() {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let priya = world.person("Priya", "U456").await;
    let victor = world.person("Victor", "U123").await;
    let dm = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let channel = world.conversation("C-ENG", Topology::Channel, &[&victor, &priya]).await;
    let priya_token = db.store.issue_access_token(world.agent, dm, "U456", "Priya's desktop").await.unwrap();
    let victor_token = db.store.issue_access_token(world.agent, channel, "U123", "").await.unwrap();
    // Issuing checks the binding: no such speaker on that connector, or one who is not a member.
    assert!(db.store.issue_access_token(world.agent, dm, "U999", "").await.is_err());
    let outsider = db.store.issue_access_token(world.agent, dm, "U123", "").await.unwrap_err();
    assert!(outsider.to_string().contains("not a member"), "{outsider}");
    let stored: Vec<Vec<u8>> =
        sqlx::query_scalar("SELECT token_hash FROM mcp_access_tokens").fetch_all(&db.pool).await.unwrap();
    assert!(stored.iter().all(|h| h.len() == 32), "SHA-256 digests");
    assert!(!stored.iter().any(|h| h.as_slice() == priya_token.secret.as_bytes()), "only hashes are stored");

    let server = serve_mcp_http(&db);
    let seen = node(&[
        "http",
        &server.endpoint,
        &priya_token.secret,
        &json!([
            {"op": "tools"},
            {"op": "call", "name": "remember", "args": {"body": "Is interviewing at Initech next month."}},
            {"op": "call", "name": "recall", "args": {"query": "interviewing Initech"}},
            {"op": "call", "name": "remember", "args": {"body": ""}},
        ])
        .to_string(),
    ]);
    let seen = seen.as_array().unwrap();
    assert_eq!(seen[0]["names"], json!(["amend", "forget", "recall", "remember", "request_memory_sharing"]));
    let committed = &seen[1]["json"];
    assert_eq!(committed["status"], "committed", "{committed}");
    let (entry, number, source, origin): (uuid::Uuid, i32, Option<uuid::Uuid>, Option<uuid::Uuid>) = sqlx::query_as(
        "SELECT e.id, r.revision_number, r.source_actor_id, e.origin_conversation_id
           FROM memory_entries e JOIN memory_entry_revisions r ON r.id = e.current_revision_id
          WHERE right(e.id::text, 12) = $1",
    )
    .bind(committed["entry_id"].as_str().unwrap())
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(entry.to_string().ends_with(committed["entry_id"].as_str().unwrap()));
    assert_eq!(committed["revision"], number, "the result is what the store committed");
    assert_eq!((source, origin), (Some(priya.actor.0), Some(dm.0)), "bound by the token, not by any argument");
    assert_eq!(seen[2]["json"]["memories"].as_array().unwrap().len(), 1);
    assert_eq!(seen[3]["isError"], true, "an empty body is refused");

    // Victor's token binds the channel: Priya's direct-conversation memory is not his to recall.
    let elsewhere = node(&[
        "http",
        &server.endpoint,
        &victor_token.secret,
        &json!([{"op": "call", "name": "recall", "args": {"query": "interviewing Initech"}}]).to_string(),
    ]);
    assert_eq!(elsewhere[0]["json"]["memories"], json!([]));

    // No token, a made-up one, a revoked one: 401, and nothing was read or written.
    let (role, password, _) = common::login_role_with_password(&db, "mm_tok", "mesh_operator").await;
    let session = OperatorSession::sign_in(&db.options, &role, &password).await.unwrap();
    session.revoke_access_token(victor_token.id, "rotating keys").await.unwrap();
    let again = session.revoke_access_token(victor_token.id, "again").await;
    assert!(matches!(again, Err(OperatorError::Store(StoreError::InvalidInput { field: "token", .. }))));
    let before = footprint(&db).await;
    for token in ["-", "mmt_made-up", victor_token.secret.as_str()] {
        let probed = node(&["probe", &server.endpoint, token]);
        assert_eq!(probed["status"], 401, "token {token:?}");
    }
    assert_eq!(footprint(&db).await, before, "a refused request reads and writes nothing");
    let listed = db.store.list_access_tokens(Some(world.agent)).await.unwrap();
    let victor_row = listed.iter().find(|t| t.id == victor_token.id).unwrap();
    assert!(victor_row.revoked_at.is_some());
    let priya_row = listed.iter().find(|t| t.id == priya_token.id).unwrap();
    assert!(priya_row.last_used_at.is_some(), "use is recorded");
    assert_eq!((priya_row.conversation.as_str(), priya_row.speaker.as_str()), ("D-PRIYA", "U456"));
    // A valid token still works after the refusals.
    assert_eq!(node(&["probe", &server.endpoint, &priya_token.secret])["status"], 200);
}

/// `(action, role, reason)` of every operator action on `target`.
async fn actions_on(db: &TestDb, target: uuid::Uuid) -> Vec<(String, String, String, String)> {
    sqlx::query_as(
        "SELECT action, role_name, target_kind, reason FROM operator_actions WHERE target_id = $1 ORDER BY acted_at",
    )
    .bind(target)
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn the_cli_and_the_console_revoke_a_token_the_same_audited_way_and_the_runtime_cannot() {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    world.person("Priya", "U456").await;
    let priya = world.person("Priya Two", "U457").await;
    let dm = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let by_console = db.store.issue_access_token(world.agent, dm, "U457", "laptop").await.unwrap();
    let by_cli = db.store.issue_access_token(world.agent, dm, "U457", "desktop").await.unwrap();

    // The runtime role may record a token's use, never revoke or re-bind it.
    let (_, runtime) = common::login_role(&db, "mm_tok", "mesh_runtime").await;
    let refused = sqlx::query("UPDATE mcp_access_tokens SET revoked_at = now() WHERE id = $1")
        .bind(by_console.id)
        .execute(&runtime)
        .await
        .unwrap_err();
    assert_eq!(refused.as_database_error().and_then(|d| d.code()).as_deref(), Some("42501"));

    // The console's revoke: the operator layer under the operator's own role.
    let (role, password, _) = common::login_role_with_password(&db, "mm_tok", "mesh_operator").await;
    let session = OperatorSession::sign_in(&db.options, &role, &password).await.unwrap();
    let no_reason = session.revoke_access_token(by_console.id, " ").await;
    assert!(matches!(no_reason, Err(OperatorError::Store(StoreError::InvalidInput { field: "reason", .. }))));
    assert_eq!(session.revoke_access_token(by_console.id, "laptop lost").await.unwrap(), role);
    assert_eq!(db.store.authenticate_access_token(&by_console.secret).await.unwrap(), None, "revoked at once");

    // The CLI's revoke: the same layer, signed in from MESH_OPERATOR_PASSWORD.
    let cli = |token: uuid::Uuid, password: &str| {
        Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
            .args(["mcp", "token", "revoke", &token.to_string(), "--reason", "desktop lost", "--operator", &role])
            .env("DATABASE_URL", &db.url)
            .env("MESH_OPERATOR_PASSWORD", password)
            .output()
            .unwrap()
    };
    let wrong = cli(by_cli.id, "not-the-password");
    assert!(!wrong.status.success(), "a wrong password revokes nothing");
    assert!(actions_on(&db, by_cli.id).await.is_empty());
    let revoked = cli(by_cli.id, &password);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    assert_eq!(db.store.authenticate_access_token(&by_cli.secret).await.unwrap(), None, "revoked at once");

    // Both shells left the same row: the operator's own role, the action, the kind, the reason.
    let console_row = actions_on(&db, by_console.id).await;
    let cli_row = actions_on(&db, by_cli.id).await;
    assert_eq!(
        console_row,
        vec![("revoke_access_token".into(), role.clone(), "mcp_access_token".into(), "laptop lost".into())]
    );
    assert_eq!(
        cli_row,
        vec![("revoke_access_token".into(), role.clone(), "mcp_access_token".into(), "desktop lost".into())]
    );

    // A browse-only role is refused by the layer, with the reason, and nothing is written.
    let (reader, reader_password, _) = common::login_role_with_password(&db, "mm_tok", "mesh_console_reader").await;
    let reader = OperatorSession::sign_in(&db.options, &reader, &reader_password).await.unwrap();
    let third = db.store.issue_access_token(world.agent, dm, "U457", "tablet").await.unwrap();
    assert!(matches!(reader.revoke_access_token(third.id, "no").await, Err(OperatorError::Forbidden(_))));
    assert!(actions_on(&db, third.id).await.is_empty());
}
