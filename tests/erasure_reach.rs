//! What an erasure reaches and what it must leave alone (issue 52), against a real PostgreSQL
//! with real login roles: the message a memory was learned from (by a turn or over MCP), the
//! planner's statistics, grants' reasons; a reason that quotes the text is refused; redaction
//! stays inside the erasure's runtime agents and never replaces a short value that merely equals
//! an erased message; a login that expired or lost LOGIN can no longer act; and a person with
//! 10,000 messages erases in seconds (the test prints the time and the time locks were held).

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{login_role_with_password, test_db, Person, TestDb, World};
use mesh_memory::erasure::{ErasureError, ErasureOptions, ErasureScope, ERASURE_MARKER};
use mesh_memory::operator::{OperatorError, OperatorSession};
use mesh_memory::retrieval::{RetrievalConfig, Retriever};
use mesh_memory::store::Topology;
use mesh_memory::tools::ToolCall;
use mesh_memory::turn::{ScriptedModel, TurnEngine, TurnOutcome};
use mesh_memory::{ConversationId, EntryId};
use serde_json::json;

/// A secret nothing else in the store says.
const SECRET: &str = "my door code is 4711-QX9 and the alarm word is heliotrope";
const SECRET_TOKEN: &str = "heliotrope";

struct Scene {
    db: TestDb,
    world: World,
    dana: Person,
    dm: ConversationId,
}

async fn scene() -> Scene {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let dana = world.person("Dana", "U321").await;
    let dm = world.conversation("D-DANA", Topology::Direct, &[&dana]).await;
    Scene { db, world, dana, dm }
}

fn engine(db: &TestDb, model: &Arc<ScriptedModel>) -> TurnEngine {
    TurnEngine::new(db.store.clone(), Retriever::new(db.store.clone(), RetrievalConfig::default()), model.clone())
}

async fn eraser(db: &TestDb) -> (OperatorSession, String) {
    let (role, password, _) = login_role_with_password(db, "eraser", "mesh_eraser").await;
    (OperatorSession::sign_in(&db.options, &role, &password).await.unwrap(), role)
}

/// Dana pastes the secret in her DM and the agent remembers it (a turn). Returns the entry.
async fn dana_pastes_the_secret(s: &mut Scene) -> EntryId {
    let told = s.world.say(s.dm, &s.dana, &format!("Please remember: {SECRET}")).await;
    let model = Arc::new(
        ScriptedModel::new().calls(vec![("remember", json!({"body": SECRET, "subject": "U321"}))]).reply("Noted."),
    );
    let report = engine(&s.db, &model).run_turn(told).await.unwrap();
    assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }), "{:?}", report.outcome);
    report.ledger.writes[0].entry_id()
}

/// Rows of `table.column` whose text holds `needle`.
async fn holding(db: &TestDb, table_column: &str, needle: &str) -> i64 {
    let (table, column) = table_column.split_once('.').unwrap();
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table} WHERE {column}::text ILIKE $1")))
        .bind(format!("%{needle}%"))
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

async fn erase(session: &OperatorSession, scope: ErasureScope, reason: &str) -> Result<(), OperatorError> {
    let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await?;
    session.erase(&preview.scope, &preview.object_ids, reason, &ErasureOptions::default()).await.map(|_| ())
}

#[tokio::test]
async fn erasing_an_entry_erases_the_message_it_was_learned_from_so_no_later_turn_sees_it() {
    let mut s = scene().await;
    let entry = dana_pastes_the_secret(&mut s).await;
    let (session, _) = eraser(&s.db).await;
    let scope = ErasureScope::Entry { entry };
    let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
    assert_eq!(preview.counts.source_messages, 1, "{}", preview.counts);
    assert!(
        preview.messages.iter().any(|m| m.kind == "source" && m.excerpt.contains("door code")),
        "the operator sees the message that goes: {:?}",
        preview.messages
    );
    session.erase(&preview.scope, &preview.object_ids, "DSR-7", &ErasureOptions::default()).await.unwrap();
    assert_eq!(holding(&s.db, "messages.body", SECRET_TOKEN).await, 0, "the pasted message keeps the secret");

    // The next turn's history (what the model is sent) holds the marker, not the secret.
    let next = s.world.say(s.dm, &s.dana, "what did I tell you earlier?").await;
    let model = Arc::new(ScriptedModel::new().reply("Nothing I can repeat."));
    engine(&s.db, &model).run_turn(next).await.unwrap();
    let sent = serde_json::to_string(&model.requests()).unwrap();
    assert!(!sent.contains(SECRET_TOKEN), "the model was sent the erased text: {sent}");
    assert!(sent.contains(ERASURE_MARKER));
}

