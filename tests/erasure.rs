//! Erasure under operator authority, against a real PostgreSQL with real login roles: who may
//! erase, that an erasure leaves no byte of a canary anywhere (every text and JSON column, a
//! `pg_dump`, the embeddings and the search projection) while the skeleton still reads, that a
//! turn which retrieved the memory before the erasure is withheld at delivery, and that an
//! erasure which fails halfway, or whose scope changed since its preview, erases nothing.

mod common;

use std::sync::Arc;

use common::{login_role_with_password, test_db, Person, TestDb, World};
use mesh_memory::erasure::{self, ErasureError, ErasureOptions, ErasureScope, FingerprintKey, ERASURE_MARKER};
use mesh_memory::operator::{OperatorError, OperatorSession};
use mesh_memory::privacy::{Rule, RuleName};
use mesh_memory::retrieval::{RetrievalConfig, Retriever};
use mesh_memory::store::{Topology, WriteOutcome};
use mesh_memory::turn::{ScriptedModel, TurnEngine, TurnOutcome};
use mesh_memory::{ConversationId, EntryId, RevisionId};
use serde_json::json;

/// A phrase nothing else in the store says: every check below looks for its words.
const CANARY: &str = "Dana keeps the spare key under the canary-7Q4Z zebra quartz fennel planter";
const CANARY_TOKEN: &str = "canary-7q4z";
const KEY: &[u8] = b"erasure test master key, 32 bytes+";

struct Scene {
    db: TestDb,
    world: World,
    dana: Person,
    priya: Person,
    victor: Person,
    dm: ConversationId,
    channel: ConversationId,
}

async fn scene() -> Scene {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let dana = world.person("Dana", "U321").await;
    let priya = world.person("Priya", "U456").await;
    let victor = world.person("Victor", "U123").await;
    let dm = world.conversation("D-DANA", Topology::Direct, &[&dana]).await;
    let channel = world.conversation("C-ENG", Topology::Channel, &[&dana, &priya, &victor]).await;
    Scene { db, world, dana, priya, victor, dm, channel }
}

fn engine(db: &TestDb, model: &Arc<ScriptedModel>) -> TurnEngine {
    TurnEngine::new(db.store.clone(), Retriever::new(db.store.clone(), RetrievalConfig::default()), model.clone())
}

fn key() -> FingerprintKey {
    FingerprintKey::from_master_key(KEY).unwrap()
}

fn with_key() -> ErasureOptions {
    ErasureOptions { fingerprint_key: Some(key()), ..ErasureOptions::default() }
}

async fn eraser(db: &TestDb) -> OperatorSession {
    let (role, password, _) = login_role_with_password(db, "eraser", "mesh_eraser").await;
    OperatorSession::sign_in(&db.options, &role, &password).await.unwrap()
}

/// Dana tells the agent the canary in her DM (a turn that remembers it and says it back), asks
/// for it again (a turn that retrieves it), and it gets an embedding. Returns the entry and its
/// revision.
async fn dana_tells_the_canary(s: &mut Scene) -> (EntryId, RevisionId) {
    let told = s.world.say(s.dm, &s.dana, &format!("Please remember: {CANARY}")).await;
    let model = Arc::new(
        ScriptedModel::new()
            .calls(vec![("remember", json!({"body": CANARY, "subject": "U321"}))])
            .reply(&format!("Noted. {CANARY}.")),
    );
    let report = engine(&s.db, &model).run_turn(told).await.unwrap();
    assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }), "{:?}", report.outcome);
    let write = &report.ledger.writes[0];
    let (entry, revision) = (write.entry_id(), write.revision_id());

    let asked = s.world.say(s.dm, &s.dana, "Where is the spare key planter?").await;
    let model = Arc::new(ScriptedModel::new().reply(&format!("You told me: {CANARY}")));
    let report = engine(&s.db, &model).run_turn(asked).await.unwrap();
    assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }), "{:?}", report.outcome);
    let used: i64 = sqlx::query_scalar("SELECT count(*) FROM agent_turns WHERE $1 = ANY (used_revision_ids)")
        .bind(revision)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(used, 1, "the second turn used the memory");

    sqlx::query(
        "WITH g AS (INSERT INTO embedding_generations (provider, model, dimension, document_form)
                    VALUES ('test', 'test', 3, 'body') RETURNING id)
         INSERT INTO revision_embeddings (generation_id, revision_id, model, dimension, embedding)
         SELECT g.id, $1, 'test', 3, '[0.1,0.2,0.3]'::vector FROM g",
    )
    .bind(revision)
    .execute(&s.db.pool)
    .await
    .unwrap();
    (entry, revision)
}

