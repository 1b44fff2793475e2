//! `erase verify` cannot be fooled, and the CLI erases only what its dry run showed (issue 52).
//!
//! Each test erases a canary as an operator, then plants a copy the way the store itself could
//! hold one (a JSON string holding JSON, a text array, a `tsvector`, planner statistics) and
//! checks that `verify` reports it; the CLI tests run the binary.

mod common;

use common::{login_role_with_password, test_db, Person, TestDb, World};
use mesh_memory::erasure::{self, ErasureOptions, ErasureScope, ErasureVerification, FingerprintKey};
use mesh_memory::operator::OperatorSession;
use mesh_memory::store::Topology;
use mesh_memory::ConversationId;
use serde_json::json;

/// A phrase nothing else in the store says.
const CANARY: &str = "Dana keeps the spare key under the canary-7Q4Z zebra quartz fennel planter";
const CANARY_TOKEN: &str = "canary-7q4z";
/// The canary as a multi-line text: every window of six words spans a line break, so a copy
/// whose `\n` escapes glue to the next word ("key\nunder" -> "key", "nunder") shares no window.
const CANARY_ON_LINES: &str = "Dana keeps the spare key\nunder the canary-7Q4Z zebra\nquartz fennel planter";
const KEY: &[u8] = b"erasure test master key, 32 bytes+";

struct Scene {
    db: TestDb,
    world: World,
    dana: Person,
    dm: ConversationId,
}

/// Dana tells the agent the canary in her DM and it is remembered about her; Priya says a few
/// unrelated things elsewhere (so the planner statistics of `messages` have a histogram).
async fn scene() -> Scene {
    let db = test_db().await;
    let mut world = World::new(&db.store, "assistant").await;
    let dana = world.person("Dana", "U321").await;
    let priya = world.person("Priya", "U456").await;
    let dm = world.conversation("D-DANA", Topology::Direct, &[&dana]).await;
    let channel = world.conversation("C-ENG", Topology::Channel, &[&dana, &priya]).await;
    world.remember(dm, &dana, Some(dana.actor), CANARY).await;
    for said in ["Lunch at noon?", "The build is green again.", "Who has the projector remote?"] {
        world.say(channel, &priya, said).await;
    }
    Scene { db, world, dana, dm }
}

fn key() -> FingerprintKey {
    FingerprintKey::from_master_key(KEY).unwrap()
}

async fn eraser(db: &TestDb) -> (OperatorSession, String, String) {
    let (role, password, _) = login_role_with_password(db, "eraser", "mesh_eraser").await;
    (OperatorSession::sign_in(&db.options, &role, &password).await.unwrap(), role, password)
}

/// Erases Dana (every agent) as an operator, with fingerprints; returns the erasure id.
async fn erase_dana(s: &Scene) -> uuid::Uuid {
    let (session, _, _) = eraser(&s.db).await;
    let scope = ErasureScope::Person { actor: s.dana.actor, agent: None };
    let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
    let options = ErasureOptions { fingerprint_key: Some(key()), ..ErasureOptions::default() };
    let report = session.erase(&preview.scope, &preview.object_ids, "DSR-52", &options).await.unwrap();
    session.close().await;
    report.erasure_id
}

async fn verify(s: &Scene, erasure: uuid::Uuid) -> ErasureVerification {
    erasure::verify(s.db.store.pool(), erasure, Some(&key())).await.unwrap()
}

fn found_in(verified: &ErasureVerification, table: &str, column: &str) -> bool {
    verified.text_found.iter().any(|t| t.table == table && t.column.starts_with(column))
}

#[tokio::test]
async fn verify_decodes_json_escapes_and_json_held_in_strings_before_cutting_words() {
    let s = scene().await;
    let erasure = erase_dana(&s).await;
    let clean = verify(&s, erasure).await;
    assert!(clean.is_clean(), "{clean}");

    // An MCP call's recorded message: a text column holding JSON, the body's line breaks escaped.
    let recorded = format!("[remember via MCP] {}", json!({ "body": CANARY_ON_LINES }));
    // A tool call's arguments: a JSON string that itself holds JSON.
    let call = json!({"name": "remember", "arguments": json!({ "body": CANARY_ON_LINES }).to_string()});
    sqlx::raw_sql("CREATE TABLE planted_copies (note text, call jsonb)").execute(&s.db.pool).await.unwrap();
    sqlx::query("INSERT INTO planted_copies VALUES ($1, $2)")
        .bind(&recorded)
        .bind(&call)
        .execute(&s.db.pool)
        .await
        .unwrap();

    let verified = verify(&s, erasure).await;
    assert!(!verified.is_clean(), "{verified}");
    assert!(found_in(&verified, "planted_copies", "note"), "{verified}");
    assert!(found_in(&verified, "planted_copies", "call"), "{verified}");
}

