//! Legacy audience repair: evidence becomes known only with proof, and nothing else changes.

mod common;

use chrono::Duration;
use common::{test_db, Person, TestDb, World};
use mesh_memory::privacy::repair::{record_observation, repair_audience_evidence, review_source_evidence, RepairError};
use mesh_memory::store::{Amendment, Direction, EvidenceView, NewMessage, SubjectUpdate, Topology, WriteOutcome};
use mesh_memory::{ActorId, ConversationId, EntryId, SourceId};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

const REASON: &str = "test repair";

/// A legacy thread: unknown topology, one authenticated inbound speaker, the agent's replies.
struct Legacy {
    world: World,
    priya: Person,
    conversation: ConversationId,
    entry: EntryId,
}

async fn legacy_thread(db: &TestDb, channel: &str) -> Legacy {
    let mut world = World::new(&db.store, "agent").await;
    let priya = world.person("Priya", "U456").await;
    let conversation = world.conversation(channel, Topology::Unknown, &[&priya]).await;
    let (entry, _) = world.remember(conversation, &priya, Some(priya.actor), "Is interviewing elsewhere").await;
    world.clock += Duration::minutes(1);
    db.store
        .record_message(NewMessage {
            agent: world.agent,
            conversation,
            direction: Direction::Outbound,
            sender: world.agent_actor,
            sender_identity: None,
            body: "Noted, I'll keep that private.",
            sent_at: world.clock,
        })
        .await
        .unwrap();
    Legacy { world, priya, conversation, entry }
}

async fn evidence_of(db: &TestDb, legacy: &Legacy) -> Vec<EvidenceView> {
    let history = db.store.entry_history(legacy.world.agent, legacy.entry).await.unwrap().unwrap();
    history.revisions.last().unwrap().sources.iter().map(|s| s.evidence.clone()).collect()
}

async fn observe_direct(db: &TestDb, legacy: &Legacy, after_minutes: i64, authenticated: bool) {
    record_observation(
        &db.pool,
        legacy.conversation,
        Topology::Direct,
        Some(legacy.priya.identity),
        authenticated,
        legacy.world.clock + Duration::minutes(after_minutes),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_later_authenticated_direct_observation_repairs_a_legacy_thread() {
    let db = test_db().await;
    let legacy = legacy_thread(&db, "D0LEGACY").await;
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown]);
    observe_direct(&db, &legacy, 60, true).await;

    let repaired = repair_audience_evidence(&db.pool, REASON, false).await.unwrap();
    assert_eq!(repaired.len(), 1);
    assert_eq!(repaired[0].rule, "later_direct_observation");
    assert_eq!(repaired[0].audience, vec![legacy.priya.actor]);
    match &evidence_of(&db, &legacy).await[..] {
        [EvidenceView::Known { actors, .. }] => assert_eq!(actors, &vec![legacy.priya.actor]),
        other => panic!("expected known evidence, got {other:?}"),
    }
    let topology = db.store.conversation(legacy.world.agent, legacy.conversation).await.unwrap().topology;
    assert_eq!(topology, Topology::Direct, "the observation fixes the direct conversation");
    let logged: i64 = sqlx::query_scalar("SELECT count(*) FROM evidence_repairs WHERE reason = $1")
        .bind(REASON)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(logged, 1);
    assert!(repair_audience_evidence(&db.pool, REASON, false).await.unwrap().is_empty(), "idempotent");
    common::assert_projection_matches_canonical(&db.pool).await;
}

#[tokio::test]
async fn an_earlier_or_unauthenticated_observation_proves_nothing() {
    let db = test_db().await;
    let legacy = legacy_thread(&db, "D0LEGACY").await;
    observe_direct(&db, &legacy, -600, true).await; // before the message was sent
    observe_direct(&db, &legacy, 60, false).await; // later, but not authenticated
    assert!(repair_audience_evidence(&db.pool, REASON, false).await.unwrap().is_empty());
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown]);
}