/// Rows of every text and JSON column of every table that contain `needle` (case-insensitive).
async fn rows_containing(db: &TestDb, needle: &str) -> Vec<(String, i64)> {
    let columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT format('%I.%I', c.table_name, c.column_name),
                format('SELECT count(*) FROM %I WHERE %I::text ILIKE $1', c.table_name, c.column_name)
           FROM information_schema.columns c
           JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
          WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
            AND c.data_type IN ('text', 'character varying', 'json', 'jsonb', 'tsvector', 'ARRAY')",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let mut found = Vec::new();
    for (column, statement) in columns {
        let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(statement))
            .bind(format!("%{needle}%"))
            .fetch_one(&db.pool)
            .await
            .unwrap();
        if n > 0 {
            found.push((column, n));
        }
    }
    found
}

fn pg_dump(db: &TestDb) -> String {
    let binaries = mesh_memory::pg::find_binaries().expect("PostgreSQL binaries (run scripts/setup.sh)");
    let output = std::process::Command::new(binaries.tool("pg_dump"))
        .args(["--no-owner", "--dbname", &db.url])
        .output()
        .expect("run pg_dump");
    assert!(output.status.success(), "pg_dump failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).to_lowercase()
}

#[tokio::test]
async fn only_members_of_mesh_eraser_can_erase_and_the_history_tables_refuse_every_other_rewrite() {
    let mut s = scene().await;
    let (entry, revision) = dana_tells_the_canary(&mut s).await;
    let scope = ErasureScope::Entry { entry };

    // An operator who may approve sharing is told why it may not erase; nothing changes.
    let (role, password, _) = login_role_with_password(&s.db, "operator", "mesh_operator").await;
    let operator = OperatorSession::sign_in(&s.db.options, &role, &password).await.unwrap();
    assert!(!operator.rights().can_erase);
    let preview = mesh_memory::operator::erasure_preview(operator.store(), &scope).await.unwrap();
    let refused = operator.erase(&preview.scope, &preview.object_ids, "DSR-1", &with_key()).await.unwrap_err();
    assert!(matches!(&refused, OperatorError::Forbidden(why) if why.contains("GRANT mesh_eraser TO")), "{refused}");
    // The database refuses it on its own: the runtime and operator roles lack EXECUTE.
    for group in ["mesh_runtime", "mesh_operator"] {
        let (_, pool) = common::login_role(&s.db, "direct", group).await;
        let err = sqlx::query("SELECT mesh_operator_erase(gen_random_uuid(), 'entry', $1, NULL, 'x', $2, '{}')")
            .bind(entry)
            .bind(&preview.object_ids)
            .execute(&pool)
            .await
            .unwrap_err();
        assert_eq!(err.as_database_error().unwrap().code().as_deref(), Some("42501"), "{group}: {err}");
    }
    // Even the table owner cannot rewrite history outside an erasure.
    for statement in [
        "UPDATE memory_entry_revisions SET body = '[erased]' WHERE id = $1",
        "UPDATE messages SET body = '[erased]' WHERE id IN (SELECT message_id FROM revision_sources WHERE revision_id = $1)",
        "UPDATE agent_turns SET failure_reason = 'x' WHERE $1 = ANY (used_revision_ids)",
        "DELETE FROM messages WHERE id IN (SELECT message_id FROM revision_sources WHERE revision_id = $1)",
    ] {
        let err = sqlx::query(statement).bind(revision).execute(&s.db.pool).await.unwrap_err();
        assert!(err.to_string().contains("append-only"), "{statement}: {err}");
    }
    assert!(!rows_containing(&s.db, CANARY_TOKEN).await.is_empty(), "nothing was erased");
}

#[tokio::test]
async fn erasing_a_person_leaves_no_byte_of_the_canary_and_the_skeleton_still_reads() {
    let mut s = scene().await;
    let (entry, revision) = dana_tells_the_canary(&mut s).await;
    // Someone else's memory stays whole.
    let (victor_entry, _) = s.world.remember(s.channel, &s.priya, Some(s.victor.actor), "Victor prefers tabs.").await;
    let before = rows_containing(&s.db, CANARY_TOKEN).await;
    assert!(before.len() >= 4, "the canary is in revisions, messages, turns and statistics: {before:?}");

    let session = eraser(&s.db).await;
    assert!(session.rights().can_erase);
    let scope = ErasureScope::Person { actor: s.dana.actor, agent: None };
    let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
    assert_eq!(preview.counts.revisions, 1);
    assert_eq!(preview.counts.messages, 2, "both of Dana's messages");
    assert_eq!(preview.counts.replies, 2, "the reply that repeated it and the one that used it");
    assert_eq!(preview.counts.turns, 2);
    assert_eq!(preview.counts.entries, 1);
    assert_eq!(preview.counts.embeddings, 1);
    assert!(preview.revisions[0].excerpt.contains("canary-7Q4Z"), "the operator sees what goes");

    let report = session
        .erase(&preview.scope, &preview.object_ids, "DSR-1042: data-subject request", &with_key())
        .await
        .unwrap();
    assert_eq!(report.counts, preview.counts);
    assert!(report.fingerprinted);
    assert!(report.vacuumed.contains(&"memory_entry_revisions".to_owned()), "{:?}", report.vacuumed);

    // No byte of it anywhere: every text, JSON and tsvector column, and a whole dump.
    assert_eq!(rows_containing(&s.db, CANARY_TOKEN).await, vec![]);
    assert_eq!(rows_containing(&s.db, "zebra quartz").await, vec![]);
    let dump = pg_dump(&s.db);
    for needle in [CANARY_TOKEN, "zebra quartz fennel", "spare key under"] {
        assert!(!dump.contains(needle), "pg_dump still holds {needle:?}");
    }
    // `erase verify` agrees, scanning by fingerprint; without the key it says it cannot scan.
    let verified = erasure::verify(s.db.store.pool(), report.erasure_id, Some(&key())).await.unwrap();
    assert!(verified.is_clean(), "{verified}");
    assert!(verified.columns_scanned > 20 && verified.values_scanned > 20, "{verified}");
    assert!(verified.erased_by.starts_with("eraser_"));
    let unkeyed = erasure::verify(s.db.store.pool(), report.erasure_id, None).await.unwrap();
    assert!(unkeyed.text_scan_unavailable.is_some());

    // The skeleton reads: history with the erasure note, explain naming the rule, the event.
    let history = s.db.store.entry_history(s.world.agent, entry).await.unwrap().unwrap();
    let erased = &history.revisions[0];
    assert_eq!(erased.body, ERASURE_MARKER);
    let note = erased.erased.as_ref().expect("an erasure note");
    assert_eq!(
        note.to_string(),
        format!("erased by {} on {}: DSR-1042: data-subject request", report.erased_by, note.erased_on)
    );
    assert_eq!(erased.sources.len(), 1, "lineage edges stay");
    let explained = mesh_memory::operator::explain(&s.db.store, Some(s.world.agent), entry, s.dm).await.unwrap();
    assert_eq!(explained.rule, RuleName::Erased, "{explained}");
    let verdict = mesh_memory::privacy::explain_entry(&s.db.store, Some(s.world.agent), entry, s.dm).await.unwrap();
    assert_eq!(verdict.rule, Rule::Erased);
    let events: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM memory_retrieval_events").fetch_all(&s.db.pool).await.unwrap();
    for event in events {
        mesh_memory::retrieval::explain_event(&s.db.pool, mesh_memory::RetrievalEventId(event))
            .await
            .unwrap()
            .expect("the event reads");
    }
    // Searches run and find nothing of it; the projection and statistics stay consistent.
    let retriever = Retriever::new(s.db.store.clone(), RetrievalConfig::default());
    let found = retriever
        .search(&mesh_memory::retrieval::SearchRequest::new(
            s.world.agent,
            s.dm,
            Some(s.dana.actor),
            "spare key planter",
            mesh_memory::retrieval::RetrievalMode::Recall,
        ))
        .await
        .unwrap();
    assert!(found.selections.iter().all(|m| m.revision_id != revision));
    common::assert_projection_matches_canonical(&s.db.pool).await;
    common::assert_lexical_statistics_match_projection(&s.db.pool).await;
    // Another person's memory keeps its text.
    let victor = s.db.store.entry_history(s.world.agent, victor_entry).await.unwrap().unwrap();
    assert_eq!(victor.revisions[0].body, "Victor prefers tabs.");
    assert!(victor.revisions[0].erased.is_none());
    // The runtime cannot bring it back, and a second erasure finds nothing left to erase.
    let amended = s.db.store.forget_entry(s.world.agent, entry).await.unwrap();
    assert!(matches!(amended, WriteOutcome::NothingChanged { .. }));
    let again = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
    assert_eq!(again.counts.revisions + again.counts.messages, 0);
    let refused = session.erase(&again.scope, &again.object_ids, "again", &with_key()).await.unwrap_err();
    assert!(matches!(refused, OperatorError::Erasure(ErasureError::NothingToErase(_))), "{refused}");
    // The audit row names the role and the reason.
    let (role, reason): (String, String) =
        sqlx::query_as("SELECT role_name, reason FROM operator_actions WHERE action = 'erase'")
            .fetch_one(&s.db.pool)
            .await
            .unwrap();
    assert_eq!((role, reason), (report.erased_by.clone(), "DSR-1042: data-subject request".to_owned()));
}

#[tokio::test]
async fn a_turn_that_retrieved_the_memory_before_the_erasure_is_withheld_at_delivery() {
    let mut s = scene().await;
    let (entry, revision) = dana_tells_the_canary(&mut s).await;
    let asked = s.world.say(s.dm, &s.dana, "Remind me where the spare key planter is?").await;
    let model = Arc::new(ScriptedModel::new().reply("Under the planter."));
    let engine = engine(&s.db, &model);
    let prepared = engine.prepare(asked).await.unwrap();

    let session = eraser(&s.db).await;
    let preview =
        mesh_memory::operator::erasure_preview(session.store(), &ErasureScope::Entry { entry }).await.unwrap();
    session
        .erase(&preview.scope, &preview.object_ids, "secret pasted by mistake", &ErasureOptions::default())
        .await
        .unwrap();

    let report = engine.deliver(prepared).await.unwrap();
    let TurnOutcome::Withheld { recheck } = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(recheck.stale_revisions[0].revision_id, revision);
}

#[tokio::test]
async fn an_erasure_that_fails_halfway_or_whose_scope_changed_erases_nothing() {
    let mut s = scene().await;
    let (entry, _) = dana_tells_the_canary(&mut s).await;
    let session = eraser(&s.db).await;
    let scope = ErasureScope::Person { actor: s.dana.actor, agent: Some(s.world.agent) };
    let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
    let before = rows_containing(&s.db, CANARY_TOKEN).await;

    // Another transaction holds one of Dana's messages: the erasure has rewritten the revision
    // by the time it waits for it, gives up after its lock timeout and rolls back whole.
    let mut holder = s.db.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM messages WHERE sender_actor_id = $1 ORDER BY sent_at DESC LIMIT 1 FOR UPDATE")
        .bind(s.dana.actor)
        .execute(&mut *holder)
        .await
        .unwrap();
    let options = ErasureOptions { lock_timeout: std::time::Duration::from_millis(300), ..with_key() };
    let failed = session.erase(&preview.scope, &preview.object_ids, "DSR-7", &options).await.unwrap_err();
    assert!(matches!(failed, OperatorError::Erasure(ErasureError::Database(_))), "{failed}");
    holder.rollback().await.unwrap();
    assert_eq!(rows_containing(&s.db, CANARY_TOKEN).await, before, "nothing half-erased");
    let erasures: i64 = sqlx::query_scalar("SELECT count(*) FROM erasures").fetch_one(&s.db.pool).await.unwrap();
    assert_eq!(erasures, 0);
    let history = s.db.store.entry_history(s.world.agent, entry).await.unwrap().unwrap();
    assert_eq!(history.revisions[0].body, CANARY);
    common::assert_projection_matches_canonical(&s.db.pool).await;

    // Dana says something new after the preview: the confirmation no longer matches, refused.
    s.world.say(s.dm, &s.dana, "One more thing for the record, please.").await;
    let refused = session.erase(&preview.scope, &preview.object_ids, "DSR-7", &with_key()).await.unwrap_err();
    assert!(matches!(refused, OperatorError::Erasure(ErasureError::ScopeChanged)), "{refused}");
    assert_eq!(rows_containing(&s.db, CANARY_TOKEN).await, before);
    // Preview again, confirm, and it goes.
    let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
    assert_eq!(preview.counts.messages, 3);
    session.erase(&preview.scope, &preview.object_ids, "DSR-7", &with_key()).await.unwrap();
    assert_eq!(rows_containing(&s.db, CANARY_TOKEN).await, vec![]);
}

fn cli(db: &TestDb, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env_remove("MESH_AGENT_MASTER_KEY")
        .envs(env.iter().copied())
        .output()
        .expect("run mesh-memory")
}

#[tokio::test]
async fn the_cli_previews_erases_as_the_operator_and_verifies() {
    let mut s = scene().await;
    dana_tells_the_canary(&mut s).await;
    let master = std::str::from_utf8(KEY).unwrap();

    let dry = cli(&s.db, &["erase", "person", "U321", "--dry-run"], &[]);
    let shown = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
    assert!(
        shown.contains("1 revisions, 2 messages sent, 0 messages learned from, 2 replies")
            && shown.contains("canary-7Q4Z"),
        "{shown}"
    );
    assert!(!rows_containing(&s.db, CANARY_TOKEN).await.is_empty(), "a dry run changes nothing");
    let digest =
        shown.lines().find_map(|l| l.strip_prefix("confirmation: ")).expect("a confirmation digest").to_owned();

    let (role, password, _) = login_role_with_password(&s.db, "eraser", "mesh_eraser").await;
    let missing = cli(&s.db, &["erase", "person", "U321", "--operator", &role], &[]);
    assert!(!missing.status.success(), "a reason is required");
    let erased = cli(
        &s.db,
        &["--json", "erase", "person", "U321", "--reason", "DSR-99", "--operator", &role, "--confirm", &digest],
        &[("MESH_OPERATOR_PASSWORD", &password), ("MESH_AGENT_MASTER_KEY", master)],
    );
    assert!(erased.status.success(), "{}", String::from_utf8_lossy(&erased.stderr));
    let report: serde_json::Value = serde_json::from_slice(&erased.stdout).unwrap();
    assert_eq!(report["erased_by"], role.as_str());
    assert_eq!(report["counts"]["revisions"], 1);
    assert_eq!(rows_containing(&s.db, CANARY_TOKEN).await, vec![]);
    let (recorded_role,): (String,) =
        sqlx::query_as("SELECT role_name FROM operator_actions WHERE action = 'erase' AND reason = 'DSR-99'")
            .fetch_one(&s.db.pool)
            .await
            .unwrap();
    assert_eq!(recorded_role, role);

    let id = report["erasure_id"].as_str().unwrap();
    let verified = cli(&s.db, &["erase", "verify", id], &[("MESH_AGENT_MASTER_KEY", master)]);
    let text = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{text}{}", String::from_utf8_lossy(&verified.stderr));
    assert!(text.contains("verified: nothing of it is left") && text.contains("text found:            0"), "{text}");
}
