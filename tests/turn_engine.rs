//! The truthful turn engine against a real PostgreSQL: the spec's production incident, the claim
//! guard on body-only amends and no-op forgets, honest replies, whole-round rejection, the
//! structural round bound, fan-out, lineage, and the delivery recheck.

mod common;

use std::sync::Arc;

use common::{test_db, Person, TestDb, World};
use mesh_memory::retrieval::{RetrievalConfig, Retriever};
use mesh_memory::store::{Amendment, SourceKind, SubjectUpdate, Topology, WriteOperation, WriteOutcome};
use mesh_memory::tools::ToolStatus;
use mesh_memory::turn::guard::ClaimKind;
use mesh_memory::turn::scripted::tool_results;
use mesh_memory::turn::{
    get_turn, list_turns, ChatMessage, ChatResponse, RecordedLedger, ScriptedModel, TurnConfig, TurnEngine, TurnOutcome,
};
use mesh_memory::{ConversationId, EntryId, MessageId};
use serde_json::json;

struct Scene {
    db: TestDb,
    world: World,
    victor: Person,
    priya: Person,
    dana: Person,
    engineering: ConversationId,
}

async fn scene() -> Scene {
    let db = test_db().await;
    let world = World::new(&db.store, "assistant").await;
    let victor = world.person("Victor", "U123").await;
    let priya = world.person("Priya", "U456").await;
    let dana = world.person("Dana", "U321").await;
    let engineering = world.conversation("C-ENG", Topology::Channel, &[&victor, &priya]).await;
    Scene { db, world, victor, priya, dana, engineering }
}

fn engine(db: &TestDb, model: &Arc<ScriptedModel>) -> TurnEngine {
    TurnEngine::new(db.store.clone(), Retriever::new(db.store.clone(), RetrievalConfig::default()), model.clone())
}

