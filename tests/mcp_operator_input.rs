//! Operator sessions and operator input (issue 52): a superuser is refused at sign-in, and bad
//! text in any operator input (a NUL, a control character, empty or only spaces, over-long) is a
//! typed error naming the field, returned before anything reaches the database, and nothing is
//! written (checked in SQL against real targets the action would otherwise change).

mod common;

use std::process::Command;

use common::{issue_token, login_role_with_password, test_db, TestDb, World};
use mesh_memory::erasure::{ErasureOptions, ErasureScope};
use mesh_memory::operator::{self, InputProblem, InputRefused, OperatorError, OperatorSession, TokenBindingRequest};
use mesh_memory::privacy::repair::EvidenceReviewDecision;
use mesh_memory::store::{ConsoleRoleKind, Topology};

/// Every row an operator action could leave: the operator log, tokens and their revocations,
/// erasures, decided sharing requests, and the bodies of live revisions.
async fn operator_footprint(db: &TestDb) -> Vec<i64> {
    let counts: (i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM operator_actions),
                (SELECT count(*) FROM mcp_access_tokens),
                (SELECT count(*) FROM mcp_access_tokens WHERE revoked_at IS NOT NULL),
                (SELECT count(*) FROM erasures),
                (SELECT count(*) FROM memory_entry_revisions WHERE body = '[erased]')",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap();
    vec![counts.0, counts.1, counts.2, counts.3, counts.4]
}

