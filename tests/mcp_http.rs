//! `mesh-memory mcp --http` driven by the official TypeScript SDK's streamable-HTTP client
//! (`tests/mcp/client.mjs`): requests are bound by operator-issued bearer tokens; without a valid
//! one the server answers 401 and nothing is read or written (checked in SQL).

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{mcp_footprint as footprint, serve_mcp_http, test_db, TestDb, World};
use mesh_memory::operator::{InputRefused, OperatorError, OperatorSession, TokenBindingRequest};
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
    let priya_token = common::issue_token(&db, world.agent, dm, "U456", "Priya's desktop").await;
    let victor_token = common::issue_token(&db, world.agent, channel, "U123", "").await;
    // Issuing checks the binding: no such speaker on that connector, or one who is not a member.
    let (issuer, issuer_password, _) = common::login_role_with_password(&db, "mm_iss", "mesh_operator").await;
    let issuer = OperatorSession::sign_in(&db.options, &issuer, &issuer_password).await.unwrap();
    let binding = |external_id| TokenBindingRequest {
        agent: world.agent,
        conversation: dm,
        external_id,
        label: "",
        expires_at: None,
    };
    assert!(issuer.issue_access_token(&binding("U999"), "for Priya").await.is_err());
    let outsider = issuer.issue_access_token(&binding("U123"), "for Victor").await.unwrap_err();
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

