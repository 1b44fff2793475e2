//! Hostile input and faults: fuzzed tool arguments and replies against the real engine and
//! database (typed errors, nothing committed), PostgreSQL stopped mid-turn, a failing embedder and
//! an exhausted connection pool.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{test_db, Person, TestDb, World};
use mesh_memory::pg::EmbeddedCluster;
use mesh_memory::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchRequest};
use mesh_memory::retrieval::{SemanticFailure, SemanticFuture, SemanticIndex, SemanticRequest};
use mesh_memory::store::{Store, StoreError, Topology};
use mesh_memory::tools::{validate_call, ToolCall};
use mesh_memory::turn::guard::unbacked_claims;
use mesh_memory::turn::{Ledger, ScriptedModel, TurnEngine, TurnOutcome};
use mesh_memory::ConversationId;
use proptest::prelude::*;
use serde_json::json;

async fn durable_counts(pool: &sqlx::PgPool) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM memory_entries), (SELECT count(*) FROM memory_entry_revisions),
                (SELECT count(*) FROM sharing_grants)",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

fn engine(store: &Store, model: &Arc<ScriptedModel>) -> TurnEngine {
    TurnEngine::new(store.clone(), Retriever::new(store.clone(), RetrievalConfig::default()), model.clone())
}

/// Argument texts a hostile or broken model might send.
fn hostile_arguments() -> Vec<String> {
    let invalid_utf8 =
        String::from_utf8_lossy(&[b'{', b'"', b'b', b'o', b'd', b'y', b'"', b':', 0xff, 0xfe, b'}']).into_owned();
    vec![
        String::new(),
        "{".into(),
        "null".into(),
        "[]".into(),
        "{\"body\": 42}".into(),
        "{\"body\": \"\"}".into(),
        format!("{{\"body\": \"{}\"}}", "x".repeat(1_000_000)),
        invalid_utf8,
        "{\"body\": \"ok\", \"entry_id\": \"01a23760-c656-730d-b743-d1d5ac59dae3\"}".into(),
        "{\"body\": \"ok\", \"supersedes\": true}".into(),
        "{\"body\": \"ok\", \"subject\": \"U１２３\"}".into(), // full-width digits: not U123
        "{\"body\": \"ok\", \"subject\": \"Vісtor\"}".into(),  // Cyrillic і and с
        "{\"body\": \"ok\", \"subject\": \"U123'; DROP TABLE actors; --\"}".into(),
        "{\"body\": \"ok\", \"source_actor\": \"U123\"}".into(),
        "{\"body\": \"ok\", \"conversation\": \"C-ENG\"}".into(),
    ]
}

#[test]
fn hostile_arguments_get_typed_errors_from_the_validator() {
    for (i, args) in hostile_arguments().into_iter().enumerate() {
        // Only the confusable / injected subjects are syntactically valid: they fail at resolution.
        let result = validate_call(&ToolCall { id: format!("c{i}"), name: "remember".into(), arguments: args.clone() });
        let shown: String = args.chars().take(60).collect();
        if args.contains("U１２３") || args.contains("Vісtor") || args.contains("DROP TABLE") {
            continue;
        }
        let err = result.expect_err(&shown);
        assert!(!err.to_string().is_empty(), "{shown}: an error must say what is wrong");
    }
}

struct Scene {
    db: TestDb,
    world: World,
    victor: Person,
    engineering: ConversationId,
}

async fn scene() -> Scene {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let victor = world.person("Victor", "U123").await;
    let engineering = world.conversation("C-ENG", Topology::Channel, &[&victor]).await;
    Scene { db, world, victor, engineering }
}

#[tokio::test]
async fn a_round_with_any_hostile_call_commits_nothing() {
    let mut s = scene().await;
    let before = durable_counts(&s.db.pool).await;
    for args in hostile_arguments() {
        let inbound = s.world.say(s.engineering, &s.victor, "please remember things").await;
        let model = Arc::new(
            ScriptedModel::new()
                .raw_calls(vec![
                    ("remember".into(), json!({"body": "a valid fact that must not commit"}).to_string()),
                    ("remember".into(), args.clone()),
                ])
                .reply("Nothing was stored."),
        );
        let report = engine(&s.db.store, &model).run_turn(inbound).await.expect("the turn runs");
        assert!(
            report.ledger.writes.is_empty(),
            "a rejected round commits nothing ({}): {:?}",
            args.chars().take(60).collect::<String>(),
            report.ledger
        );
    }
    assert_eq!(before, durable_counts(&s.db.pool).await);
    let tables: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE tablename IN ('actors', 'memory_entries')")
            .fetch_one(&s.db.pool)
            .await
            .unwrap();
    assert_eq!(tables, 2, "SQL metacharacters are data, never code");
}