/// The field and problem of a refused input, or a panic naming what came back instead.
fn refused<T: std::fmt::Debug>(result: Result<T, OperatorError>) -> (&'static str, InputProblem) {
    match result {
        Err(OperatorError::Input(InputRefused { field, problem })) => (field, problem),
        other => panic!("expected a typed input error, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_text_in_any_operator_input_is_a_typed_error_naming_the_field_and_nothing_is_written() {
    let db = test_db().await;
    let mut world = World::new(&db.store, "assistant").await;
    let priya = world.person("Priya", "U456").await;
    let dm = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let (entry, _) = world.remember(dm, &priya, Some(priya.actor), "My door code is 4711.").await;
    let token = issue_token(&db, world.agent, dm, "U456", "laptop").await;
    let (role, password, _) = login_role_with_password(&db, "mm_in", "mesh_operator").await;
    sqlx::query(sqlx::AssertSqlSafe(format!("GRANT mesh_eraser TO {role}"))).execute(&db.pool).await.unwrap();
    let session = OperatorSession::sign_in(&db.options, &role, &password).await.unwrap();
    let scope = ErasureScope::Entry { entry };
    let preview = operator::erasure_preview(session.store(), &scope).await.unwrap();
    let before = operator_footprint(&db).await;

    // A NUL byte used to come back as a generic "database error".
    let nul = refused(session.revoke_access_token(token.id, "laptop\0lost").await);
    assert_eq!(nul, ("reason", InputProblem::Nul));
    // A terminal escape the database would have stored and `token list` printed as is.
    let escape = refused(session.revoke_access_token(token.id, "lost \u{1b}[2J").await);
    assert_eq!(escape, ("reason", InputProblem::Control("")));
    let options = ErasureOptions::default();
    let erase = session.erase(&preview.scope, &preview.object_ids, "DSR-7 \u{1b}]0;owned\u{7}", &options);
    assert_eq!(refused(erase.await).0, "reason");
    let long = "x".repeat(2001);
    let too_long = refused(session.erase(&preview.scope, &preview.object_ids, &long, &options).await);
    assert_eq!(too_long, ("reason", InputProblem::TooLong { length: 2001, limit: 2000, unit: "characters" }));
    let request = mesh_memory::privacy::sharing::SharingRequestId(uuid::Uuid::now_v7());
    assert_eq!(refused(session.decide_sharing(request, true, " \t ").await), ("reason", InputProblem::Empty));
    let source = mesh_memory::SourceId(uuid::Uuid::now_v7());
    let review = session.review_evidence(source, &EvidenceReviewDecision::LeaveUnknown, "no proof\0").await;
    assert_eq!(refused(review), ("note", InputProblem::Nul));

    // Issuing: the label, the speaker and the reason.
    let binding = |external_id, label| TokenBindingRequest {
        agent: world.agent,
        conversation: dm,
        external_id,
        label,
        expires_at: None,
    };
    let label = refused(session.issue_access_token(&binding("U456", "Priya's\nlaptop"), "ticket 9").await);
    assert_eq!(label.0, "label");
    let long_label = "l".repeat(201);
    let label = refused(session.issue_access_token(&binding("U456", &long_label), "ticket 9").await);
    assert_eq!(label, ("label", InputProblem::TooLong { length: 201, limit: 200, unit: "characters" }));
    assert_eq!(refused(session.issue_access_token(&binding("U4\u{0}56", ""), "ticket 9").await).0, "speaker");
    assert_eq!(refused(session.issue_access_token(&binding("U456", ""), "").await).0, "reason");
    let past = TokenBindingRequest { expires_at: Some(chrono::Utc::now()), ..binding("U456", "") };
    assert_eq!(refused(session.issue_access_token(&past, "ticket 9").await), ("expires_at", InputProblem::Past));

    // Signing in and creating a console role: the role name and the password.
    let sign_in = |role: String, password: String| {
        let options = db.options.clone();
        async move { OperatorSession::sign_in(&options, &role, &password).await.map(|_| ()) }
    };
    assert_eq!(refused(sign_in(format!("{role}\0"), password.clone()).await), ("role", InputProblem::Nul));
    assert_eq!(refused(sign_in(role.clone(), format!("{password}\0")).await), ("password", InputProblem::Nul));
    assert_eq!(refused(sign_in("   ".into(), password.clone()).await), ("role", InputProblem::Empty));
    // PostgreSQL would truncate this to 63 bytes, which may name another role.
    let long_role = format!("{role}{}", "x".repeat(64 - role.len()));
    assert_eq!(refused(sign_in(long_role, password.clone()).await).0, "role");
    let created = operator::create_console_role(&db.pool, "mm_new_console", "twelve chars\0!", ConsoleRoleKind::Reader);
    assert_eq!(refused(created.await), ("password", InputProblem::Nul));

    // The CLI shows the typed error, naming the field.
    let cli = Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(["mcp", "token", "revoke", &token.id.to_string(), "--reason", "lost \u{1b}[2J", "--operator", &role])
        .env("DATABASE_URL", &db.url)
        .env("MESH_OPERATOR_PASSWORD", &password)
        .output()
        .unwrap();
    assert!(!cli.status.success());
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(stderr.contains("reason must not contain control characters"), "{stderr}");

    // Nothing was written: the token is live, the entry not erased, no action was logged.
    assert_eq!(operator_footprint(&db).await, before, "a refused input writes nothing");
    assert!(db.store.authenticate_access_token(&token.secret).await.unwrap().is_some());
    let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mm_new_console')")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(!exists, "no role was created");
    // The same session still acts on good input.
    session.revoke_access_token(token.id, "laptop lost").await.unwrap();
    session.close().await;
}

#[tokio::test]
async fn a_superuser_is_refused_at_sign_in_with_a_clear_message() {
    let db = test_db().await;
    let role = format!("mm_super_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let password = uuid::Uuid::new_v4().simple().to_string();
    let (create,): (String,) = sqlx::query_as("SELECT format('CREATE ROLE %I LOGIN SUPERUSER PASSWORD %L', $1, $2)")
        .bind(&role)
        .bind(&password)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(&db.pool).await.unwrap();

    let signed_in = OperatorSession::sign_in(&db.options, &role, &password).await.map(|_| ());
    let cli = Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(["mcp", "token", "revoke", &uuid::Uuid::now_v7().to_string(), "--reason", "test", "--operator", &role])
        .env("DATABASE_URL", &db.url)
        .env("MESH_OPERATOR_PASSWORD", &password)
        .output()
        .unwrap();
    // A cluster-wide superuser must not outlive the test, whatever it found.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP ROLE {role}"))).execute(&db.pool).await.unwrap();

    let Err(OperatorError::Forbidden(why)) = signed_in else { panic!("a superuser signed in: {signed_in:?}") };
    assert!(why.contains("superuser") && why.contains("your own operator role"), "{why}");
    assert!(!cli.status.success());
    assert!(
        String::from_utf8_lossy(&cli.stderr).contains("is a superuser"),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
}