async fn live_entries(db: &TestDb) -> Vec<(EntryId, i32)> {
    sqlx::query_as(
        "SELECT e.id, r.revision_number FROM memory_entries e JOIN memory_entry_revisions r ON r.id = e.current_revision_id
          WHERE e.state = 'live' ORDER BY e.id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap()
}

async fn count(db: &TestDb, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(&db.pool).await.unwrap()
}

fn claim_kinds(outcome: &TurnOutcome) -> Vec<ClaimKind> {
    match outcome {
        TurnOutcome::ClaimGuardFailed { claims } => claims.iter().map(|c| c.kind).collect(),
        other => panic!("expected the claim guard to fail the turn, got {other:?}"),
    }
}

/// First memory of the latest recall result in the request, as its line shows it: (entry id,
/// revision number).
fn recalled(request: &mesh_memory::turn::ChatRequest) -> (String, u32) {
    let results = tool_results(request);
    let line = results.last().expect("a tool result")["memories"][0].as_str().expect("memories are lines").to_owned();
    let (entry, revision) = mesh_memory::retrieval::render::line_reference(&line).expect("a line names its entry");
    (entry.to_owned(), revision)
}

#[tokio::test]
async fn production_incident_two_remembers_then_false_supersession_claim_fails() {
    let mut s = scene().await;
    let inbound = s.world.say(s.engineering, &s.victor, "Actually it is Priya who prefers tabs, not me.").await;
    for reply in
        ["Done. I've re-attributed the earlier memory to Priya.", "Done: the earlier entry was marked as superseded."]
    {
        let model = Arc::new(
            ScriptedModel::new()
                .calls(vec![
                    ("remember", json!({"body": "Prefers tabs over spaces.", "subject": "U123"})),
                    ("remember", json!({"body": "Prefers tabs over spaces.", "subject": "U456"})),
                ])
                .reply(reply),
        );
        let before = live_entries(&s.db).await.len();
        let report = engine(&s.db, &model).run_turn(inbound).await.unwrap();
        let kinds = claim_kinds(&report.outcome);
        assert!(kinds.contains(&ClaimKind::Reattributed) || kinds.contains(&ClaimKind::Superseded), "{kinds:?}");
        assert!(report.reply.is_none(), "a failed turn delivers nothing");
        // The database holds two more independent live revision-1 entries; nothing was superseded.
        let live = live_entries(&s.db).await;
        assert_eq!(live.len(), before + 2);
        assert!(live.iter().all(|(_, number)| *number == 1));
        assert_eq!(report.ledger.writes.len(), 2);
        assert!(report.ledger.writes.iter().all(|w| w.operation() == WriteOperation::Create));
        // The reply was generated with the complete ledger and the prohibitions as a developer message.
        let last = model.requests().last().unwrap().clone();
        let ChatMessage::Developer { content } = last.messages.last().unwrap() else { panic!("ledger last") };
        for w in &report.ledger.writes {
            let named = format!("{} -> revision {}", w.entry_id().short(), w.revision_number());
            assert!(content.contains(&named), "ledger names every entry and its revision: {content}");
        }
        assert!(content.contains("Nothing was re-attributed"));
        assert!(content.contains("Nothing was superseded"));
        // Persisted, and no outbound message recorded.
        let stored = get_turn(&s.db.pool, report.turn_id).await.unwrap().unwrap();
        assert_eq!(stored.outcome, "claim_guard_failed");
        assert_eq!(stored.ledger, RecordedLedger::from(&report.ledger));
    }
    assert_eq!(count(&s.db, "SELECT count(*) FROM messages WHERE direction = 'outbound'").await, 0);
}

#[tokio::test]
async fn body_only_amend_then_reattribution_claim_fails() {
    let mut s = scene().await;
    let (entry, _) =
        s.world.remember(s.engineering, &s.victor, Some(s.victor.actor), "Prefers tabs over spaces.").await;
    let inbound = s.world.say(s.engineering, &s.victor, "That tabs memory is about Priya, fix it.").await;
    let model = Arc::new(
        ScriptedModel::new()
            .calls(vec![("recall", json!({"query": "tabs"}))])
            .step(|request| {
                let (entry, revision) = recalled(request);
                ChatResponse {
                    content: None,
                    tool_calls: vec![mesh_memory::tools::ToolCall {
                        id: "a1".into(),
                        name: "amend".into(),
                        arguments: json!({"entry_id": entry, "expected_revision": revision,
                                          "body": "Prefers tabs over spaces in every repository."})
                        .to_string(),
                    }],
                }
            })
            .reply("I re-attributed it to Priya."),
    );
    let report = engine(&s.db, &model).run_turn(inbound).await.unwrap();
    assert_eq!(claim_kinds(&report.outcome), vec![ClaimKind::Reattributed]);
    assert_eq!(report.ledger.writes.len(), 1);
    assert_eq!(report.ledger.writes[0].operation(), WriteOperation::Amend);
    assert_eq!(report.ledger.writes[0].entry_id(), entry);
    assert!(!report.ledger.writes[0].subject_changed());
    // The amend really committed (the ledger is the store's word), and its subject is unchanged.
    let history = s.db.store.entry_history(s.world.agent, entry).await.unwrap().unwrap();
    assert_eq!(history.revisions.len(), 2);
    assert_eq!(history.revisions[1].subject, Some(s.victor.actor));
}

#[tokio::test]
async fn noop_forget_of_unknown_id_then_forgot_claim_fails() {
    let mut s = scene().await;
    let inbound = s.world.say(s.engineering, &s.victor, "Forget what I said about deploys.").await;
    let unknown = uuid::Uuid::now_v7();
    let model = Arc::new(
        ScriptedModel::new().calls(vec![("forget", json!({"entry_id": unknown.to_string()}))]).reply("I forgot it."),
    );
    let report = engine(&s.db, &model).run_turn(inbound).await.unwrap();
    assert_eq!(claim_kinds(&report.outcome), vec![ClaimKind::Deleted]);
    assert!(report.ledger.is_empty(), "a call that changed nothing adds nothing to the ledger");
    assert_eq!(report.tool_calls[0].status, ToolStatus::NothingChanged);
    // The model was told nothing changed.
    let results = tool_results(&model.requests()[1]);
    assert_eq!(results[0]["status"], "nothing_changed");
    assert_eq!(results[0]["reason"], "unknown_entry");
}

#[tokio::test]
async fn honest_reply_after_a_real_amend_is_delivered() {
    let mut s = scene().await;
    let (entry, first_revision) =
        s.world.remember(s.engineering, &s.victor, Some(s.victor.actor), "Prefers tabs over spaces.").await;
    let inbound = s.world.say(s.engineering, &s.victor, "The tabs preference is Priya's, not mine.").await;
    let model = Arc::new(
        ScriptedModel::new()
            .calls(vec![("recall", json!({"query": "tabs preference"}))])
            .step(|request| {
                let (entry, revision) = recalled(request);
                ChatResponse {
                    content: None,
                    tool_calls: vec![mesh_memory::tools::ToolCall {
                        id: "a1".into(),
                        name: "amend".into(),
                        arguments: json!({"entry_id": entry, "expected_revision": revision, "subject": "U456"})
                            .to_string(),
                    }],
                }
            })
            .step(|request| {
                let ChatMessage::Developer { content } = request.messages.last().unwrap() else { panic!() };
                assert!(content.contains("amended (subject changed)"));
                ChatResponse::text("I've updated that memory and re-attributed it to Priya.")
            }),
    );
    let report = engine(&s.db, &model).run_turn(inbound).await.unwrap();
    let TurnOutcome::Delivered { outbound_message } = report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(report.reply.as_deref(), Some("I've updated that memory and re-attributed it to Priya."));
    assert!(report.ledger.writes[0].subject_changed());
    // The recheck did not withhold the reply although the used revision was amended: by this turn.
    let history = s.db.store.entry_history(s.world.agent, entry).await.unwrap().unwrap();
    assert_ne!(history.current_revision_id, first_revision);
    assert_eq!(history.revisions[1].subject, Some(s.priya.actor));
    // Lineage: the amendment keeps the earlier evidence and adds the turn's sources.
    let kinds: Vec<&str> = history.revisions[1].sources.iter().map(|s| s.kind.as_str()).collect();
    assert!(kinds.contains(&"parent_revision") && kinds.contains(&"message") && kinds.contains(&"retrieved_revision"));
    let outbound: (String,) = sqlx::query_as("SELECT body FROM messages WHERE id = $1")
        .bind(outbound_message)
        .fetch_one(&s.db.pool)
        .await
        .unwrap();
    assert!(outbound.0.contains("re-attributed"));
    let listed = list_turns(&s.db.pool, Some(s.world.agent), 10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].outcome, "delivered");
    assert_eq!(listed[0].retrieval_event_ids.len(), 2, "prompt assembly and the recall each leave an event");
}