#[tokio::test]
async fn verify_scans_text_arrays_element_by_element_and_tsvectors_by_lexeme_position() {
    let s = scene().await;
    let erasure = erase_dana(&s).await;
    assert!(verify(&s, erasure).await.is_clean());

    sqlx::raw_sql(
        "CREATE TABLE planted_arrays (labels text[], documents jsonb[]);
         CREATE TABLE planted_vectors (search tsvector);
         CREATE TYPE planted_pair AS (label text, body text);
         CREATE SCHEMA elsewhere;
         CREATE TABLE elsewhere.planted_other (pair planted_pair, blob bytea)",
    )
    .execute(&s.db.pool)
    .await
    .unwrap();
    sqlx::query("INSERT INTO planted_arrays VALUES (ARRAY['unrelated', $1], ARRAY[$2::jsonb])")
        .bind(CANARY)
        .bind(json!({ "note": CANARY }))
        .execute(&s.db.pool)
        .await
        .unwrap();
    // Stemmed, stop words gone, positions kept: the text is not there, its lexemes in order are.
    sqlx::query("INSERT INTO planted_vectors VALUES (to_tsvector('english', 'Copied from the DM: ' || $1))")
        .bind(CANARY)
        .execute(&s.db.pool)
        .await
        .unwrap();

    // A composite value and bytes holding UTF-8, in another schema.
    sqlx::query("INSERT INTO elsewhere.planted_other VALUES (ROW('note', $1), convert_to($1, 'UTF8'))")
        .bind(CANARY)
        .execute(&s.db.pool)
        .await
        .unwrap();

    let verified = verify(&s, erasure).await;
    assert!(found_in(&verified, "elsewhere.planted_other", "pair"), "{verified}");
    assert!(found_in(&verified, "elsewhere.planted_other", "blob"), "{verified}");
    assert!(found_in(&verified, "planted_arrays", "labels"), "{verified}");
    assert!(found_in(&verified, "planted_arrays", "documents"), "{verified}");
    assert!(found_in(&verified, "planted_vectors", "search"), "{verified}");

    // The CLI says so with exit code 1.
    let out = cli(&s.db, &["erase", "verify", &erasure.to_string()], &[("MESH_AGENT_MASTER_KEY", master())]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("NOT CLEAN") && text.contains("planted_vectors.search"), "{text}");
}

#[tokio::test]
async fn verify_scans_planner_statistics_and_reports_statistics_older_than_the_erasure() {
    let mut s = scene().await;
    // Someone asks again: the DM now holds the canary twice, a most common value of messages.body.
    s.world.say(s.dm, &s.dana, CANARY).await;
    sqlx::raw_sql("ANALYZE messages").execute(&s.db.pool).await.unwrap();
    let sampled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stats WHERE tablename = 'messages' AND attname = 'body'
            AND (most_common_vals::text ILIKE '%' || $1 || '%' OR histogram_bounds::text ILIKE '%' || $1 || '%')",
    )
    .bind(CANARY_TOKEN)
    .fetch_one(&s.db.pool)
    .await
    .unwrap();
    assert_eq!(sampled, 1, "the statistics sampled the canary");

    // The erasure function alone, as an eraser, without the VACUUM/ANALYZE that follows it: the
    // statistics of the rewritten messages table predate the erasure and still hold the text.
    let (session, _, _) = eraser(&s.db).await;
    let scope = ErasureScope::Person { actor: s.dana.actor, agent: None };
    let preview = mesh_memory::operator::erasure_preview(session.store(), &scope).await.unwrap();
    let erasure = uuid::Uuid::now_v7();
    let fingerprints: Vec<Vec<u8>> = key().of_text(CANARY).into_iter().map(|f| f.to_vec()).collect();
    sqlx::query("SELECT mesh_operator_erase($1, 'person', $2, NULL, 'DSR-52', $3, $4)")
        .bind(erasure)
        .bind(s.dana.actor)
        .bind(&preview.object_ids)
        .bind(&fingerprints)
        .execute(session.store().pool())
        .await
        .unwrap();
    session.close().await;

    let verified = verify(&s, erasure).await;
    assert!(!verified.is_clean(), "{verified}");
    assert!(found_in(&verified, "messages", "body (pg_stats"), "{verified}");
    let text = verified.to_string();
    assert!(text.contains("statistics older than the erasure: messages"), "{text}");

    // Analysed again (what the erasure's own maintenance does), it verifies clean.
    sqlx::raw_sql("ANALYZE").execute(&s.db.pool).await.unwrap();
    let verified = verify(&s, erasure).await;
    assert!(verified.is_clean(), "{verified}");
}