#[tokio::test]
async fn erasing_an_entry_remembered_over_mcp_erases_the_recorded_call() {
    let mut s = scene().await;
    let body = json!({"body": SECRET, "subject": "U321"}).to_string();
    let recorded = mesh_memory::turn::receive(
        &s.db.store,
        s.world.agent,
        s.dm,
        "slack",
        "U321",
        &format!("[remember via MCP] {body}"),
    )
    .await
    .unwrap();
    let model = Arc::new(ScriptedModel::new());
    let call = ToolCall { id: "mcp".into(), name: "remember".into(), arguments: body };
    let mut session = Default::default();
    let outcome = engine(&s.db, &model).run_hosted_call(recorded, &call, &mut session).await.unwrap();
    let entry = outcome.ledger.writes[0].entry_id();
    assert_eq!(holding(&s.db, "messages.body", SECRET_TOKEN).await, 1);
    s.world.clock += chrono::Duration::minutes(1);

    let (eraser, _) = eraser(&s.db).await;
    erase(&eraser, ErasureScope::Entry { entry }, "DSR-8").await.unwrap();
    assert_eq!(holding(&s.db, "messages.body", SECRET_TOKEN).await, 0, "the MCP call's record keeps the secret");
    assert_eq!(holding(&s.db, "agent_turns.tool_calls", SECRET_TOKEN).await, 0);
}

#[tokio::test]
async fn the_planner_statistics_do_not_keep_the_erased_text() {
    let mut s = scene().await;
    let entry = dana_pastes_the_secret(&mut s).await;
    for table in ["messages", "memory_entry_revisions", "agent_turns"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("ANALYZE {table}"))).execute(&s.db.pool).await.unwrap();
    }
    let in_stats = "SELECT count(*) FROM pg_stats WHERE schemaname = current_schema()
                     AND (most_common_vals::text ILIKE $1 OR histogram_bounds::text ILIKE $1
                          OR most_common_elems::text ILIKE $1)";
    let before: i64 =
        sqlx::query_scalar(in_stats).bind(format!("%{SECRET_TOKEN}%")).fetch_one(&s.db.pool).await.unwrap();
    assert!(before > 0, "the statistics sampled the secret");

    let (session, _) = eraser(&s.db).await;
    erase(&session, ErasureScope::Entry { entry }, "DSR-9").await.unwrap();
    let after: i64 =
        sqlx::query_scalar(in_stats).bind(format!("%{SECRET_TOKEN}%")).fetch_one(&s.db.pool).await.unwrap();
    assert_eq!(after, 0, "pg_stats (readable by every reader of the tables) keeps the erased text");
}

#[tokio::test]
async fn a_grants_reason_that_quotes_the_text_is_redacted_and_a_reason_quoting_it_is_refused() {
    let mut s = scene().await;
    let entry = dana_pastes_the_secret(&mut s).await;
    let revision: uuid::Uuid = sqlx::query_scalar("SELECT current_revision_id FROM memory_entries WHERE id = $1")
        .bind(entry)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    let grant =
        common::grant(&s.db.pool, s.world.agent, mesh_memory::RevisionId(revision), &[s.dana.actor], false).await;
    sqlx::query("UPDATE sharing_grants SET reason = $2 WHERE id = $1")
        .bind(grant)
        .bind(format!("released because {SECRET}, per Dana"))
        .execute(&s.db.pool)
        .await
        .unwrap();

    let (session, _) = eraser(&s.db).await;
    // The reason stays in the audit for good: quoting the text, whole or six words of it, is refused.
    for reason in [format!("erase '{SECRET}'"), "as she put it: qx9 and the alarm word is heliotrope".to_owned()] {
        let refused = erase(&session, ErasureScope::Entry { entry }, &reason).await.unwrap_err();
        assert!(
            matches!(refused, OperatorError::Erasure(ErasureError::ReasonQuotesErasedText)),
            "{reason:?}: {refused}"
        );
    }
    assert_eq!(holding(&s.db, "memory_entry_revisions.body", SECRET_TOKEN).await, 1, "a refusal erases nothing");

    erase(&session, ErasureScope::Entry { entry }, "DSR-10").await.unwrap();
    assert_eq!(holding(&s.db, "sharing_grants.reason", SECRET_TOKEN).await, 0, "the grant's reason keeps it");
    let reason: String = sqlx::query_scalar("SELECT reason FROM sharing_grants WHERE id = $1")
        .bind(grant)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(reason, format!("released because {ERASURE_MARKER}, per Dana"), "only the occurrence goes");
}

