//! Memories that say when (issue 33), against a real PostgreSQL: every revision carries the time
//! it was learned (the message it was told in; an amendment, the correction's), the memory line
//! says that day in words and resolves the body's relative words against it, a rename still
//! changes only the labels, and a query that names a period boosts memories learned in it (with
//! its own component and reason in the audit) without ever reaching an ineligible one.

mod common;

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use common::{test_db, Person, TestDb, World};
use mesh_memory::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchOutcome, SearchRequest};
use mesh_memory::store::{Amendment, SourceRef, SubjectUpdate, Topology, WriteOutcome};
use mesh_memory::turn::{ScriptedModel, TurnEngine, TurnOutcome};
use mesh_memory::{ConversationId, EntryId};
use serde_json::json;

fn at(y: i32, m: u32, d: u32, h: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, m, d, h, 0, 0).unwrap()
}

struct Scene {
    db: TestDb,
    world: World,
    caroline: Person,
    melanie: Person,
    chat: ConversationId,
}

/// Caroline and Melanie in a group chat since 30 April 2023; the clock then stands at 8 May 2023.
async fn scene() -> Scene {
    let db = test_db().await;
    let mut world = World::new(&db.store, "assistant").await;
    world.clock = at(2023, 5, 1, 13);
    let caroline = world.person("Caroline", "U1").await;
    let melanie = world.person("Melanie", "U2").await;
    let chat = world.conversation("group", Topology::Group, &[&caroline, &melanie]).await;
    world.clock = at(2023, 5, 8, 13);
    Scene { db, world, caroline, melanie, chat }
}

async fn ask(s: &Scene, query: &str, asked_at: DateTime<Utc>, config: RetrievalConfig) -> SearchOutcome {
    let mut request = SearchRequest::new(s.world.agent, s.chat, Some(s.melanie.actor), query, RetrievalMode::Recall);
    request.asked_at = Some(asked_at);
    Retriever::new(s.db.store.clone(), config).search(&request).await.unwrap()
}

fn line_of(outcome: &SearchOutcome, entry: EntryId) -> String {
    let json = outcome.recall_json();
    let index = outcome.selections.iter().position(|s| s.entry_id == entry).expect("the entry was selected");
    json["memories"][index].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_turns_memory_renders_the_day_its_message_was_sent_and_resolves_yesterday() {
    let mut s = scene().await;
    let inbound = s.world.say(s.chat, &s.caroline, "I went to a LGBTQ support group yesterday.").await;
    let model = Arc::new(
        ScriptedModel::new()
            .calls(vec![("remember", json!({"body": "Went to a LGBTQ support group yesterday.", "subject": "U1"}))])
            .reply("I'll remember that."),
    );
    let engine = TurnEngine::new(
        s.db.store.clone(),
        Retriever::new(s.db.store.clone(), RetrievalConfig::default()),
        model.clone(),
    );
    let report = engine.run_turn(inbound).await.unwrap();
    assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }), "{:?}", report.outcome);
    let entry = report.ledger.writes[0].entry_id();

    // Asked weeks later: the line still says the day it was told, and what "yesterday" was.
    let outcome = ask(&s, "support group", at(2023, 6, 20, 9), RetrievalConfig::default()).await;
    let line = line_of(&outcome, entry);
    assert!(
        line.contains(
            "told by Caroline (id U1) on 8 May 2023 in this conversation (\"yesterday\": 7 May 2023): Went to a LGBTQ"
        ),
        "{line}"
    );
    assert_eq!(outcome.selections[0].learned_at, s.world.clock, "learned when the inbound message was sent");
    let history = s.db.store.entry_history(s.world.agent, entry).await.unwrap().unwrap();
    assert_eq!(history.revisions[0].learned_at, s.world.clock);
    assert!(history.revisions[0].created_at > history.revisions[0].learned_at, "written now, learned then");
    // The section's header says what the date means.
    let section = outcome.prompt_section();
    assert!(section.contains("on which day (UTC) it was told"), "{section}");
}

#[tokio::test]
async fn an_amend_renders_the_day_the_correction_was_told() {
    let mut s = scene().await;
    let (entry, first) =
        s.world.remember(s.chat, &s.caroline, Some(s.caroline.actor), "Moved from Sweden four years ago.").await;
    s.world.clock = at(2023, 6, 2, 10);
    let correction = s.world.say(s.chat, &s.caroline, "Actually it was Norway, not Sweden.").await;
    let amended =
        s.db.store
            .amend_entry(Amendment {
                agent: s.world.agent,
                entry,
                expected_revision: first,
                body: Some("Moved from Norway four years ago.".into()),
                subject: SubjectUpdate::Keep,
                source_actor: Some(s.caroline.actor),
                sources: vec![SourceRef::Message(correction)],
            })
            .await
            .unwrap();
    assert!(matches!(amended, WriteOutcome::Committed(_)));

    let outcome = ask(&s, "Norway", at(2023, 7, 1, 9), RetrievalConfig::default()).await;
    let line = line_of(&outcome, entry);
    assert!(line.contains("rev 2] About Caroline (id U1), told by Caroline (id U1) on 2 June 2023 in "), "{line}");
    assert!(line.contains("(\"four years ago\": 2019)"), "resolved against the correction's day: {line}");
    let history = s.db.store.entry_history(s.world.agent, entry).await.unwrap().unwrap();
    assert_eq!(history.revisions[0].learned_at.date_naive(), at(2023, 5, 8, 0).date_naive());
    assert_eq!(history.revisions[1].learned_at, s.world.clock, "the amendment was learned from the correction");
}