/// `(action, role, kind, reason)` of every revocation of `target` (its issue is recorded too).
async fn actions_on(db: &TestDb, target: uuid::Uuid) -> Vec<(String, String, String, String)> {
    sqlx::query_as(
        "SELECT action, role_name, target_kind, reason FROM operator_actions
          WHERE target_id = $1 AND action = 'revoke_access_token' ORDER BY acted_at",
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
    let by_console = common::issue_token(&db, world.agent, dm, "U457", "laptop").await;
    let by_cli = common::issue_token(&db, world.agent, dm, "U457", "desktop").await;

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
    assert!(matches!(no_reason, Err(OperatorError::Input(InputRefused { field: "reason", .. }))), "{no_reason:?}");
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
    let third = common::issue_token(&db, world.agent, dm, "U457", "tablet").await;
    assert!(matches!(reader.revoke_access_token(third.id, "no").await, Err(OperatorError::Forbidden(_))));
    assert!(actions_on(&db, third.id).await.is_empty());
}

/// Waits up to `seconds` for `child` to exit; `None` while it still runs.
fn exited_within(child: &mut std::process::Child, seconds: u64) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `node client.mjs http ENDPOINT TOKEN OPS`, started and left running.
fn spawn_node_http(endpoint: &str, token: &str, ops: &Value) -> std::process::Child {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp");
    Command::new("node")
        .current_dir(&dir)
        .args(["client.mjs", "http", endpoint, token, &ops.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("node runs")
}

/// Backends of this test's database waiting for a lock.
async fn lock_waiters(db: &TestDb) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn one_tokens_blocked_call_never_delays_another_tokens_call() {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let priya = world.person("Priya", "U456").await;
    let victor = world.person("Victor", "U123").await;
    let dm = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let channel = world.conversation("C-ENG", Topology::Channel, &[&victor, &priya]).await;
    let priya_token = common::issue_token(&db, world.agent, dm, "U456", "").await;
    let victor_token = common::issue_token(&db, world.agent, channel, "U123", "").await;
    let server = serve_mcp_http(&db);

    let made = node(&[
        "http",
        &server.endpoint,
        &priya_token.secret,
        &json!([{"op": "call", "name": "remember", "args": {"body": "Prefers tea to coffee."}}]).to_string(),
    ]);
    let entry = made[0]["json"]["entry_id"].as_str().expect("committed").to_owned();

    // The test holds the entry's row lock: Priya's amend waits for it inside its tool call,
    // deterministically, for as long as the test wants.
    let mut holder = db.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM memory_entries WHERE right(id::text, 12) = $1 FOR UPDATE")
        .bind(&entry)
        .execute(&mut *holder)
        .await
        .unwrap();
    let amend = json!([{"op": "call", "name": "amend",
                        "args": {"entry_id": entry, "expected_revision": 1, "body": "Prefers green tea."}}]);
    let mut blocked = spawn_node_http(&server.endpoint, &priya_token.secret, &amend);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while lock_waiters(&db).await == 0 {
        assert!(blocked.try_wait().unwrap().is_none(), "the amend ended without waiting for the lock");
        assert!(std::time::Instant::now() < deadline, "the amend never reached the locked row");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // Victor's call, on his own token, completes while Priya's is still blocked.
    let recall = json!([{"op": "call", "name": "recall", "args": {"query": "tea"}}]);
    let mut other = spawn_node_http(&server.endpoint, &victor_token.secret, &recall);
    let finished = exited_within(&mut other, 30);
    let still_blocked = blocked.try_wait().unwrap().is_none() && lock_waiters(&db).await > 0;
    holder.rollback().await.unwrap();
    let priya_finished = exited_within(&mut blocked, 60);
    if finished.is_none() {
        let _ = other.kill();
    }
    let _ = other.wait();
    assert!(finished.is_some_and(|s| s.success()), "another token's call waited for a blocked call of Priya's token");
    assert!(still_blocked, "Priya's call was still waiting when the other call finished");
    assert!(priya_finished.is_some_and(|s| s.success()), "Priya's amend finished once the lock was released");
    let revisions: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM memory_entry_revisions r JOIN memory_entries e ON e.id = r.entry_id
          WHERE right(e.id::text, 12) = $1",
    )
    .bind(&entry)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(revisions, 2, "the blocked amend committed after the lock was released");
}

/// `mesh-memory ARGS` against the test database, signed in as `role` with `password`.
fn cli(db: &TestDb, role: &str, password: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env("MESH_OPERATOR_ROLE", role)
        .env("MESH_OPERATOR_PASSWORD", password)
        .output()
        .unwrap()
}

/// Tokens and the operator actions on them: what a refused issue must not add to.
async fn token_footprint(db: &TestDb) -> (i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM mcp_access_tokens),
                (SELECT count(*) FROM operator_actions WHERE target_kind = 'mcp_access_token')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn every_issue_is_an_audited_operator_action_and_an_expired_token_gets_401_like_a_revoked_one() {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let priya = world.person("Priya", "U456").await;
    world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let (role, password, _) = common::login_role_with_password(&db, "mm_iss", "mesh_operator").await;
    let create = |extra: &[&str]| {
        let mut args = vec!["--json", "mcp", "token", "create", "--agent", "assistant", "--conversation", "D-PRIYA"];
        args.extend_from_slice(&["--as", "U456", "--label", "Priya's laptop"]);
        args.extend_from_slice(extra);
        args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>, password: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&db, &role, password, &args)
    };

    // Refused issues write nothing: no reason, a wrong password, an expiry in the past, bad text.
    let before = token_footprint(&db).await;
    for (args, password, why) in [
        (create(&[]), password.as_str(), "--reason"),
        (create(&["--reason", "ticket 7"]), "not-the-password", "cannot sign in"),
        (create(&["--reason", "ticket 7", "--expires-at", "2020-01-01"]), password.as_str(), "expires_at"),
        (create(&["--reason", "ticket 7", "--expires-in", "30 days"]), password.as_str(), "expires_in"),
        (create(&["--reason", "  "]), password.as_str(), "reason is required"),
    ] {
        let refused = run(args, password);
        assert!(!refused.status.success(), "{why}");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(why), "{why}: {stderr}");
    }
    assert_eq!(token_footprint(&db).await, before, "a refused issue writes nothing");

    // An issue: the role, the reason, the binding and the expiry are recorded.
    let issued = run(create(&["--reason", "ticket 7", "--expires-in", "30d"]), &password);
    assert!(issued.status.success(), "{}", String::from_utf8_lossy(&issued.stderr));
    let issued: Value = serde_json::from_slice(&issued.stdout).unwrap();
    let id: uuid::Uuid = issued["id"].as_str().unwrap().parse().unwrap();
    let secret = issued["token"].as_str().unwrap().to_owned();
    let expires: chrono::DateTime<chrono::Utc> = issued["expires_at"].as_str().unwrap().parse().unwrap();
    let in_30_days = chrono::Utc::now() + chrono::TimeDelta::days(30);
    assert!((expires - in_30_days).num_seconds().abs() < 120, "{expires}");
    let (action, by, reason, details): (String, String, String, Value) =
        sqlx::query_as("SELECT action, role_name, reason, details FROM operator_actions WHERE target_id = $1")
            .bind(id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((action.as_str(), by.as_str(), reason.as_str()), ("issue_access_token", role.as_str(), "ticket 7"));
    assert_eq!(details["identity_id"], priya.identity.0.to_string());
    assert_eq!(details["runtime_agent_id"], world.agent.0.to_string());
    let recorded: chrono::DateTime<chrono::Utc> = serde_json::from_value(details["expires_at"].clone()).unwrap();
    assert_eq!(recorded.timestamp(), expires.timestamp(), "the expiry is recorded with the action");

    // Neither the operator nor the runtime may write a token without the audited function.
    let (_, runtime) = common::login_role(&db, "mm_rt", "mesh_runtime").await;
    let (_, operator_pool) = common::login_role(&db, "mm_op", "mesh_operator").await;
    for pool in [&runtime, &operator_pool] {
        let forged = sqlx::query(
            "INSERT INTO mcp_access_tokens (id, token_hash, runtime_agent_id, conversation_id, identity_id)
             SELECT gen_random_uuid(), sha256('forged'), runtime_agent_id, conversation_id, identity_id
               FROM mcp_access_tokens LIMIT 1",
        )
        .execute(pool)
        .await
        .unwrap_err();
        assert_eq!(forged.as_database_error().and_then(|d| d.code()).as_deref(), Some("42501"));
    }

    // Live until it expires; then 401 exactly like a revoked token, and listed as expired.
    let server = serve_mcp_http(&db);
    assert_eq!(node(&["probe", &server.endpoint, &secret])["status"], 200);
    sqlx::query(
        "UPDATE mcp_access_tokens SET created_at = now() - interval '31 days', expires_at = now() - interval '1 second'
          WHERE id = $1",
    )
    .bind(id)
    .execute(&db.pool)
    .await
    .unwrap();
    let before = footprint(&db).await;
    assert_eq!(node(&["probe", &server.endpoint, &secret])["status"], 401);
    assert_eq!(footprint(&db).await, before, "an expired token reads and writes nothing");
    assert_eq!(db.store.authenticate_access_token(&secret).await.unwrap(), None);
    let listed = cli(&db, &role, &password, &["mcp", "token", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains(&id.to_string()) && listed.contains("expired "), "{listed}");
}
