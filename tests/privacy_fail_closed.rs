//! Privacy, second pass (issue 24): destination audiences fail closed, membership times count on
//! the destination side, no tool answer tells a hidden entry from a missing one, an unknown
//! speaker is a typed error before anything runs, and a forgotten revision cited as a source
//! never widens what it narrows.

mod common;

use std::sync::Arc;

use chrono::{Duration, Utc};
use common::{test_db, Person, TestDb, World};
use mesh_memory::retrieval::{
    DegradationCategory, RetrievalConfig, RetrievalError, RetrievalMode, Retriever, SearchOutcome, SearchRequest,
};
use mesh_memory::store::{NewConversation, SourceRef, StoreError, Topology};
use mesh_memory::turn::scripted::tool_results;
use mesh_memory::turn::{ScriptedModel, TurnEngine};
use mesh_memory::{ActorId, ConversationId, EntryId};
use serde_json::{json, Value};

/// Ana and Ben share a group; Ana told the agent something in her direct conversation.
struct Scene {
    db: TestDb,
    world: World,
    ana: Person,
    ben: Person,
    group: ConversationId,
    dm_ana: ConversationId,
    private: EntryId,
}

async fn scene() -> Scene {
    let db = test_db().await;
    let mut world = World::new(&db.store, "assistant").await;
    let ana = world.person("Ana", "U1").await;
    let ben = world.person("Ben", "U2").await;
    let group = world.conversation("G-ab", Topology::Group, &[&ana, &ben]).await;
    let dm_ana = world.conversation("D-ana", Topology::Direct, &[&ana]).await;
    let (private, _) = world.remember(dm_ana, &ana, Some(ana.actor), "Ana is interviewing at Initech").await;
    Scene { db, world, ana, ben, group, dm_ana, private }
}

async fn search(db: &TestDb, s: &Scene, conversation: ConversationId, speaker: Option<ActorId>) -> SearchOutcome {
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default());
    let request =
        SearchRequest::new(s.world.agent, conversation, speaker, "interviewing Initech", RetrievalMode::Recall);
    retriever.search(&request).await.unwrap()
}

async fn empty_conversation(s: &Scene, channel: &str) -> ConversationId {
    s.db.store
        .create_conversation(NewConversation {
            agent: s.world.agent,
            connector: "slack",
            external_channel_id: channel,
            topology: Topology::Channel,
            title: channel,
        })
        .await
        .unwrap()
}

// 1. A speaker who is not a recorded member, and a conversation without members, fail closed.

#[tokio::test]
async fn a_speaker_outside_the_membership_gets_nothing_and_the_search_says_why() {
    let s = scene().await;
    // Ana's own direct conversation: her memory is eligible when she speaks there...
    let own = search(&s.db, &s, s.dm_ana, Some(s.ana.actor)).await;
    assert_eq!(own.selections.len(), 1, "the control: Ana's memory in Ana's conversation");
    // ...but a message from Ben, who is no member of it, is answered from no memory at all.
    let outsider = search(&s.db, &s, s.dm_ana, Some(s.ben.actor)).await;
    assert!(outsider.selections.is_empty(), "a sender outside the membership got {:?}", outsider.used_revisions());
    assert!(outsider.context.audience().is_empty());
    assert!(outsider.degradation_categories.contains(&DegradationCategory::SpeakerNotMember));
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT unnest(degradation_categories) FROM memory_retrieval_events WHERE id = $1")
            .bind(outsider.event_id)
            .fetch_all(&s.db.pool)
            .await
            .unwrap();
    assert!(stored.contains(&"speaker_not_member".to_owned()), "the audit row says why: {stored:?}");
}

