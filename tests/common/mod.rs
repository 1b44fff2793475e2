//! Shared test harness: every test gets its own freshly migrated database on a real PostgreSQL,
//! so tests are parallel-safe and never see each other's rows.
//!
//! The server comes from `DATABASE_URL` (an admin URL on any database of the cluster);
//! `scripts/test.sh` starts an ephemeral embedded cluster and sets it. There is no mock.

#![allow(dead_code)]

use std::str::FromStr;

use chrono::{DateTime, Duration, Utc};
use mesh_memory::store::{
    ActorKind, Direction, NewConversation, NewMemory, NewMessage, Restriction, SourceRef, Store, Topology,
};
use mesh_memory::{ActorId, AgentId, ConversationId, EntryId, IdentityId, MessageId, RevisionId};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

/// A private, migrated database for one test, dropped when the test ends (kept, and named on
/// stderr, when the test fails, for inspection).
pub struct TestDb {
    pub pool: PgPool,
    pub store: Store,
    pub name: String,
    pub options: PgConnectOptions,
    /// A URL for this database (for driving the CLI in tests).
    pub url: String,
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test database {} kept for inspection (the test failed)", self.name);
            return;
        }
        // Drop runs inside the test's runtime, which cannot be blocked on: a thread of its own
        // drops the database (FORCE ends this test's remaining connections).
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime
                .block_on(async {
                    let mut admin = admin_options().connect().await?;
                    // The name was generated from a UUID by test_db, never from input.
                    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                        .execute(&mut admin)
                        .await
                        .map(|_| ())
                })
                .map_err(std::io::Error::other)
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("warning: could not drop test database {}: {dropped:?}", self.name);
        }
    }
}

/// The admin URL with its database name replaced.
fn url_for_database(admin: &str, name: &str) -> String {
    let (base, query) = admin.split_once('?').map_or((admin, None), |(b, q)| (b, Some(q)));
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[after_scheme..].find('/').map_or(base.len(), |i| after_scheme + i);
    let mut url = format!("{}/{name}", &base[..host_end]);
    if let Some(query) = query {
        url.push('?');
        url.push_str(query);
    }
    url
}

/// The admin URL of the test cluster, or a loud failure explaining how to get one.
pub fn admin_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| {
        panic!(
            "DATABASE_URL is not set: these tests need a real PostgreSQL. Run `scripts/test.sh` \
             (it starts an embedded cluster), or export DATABASE_URL=$(mesh-memory db url) after \
             `mesh-memory db start --ephemeral`."
        )
    })
}

fn admin_options() -> PgConnectOptions {
    PgConnectOptions::from_str(&admin_url()).expect("DATABASE_URL parses")
}

/// The name of the template database holding today's migrations: `mm_template_` and a digest of
/// every migration file, so a changed or added migration gets a template of its own.
fn template_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        use sha2::{Digest, Sha256};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let mut files: Vec<_> = std::fs::read_dir(&dir).expect("migrations/").map(|e| e.unwrap().path()).collect();
        files.sort();
        let mut digest = Sha256::new();
        for file in files {
            digest.update(file.file_name().unwrap().as_encoded_bytes());
            digest.update(std::fs::read(&file).unwrap());
        }
        format!("mm_template_{}", &hex::encode(digest.finalize())[..16])
    })
}

