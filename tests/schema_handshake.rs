//! The schema handshake: a server database is never migrated by opening it. An older one opens
//! read-only with a warning naming the versions (reads work, a write is refused in those words
//! and changes nothing) until `db migrate` brings it current; a newer one, or one without the
//! schema, is refused naming the versions.

mod common;

use std::process::{Command, Output};

use common::World;
use mesh_memory::database::{self, OpenError, SchemaState, MIGRATOR};
use mesh_memory::store::Topology;

fn cli(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(args)
        .env("DATABASE_URL", url)
        .env_remove("MESH_LOG")
        .env_remove("MESH_MCP_TOKEN")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// This binary's newest migration and the one before it.
fn newest_two() -> (i64, i64) {
    let mut versions: Vec<i64> = MIGRATOR.iter().map(|m| m.version).collect();
    versions.sort_unstable();
    (versions[versions.len() - 1], versions[versions.len() - 2])
}

async fn count(db: &common::TestDb, table: &str) -> i64 {
    // Table names are this test's constants.
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}"))).fetch_one(&db.pool).await.unwrap()
}

#[tokio::test]
async fn an_older_database_is_read_only_until_db_migrate_brings_it_current() {
    let (newest, previous) = newest_two();
    let db = common::empty_db().await;
    MIGRATOR.run_to(previous, &db.pool).await.expect("the older schema applies");
    let mut world = World::new(&db.store, "handshake-agent").await;
    let ana = world.person("Ana", "U1").await;
    let channel = world.conversation("C-OLD", Topology::Group, &[&ana]).await;
    let (entry, _) = world.remember(channel, &ana, Some(ana.actor), "Ana's desk is by the window").await;

    let state = database::check_schema(&db.pool).await.unwrap();
    assert_eq!(
        state,
        SchemaState::Older { database_version: Some(previous), binary_version: newest, missing: vec![newest] }
    );

    // Reads work, with one warning naming both versions and what to do.
    let out = cli(&db.url, &["show", &entry.to_string()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Ana's desk is by the window"), "{}", text(&out.stdout));
    let warning = text(&out.stderr);
    assert_eq!(warning.matches("warning:").count(), 1, "{warning}");
    assert!(warning.contains(&format!("database at migration {previous}, this mesh-memory at {newest}")), "{warning}");
    assert!(warning.contains("open read-only: ask its administrator to run `mesh-memory db migrate`"), "{warning}");

    // A write is refused by the server in the handshake's words, and changes nothing.
    let (agents, entries) = (count(&db, "runtime_agents").await, count(&db, "memory_entries").await);
    let out = cli(&db.url, &["demo", "seed"]);
    assert!(!out.status.success(), "{}", text(&out.stdout));
    let refusal = text(&out.stderr);
    assert!(refusal.contains("error: this database's schema is older than this mesh-memory"), "{refusal}");
    assert!(refusal.contains("it is open read-only"), "{refusal}");
    assert_eq!((count(&db, "runtime_agents").await, count(&db, "memory_entries").await), (agents, entries));

    // The library's session is read-only on the server's side, whatever a caller runs.
    let opened = database::open(Some(&db.url)).await.unwrap();
    assert!(opened.read_only_reason().unwrap().contains(&previous.to_string()));
    let write = sqlx::query("INSERT INTO actors (id, kind, display_name) VALUES (gen_random_uuid(), 'human', 'X')")
        .execute(&opened.pool)
        .await
        .unwrap_err();
    assert_eq!(write.as_database_error().and_then(|e| e.code()).as_deref(), Some("25006"), "{write}");
    assert!(database::is_read_only_refusal(&write));
    opened.close().await;
    assert_eq!(count(&db, "runtime_agents").await, agents);

    // The MCP server writes every call, so it does not start on an older schema.
    let out = cli(&db.url, &["mcp", "--http", "127.0.0.1:0"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("needs the schema current"), "{}", text(&out.stderr));

    // Opening never migrated it; `db migrate` does.
    assert_eq!(database::check_schema(&db.pool).await.unwrap(), state);
    let out = cli(&db.url, &["db", "migrate"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "migrations applied (1 new)");
    assert_eq!(database::check_schema(&db.pool).await.unwrap(), SchemaState::Current);
    let out = cli(&db.url, &["demo", "seed"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).is_empty(), "no warning once current: {}", text(&out.stderr));
    assert!(count(&db, "runtime_agents").await > agents);
}

#[tokio::test]
async fn a_newer_database_is_refused_naming_both_versions() {
    let (newest, _) = newest_two();
    let future = 99_990_101_000_000_i64;
    let db = common::test_db().await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
         VALUES ($1, 'from a newer mesh-memory', true, '\\x00', 0)",
    )
    .bind(future)
    .execute(&db.pool)
    .await
    .unwrap();
    let expected = format!("newer than this mesh-memory (database at migration {future}, this mesh-memory at {newest}");

    let out = cli(&db.url, &["turns"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains(&expected), "{}", text(&out.stderr));

    // db migrate refuses it too, and leaves the history as it was.
    let before = count(&db, "_sqlx_migrations").await;
    let out = cli(&db.url, &["db", "migrate"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains(&expected), "{}", text(&out.stderr));
    assert_eq!(count(&db, "_sqlx_migrations").await, before);

    match database::open(Some(&db.url)).await {
        Err(OpenError::Schema { refusal }) => assert!(refusal.contains(&expected), "{refusal}"),
        other => panic!("expected a schema refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_database_without_the_schema_is_refused_and_left_empty() {
    let db = common::empty_db().await;
    assert_eq!(database::check_schema(&db.pool).await.unwrap(), SchemaState::Absent);
    let out = cli(&db.url, &["turns"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("this database has no Mesh Memory schema"), "{}", text(&out.stderr));
    let history: bool =
        sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL").fetch_one(&db.pool).await.unwrap();
    assert!(!history, "opening must not migrate");
}