#[tokio::test]
async fn a_conversation_without_members_admits_no_memory_not_every_memory() {
    let s = scene().await;
    let empty = empty_conversation(&s, "C-empty").await;
    let outcome = search(&s.db, &s, empty, None).await;
    assert!(outcome.selections.is_empty(), "an empty audience covered {:?}", outcome.used_revisions());
    assert!(outcome.degradation_categories.contains(&DegradationCategory::AudienceWithoutReaders));
    // The same rule holds in every SQL form of the predicate, whoever calls it with `{}`.
    let revision: uuid::Uuid = sqlx::query_scalar("SELECT current_revision_id FROM memory_entries WHERE id = $1")
        .bind(s.private)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    let rule: String = sqlx::query_scalar("SELECT (memory_eligibility_verdict($1, $2, $3, '{}')).rule")
        .bind(s.world.agent)
        .bind(revision)
        .bind(empty)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(rule, "audience_unknown");
    // The newest readings look where the private memory is: its subject, its origin.
    let (subject, origin): (Option<uuid::Uuid>, Option<uuid::Uuid>) = sqlx::query_as(
        "SELECT subject_actor_id, origin_conversation_id FROM searchable_revisions WHERE revision_id = $1",
    )
    .bind(revision)
    .fetch_one(&s.db.pool)
    .await
    .unwrap();
    let readings = [
        ("audience_array", None),
        ("class_scan", None),
        ("newest_about", subject),
        ("newest_from", origin),
        ("newest_always_on", None),
    ];
    for (reading, key) in readings {
        let admitted: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM memory_eligible_revisions($1, $2, $3, $4::memory_set_reading, $5, 100)",
        )
        .bind(s.world.agent)
        .bind(empty)
        .bind(Vec::<uuid::Uuid>::new())
        .bind(reading)
        .bind(key)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
        assert_eq!(admitted, 0, "the set form admits nothing for an empty audience (reading {reading})");
    }
}

// 2. Membership times count on the destination side.

#[tokio::test]
async fn a_leave_recorded_for_later_keeps_the_leaver_in_the_audience_until_then() {
    let mut s = scene().await;
    // Ana alone in a group with Ben, who will leave in an hour.
    let (_, _) = s.world.remember(s.group, &s.ana, Some(s.ana.actor), "Ana is interviewing at Initech next week").await;
    s.db.store.leave_conversation(s.group, s.ben.actor, Utc::now() + Duration::hours(1)).await.unwrap();
    let outcome = search(&s.db, &s, s.group, Some(s.ana.actor)).await;
    assert!(outcome.context.audience().contains(&s.ben.actor), "Ben still reads the group");
    let private_revision: uuid::Uuid =
        sqlx::query_scalar("SELECT current_revision_id FROM memory_entries WHERE id = $1")
            .bind(s.private)
            .fetch_one(&s.db.pool)
            .await
            .unwrap();
    assert!(
        outcome.used_revisions().iter().all(|r| r.0 != private_revision),
        "Ana's direct-message memory reached a group Ben still reads"
    );
    // A leave in the past removes him; the membership history shows both times.
    s.db.store.leave_conversation(s.group, s.ana.actor, Utc::now() - Duration::minutes(1)).await.unwrap();
    let history = s.db.store.membership_history(s.world.agent, s.group).await.unwrap();
    let ben = history.iter().find(|m| m.actor_id == s.ben.actor).unwrap();
    assert!(ben.left_at.is_some_and(|t| t > Utc::now()));
    assert!(!s.db.store.current_audience(s.world.agent, s.group).await.unwrap().contains(&s.ana.actor));
}

// 4. No existence oracle through the tools.

/// Runs one turn in which the model calls `tool` with `arguments`, and returns the tool result
/// the model saw, without the id it named.
async fn tool_result(s: &mut Scene, speaker: &Person, conversation: ConversationId, tool: &str, args: Value) -> Value {
    let inbound = s.world.say(conversation, speaker, "please do it").await;
    let model = Arc::new(ScriptedModel::new().calls(vec![(tool, args)]).reply("Done."));
    let engine = TurnEngine::new(
        s.db.store.clone(),
        Retriever::new(s.db.store.clone(), RetrievalConfig::default()),
        model.clone(),
    );
    engine.run_turn(inbound).await.unwrap();
    let requests = model.requests();
    let mut result = tool_results(requests.last().unwrap()).pop().expect("a tool result");
    for id_field in ["entry_id", "revision_id", "request_id"] {
        if let Some(object) = result.as_object_mut() {
            object.remove(id_field);
        }
    }
    result
}