/// Makes sure the template database exists: migrated once per cluster and migration set, under an
/// advisory lock so that parallel test processes build it once. Older templates are dropped.
async fn ensure_template() {
    static READY: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    READY
        .get_or_init(|| async {
            let template = template_name();
            let mut admin = admin_options().connect().await.expect("connect to the test cluster");
            sqlx::query("SELECT pg_advisory_lock(hashtext('mesh-memory test template'))")
                .execute(&mut admin)
                .await
                .unwrap();
            let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                .bind(template)
                .fetch_one(&mut admin)
                .await
                .unwrap();
            if !exists {
                let stale: Vec<String> = sqlx::query_scalar(
                    "SELECT datname FROM pg_database WHERE datname LIKE 'mm\\_template\\_%' AND datname <> $1",
                )
                .bind(template)
                .fetch_all(&mut admin)
                .await
                .unwrap();
                // Names read from pg_database, all of the form mm_template_<hex>.
                for old in stale {
                    for statement in [
                        format!("ALTER DATABASE {old} IS_TEMPLATE false"),
                        format!("DROP DATABASE IF EXISTS {old} WITH (FORCE)"),
                    ] {
                        sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut admin).await.unwrap();
                    }
                }
                let building = format!("{template}_building");
                for statement in
                    [format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"), format!("CREATE DATABASE {building}")]
                {
                    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut admin).await.unwrap();
                }
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .connect_with(admin_options().database(&building))
                    .await
                    .expect("connect to the template being built");
                mesh_memory::database::migrate(&pool).await.expect("migrations apply");
                pool.close().await;
                for statement in [
                    format!("ALTER DATABASE {building} RENAME TO {template}"),
                    format!("ALTER DATABASE {template} IS_TEMPLATE true"),
                ] {
                    sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&mut admin).await.unwrap();
                }
            }
            sqlx::query("SELECT pg_advisory_unlock(hashtext('mesh-memory test template'))")
                .execute(&mut admin)
                .await
                .unwrap();
        })
        .await;
}

/// Creates a fresh database named after the test, copied from the migrated template (migrating
/// every file per test cost more than most tests themselves). It is dropped when the test ends.
pub async fn test_db() -> TestDb {
    ensure_template().await;
    let db = database_from(template_name()).await;
    // Already at head: this only checks that the template's history matches the binary's.
    mesh_memory::database::migrate(&db.pool).await.expect("migrations apply");
    db
}

/// A fresh, empty database (no migration applied): for restoring a dump into, as an upgrading
/// user's store would be. Dropped when the test ends, like [`test_db`]'s.
pub async fn empty_db() -> TestDb {
    database_from("template0").await
}

/// A new database copied from `template` (a name generated here, never input), connected.
async fn database_from(template: &str) -> TestDb {
    let name = format!("mm_test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = admin_options().connect().await.expect("connect to the test cluster");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name} TEMPLATE {template}")))
        .execute(&mut admin)
        .await
        .expect("create test database");
    let options = admin_options().database(&name);
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .connect_with(mesh_memory::database::with_session_settings(options.clone()))
        .await
        .expect("connect to the test database");
    let url = url_for_database(&admin_url(), &name);
    TestDb { store: Store::new(pool.clone()), pool, name, options, url }
}

/// A runtime agent with people and conversations, for building scenarios quickly.
pub struct World {
    pub store: Store,
    pub agent: AgentId,
    pub agent_actor: ActorId,
    pub clock: DateTime<Utc>,
}

pub struct Person {
    pub actor: ActorId,
    pub identity: IdentityId,
}

impl World {
    pub async fn new(store: &Store, agent_name: &str) -> World {
        let agent = store.create_runtime_agent(agent_name).await.unwrap();
        let agent_actor = store.agent_actor(agent).await.unwrap();
        World { store: store.clone(), agent, agent_actor, clock: Utc::now() - Duration::days(10) }
    }

    pub async fn person(&self, name: &str, handle: &str) -> Person {
        let actor = self.store.create_actor(ActorKind::Human, name).await.unwrap();
        let identity = self.store.add_connector_identity(actor, "slack", handle).await.unwrap();
        Person { actor, identity }
    }

    /// A conversation whose members (and the agent) joined a day before the clock.
    pub async fn conversation(&self, channel: &str, topology: Topology, members: &[&Person]) -> ConversationId {
        let id = self
            .store
            .create_conversation(NewConversation {
                agent: self.agent,
                connector: "slack",
                external_channel_id: channel,
                topology,
                title: channel,
            })
            .await
            .unwrap();
        let at = self.clock - Duration::days(1);
        self.store.join_conversation(id, self.agent_actor, at).await.unwrap();
        for m in members {
            self.store.join_conversation(id, m.actor, at).await.unwrap();
        }
        id
    }

    pub async fn say(&mut self, conversation: ConversationId, by: &Person, body: &str) -> MessageId {
        self.clock += Duration::minutes(1);
        self.store
            .record_message(NewMessage {
                agent: self.agent,
                conversation,
                direction: Direction::Inbound,
                sender: by.actor,
                sender_identity: Some(by.identity),
                body,
                sent_at: self.clock,
            })
            .await
            .unwrap()
    }