#[tokio::test]
async fn sql_metacharacters_in_a_body_are_stored_verbatim() {
    let mut s = scene().await;
    let body = "Robert'); DROP TABLE memory_entries; -- likes $$ and \\\\ and %s";
    let inbound = s.world.say(s.engineering, &s.victor, body).await;
    let model = Arc::new(ScriptedModel::new().calls(vec![("remember", json!({"body": body}))]).reply("I stored it."));
    let report = engine(&s.db.store, &model).run_turn(inbound).await.unwrap();
    assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }), "{:?}", report.outcome);
    let stored: String =
        sqlx::query_scalar("SELECT body FROM memory_entry_revisions").fetch_one(&s.db.pool).await.unwrap();
    assert_eq!(stored, body);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Arbitrary argument text never panics the validator, and an unknown tool is always refused.
    #[test]
    fn arbitrary_bytes_as_arguments_are_typed_errors_or_clean_calls(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        for name in ["remember", "recall", "amend", "forget", "request_memory_sharing"] {
            let _ = validate_call(&ToolCall { id: "c".into(), name: name.into(), arguments: text.clone() });
        }
        let unknown = validate_call(&ToolCall { id: "c".into(), name: "drop_table".into(), arguments: text });
        prop_assert!(unknown.is_err(), "an unknown tool is never a clean call");
    }

    /// `remember` is create-only: whatever fields a model sends, a call that validates names no
    /// existing entry (it has no field that could), and one that tries to is a typed error.
    #[test]
    fn no_remember_that_validates_names_an_existing_entry(
        fields in prop::collection::btree_map(
            prop::sample::select(vec!["body", "subject", "always_on", "entry_id", "entry", "id", "revision_id"]),
            "[a-z ]{1,20}",
            0..5,
        ),
    ) {
        let arguments = serde_json::Value::Object(
            fields.iter().map(|(k, v)| (k.to_string(), json!(v))).collect(),
        )
        .to_string();
        let names_an_entry = fields.keys().any(|k| ["entry_id", "entry", "id", "revision_id"].contains(k));
        let result = validate_call(&ToolCall { id: "c".into(), name: "remember".into(), arguments: arguments.clone() });
        if names_an_entry {
            prop_assert!(result.is_err(), "a remember naming an entry must be refused: {}", arguments);
        }
        if let Ok(call) = result {
            prop_assert_eq!(call.name(), "remember");
        }
    }

    /// With an empty ledger, any first-person past-tense mutation claim fails the guard, whatever
    /// surrounds it; arbitrary text never panics it.
    #[test]
    fn claims_without_writes_are_always_caught(
        prefix in "[a-zA-Z ,.!]{0,40}",
        suffix in "[a-zA-Z ,.!]{0,40}",
        verb in prop::sample::select(vec!["stored", "remembered", "updated", "amended", "deleted", "forgot"]),
        noise in ".{0,200}",
    ) {
        let _ = unbacked_claims(&noise, &Ledger::default());
        let reply = format!("{prefix}. I {verb} that. {suffix}");
        prop_assert!(!unbacked_claims(&reply, &Ledger::default()).is_empty(), "{}", reply);
    }
}

/// An index whose provider always fails (an embedder outage).
struct FailingEmbedder;

impl SemanticIndex for FailingEmbedder {
    fn search<'a>(&'a self, _request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        Box::pin(async { Err(SemanticFailure::Failed) })
    }
}

