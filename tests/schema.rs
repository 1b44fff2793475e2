//! The schema as a reviewed artifact:
//! - `migrations.lock` holds the sha256 of every migration: a landed migration can never be
//!   edited again (sqlx refuses to open a database whose applied migration changed, so an edit
//!   would lock every upgraded user out of their store);
//! - `schema/current.sql` is the normalised `pg_dump --schema-only` of a freshly migrated
//!   database, so a reviewer reads what a migration did to the schema in the diff;
//! - the privilege catalogue: every `SECURITY DEFINER` function pins its `search_path` and is
//!   executable by its intended callers only, and the runtime role holds exactly the listed table
//!   privileges.
//!
//! After adding a migration: `UPDATE_MIGRATIONS_LOCK=1 UPDATE_SCHEMA=1 cargo test --test schema`
//! (the first appends the new file's digest and never rewrites a listed one).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::test_db;
use sha2::{Digest, Sha256};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `(file name, sha256)` of every migration on disk, sorted by name.
fn migrations_on_disk() -> BTreeMap<String, String> {
    std::fs::read_dir(root().join("migrations"))
        .expect("migrations/")
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, hex::encode(Sha256::digest(std::fs::read(&path).unwrap())))
        })
        .collect()
}

/// The lock file's `(file name, sha256)` lines, in the `sha256sum` format.
fn parse_lock(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (digest, name) = line.split_once("  ").expect("a lock line is `<sha256>  <file>`");
            (name.to_owned(), digest.to_owned())
        })
        .collect()
}