    pub fn memory(
        &self,
        body: &str,
        subject: Option<ActorId>,
        source: ActorId,
        conversation: ConversationId,
        message: MessageId,
    ) -> NewMemory {
        NewMemory {
            agent: self.agent,
            body: body.to_owned(),
            subject,
            source_actor: Some(source),
            origin_conversation: Some(conversation),
            always_on: false,
            restriction: Restriction::None,
            sources: vec![SourceRef::Message(message)],
        }
    }

    /// Says `body` in `conversation` and remembers it about `subject`, sourced from that message.
    pub async fn remember(
        &mut self,
        conversation: ConversationId,
        by: &Person,
        subject: Option<ActorId>,
        body: &str,
    ) -> (EntryId, RevisionId) {
        let message = self.say(conversation, by, body).await;
        let written =
            self.store.create_entry(self.memory(body, subject, by.actor, conversation, message)).await.unwrap();
        (written.entry_id(), written.revision_id())
    }
}

/// Asserts that the `searchable_revisions` projection holds exactly what its definition says:
/// one row per current revision of a live entry, with the entry's restriction and the revision's
/// evidence summary as they are now. Tests call it after the writes that maintain it (create,
/// amend, forget, repair, operator review), so a missed trigger fails here by name.
#[allow(dead_code)]
pub async fn assert_projection_matches_canonical(pool: &PgPool) {
    let diff: Vec<(String, uuid::Uuid)> = sqlx::query_as(
        "WITH expected AS (
             SELECT r.id AS revision_id, e.id AS entry_id, e.runtime_agent_id, e.restriction, e.restricted_conversation_id,
                    coalesce(s.evidence_known, false) AS evidence_known, coalesce(s.audience, '{}') AS audience,
                    r.subject_actor_id, e.origin_conversation_id, e.always_on, r.created_at
               FROM memory_entries e
               JOIN memory_entry_revisions r ON r.id = e.current_revision_id
               LEFT JOIN revision_audience_summary s ON s.revision_id = r.id
              WHERE e.state = 'live'
         ), actual AS (
             SELECT revision_id, entry_id, runtime_agent_id, restriction, restricted_conversation_id, evidence_known,
                    audience, subject_actor_id, origin_conversation_id, always_on, created_at
               FROM searchable_revisions
         )
         SELECT 'missing or stale', revision_id FROM (SELECT * FROM expected EXCEPT SELECT * FROM actual) m
         UNION ALL
         SELECT 'unexpected', revision_id FROM (SELECT * FROM actual EXCEPT SELECT * FROM expected) u",
    )
    .fetch_all(pool)
    .await
    .expect("comparing the projection");
    assert!(diff.is_empty(), "searchable_revisions diverges from canonical rows: {diff:?}");
    assert_lexical_statistics_match_projection(pool).await;
    // A row has an audience class exactly when its evidence is known, and the class's members are
    // its audience (what makes the class-driven eligible set equal to the array-driven one).
    let misclassed: Vec<uuid::Uuid> = sqlx::query_scalar(
        "SELECT p.revision_id FROM searchable_revisions p
           LEFT JOIN audience_classes c ON c.id = p.audience_class_id
          WHERE (p.audience_class_id IS NOT NULL) <> p.evidence_known
             OR (p.audience_class_id IS NOT NULL
                 AND (c.id IS NULL OR c.members <> p.audience OR c.runtime_agent_id <> p.runtime_agent_id))",
    )
    .fetch_all(pool)
    .await
    .expect("checking audience classes");
    assert!(misclassed.is_empty(), "rows with a wrong audience class: {misclassed:?}");
    // Each row carries the quantized embedding of its revision in the active generation, or NULL
    // when there is none (migration 20261202008200; only where pgvector is installed).
    let pgvector: bool = sqlx::query_scalar("SELECT to_regproc('memory_embedding_bits') IS NOT NULL")
        .fetch_one(pool)
        .await
        .expect("checking for pgvector");
    if pgvector {
        let stale: Vec<uuid::Uuid> = sqlx::query_scalar(
            "SELECT p.revision_id FROM searchable_revisions p
              WHERE p.embedding_bits IS DISTINCT FROM memory_embedding_bits(p.revision_id)",
        )
        .fetch_all(pool)
        .await
        .expect("checking embedding bits");
        assert!(stale.is_empty(), "rows whose embedding bits are not the active generation's: {stale:?}");
    }
}