#[tokio::test]
async fn a_direct_looking_channel_prefix_alone_proves_nothing() {
    let db = test_db().await;
    // Slack DM ids start with "D"; the prefix is never consulted.
    let legacy = legacy_thread(&db, "D024BE7LR").await;
    assert!(repair_audience_evidence(&db.pool, REASON, false).await.unwrap().is_empty());
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown]);
}

#[tokio::test]
async fn a_single_speaker_count_alone_proves_nothing() {
    let db = test_db().await;
    let mut legacy = legacy_thread(&db, "C-OLD-THREAD").await;
    // Only one human ever spoke, and only the agent answered: still no proof of who could read it.
    for _ in 0..3 {
        legacy.world.say(legacy.conversation, &legacy.priya, "more from the only speaker").await;
    }
    assert!(repair_audience_evidence(&db.pool, REASON, false).await.unwrap().is_empty());
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown]);
}

#[tokio::test]
async fn a_contradictory_inbound_sender_blocks_the_repair() {
    let db = test_db().await;
    let mut legacy = legacy_thread(&db, "D0LEGACY").await;
    let victor = legacy.world.person("Victor", "U123").await;
    // Victor spoke in the "direct" thread: it was not a private conversation with Priya.
    legacy.world.say(legacy.conversation, &victor, "I can read this too").await;
    observe_direct(&db, &legacy, 60, true).await;
    assert!(repair_audience_evidence(&db.pool, REASON, false).await.unwrap().is_empty());
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown]);
}

#[tokio::test]
async fn a_sender_without_an_exact_connector_identity_blocks_the_repair() {
    let db = test_db().await;
    let mut world = World::new(&db.store, "agent").await;
    let priya = world.person("Priya", "U456").await;
    let conversation = world.conversation("D0LEGACY", Topology::Unknown, &[&priya]).await;
    world.clock += Duration::minutes(1);
    let message = db
        .store
        .record_message(NewMessage {
            agent: world.agent,
            conversation,
            direction: Direction::Inbound,
            sender: priya.actor,
            sender_identity: None,
            body: "unauthenticated",
            sent_at: world.clock,
        })
        .await
        .unwrap();
    let written = db
        .store
        .create_entry(world.memory("unauthenticated fact", None, priya.actor, conversation, message))
        .await
        .unwrap();
    record_observation(
        &db.pool,
        conversation,
        Topology::Direct,
        Some(priya.identity),
        true,
        world.clock + Duration::hours(1),
    )
    .await
    .unwrap();
    assert!(repair_audience_evidence(&db.pool, REASON, false).await.unwrap().is_empty());
    let history = db.store.entry_history(world.agent, written.entry_id()).await.unwrap().unwrap();
    assert_eq!(history.revisions[0].sources[0].evidence, EvidenceView::Unknown);
}

#[tokio::test]
async fn stored_direct_topology_repairs_and_derived_sources_follow() {
    let db = test_db().await;
    let legacy = legacy_thread(&db, "D0LEGACY").await;
    // An amendment made while the evidence was unknown carries an unknown parent source.
    let history = db.store.entry_history(legacy.world.agent, legacy.entry).await.unwrap().unwrap();
    let amended = db
        .store
        .amend_entry(Amendment {
            agent: legacy.world.agent,
            entry: legacy.entry,
            expected_revision: history.current_revision_id,
            body: Some("Is interviewing at two companies".into()),
            subject: SubjectUpdate::Keep,
            source_actor: None,
            sources: vec![],
        })
        .await
        .unwrap();
    assert!(matches!(amended, WriteOutcome::Committed(_)));
    // The topology was stored later by a connector upgrade (legacy data).
    sqlx::query("UPDATE conversations SET topology = 'direct' WHERE id = $1")
        .bind(legacy.conversation)
        .execute(&db.pool)
        .await
        .unwrap();

    let repaired = repair_audience_evidence(&db.pool, REASON, false).await.unwrap();
    let rules: Vec<&str> = repaired.iter().map(|r| r.rule.as_str()).collect();
    assert_eq!(rules.iter().filter(|r| **r == "direct_topology").count(), 2, "{rules:?}");
    assert!(rules.contains(&"derived_from_known_revision"), "{rules:?}");
    for evidence in evidence_of(&db, &legacy).await {
        assert!(matches!(evidence, EvidenceView::Known { ref actors, .. } if actors == &vec![legacy.priya.actor]));
    }
}