#[test]
fn every_landed_migration_is_byte_for_byte_what_migrations_lock_lists() {
    let lock_path = root().join("migrations.lock");
    let locked = parse_lock(&std::fs::read_to_string(&lock_path).expect("migrations.lock"));
    let on_disk = migrations_on_disk();
    let mut problems = Vec::new();
    for (name, digest) in &locked {
        match on_disk.get(name) {
            None => problems.push(format!("{name} is listed in migrations.lock but was deleted or renamed")),
            Some(actual) if actual != digest => problems.push(format!(
                "{name} changed after it landed (sha256 {actual}, locked {digest}): never edit a landed \
                 migration, add a new one"
            )),
            Some(_) => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let listed: Vec<&String> = locked.iter().map(|(name, _)| name).collect();
    let new: Vec<(&String, &String)> = on_disk.iter().filter(|(name, _)| !listed.contains(name)).collect();
    if let Some(last) = listed.last() {
        let out_of_order: Vec<_> = new.iter().filter(|(name, _)| name <= last).collect();
        assert!(
            out_of_order.is_empty(),
            "new migrations must sort after the last landed one ({last}): {out_of_order:?}"
        );
    }
    if new.is_empty() {
        return;
    }
    if std::env::var_os("UPDATE_MIGRATIONS_LOCK").is_some() {
        let mut text = std::fs::read_to_string(&lock_path).unwrap();
        for (name, digest) in &new {
            text.push_str(&format!("{digest}  {name}\n"));
        }
        std::fs::write(&lock_path, text).unwrap();
        return;
    }
    panic!(
        "migrations not in migrations.lock: {:?}; run UPDATE_MIGRATIONS_LOCK=1 cargo test --test schema",
        new.iter().map(|(name, _)| name).collect::<Vec<_>>()
    );
}

#[test]
fn the_lock_rejects_a_one_byte_edit() {
    // The check above, on a copy: flipping one byte of any migration changes its digest.
    let on_disk = migrations_on_disk();
    let (name, digest) = on_disk.iter().next().expect("at least one migration");
    let mut bytes = std::fs::read(root().join("migrations").join(name)).unwrap();
    bytes[0] ^= 1;
    assert_ne!(&hex::encode(Sha256::digest(&bytes)), digest);
}

/// `pg_dump --schema-only` of `url`, normalised: no comments, `SET` lines or `\restrict` keys
/// (which differ per run), single blank lines.
fn dump_schema(url: &str) -> String {
    let binaries = mesh_memory::pg::find_binaries().expect("PostgreSQL binaries (run scripts/setup.sh)");
    let output = std::process::Command::new(binaries.tool("pg_dump"))
        .args(["--schema-only", "--no-owner", "--no-comments", "--dbname", url])
        .output()
        .expect("run pg_dump");
    assert!(output.status.success(), "pg_dump failed: {}", String::from_utf8_lossy(&output.stderr));
    normalise(&String::from_utf8(output.stdout).unwrap())
}

fn normalise(dump: &str) -> String {
    let mut out = String::new();
    let mut blank = false;
    for line in dump.lines() {
        let skip = line.starts_with("--")
            || line.starts_with("SET ")
            || line.starts_with("SELECT pg_catalog.set_config")
            || line.starts_with("\\restrict")
            || line.starts_with("\\unrestrict");
        if skip {
            continue;
        }
        if line.trim().is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push('\n');
            blank = false;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[tokio::test]
async fn schema_current_sql_is_the_schema_of_a_freshly_migrated_database() {
    let db = test_db().await;
    let dumped = dump_schema(&db.url);
    let path = root().join("schema/current.sql");
    if std::env::var_os("UPDATE_SCHEMA").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &dumped).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != dumped {
        let first = committed.lines().zip(dumped.lines()).position(|(a, b)| a != b);
        panic!(
            "schema/current.sql is stale (first difference at line {:?}): run UPDATE_SCHEMA=1 cargo test --test schema \
             and review the diff",
            first.map(|i| i + 1)
        );
    }
}

/// The roles allowed to execute each `SECURITY DEFINER` function besides its owner: trigger
/// functions are called by their triggers only.
const DEFINER_CALLERS: &[(&str, &[&str])] = &[
    ("memory_keep_source_evidence_unknown", &["mesh_operator"]),
    ("memory_lexical_statistics_after_truncate", &[]),
    ("memory_lexical_statistics_fold", &["mesh_runtime"]),
    ("memory_review_source_evidence", &["mesh_operator"]),
    ("memory_searchable_after_embeddings", &[]),
    ("memory_searchable_after_entries", &[]),
    ("memory_searchable_after_generations", &[]),
    ("memory_searchable_after_summary", &[]),
    ("memory_summary_after_sources", &[]),
    ("mesh_confirm_sharing_by_source_actor", &["mesh_runtime"]),
    ("mesh_operator_approve_sharing", &["mesh_operator"]),
    ("mesh_operator_deny_sharing", &["mesh_operator"]),
    ("mesh_operator_erase", &["mesh_eraser"]),
    ("mesh_operator_issue_access_token", &["mesh_operator"]),
    ("mesh_operator_revoke_access_token", &["mesh_operator"]),
    ("mesh_operator_revoke_grant", &["mesh_operator"]),
];

#[tokio::test]
async fn every_security_definer_function_pins_its_search_path_and_only_its_callers_execute_it() {
    let db = test_db().await;
    let functions: Vec<(String, Option<Vec<String>>, Vec<String>)> = sqlx::query_as(
        "SELECT p.proname, p.proconfig,
                ARRAY(SELECT coalesce(r.rolname, 'PUBLIC') FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                        LEFT JOIN pg_roles r ON r.oid = a.grantee
                       WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner ORDER BY 1)
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = 'public' AND p.prosecdef ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let expected: BTreeMap<&str, &[&str]> = DEFINER_CALLERS.iter().copied().collect();
    let found: Vec<&str> = functions.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(found, expected.keys().copied().collect::<Vec<_>>(), "the SECURITY DEFINER functions changed");
    for (name, config, executors) in &functions {
        let search_path = config
            .iter()
            .flatten()
            .find_map(|setting| setting.strip_prefix("search_path="))
            .unwrap_or_else(|| panic!("{name} is SECURITY DEFINER without a pinned search_path"));
        assert!(!search_path.contains("$user"), "{name}: search_path {search_path} lets a same-named schema in");
        assert!(
            search_path.trim_end().ends_with("pg_temp"),
            "{name}: search_path {search_path} must name pg_temp last (unnamed, it is searched first)"
        );
        assert_eq!(executors, &expected[name.as_str()].to_vec(), "{name}: who may execute it");
    }
}

/// Every table privilege of the runtime role, `table: privileges`. The runtime writes memory and
/// turn records and reads the rest; grants, reviews and operator actions go through functions.
const RUNTIME_TABLE_PRIVILEGES: &[&str] = &[
    "_sqlx_migrations: SELECT",
    "actors: INSERT, SELECT, UPDATE",
    "agent_turns: INSERT, SELECT, UPDATE",
    "audience_classes: SELECT",
    "connector_identities: INSERT, SELECT, UPDATE",
    "conversation_memberships: INSERT, SELECT, UPDATE",
    "conversation_observations: INSERT, SELECT",
    "conversations: INSERT, SELECT, UPDATE",
    "embedding_generations: INSERT, SELECT, UPDATE",
    "erased_messages: SELECT",
    "erased_revisions: SELECT",
    "erasure_fingerprints: SELECT",
    "erasures: SELECT",
    "evidence_repairs: SELECT",
    "index_outbox: INSERT, SELECT, UPDATE",
    "lexical_corpus_statistics: SELECT",
    "lexical_corpus_totals: INSERT, SELECT, UPDATE",
    "lexical_statistics_pending: SELECT",
    "lexical_term_statistics: SELECT",
    "lexical_term_totals: INSERT, SELECT, UPDATE",
    "mcp_access_tokens: SELECT",
    "memory_entries: INSERT, SELECT, UPDATE",
    "memory_entry_revisions: INSERT, SELECT",
    "memory_retrieval_events: INSERT, SELECT",
    "messages: INSERT, SELECT",
    "operator_actions: SELECT",
    "revision_audience_summary: SELECT",
    "revision_embeddings: INSERT, SELECT, UPDATE",
    "revision_sources: INSERT, SELECT",
    "runtime_agents: INSERT, SELECT, UPDATE",
    "searchable_revisions: SELECT",
    "sharing_confirmations: SELECT",
    "sharing_grant_audience: SELECT",
    "sharing_grants: SELECT",
    "sharing_request_audience: INSERT, SELECT",
    "sharing_requests: SELECT",
];

#[tokio::test]
async fn the_runtime_role_holds_exactly_the_listed_privileges() {
    let db = test_db().await;
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name || ': ' || string_agg(privilege_type, ', ' ORDER BY privilege_type)
           FROM information_schema.role_table_grants
          WHERE grantee = 'mesh_runtime' AND table_catalog = current_database()
          GROUP BY table_name ORDER BY table_name",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(tables, RUNTIME_TABLE_PRIVILEGES, "the runtime role's table privileges changed");
    let (superuser, create_role, create_db, bypass_rls): (bool, bool, bool, bool) = sqlx::query_as(
        "SELECT rolsuper, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname = 'mesh_runtime'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert!(!(superuser || create_role || create_db || bypass_rls), "the runtime role has a cluster-wide power");
    let inherits: Vec<String> = sqlx::query_scalar(
        "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
           JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = 'mesh_runtime' ORDER BY 1",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert!(inherits.is_empty(), "the runtime role is a member of {inherits:?}");
}

#[test]
fn normalising_drops_what_differs_between_runs() {
    let dump = "--\n-- PostgreSQL database dump\n\\restrict abc123\nSET x = 1;\n\n\nCREATE TABLE t (a int);  \n\n\n\nCREATE INDEX i ON t (a);\n\\unrestrict abc123\n";
    assert_eq!(normalise(dump), "CREATE TABLE t (a int);\n\nCREATE INDEX i ON t (a);\n");
    assert!(Path::new(&root().join("schema")).is_dir(), "schema/ holds current.sql");
}