/// Asserts that the BM25 statistics (migration 20261204100000: folded totals plus pending rows, the
/// views ranking reads) equal a
/// recomputation from the projection: per agent the number of rows and their lexeme occurrences,
/// per agent and lexeme the number of rows containing it. Called by
/// [`assert_projection_matches_canonical`], so every write path its callers exercise (create,
/// amend, forget, repair, review) checks them too.
pub async fn assert_lexical_statistics_match_projection(pool: &PgPool) {
    let corpus: Vec<(uuid::Uuid, i64, i64, i64, i64)> = sqlx::query_as(
        "WITH expected AS (SELECT runtime_agent_id, count(*)::bigint AS documents, sum(lexeme_count)::bigint AS lexemes
                             FROM searchable_revisions GROUP BY runtime_agent_id),
              actual AS (SELECT runtime_agent_id, documents, lexemes FROM lexical_corpus_totals)
         SELECT coalesce(e.runtime_agent_id, a.runtime_agent_id), coalesce(e.documents, 0), coalesce(a.documents, 0),
                coalesce(e.lexemes, 0), coalesce(a.lexemes, 0)
           FROM expected e FULL JOIN actual a ON a.runtime_agent_id = e.runtime_agent_id
          WHERE coalesce(e.documents, 0) <> coalesce(a.documents, 0) OR coalesce(e.lexemes, 0) <> coalesce(a.lexemes, 0)",
    )
    .fetch_all(pool)
    .await
    .expect("comparing corpus statistics");
    assert!(corpus.is_empty(), "corpus statistics (agent, expected/actual rows, expected/actual lexemes): {corpus:?}");
    let terms: Vec<(uuid::Uuid, String, i64, i64)> = sqlx::query_as(
        "WITH expected AS (SELECT p.runtime_agent_id, u.lexeme, count(*)::bigint AS documents
                             FROM searchable_revisions p CROSS JOIN LATERAL unnest(p.body_tsv) AS u
                            GROUP BY 1, 2),
              actual AS (SELECT runtime_agent_id, lexeme, documents FROM lexical_term_totals)
         SELECT coalesce(e.runtime_agent_id, a.runtime_agent_id), coalesce(e.lexeme, a.lexeme),
                coalesce(e.documents, 0), coalesce(a.documents, 0)
           FROM expected e FULL JOIN actual a ON a.runtime_agent_id = e.runtime_agent_id AND a.lexeme = e.lexeme
          WHERE coalesce(e.documents, 0) <> coalesce(a.documents, 0)
          LIMIT 20",
    )
    .fetch_all(pool)
    .await
    .expect("comparing term statistics");
    assert!(terms.is_empty(), "term statistics (agent, lexeme, expected, actual): {terms:?}");
}

/// Inserts an operator-approved grant on `revision` for `audience` (revoked at once when
/// `revoked`), in plain SQL: creating grants through the API belongs to the sharing module and its
/// tests; these tests need grants as data.
pub async fn grant(
    pool: &PgPool,
    agent: AgentId,
    revision: RevisionId,
    audience: &[ActorId],
    revoked: bool,
) -> uuid::Uuid {
    let id = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO sharing_grants (id, runtime_agent_id, revision_id, authority, approved_by_role, reason, revoked_at, revoked_by)
         VALUES ($1, $2, $3, 'operator_approval', 'test-operator', 'released for the test',
                 CASE WHEN $4 THEN now() END, CASE WHEN $4 THEN 'test-operator' END)",
    )
    .bind(id)
    .bind(agent)
    .bind(revision)
    .bind(revoked)
    .execute(pool)
    .await
    .unwrap();
    let actors: Vec<uuid::Uuid> = audience.iter().map(|a| a.0).collect();
    sqlx::query("INSERT INTO sharing_grant_audience (grant_id, actor_id) SELECT $1, unnest($2::uuid[])")
        .bind(id)
        .bind(actors)
        .execute(pool)
        .await
        .unwrap();
    id
}