#[tokio::test]
async fn a_failing_embedder_degrades_to_authorized_lexical_results() {
    let mut s = scene().await;
    s.world.remember(s.engineering, &s.victor, Some(s.victor.actor), "Victor prefers tabs over spaces").await;
    let retriever =
        Retriever::new(s.db.store.clone(), RetrievalConfig::default()).with_semantic_index(Arc::new(FailingEmbedder));
    let request = SearchRequest::new(s.world.agent, s.engineering, Some(s.victor.actor), "tabs", RetrievalMode::Recall);
    let outcome = retriever.search(&request).await.expect("search survives the embedder");
    assert_eq!(outcome.selections.len(), 1);
    assert_eq!(outcome.degradation_category().map(|c| c.as_str()), Some("semantic_failed"));
}

#[tokio::test]
async fn an_exhausted_pool_is_a_clear_error_that_writes_nothing_and_recovers() {
    let mut s = scene().await;
    let message = s.world.say(s.engineering, &s.victor, "fact").await;
    // The bound covers the first connection too: 300 ms flaked when other suites loaded the two
    // cores, so it is long enough to connect under load (the exhausted acquire waits it out).
    let tiny = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(3))
        .connect_with(s.db.options.clone())
        .await
        .unwrap();
    let store = Store::new(tiny.clone());
    let before = durable_counts(&s.db.pool).await;
    let held = tiny.acquire().await.unwrap();
    let err =
        store.create_entry(s.world.memory("fact", None, s.victor.actor, s.engineering, message)).await.unwrap_err();
    assert!(matches!(err, StoreError::Database(sqlx::Error::PoolTimedOut)), "{err}");
    assert!(err.to_string().contains("database error"), "{err}");
    assert_eq!(before, durable_counts(&s.db.pool).await);
    drop(held);
    store.create_entry(s.world.memory("fact", None, s.victor.actor, s.engineering, message)).await.expect("recovers");
}

#[tokio::test]
async fn postgres_stopped_mid_turn_leaves_no_partial_write_and_recovers_after_restart() {
    // A private cluster: stopping the shared test server would break every other test.
    let root = std::env::temp_dir().join(format!("mm-fault-{}", uuid::Uuid::new_v4().simple()));
    let cluster = EmbeddedCluster::new(&root).expect("PostgreSQL binaries (run scripts/setup.sh)");
    // However the test ends, the private server stops and its files go.
    let _stop = StopOnDrop(cluster.clone(), root.clone());
    cluster.start(true).expect("start the private cluster");
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(3))
        .connect(&cluster.url().unwrap())
        .await
        .unwrap();
    mesh_memory::database::migrate(&pool).await.unwrap();
    let store = Store::new(pool.clone());
    let mut world = World::new(&store, "assistant").await;
    let victor = world.person("Victor", "U123").await;
    let engineering = world.conversation("C-ENG", Topology::Channel, &[&victor]).await;
    let inbound = world.say(engineering, &victor, "remember that I prefer tabs").await;
    let before = durable_counts(&pool).await;

    let stopper = cluster.clone();
    let model = Arc::new(ScriptedModel::new().step(move |_| {
        // The server goes away after the model asked for a write and before it executes.
        stopper.stop().expect("stop the server");
        mesh_memory::turn::ChatResponse {
            content: None,
            tool_calls: vec![mesh_memory::tools::ToolCall {
                id: "call-0".into(),
                name: "remember".into(),
                arguments: json!({"body": "Victor prefers tabs"}).to_string(),
            }],
        }
    }));
    let failed = engine(&store, &model).run_turn(inbound).await;
    let err = failed.expect_err("a turn cannot succeed without its database");
    assert!(!err.to_string().is_empty());
    eprintln!("turn with the server stopped failed as expected: {err}");

    cluster.start(true).expect("restart");
    assert_eq!(before, durable_counts(&pool).await, "no partial write survived");
    let inbound = world.say(engineering, &victor, "remember that I prefer tabs").await;
    let model = Arc::new(
        ScriptedModel::new().calls(vec![("remember", json!({"body": "Victor prefers tabs"}))]).reply("I stored it."),
    );
    let report = engine(&store, &model).run_turn(inbound).await.expect("the pool recovers after the restart");
    assert_eq!(report.ledger.writes.len(), 1);
    pool.close().await;
}

/// Stops a private cluster and removes its directory when dropped, also when a test panics.
struct StopOnDrop(EmbeddedCluster, std::path::PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Err(err) = self.0.stop() {
            eprintln!("warning: could not stop the private cluster: {err}");
        }
        let _ = std::fs::remove_dir_all(&self.1);
    }
}