/// Everything repair must not touch, as comparable text.
async fn preserved_state(pool: &PgPool) -> Vec<String> {
    let queries = [
        "SELECT string_agg(id || ':' || body || ':' || coalesce(subject_actor_id::text, '-'), ',' ORDER BY id) FROM memory_entry_revisions",
        "SELECT string_agg(id || ':' || revision_id || ':' || kind || ':' || coalesce(message_id::text, '-') || ':' || coalesce(parent_revision_id::text, '-'), ',' ORDER BY id) FROM revision_sources",
        "SELECT string_agg(id || ':' || state || ':' || restriction || ':' || coalesce(restricted_conversation_id::text, '-'), ',' ORDER BY id) FROM memory_entries",
        "SELECT coalesce(string_agg(id || ':' || revision_id || ':' || coalesce(revoked_at::text, '-'), ',' ORDER BY id), '') FROM sharing_grants",
        "SELECT string_agg(id || ':' || body || ':' || sender_actor_id || ':' || coalesce(sender_identity_id::text, '-'), ',' ORDER BY id) FROM messages",
    ];
    let mut state = Vec::new();
    for q in queries {
        state.push(sqlx::query_scalar::<_, Option<String>>(q).fetch_one(pool).await.unwrap().unwrap_or_default());
    }
    state
}

#[tokio::test]
async fn repair_preserves_bodies_sources_restrictions_grants_and_transcripts() {
    let db = test_db().await;
    let legacy = legacy_thread(&db, "D0LEGACY").await;
    let history = db.store.entry_history(legacy.world.agent, legacy.entry).await.unwrap().unwrap();
    sqlx::query(
        "INSERT INTO sharing_grants (id, runtime_agent_id, revision_id, authority, approved_by_role, reason)
         VALUES (gen_random_uuid(), $1, $2, 'operator_approval', 'someone', 'test grant')",
    )
    .bind(legacy.world.agent)
    .bind(history.current_revision_id)
    .execute(&db.pool)
    .await
    .unwrap();
    observe_direct(&db, &legacy, 60, true).await;
    let before = preserved_state(&db.pool).await;

    let dry = repair_audience_evidence(&db.pool, REASON, true).await.unwrap();
    assert_eq!(dry.len(), 1, "the dry run reports what it would change");
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown], "the dry run changes nothing");

    let real = repair_audience_evidence(&db.pool, REASON, false).await.unwrap();
    assert_eq!(dry, real, "the dry run predicts the real run exactly");
    assert_eq!(before, preserved_state(&db.pool).await);
}

async fn login_role(db: &TestDb, operator: bool) -> (PgPool, String) {
    login_role_in(db, if operator { Some("mesh_operator") } else { None }).await
}

async fn login_role_in(db: &TestDb, group: Option<&str>) -> (PgPool, String) {
    let name = format!("mm_role_{}", uuid::Uuid::new_v4().simple());
    let membership = group.map(|g| format!(" IN ROLE {g}")).unwrap_or_default();
    // Role names are generated here, never taken from input.
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE ROLE {name} LOGIN PASSWORD 'role-pw'{membership}")))
        .execute(&db.pool)
        .await
        .unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(db.options.clone().username(&name).password("role-pw"))
        .await
        .unwrap();
    (pool, name)
}