/// A LOGIN role in `group` with a random password, and a pool connected as it to the test database.
#[allow(dead_code)]
pub async fn login_role(db: &TestDb, prefix: &str, group: &str) -> (String, PgPool) {
    let (role, _, pool) = login_role_with_password(db, prefix, group).await;
    (role, pool)
}

/// [`login_role`], also returning the role's password (to sign in as it from another process).
#[allow(dead_code)]
pub async fn login_role_with_password(db: &TestDb, prefix: &str, group: &str) -> (String, String, PgPool) {
    let role = format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let password = uuid::Uuid::new_v4().simple().to_string();
    let (statement,): (String,) =
        sqlx::query_as("SELECT format('CREATE ROLE %I LOGIN PASSWORD %L IN ROLE %I', $1, $2, $3)")
            .bind(&role)
            .bind(&password)
            .bind(group)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&db.pool).await.unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(db.options.clone().username(&role).password(&password))
        .await
        .expect("the new login role connects");
    (role, password, pool)
}

/// A `mesh-memory mcp --http` server process (tests/mcp_http.rs, tests/mcp_malformed.rs); killed
/// when the test ends, whatever happens.
pub struct McpHttpServer {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT/`.
    pub endpoint: String,
}

impl Drop for McpHttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `mesh-memory mcp --http 127.0.0.1:0` and waits for the address it prints.
pub fn serve_mcp_http(db: &TestDb) -> McpHttpServer {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mesh-memory"))
        .args(["--database-url", &db.url, "mcp", "--http", "127.0.0.1:0"])
        .env("MESH_EMBEDDER", "none")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the server starts");
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    let line = loop {
        match lines.next() {
            Some(Ok(line)) if line.contains("http://") => break line,
            Some(Ok(_)) => continue,
            other => panic!("the server printed no address: {other:?}"),
        }
    };
    let endpoint = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap().to_owned();
    // Keep draining stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    McpHttpServer { child, endpoint }
}

/// Messages, memory entries and retrieval events: what a refused MCP request must not add to.
pub async fn mcp_footprint(db: &TestDb) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM memory_entries),
                (SELECT count(*) FROM memory_retrieval_events)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

/// Erases `scope` (`entry` or `person`) of `target` in every runtime agent, as an operator does
/// after a preview: the scope's ids are confirmed as read, through the one erasure function (the
/// table owner may execute it like a member of `mesh_eraser`). Nothing happens when nothing is
/// left to erase.
#[allow(dead_code)]
pub async fn erase_as_owner(pool: &PgPool, scope: &str, target: uuid::Uuid) {
    let confirmed: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM memory_erasure_scope($1, $2, NULL)")
        .bind(scope)
        .bind(target)
        .fetch_all(pool)
        .await
        .unwrap();
    if confirmed.is_empty() {
        return;
    }
    sqlx::query("SELECT mesh_operator_erase(gen_random_uuid(), $1, $2, NULL, 'test', $3, '{}')")
        .bind(scope)
        .bind(target)
        .bind(&confirmed)
        .execute(pool)
        .await
        .unwrap();
}

/// An MCP access token for the speaker `external_id` in `conversation`, issued as operators issue
/// them: by a new member of `mesh_operator` signed in through the operator layer, with a reason
/// (recorded in `operator_actions`).
#[allow(dead_code)]
pub async fn issue_token(
    db: &TestDb,
    agent: AgentId,
    conversation: ConversationId,
    external_id: &str,
    label: &str,
) -> mesh_memory::store::IssuedToken {
    let (role, password, pool) = login_role_with_password(db, "mm_issuer", "mesh_operator").await;
    pool.close().await;
    let session = mesh_memory::operator::OperatorSession::sign_in(&db.options, &role, &password).await.unwrap();
    let request =
        mesh_memory::operator::TokenBindingRequest { agent, conversation, external_id, label, expires_at: None };
    let issued = session.issue_access_token(&request, "issued for the test").await;
    session.close().await;
    issued.unwrap()
}

/// This test database's URL, signed in as `role` with `password` (a runtime or operator login).
#[allow(dead_code)]
pub fn url_as(db: &TestDb, role: &str, password: &str) -> String {
    let (scheme, rest) = db.url.split_once("://").expect("a URL");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{role}:{password}@{host}")
}