#[tokio::test]
async fn redaction_stays_in_the_erasures_agents_and_leaves_values_that_merely_equal_a_short_message() {
    let mut s = scene().await;
    // Dana also talks to a second agent, whose audit quotes the secret in a sharing decision.
    let other = World::new(&s.db.store, "other-assistant").await;
    let dm_other = other.conversation("D-DANA-2", Topology::Direct, &[&s.dana]).await;
    let mut other = other;
    let (_, other_revision) = other.remember(dm_other, &s.dana, Some(s.dana.actor), SECRET).await;
    let other_grant = common::grant(&s.db.pool, other.agent, other_revision, &[s.dana.actor], false).await;
    sqlx::query(
        "INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason)
         VALUES ('ops', 'revoke_grant', 'sharing_grant', $1, $2)",
    )
    .bind(other_grant)
    .bind(format!("revoked: {SECRET}"))
    .execute(&s.db.pool)
    .await
    .unwrap();
    // In the first agent: the secret, and a short message that equals an unrelated decision.
    dana_pastes_the_secret(&mut s).await;
    s.world.say(s.dm, &s.dana, "approved").await;
    let this_grant =
        common::grant(&s.db.pool, s.world.agent, other_revision_in(&s).await, &[s.dana.actor], false).await;
    sqlx::query(
        "INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason)
         VALUES ('ops', 'revoke_grant', 'sharing_grant', $1, 'approved'),
                ('ops', 'revoke_grant', 'sharing_grant', $1, $2)",
    )
    .bind(this_grant)
    .bind(format!("revoked: {SECRET}"))
    .execute(&s.db.pool)
    .await
    .unwrap();

    let (session, _) = eraser(&s.db).await;
    let scope = ErasureScope::Person { actor: s.dana.actor, agent: Some(s.world.agent) };
    erase(&session, scope, "DSR-11").await.unwrap();

    let reasons: Vec<(uuid::Uuid, String)> =
        sqlx::query_as("SELECT target_id, reason FROM operator_actions WHERE action = 'revoke_grant' ORDER BY id")
            .fetch_all(&s.db.pool)
            .await
            .unwrap();
    assert_eq!(
        reasons,
        vec![
            (other_grant, format!("revoked: {SECRET}")),
            (this_grant, "approved".to_owned()),
            (this_grant, format!("revoked: {ERASURE_MARKER}")),
        ],
        "the other agent's audit row and a value equal to a short message stay; the occurrence goes"
    );
}

/// The current revision of the first agent's first entry (the secret's).
async fn other_revision_in(s: &Scene) -> mesh_memory::RevisionId {
    mesh_memory::RevisionId(
        sqlx::query_scalar(
            "SELECT current_revision_id FROM memory_entries WHERE runtime_agent_id = $1 ORDER BY created_at LIMIT 1",
        )
        .bind(s.world.agent)
        .fetch_one(&s.db.pool)
        .await
        .unwrap(),
    )
}