#[tokio::test]
async fn malformed_second_call_rejects_the_round_and_commits_nothing() {
    let mut s = scene().await;
    let inbound = s.world.say(s.engineering, &s.victor, "Remember that I like tea and coffee.").await;
    let before = count(&s.db, "SELECT count(*) FROM memory_entry_revisions").await;
    for second in [
        json!({"body": "Likes coffee.", "entry_id": uuid::Uuid::now_v7().to_string()}).to_string(),
        "{\"body\": \"Likes coffee.\"".to_owned(),
        json!({"body": ""}).to_string(),
    ] {
        let model = Arc::new(
            ScriptedModel::new()
                .raw_calls(vec![
                    ("remember".into(), json!({"body": "Likes tea."}).to_string()),
                    ("remember".into(), second.clone()),
                ])
                .reply("Okay."),
        );
        let report = engine(&s.db, &model).run_turn(inbound).await.unwrap();
        assert!(report.ledger.is_empty(), "{second}");
        assert!(report.tool_calls.iter().all(|c| c.status == ToolStatus::Rejected));
        assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }));
        let results = tool_results(&model.requests()[1]);
        assert!(results.iter().all(|r| r["status"] == "rejected"));
    }
    assert_eq!(count(&s.db, "SELECT count(*) FROM memory_entry_revisions").await, before);
    assert_eq!(count(&s.db, "SELECT count(*) FROM index_outbox").await, before);
}

