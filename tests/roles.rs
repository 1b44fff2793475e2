//! The console's three kinds of user, as `mesh-memory role create` makes them: an operator
//! decides, an auditor reads everything the console shows and changes nothing, an eraser erases
//! (and reads, to find what to erase). Rights come from the server's own privilege checks.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use mesh_memory::erasure::ErasureScope;
use mesh_memory::operator::{self, OperatorError, OperatorSession};
use mesh_memory::privacy::repair;
use mesh_memory::store::BrowseFilter;
use mesh_memory::views;

const PASSWORD: &str = "a-long-enough-password";

/// A cluster-global role name no other test (or run) uses.
fn unique_role(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

async fn drop_role(db: &common::TestDb, role: &str) {
    let (statement,): (String,) =
        sqlx::query_as("SELECT format('DROP ROLE IF EXISTS %I', $1)").bind(role).fetch_one(&db.pool).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&db.pool).await.unwrap();
}

/// `mesh-memory role create ARGS` with `stdin` written to its standard input (no
/// MESH_NEW_ROLE_PASSWORD unless `env_password`), DATABASE_URL `url` (none: unset, and no
/// embedded cluster to find either).
fn role_create(url: Option<&str>, args: &[&str], env_password: Option<&str>, stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mesh-memory"));
    command.args(["role", "create"]).args(args).env_remove("MESH_LOG").env_remove("MESH_NEW_ROLE_PASSWORD");
    match url {
        Some(url) => command.env("DATABASE_URL", url),
        None => command.env_remove("DATABASE_URL").env("MESH_DATA_DIR", "/nonexistent/mesh-roles-test"),
    };
    if let Some(password) = env_password {
        command.env("MESH_NEW_ROLE_PASSWORD", password);
    }
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn each_kind_gets_exactly_its_rights() {
    let db = common::test_db().await;
    let workspace = mesh_memory::demo::seed(&db.store).await.unwrap();
    let kinds = [("operator", "op"), ("auditor", "aud"), ("eraser", "era")];
    let mut sessions = Vec::new();
    for (kind, prefix) in kinds {
        let role = unique_role(prefix);
        let out = role_create(Some(&db.url), &[&role, "--kind", kind], Some(PASSWORD), "");
        assert!(out.status.success(), "{kind}: {}", text(&out.stderr));
        assert!(text(&out.stdout).starts_with(&format!("created login role {role} ({kind}: member of ")));
        sessions.push((role.clone(), OperatorSession::sign_in(&db.options, &role, PASSWORD).await.unwrap()));
    }
    let [(_, operator), (_, auditor), (_, eraser)] = &sessions[..] else { unreachable!() };

    let o = operator.rights();
    assert!(o.can_browse && o.can_approve && o.can_review_evidence && o.can_revoke_tokens && !o.can_erase, "{o:?}");
    let a = auditor.rights();
    assert!(a.can_browse && !a.can_approve && !a.can_review_evidence && !a.can_revoke_tokens && !a.can_erase, "{a:?}");
    let e = eraser.rights();
    assert!(e.can_browse && e.can_erase && !e.can_approve && !e.can_review_evidence && !e.can_revoke_tokens, "{e:?}");

    // The auditor reads every view the console shows.
    let store = auditor.store();
    assert!(!store.list_runtime_agents().await.unwrap().is_empty());
    assert!(!store.list_subjects(None).await.unwrap().is_empty());
    assert!(!store.list_conversations(None).await.unwrap().is_empty());
    let page = store.browse_entries(&BrowseFilter::default(), None, 50).await.unwrap();
    assert!(!page.entries.is_empty());
    let (_, entry) = workspace.entries[0];
    assert!(views::entry_detail(store, entry).await.unwrap().is_some());
    repair::evidence_review(store, None, None, 50).await.unwrap();
    let events = views::retrieval_events(store, None, None, 50).await.unwrap();
    assert!(!events.events.is_empty());
    assert!(views::retrieval_event(store, events.events[0].event.id).await.unwrap().is_some());
    let (_, conversation) = workspace.conversations[0];
    operator::explain(store, None, entry, conversation).await.unwrap();
    let requests = operator::sharing_queue(store, None).await.unwrap();
    assert!(!requests.is_empty(), "the demo leaves a sharing request pending");
    operator::access_tokens(store, None).await.unwrap();
    views::index_status(store).await.unwrap();
    operator::erasure_preview(store, &ErasureScope::Entry { entry }).await.unwrap();

    // ...and changes nothing: the operator layer refuses, and so does the server.
    let request = workspace.pending_sharing_request.unwrap();
    assert!(matches!(auditor.decide_sharing(request, true, "audit").await, Err(OperatorError::Forbidden(_))));
    assert!(matches!(eraser.decide_sharing(request, true, "erase").await, Err(OperatorError::Forbidden(_))));
    for statement in [
        "UPDATE runtime_agents SET name = name",
        "DELETE FROM sharing_requests",
        "INSERT INTO actors (id, kind, display_name) VALUES (gen_random_uuid(), 'human', 'X')",
    ] {
        let err = sqlx::query(statement).execute(store.pool()).await.unwrap_err();
        assert_eq!(err.as_database_error().and_then(|e| e.code()).as_deref(), Some("42501"), "{statement}: {err}");
    }
    let approve = sqlx::query("SELECT mesh_operator_approve_sharing($1, 'audit')")
        .bind(request.0)
        .execute(store.pool())
        .await
        .unwrap_err();
    assert_eq!(approve.as_database_error().and_then(|e| e.code()).as_deref(), Some("42501"), "{approve}");

    // The eraser finds what to erase; the operator decides.
    operator::erasure_preview(eraser.store(), &ErasureScope::Entry { entry }).await.unwrap();
    operator.decide_sharing(request, false, "not needed").await.unwrap();

    for (role, session) in &sessions {
        session.close().await;
        drop_role(&db, role).await;
    }
}

#[tokio::test]
async fn print_sql_needs_no_database_and_its_statement_makes_a_role_that_signs_in() {
    let db = common::test_db().await;
    let role = unique_role("printed");
    // The password as one line on stdin, no database anywhere.
    let out = role_create(None, &[&role, "--kind", "auditor", "--print-sql"], None, &format!("{PASSWORD}\n"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let statement = text(&out.stdout);
    assert!(statement.starts_with(&format!("CREATE ROLE \"{role}\" LOGIN PASSWORD 'SCRAM-SHA-256$4096:")));
    assert!(statement.trim_end().ends_with("IN ROLE \"mesh_console_reader\";"), "{statement}");
    assert!(!statement.contains(PASSWORD));

    // An administrator runs it as printed (as psql would).
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&db.pool).await.unwrap();
    let session = OperatorSession::sign_in(&db.options, &role, PASSWORD).await.unwrap();
    let rights = session.rights();
    assert!(rights.can_browse && !rights.can_approve && !rights.can_erase, "{rights:?}");
    session.close().await;
    drop_role(&db, &role).await;
}

#[tokio::test]
async fn role_create_refuses_with_clear_words() {
    let db = common::test_db().await;
    let role = unique_role("dup");
    let created = role_create(Some(&db.url), &[&role, "--kind", "operator"], None, &format!("{PASSWORD}\n"));
    assert!(created.status.success(), "{}", text(&created.stderr));

    let cases: [(&[&str], Option<&str>, &str, String); 5] = [
        (&[&role, "--kind", "operator"], Some(PASSWORD), "", format!("role {role} already exists")),
        (&["Bad-Name", "--kind", "auditor"], Some(PASSWORD), "", "invalid role: use 1 to 63 lower-case".to_owned()),
        (
            &["mesh_x", "--kind", "auditor"],
            Some(PASSWORD),
            "",
            "names starting with pg_ or mesh_ are reserved".to_owned(),
        ),
        (&["shorty", "--kind", "eraser"], Some("short"), "", "must be at least 12 characters".to_owned()),
        (&["nopass", "--kind", "eraser"], None, "", "no password: set MESH_NEW_ROLE_PASSWORD".to_owned()),
    ];
    for (args, env_password, stdin, expected) in cases {
        let out = role_create(Some(&db.url), args, env_password, stdin);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(text(&out.stderr).contains(&expected), "{args:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).contains(PASSWORD));
    }

    // A login without CREATEROLE may not create roles: the words say who may, and the way out.
    let plain = unique_role("plain");
    let (statement,): (String,) = sqlx::query_as("SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', $1, $2)")
        .bind(&plain)
        .bind(PASSWORD)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&db.pool).await.unwrap();
    let plain_url = with_credentials(&db.url, &plain, PASSWORD);
    let wanted = unique_role("never");
    let out = role_create(Some(&plain_url), &[&wanted, "--kind", "auditor"], Some(PASSWORD), "");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("not allowed to create this role") && stderr.contains("CREATEROLE"), "{stderr}");
    assert!(stderr.contains("--print-sql"), "{stderr}");
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)")
        .bind(&wanted)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(!exists);

    drop_role(&db, &role).await;
    drop_role(&db, &plain).await;
}

/// `url` signing in as `role` with `password` instead of its own credentials.
fn with_credentials(url: &str, role: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let host = rest.split_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{role}:{password}@{host}")
}