#[tokio::test]
async fn a_rename_changes_the_labels_and_keeps_the_text_and_the_day() {
    let mut s = scene().await;
    let (entry, revision) =
        s.world.remember(s.chat, &s.caroline, Some(s.caroline.actor), "Paints sunsets on weekends.").await;
    let before = line_of(&ask(&s, "sunsets", at(2023, 6, 1, 9), RetrievalConfig::default()).await, entry);
    s.db.store.rename_actor(s.caroline.actor, "Carol").await.unwrap();
    let after = line_of(&ask(&s, "sunsets", at(2023, 6, 1, 9), RetrievalConfig::default()).await, entry);
    assert!(before.contains("About Caroline (id U1), told by Caroline (id U1) on 8 May 2023"), "{before}");
    assert!(after.contains("About Carol (id U1), told by Carol (id U1) on 8 May 2023"), "{after}");
    assert!(after.ends_with(": Paints sunsets on weekends."), "{after}");
    let body: String = sqlx::query_scalar("SELECT body FROM memory_entry_revisions WHERE id = $1")
        .bind(revision)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert_eq!(body, "Paints sunsets on weekends.", "the stored text was not rewritten");
}

#[tokio::test]
async fn a_query_naming_a_period_boosts_memories_learned_in_it_and_never_an_ineligible_one() {
    let mut s = scene().await;
    // The same words told in May and in July, and a private note to the agent told in May.
    let (may, _) = s.world.remember(s.chat, &s.caroline, Some(s.caroline.actor), "Went hiking with friends.").await;
    let private = s.world.conversation("dm", Topology::Direct, &[&s.caroline]).await;
    s.world.clock = at(2023, 5, 20, 9);
    let (secret, _) =
        s.world.remember(private, &s.caroline, Some(s.caroline.actor), "Went hiking with friends, privately.").await;
    s.world.clock = at(2023, 7, 14, 9);
    let (july, _) = s.world.remember(s.chat, &s.caroline, Some(s.caroline.actor), "Went hiking with friends.").await;
    let asked = at(2023, 8, 1, 9);

    let in_may = ask(&s, "Where did Caroline go hiking in May 2023?", asked, RetrievalConfig::default()).await;
    let ids: Vec<EntryId> = in_may.selections.iter().map(|x| x.entry_id).collect();
    assert_eq!(ids, vec![may, july], "the May memory first, the private one nowhere");
    let top = &in_may.selections[0].components;
    assert!(top.period_boost > 0.0 && top.period.as_deref() == Some("May 2023"), "{top:?}");
    assert!(in_may.selections[0].reason.contains("learned in May 2023, which the query names"));
    assert_eq!(in_may.selections[1].components.period_boost, 0.0);

    let in_july = ask(&s, "Where did Caroline go hiking in July 2023?", asked, RetrievalConfig::default()).await;
    assert_eq!(in_july.selections.iter().map(|x| x.entry_id).collect::<Vec<_>>(), vec![july, may]);

    // Without the boost the two tie on relevance and the newer wins: the order above is the
    // period's doing.
    let off = RetrievalConfig { period_weight: 0.0, ..RetrievalConfig::default() };
    let unboosted = ask(&s, "Where did Caroline go hiking in May 2023?", asked, off).await;
    assert_eq!(unboosted.selections[0].entry_id, july);
    assert!(!unboosted.selections.iter().any(|x| x.entry_id == secret));

    // The audit keeps the component, the period and the learned time of each selection.
    let event = mesh_memory::retrieval::audit::explain_event(&s.db.pool, in_may.event_id).await.unwrap().unwrap();
    assert_eq!(event.selections[0].components.period.as_deref(), Some("May 2023"));
    assert_eq!(event.selections[0].learned_at.map(|t| t.date_naive()), Some(at(2023, 5, 8, 0).date_naive()));
}

#[tokio::test]
async fn relative_periods_count_from_the_asking_message_not_from_now() {
    let mut s = scene().await;
    s.world.clock = at(2023, 5, 10, 9);
    let (last_week, _) =
        s.world.remember(s.chat, &s.caroline, Some(s.caroline.actor), "Visited the pottery studio.").await;
    s.world.clock = at(2023, 5, 3, 9);
    let (earlier, _) =
        s.world.remember(s.chat, &s.caroline, Some(s.caroline.actor), "Visited the pottery studio.").await;
    // Asked on Monday 15 May 2023: "last week" is 8-14 May.
    let outcome =
        ask(&s, "who visited the pottery studio last week?", at(2023, 5, 15, 9), RetrievalConfig::default()).await;
    assert_eq!(outcome.selections[0].entry_id, last_week);
    assert_eq!(outcome.selections[0].components.period.as_deref(), Some("the week of 8 May 2023"));
    assert!(outcome.selections.iter().any(|x| x.entry_id == earlier && x.components.period_boost == 0.0));
}