#[tokio::test]
async fn third_request_carries_no_tools_and_late_calls_never_run() {
    let mut s = scene().await;
    let inbound = s.world.say(s.engineering, &s.victor, "What do you know about me?").await;
    let model = Arc::new(
        ScriptedModel::new()
            .calls(vec![("recall", json!({"query": "victor"}))])
            .calls(vec![("recall", json!({"query": ""}))])
            // A provider that ignores the missing tool list still cannot write anything.
            .calls(vec![("remember", json!({"body": "Sneaky write."}))]),
    );
    let report = engine(&s.db, &model).run_turn(inbound).await.unwrap();
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[0].tools.is_some() && requests[1].tools.is_some());
    assert!(requests[2].tools.is_none(), "the last permitted round has no tool list");
    assert_eq!(report.rounds, 3);
    assert!(report.ledger.is_empty());
    assert!(matches!(report.outcome, TurnOutcome::Failed { .. }));
    assert_eq!(count(&s.db, "SELECT count(*) FROM memory_entries").await, 0);
}

#[tokio::test]
async fn fan_out_over_the_bound_is_rejected_whole() {
    let mut s = scene().await;
    let inbound = s.world.say(s.engineering, &s.victor, "Remember three things.").await;
    let three = vec![
        ("remember", json!({"body": "One."})),
        ("remember", json!({"body": "Two."})),
        ("remember", json!({"body": "Three."})),
    ];
    let config = TurnConfig { max_calls_per_round: 2, ..TurnConfig::default() };
    let model = Arc::new(ScriptedModel::new().calls(three.clone()).reply("Nothing was stored."));
    let report = engine(&s.db, &model).with_config(config.clone()).run_turn(inbound).await.unwrap();
    assert!(report.ledger.is_empty());
    assert_eq!(report.tool_calls.len(), 3);
    assert!(report.tool_calls.iter().all(|c| c.status == ToolStatus::Rejected));
    assert_eq!(count(&s.db, "SELECT count(*) FROM memory_entries").await, 0);
    // At the bound it runs.
    let model = Arc::new(ScriptedModel::new().calls(three[..2].to_vec()).reply("I stored two memories."));
    let report = engine(&s.db, &model).with_config(config).run_turn(inbound).await.unwrap();
    assert_eq!(report.ledger.writes.len(), 2);
    assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }));
}

#[tokio::test]
async fn remember_inherits_message_history_and_retrieved_revisions_even_after_forgetting_one() {
    let mut s = scene().await;
    let (_, tabs_revision) =
        s.world.remember(s.engineering, &s.victor, Some(s.victor.actor), "Prefers tabs over spaces.").await;
    let earlier = s.world.say(s.engineering, &s.priya, "We were talking about indentation.").await;
    let inbound = s.world.say(s.engineering, &s.victor, "Forget my tabs memory, and remember I now use spaces.").await;
    let model = Arc::new(
        ScriptedModel::new()
            .calls(vec![("recall", json!({"query": "tabs"}))])
            .step(|request| {
                let (entry, _) = recalled(request);
                ChatResponse {
                    content: None,
                    tool_calls: vec![
                        mesh_memory::tools::ToolCall {
                            id: "f".into(),
                            name: "forget".into(),
                            arguments: json!({"entry_id": entry}).to_string(),
                        },
                        mesh_memory::tools::ToolCall {
                            id: "r".into(),
                            name: "remember".into(),
                            arguments: json!({"body": "Now uses spaces for indentation.", "subject": "U123"})
                                .to_string(),
                        },
                    ],
                }
            })
            .reply("I forgot the tabs memory and stored that you now use spaces."),
    );
    let report = engine(&s.db, &model).run_turn(inbound).await.unwrap();
    assert!(matches!(report.outcome, TurnOutcome::Delivered { .. }), "{:?}", report.outcome);
    let created = report.ledger.writes.iter().find(|w| w.operation() == WriteOperation::Create).unwrap();
    let history = s.db.store.entry_history(s.world.agent, created.entry_id()).await.unwrap().unwrap();
    let sources = &history.revisions[0].sources;
    assert!(sources.iter().any(|s| s.kind == SourceKind::Message && s.message_id == Some(inbound)));
    assert!(sources.iter().any(|s| s.kind == SourceKind::HistoryMessage && s.message_id == Some(earlier)));
    assert!(
        sources.iter().any(|s| s.kind == SourceKind::RetrievedRevision && s.parent_revision_id == Some(tabs_revision)),
        "forgetting the retrieved memory does not remove it from later lineage"
    );
    assert_eq!(history.revisions[0].source_actor, Some(s.victor.actor), "source comes from the authenticated message");
}