#[tokio::test]
async fn forget_and_amend_of_an_entry_this_audience_cannot_see_answer_like_a_made_up_id() {
    let mut s = scene().await;
    let made_up = EntryId::generate();
    let (ana, ben) = (Person { ..s.ana }, Person { ..s.ben });
    let group = s.group;
    // By the short id recall shows, as a model names entries.
    let forget = |id: EntryId| json!({"entry_id": id.short()});
    let amend = |id: EntryId| json!({"entry_id": id.short(), "expected_revision": 1, "body": "x"});
    let private = s.private;
    // Live but private to Ana: Ben, in the group, learns nothing from either tool.
    let unknown_forget = tool_result(&mut s, &ben, group, "forget", forget(made_up)).await;
    assert_eq!(tool_result(&mut s, &ben, group, "forget", forget(private)).await, unknown_forget);
    let unknown_amend = tool_result(&mut s, &ben, group, "amend", amend(made_up)).await;
    assert_eq!(tool_result(&mut s, &ben, group, "amend", amend(private)).await, unknown_amend);
    // Forgotten (by Ana, where she could see it): still indistinguishable from a made-up id.
    s.db.store.forget_entry(s.world.agent, private).await.unwrap();
    assert_eq!(tool_result(&mut s, &ben, group, "forget", forget(private)).await, unknown_forget);
    assert_eq!(tool_result(&mut s, &ana, group, "forget", forget(private)).await, unknown_forget);
    assert_eq!(tool_result(&mut s, &ben, group, "amend", amend(private)).await, unknown_amend);
    // Nothing was written by any of them: one revision, forgotten only by the store call above.
    let (revisions, state): (i64, String) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM memory_entry_revisions WHERE entry_id = $1), state::text
           FROM memory_entries WHERE id = $1",
    )
    .bind(private)
    .fetch_one(&s.db.pool)
    .await
    .unwrap();
    assert_eq!((revisions, state.as_str()), (1, "forgotten"));
}

// 5. A forgotten revision as a lineage source: accepted, and it can only narrow.

#[tokio::test]
async fn citing_a_forgotten_private_revision_never_widens_the_new_memory() {
    let mut s = scene().await;
    let private_revision = sqlx::query_scalar("SELECT current_revision_id FROM memory_entries WHERE id = $1")
        .bind(s.private)
        .fetch_one(&s.db.pool)
        .await
        .map(mesh_memory::RevisionId)
        .unwrap();
    s.db.store.forget_entry(s.world.agent, s.private).await.unwrap();
    let said = s.world.say(s.group, &s.ana, "Initech interviews again").await;
    let mut derived = s.world.memory("Ana has Initech interviews", Some(s.ana.actor), s.ana.actor, s.group, said);
    derived.sources.push(SourceRef::RetrievedRevision(private_revision));
    let written = s.db.store.create_entry(derived).await.unwrap();
    // The group (Ana and Ben) could read the new message, but not the forgotten source: the new
    // memory inherits the narrower audience (Ana alone) and stays out of the group.
    let in_group = search(&s.db, &s, s.group, Some(s.ana.actor)).await;
    assert!(!in_group.used_revisions().contains(&written.revision_id()), "a forgotten source widened a memory");
    let in_dm = search(&s.db, &s, s.dm_ana, Some(s.ana.actor)).await;
    assert!(in_dm.used_revisions().contains(&written.revision_id()), "the narrower audience still reads it");
}

// 6. An unknown speaker is a typed error before anything runs.

#[tokio::test]
async fn an_unknown_current_actor_is_a_typed_error_and_writes_no_audit_row() {
    let s = scene().await;
    let retriever = Retriever::new(s.db.store.clone(), RetrievalConfig::default());
    let stranger = ActorId(uuid::Uuid::now_v7());
    let request = SearchRequest::new(s.world.agent, s.group, Some(stranger), "Initech", RetrievalMode::Recall);
    let error = retriever.search(&request).await.unwrap_err();
    assert!(
        matches!(error, RetrievalError::Privacy(mesh_memory::privacy::PrivacyError::Store(
            StoreError::UnknownReference { kind: "actor", id }
        )) if id == stranger.0),
        "{error:?}"
    );
    let events: i64 =
        sqlx::query_scalar("SELECT count(*) FROM memory_retrieval_events").fetch_one(&s.db.pool).await.unwrap();
    assert_eq!(events, 0);
}