#[tokio::test]
async fn a_signed_in_eraser_whose_login_ends_can_no_longer_erase() {
    let mut s = scene().await;
    let entry = dana_pastes_the_secret(&mut s).await;
    let scope = ErasureScope::Entry { entry };
    for ending in ["ALTER ROLE {} NOLOGIN", "ALTER ROLE {} VALID UNTIL '2000-01-01'", "REVOKE mesh_eraser FROM {}"] {
        let (session, role) = eraser(&s.db).await;
        let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(ending.replace("{}", &role))).execute(&s.db.pool).await.unwrap();
        // The pool's connections were opened before: only the check in the action's own
        // transaction can refuse.
        let refused =
            session.erase(&preview.scope, &preview.object_ids, "DSR-12", &ErasureOptions::default()).await.unwrap_err();
        assert!(
            matches!(refused, OperatorError::Erasure(ErasureError::LoginNoLongerValid(_) | ErasureError::NotAnEraser)),
            "{ending}: {refused}"
        );
        assert_eq!(holding(&s.db, "memory_entry_revisions.body", SECRET_TOKEN).await, 1, "{ending}: erased");
        session.close().await;
    }
    // An operator's pooled connection is refused the same way when its login ends.
    let grant = common::grant(&s.db.pool, s.world.agent, other_revision_in(&s).await, &[s.dana.actor], false).await;
    let (role, _, pool) = login_role_with_password(&s.db, "operator", "mesh_operator").await;
    sqlx::query(sqlx::AssertSqlSafe(format!("ALTER ROLE {role} NOLOGIN"))).execute(&s.db.pool).await.unwrap();
    let err = sqlx::query("SELECT mesh_operator_revoke_grant($1, 'lost laptop')")
        .bind(grant)
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(err.as_database_error().unwrap().code().as_deref(), Some("MM014"), "{err}");
    let revoked: bool = sqlx::query_scalar("SELECT revoked_at IS NOT NULL FROM sharing_grants WHERE id = $1")
        .bind(grant)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert!(!revoked);
    // Through the operator layer the same refusal reads as the server says it.
    let (role, password, _) = login_role_with_password(&s.db, "operator", "mesh_operator").await;
    let operator = OperatorSession::sign_in(&s.db.options, &role, &password).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("ALTER ROLE {role} VALID UNTIL '2000-01-01'")))
        .execute(&s.db.pool)
        .await
        .unwrap();
    let refused = operator.revoke_access_token(uuid::Uuid::now_v7(), "lost laptop").await.unwrap_err();
    assert!(
        matches!(&refused, OperatorError::Forbidden(why) if why.contains("expired")),
        "an expired login is told so: {refused}"
    );
}

/// A person with 10,000 messages, each answered by a turn that quotes it, erased in one go. Prints
/// the preview, the erasure (the time its locks are held) and the vacuum. Before the erasure was
/// set-based, every turn was redacted with every text (rows x texts in plpgsql under the locks).
#[tokio::test]
async fn a_person_with_ten_thousand_messages_erases_in_seconds() {
    const MESSAGES: i64 = 10_000;
    let s = scene().await;
    sqlx::query(
        "WITH m AS (
             INSERT INTO messages (id, runtime_agent_id, conversation_id, direction, sender_actor_id,
                                   sender_identity_id, body, sent_at)
             SELECT gen_random_uuid(), $1, $2, 'inbound', $3, $4,
                    format('message %s from Dana about the project plan, item %s', i, i * 7), now()
               FROM generate_series(1, $5) AS i
             RETURNING id, body)
         INSERT INTO agent_turns (id, runtime_agent_id, conversation_id, inbound_message_id, rounds, tool_calls,
                                  ledger, outcome, started_at)
         SELECT gen_random_uuid(), $1, $2, m.id, 1,
                jsonb_build_array(jsonb_build_object('name', 'recall', 'arguments', jsonb_build_object('query', m.body))),
                '{\"writes\": []}', 'failed', now()
           FROM m",
    )
    .bind(s.world.agent)
    .bind(s.dm)
    .bind(s.dana.actor)
    .bind(s.dana.identity)
    .bind(MESSAGES)
    .execute(&s.db.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason)
         SELECT 'ops', 'note', 'entry', gen_random_uuid(), format('routine check %s', i) FROM generate_series(1, 500) AS i",
    )
    .execute(&s.db.pool)
    .await
    .unwrap();

    let (session, _) = eraser(&s.db).await;
    let scope = ErasureScope::Person { actor: s.dana.actor, agent: None };
    let started = Instant::now();
    let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
    let previewed = started.elapsed();
    assert_eq!(preview.counts.messages as i64, MESSAGES);
    assert_eq!(preview.counts.turns as i64, MESSAGES);

    let started = Instant::now();
    let report =
        session.erase(&preview.scope, &preview.object_ids, "DSR-13", &ErasureOptions::default()).await.unwrap();
    let erased = started.elapsed();
    println!(
        "erasure of a person with {MESSAGES} messages and {MESSAGES} turns: preview {:.2} s, erase {:.2} s in all, \
         locks held {:.2} s, vacuum and analyse {:.2} s ({} tables); {}",
        previewed.as_secs_f64(),
        erased.as_secs_f64(),
        report.locked_ms as f64 / 1000.0,
        report.vacuum_ms as f64 / 1000.0,
        report.vacuumed.len(),
        report.counts
    );
    assert_eq!(holding(&s.db, "messages.body", "project plan").await, 0);
    assert_eq!(holding(&s.db, "agent_turns.tool_calls", "project plan").await, 0);
    assert_eq!(holding(&s.db, "operator_actions.reason", "routine check").await, 500, "unrelated reasons stay");
}