#[tokio::test]
async fn participant_joining_between_retrieval_and_delivery_withholds_the_reply() {
    let mut s = scene().await;
    s.world.remember(s.engineering, &s.victor, Some(s.victor.actor), "Prefers tabs over spaces.").await;
    let inbound = s.world.say(s.engineering, &s.priya, "Does Victor prefer tabs?").await;
    let model = Arc::new(ScriptedModel::new().reply("Yes, Victor prefers tabs."));
    let engine = engine(&s.db, &model);
    let prepared = engine.prepare(inbound).await.unwrap();
    assert_eq!(prepared.used_revisions().len(), 1, "the tabs memory was used");
    s.db.store.join_conversation(s.engineering, s.dana.actor, chrono::Utc::now()).await.unwrap();
    let report = engine.deliver(prepared).await.unwrap();
    let TurnOutcome::Withheld { recheck } = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(recheck.audience_change.as_ref().unwrap().joined, vec![s.dana.actor]);
    assert!(report.reply.is_none());
    assert_eq!(count(&s.db, "SELECT count(*) FROM messages WHERE direction = 'outbound'").await, 0);
    let stored = get_turn(&s.db.pool, report.turn_id).await.unwrap().unwrap();
    assert_eq!(stored.outcome, "withheld");
    assert!(stored.withheld.is_some());
}

#[tokio::test]
async fn used_revision_amended_elsewhere_before_delivery_withholds_the_reply() {
    let mut s = scene().await;
    let (entry, revision) =
        s.world.remember(s.engineering, &s.victor, Some(s.victor.actor), "Prefers tabs over spaces.").await;
    let inbound = s.world.say(s.engineering, &s.priya, "Does Victor prefer tabs?").await;
    let model = Arc::new(ScriptedModel::new().reply("Yes, Victor prefers tabs."));
    let engine = engine(&s.db, &model);
    let prepared = engine.prepare(inbound).await.unwrap();
    let amended =
        s.db.store
            .amend_entry(Amendment {
                agent: s.world.agent,
                entry,
                expected_revision: revision,
                body: Some("Prefers spaces now.".into()),
                subject: SubjectUpdate::Keep,
                source_actor: Some(s.victor.actor),
                sources: vec![],
            })
            .await
            .unwrap();
    assert!(matches!(amended, WriteOutcome::Committed(_)));
    let report = engine.deliver(prepared).await.unwrap();
    let TurnOutcome::Withheld { recheck } = &report.outcome else { panic!("{:?}", report.outcome) };
    assert_eq!(recheck.stale_revisions[0].revision_id, revision);
}

#[tokio::test]
async fn unauthenticated_inbound_message_starts_no_turn() {
    let s = scene().await;
    let message: MessageId =
        s.db.store
            .record_message(mesh_memory::store::NewMessage {
                agent: s.world.agent,
                conversation: s.engineering,
                direction: mesh_memory::store::Direction::Inbound,
                sender: s.victor.actor,
                sender_identity: None,
                body: "Remember I am the CEO.",
                sent_at: chrono::Utc::now(),
            })
            .await
            .unwrap();
    let model = Arc::new(ScriptedModel::new().calls(vec![("remember", json!({"body": "Is the CEO."}))]));
    let error = engine(&s.db, &model).run_turn(message).await.unwrap_err();
    assert!(matches!(error, mesh_memory::turn::TurnError::NotAuthenticatedInbound(_)));
    assert!(model.requests().is_empty());
}
