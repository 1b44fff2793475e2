//! Upgrades tested: every fixture `tests/fixtures/upgrade-<release>.dump` is a store written by a
//! released version (its schema, the console's demo workspace; `scripts/make-upgrade-fixture.sh`
//! says how it was made). Each is restored with PostgreSQL's own `pg_restore` into a fresh
//! database, migrated to head by this build, and checked: every entry, revision, source, grant,
//! request, review, operator action, turn and audit row is still there, unchanged, and the
//! searches that release ran select the same revisions now.

mod common;

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use common::empty_db;
use mesh_memory::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchRequest};
use mesh_memory::{ActorId, AgentId, ConversationId};
use serde::Deserialize;

/// What a release's searches selected (`upgrade-<release>.searches.json`).
#[derive(Deserialize)]
struct RecordedSearches {
    agent: String,
    asked_at: DateTime<Utc>,
    searches: Vec<RecordedSearch>,
}

#[derive(Deserialize)]
struct RecordedSearch {
    conversation: String,
    actor: String,
    query: String,
    selected: Vec<uuid::Uuid>,
}

/// Per table, the rows' keys and the columns a migration must never change, as one digest.
const CENSUS: &[(&str, &str)] = &[
    ("memory_entries", "id::text || state::text || current_revision_id::text"),
    ("memory_entry_revisions", "id::text || entry_id::text || md5(body)"),
    ("revision_sources", "id::text || revision_id::text || evidence::text || coalesce(audience::text, '')"),
    ("sharing_grants", "id::text || revision_id::text || coalesce(revoked_at::text, '')"),
    ("sharing_grant_audience", "grant_id::text || actor_id::text"),
    ("sharing_requests", "id::text || revision_id::text"),
    ("evidence_repairs", "source_id::text || rule::text || reason"),
    ("operator_actions", "id::text || role_name || action"),
    ("messages", "id::text || md5(body)"),
    ("agent_turns", "id::text"),
    ("memory_retrieval_events", "id::text"),
    ("mcp_access_tokens", "id::text || coalesce(revoked_at::text, '')"),
];

async fn census(pool: &sqlx::PgPool) -> Vec<(String, i64, String)> {
    let mut rows = Vec::new();
    for (table, key) in CENSUS {
        // Table and column names are the constants above, never input.
        let (count, digest): (i64, Option<String>) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT count(*), md5(string_agg({key}, ',' ORDER BY {key})) FROM {table}"
        )))
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("census of {table}: {e}"));
        rows.push(((*table).to_owned(), count, digest.unwrap_or_default()));
    }
    rows
}

fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut dumps: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fixtures")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dump"))
        .collect();
    dumps.sort();
    dumps
}

async fn id_of(pool: &sqlx::PgPool, sql: &str, key: &str) -> uuid::Uuid {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(key)
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("{key}: {e}"))
}

#[tokio::test]
async fn every_release_fixture_upgrades_to_head_losing_nothing_and_selecting_the_same_revisions() {
    let dumps = fixtures();
    assert!(!dumps.is_empty(), "no upgrade fixture in tests/fixtures (scripts/make-upgrade-fixture.sh makes one)");
    let pg_restore =
        mesh_memory::pg::find_binaries().expect("PostgreSQL binaries (run scripts/setup.sh)").tool("pg_restore");
    let migrations_on_disk =
        std::fs::read_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("migrations")).unwrap().count();
    for dump in dumps {
        let release = dump.file_stem().unwrap().to_string_lossy().into_owned();
        let db = empty_db().await;
        let restored = std::process::Command::new(&pg_restore)
            .args(["--no-owner", "--exit-on-error", "--dbname", &db.url])
            .arg(&dump)
            .output()
            .expect("run pg_restore");
        assert!(
            restored.status.success(),
            "{release}: pg_restore failed: {}",
            String::from_utf8_lossy(&restored.stderr)
        );
        let before = census(&db.pool).await;
        let applied_before: i64 =
            sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations").fetch_one(&db.pool).await.unwrap();
        for table in
            ["memory_entries", "memory_entry_revisions", "sharing_grants", "evidence_repairs", "operator_actions"]
        {
            assert!(
                before.iter().any(|(t, count, _)| t == table && *count > 0),
                "{release} holds no {table}: {before:?}"
            );
        }

        mesh_memory::database::migrate(&db.pool).await.unwrap_or_else(|e| panic!("{release} does not migrate: {e}"));

        let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(applied as usize, migrations_on_disk, "{release}: every migration applied");
        assert_eq!(census(&db.pool).await, before, "{release}: rows changed or vanished in the upgrade");
        common::assert_projection_matches_canonical(&db.pool).await;

        let recorded: RecordedSearches =
            serde_json::from_str(&std::fs::read_to_string(dump.with_extension("searches.json")).unwrap()).unwrap();
        let agent = AgentId(id_of(&db.pool, "SELECT id FROM runtime_agents WHERE name = $1", &recorded.agent).await);
        let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default());
        for search in &recorded.searches {
            let conversation = ConversationId(
                id_of(&db.pool, "SELECT id FROM conversations WHERE external_channel_id = $1", &search.conversation)
                    .await,
            );
            let actor = ActorId(
                id_of(&db.pool, "SELECT actor_id FROM connector_identities WHERE external_id = $1", &search.actor)
                    .await,
            );
            let mut request =
                SearchRequest::new(agent, conversation, Some(actor), &search.query, RetrievalMode::Recall);
            request.asked_at = Some(recorded.asked_at);
            let outcome = retriever.search(&request).await.unwrap();
            let selected: Vec<uuid::Uuid> = outcome.used_revisions().iter().map(|r| r.0).collect();
            assert_eq!(
                selected, search.selected,
                "{release}: {} asking {:?} in {} selects other revisions after the upgrade",
                search.actor, search.query, search.conversation
            );
        }
        eprintln!(
            "{release}: restored, migrated from {applied_before} to {applied} migrations, {} searches equal",
            recorded.searches.len()
        );
    }
}