#[tokio::test]
async fn operator_review_needs_an_operator_role_and_is_logged_with_its_name() {
    let db = test_db().await;
    let legacy = legacy_thread(&db, "C-OLD").await;
    let source: SourceId = sqlx::query_scalar("SELECT id FROM revision_sources WHERE evidence = 'unknown' LIMIT 1")
        .fetch_one(&db.pool)
        .await
        .unwrap();

    let (browser, _) = login_role(&db, false).await;
    let refused = review_source_evidence(&browser, source, &[legacy.priya.actor], "looks private").await.unwrap_err();
    assert!(matches!(refused, RepairError::NotAnOperator(_)), "{refused}");
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown]);

    let (operator, operator_name) = login_role(&db, true).await;
    let missing = review_source_evidence(&operator, source, &[legacy.priya.actor], "  ").await.unwrap_err();
    assert!(matches!(missing, RepairError::MissingReason));
    let nobody = ActorId(uuid::Uuid::now_v7());
    let unknown = review_source_evidence(&operator, source, &[legacy.priya.actor, nobody], "a typo").await.unwrap_err();
    assert!(matches!(unknown, RepairError::UnknownActor), "{unknown}");
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown]);
    review_source_evidence(&operator, source, &[legacy.priya.actor], "confirmed with Priya: DM").await.unwrap();
    match &evidence_of(&db, &legacy).await[..] {
        [EvidenceView::Known { actors, .. }] => assert_eq!(actors, &vec![legacy.priya.actor]),
        other => panic!("expected known evidence, got {other:?}"),
    }
    let (role, action): (String, String) =
        sqlx::query_as("SELECT role_name, action FROM operator_actions WHERE target_id = $1")
            .bind(source)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((role.as_str(), action.as_str()), (operator_name.as_str(), "review_source_evidence"));
    let again = review_source_evidence(&operator, source, &[legacy.priya.actor], "twice").await.unwrap_err();
    assert!(matches!(again, RepairError::NotReviewable(_)), "{again}");
    common::assert_projection_matches_canonical(&db.pool).await;
}

#[tokio::test]
async fn the_runtime_role_writes_memories_but_cannot_rewrite_provenance() {
    let db = test_db().await;
    let legacy = legacy_thread(&db, "C-OLD").await;
    let (runtime_pool, _) = login_role_in(&db, Some("mesh_runtime")).await;
    let runtime = mesh_memory::store::Store::new(runtime_pool.clone());

    // The runtime can still remember (lineage rows and the derived summary are written).
    let message = db
        .store
        .record_message(NewMessage {
            agent: legacy.world.agent,
            conversation: legacy.conversation,
            direction: Direction::Inbound,
            sender: legacy.priya.actor,
            sender_identity: Some(legacy.priya.identity),
            body: "runtime-written",
            sent_at: legacy.world.clock + Duration::minutes(5),
        })
        .await
        .unwrap();
    let written = runtime
        .create_entry(legacy.world.memory("runtime-written", None, legacy.priya.actor, legacy.conversation, message))
        .await
        .expect("the runtime role can create memories");
    let summarized: i64 = sqlx::query_scalar("SELECT count(*) FROM revision_audience_summary WHERE revision_id = $1")
        .bind(written.revision_id())
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(summarized, 1);

    // But it cannot turn unknown evidence into known, nor forge the summary or the repair log.
    for statement in [
        "UPDATE revision_sources SET evidence = 'known'",
        "UPDATE revision_audience_summary SET evidence_known = true",
        "DELETE FROM revision_sources",
        "INSERT INTO evidence_repairs (source_id, revision_id, rule, audience, reason) SELECT id, revision_id, 'operator_review', '{}', 'forged' FROM revision_sources LIMIT 1",
    ] {
        let err = sqlx::query(statement).execute(&runtime_pool).await.expect_err(statement);
        assert!(err.to_string().contains("permission denied"), "{statement}: {err}");
    }
    assert_eq!(evidence_of(&db, &legacy).await, vec![EvidenceView::Unknown]);
}