fn master() -> &'static str {
    std::str::from_utf8(KEY).unwrap()
}

fn cli(db: &TestDb, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env_remove("MESH_AGENT_MASTER_KEY")
        .env_remove("MESH_OPERATOR_ROLE")
        .env_remove("MESH_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("run mesh-memory")
}

/// Rows of `messages` and `memory_entry_revisions` still holding the canary.
async fn canary_rows(db: &TestDb) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM messages WHERE body ILIKE '%' || $1 || '%')
              + (SELECT count(*) FROM memory_entry_revisions WHERE body ILIKE '%' || $1 || '%')",
    )
    .bind(CANARY_TOKEN)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

/// `erase person U321 --dry-run --json`: the preview's confirmation digest.
fn dry_run_digest(db: &TestDb) -> String {
    let out = cli(db, &["--json", "erase", "person", "U321", "--dry-run"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let preview: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let digest = preview["confirmation"].as_str().expect("the preview carries its confirmation digest").to_owned();
    assert_eq!(digest.len(), 16, "{digest}");
    digest
}

#[tokio::test]
async fn the_cli_erases_only_with_the_digest_of_what_its_dry_run_showed() {
    let mut s = scene().await;
    let (_, role, password) = eraser(&s.db).await;
    let operator = [("MESH_OPERATOR_PASSWORD", password.as_str()), ("MESH_AGENT_MASTER_KEY", master())];
    let erase = |confirm: Option<&str>| {
        let mut args = vec!["erase", "person", "U321", "--reason", "DSR-52", "--operator", role.as_str()];
        if let Some(digest) = confirm {
            args.extend(["--confirm", digest]);
        }
        cli(&s.db, &args, &operator)
    };
    let erasures =
        || async { sqlx::query_scalar::<_, i64>("SELECT count(*) FROM erasures").fetch_one(&s.db.pool).await.unwrap() };

    // Without --confirm: refused, and told how to get one.
    let refused = erase(None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "erased without a confirmation: {}", String::from_utf8_lossy(&refused.stdout));
    assert!(stderr.contains("--confirm") && stderr.contains("--dry-run"), "{stderr}");
    assert_eq!((erasures().await, canary_rows(&s.db).await), (0, 2));

    // The dry run prints the digest, in text too, and says how to use it.
    let dry = cli(&s.db, &["erase", "person", "U321", "--dry-run"], &[]);
    let shown = String::from_utf8_lossy(&dry.stdout);
    let digest = dry_run_digest(&s.db);
    assert!(shown.contains(&format!("--confirm {digest}")), "{shown}");

    // Dana says something after the dry run: the digest no longer matches, nothing is erased.
    s.world.say(s.dm, &s.dana, "One more thing for the record, please.").await;
    let refused = erase(Some(&digest));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("MM011") && stderr.contains("changed since its preview"), "{stderr}");
    assert_eq!((erasures().await, canary_rows(&s.db).await), (0, 2));

    // The digest of a fresh dry run erases.
    let fresh = dry_run_digest(&s.db);
    assert_ne!(fresh, digest);
    let erased = erase(Some(&fresh));
    assert!(erased.status.success(), "{}", String::from_utf8_lossy(&erased.stderr));
    assert_eq!((erasures().await, canary_rows(&s.db).await), (1, 0));
}
