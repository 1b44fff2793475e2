//! The console's read APIs (memory browser, evidence review, retrieval-event and sharing lists)
//! and operator accounts, against a real PostgreSQL.

mod common;

use common::{test_db, World};
use mesh_memory::privacy::repair::evidence_review;
use mesh_memory::store::{
    connect_as, create_console_role, operator_rights, BrowseFilter, ConsoleRoleKind, EntryState, NewConversation,
    StoreError, Topology,
};
use mesh_memory::views;

#[tokio::test]
async fn browse_pages_newest_first_by_keyset_without_overlap() {
    let db = test_db().await;
    let mut world = World::new(&db.store, "browse-agent").await;
    let ana = world.person("Ana", "U1").await;
    let chan = world.conversation("C1", Topology::Channel, &[&ana]).await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(world.remember(chan, &ana, Some(ana.actor), &format!("Fact number {i} about Ana")).await.0);
    }
    let filter = BrowseFilter::default();
    let first = db.store.browse_entries(&filter, None, 2).await.unwrap();
    let second = db.store.browse_entries(&filter, first.next_after, 2).await.unwrap();
    let third = db.store.browse_entries(&filter, second.next_after, 2).await.unwrap();
    let seen: Vec<_> = [&first, &second, &third].iter().flat_map(|p| p.entries.iter().map(|e| e.entry_id)).collect();
    created.reverse();
    assert_eq!(seen, created, "every entry exactly once, newest first");
    assert_eq!(third.entries.len(), 1);
    assert_eq!(third.next_after, None, "the last page says so");
    assert_eq!(first.entries[0].subject_label.as_deref(), Some("Ana (id U1)"));
    assert_eq!(first.entries[0].agent_name, "browse-agent");
    assert_eq!(first.entries[0].restriction, mesh_memory::store::RestrictionKind::None);
    let conversations = db.store.list_conversations(Some(world.agent)).await.unwrap();
    assert_eq!(conversations.iter().map(|c| (c.id, c.topology)).collect::<Vec<_>>(), [(chan, Topology::Channel)]);
}

#[tokio::test]
async fn browse_filters_by_agent_subject_state_and_text() {
    let db = test_db().await;
    let mut world = World::new(&db.store, "filter-agent").await;
    let ana = world.person("Ana", "U1").await;
    let bo = world.person("Bo", "U2").await;
    let chan = world.conversation("C1", Topology::Channel, &[&ana, &bo]).await;
    let (tabs, tabs_rev) = world.remember(chan, &ana, Some(ana.actor), "Prefers tabs over spaces").await;
    let (ramen, _) = world.remember(chan, &bo, Some(bo.actor), "Favourite food is spicy ramen").await;
    let (gone, _) = world.remember(chan, &bo, Some(bo.actor), "Deploy freeze on Fridays").await;
    db.store.forget_entry(world.agent, gone).await.unwrap();
    let mut other = World::new(&db.store, "other-agent").await;
    let cy = other.person("Cy", "U3").await;
    let other_chan = other.conversation("C9", Topology::Channel, &[&cy]).await;
    let (foreign, _) = other.remember(other_chan, &cy, Some(cy.actor), "Also likes ramen").await;

    let store = &db.store;
    let by = |f: BrowseFilter| async move {
        store.browse_entries(&f, None, 50).await.unwrap().entries.into_iter().map(|e| e.entry_id).collect::<Vec<_>>()
    };

    assert_eq!(by(BrowseFilter { subject: Some(ana.actor), ..Default::default() }).await, vec![tabs]);
    assert_eq!(by(BrowseFilter { state: Some(EntryState::Forgotten), ..Default::default() }).await, vec![gone]);
    assert_eq!(by(BrowseFilter { text: Some("ramen".into()), ..Default::default() }).await, vec![foreign, ramen]);
    assert_eq!(
        by(BrowseFilter { text: Some("ramen".into()), agent: Some(world.agent), ..Default::default() }).await,
        vec![ramen]
    );
    assert_eq!(
        by(BrowseFilter { text: Some(tabs_rev.to_string()), ..Default::default() }).await,
        vec![tabs],
        "a pasted revision id finds its entry"
    );
    assert_eq!(by(BrowseFilter { agent: Some(other.agent), ..Default::default() }).await, vec![foreign]);
    let too_long = BrowseFilter { text: Some("x".repeat(501)), ..Default::default() };
    assert!(matches!(db.store.browse_entries(&too_long, None, 10).await, Err(StoreError::InvalidInput { .. })));
}

#[tokio::test]
async fn evidence_review_lists_current_revisions_with_unknown_evidence_only() {
    let db = test_db().await;
    let mut world = World::new(&db.store, "review-agent").await;
    let ana = world.person("Ana", "U1").await;
    let known = world.conversation("C1", Topology::Channel, &[&ana]).await;
    let bridged = db
        .store
        .create_conversation(NewConversation {
            agent: world.agent,
            connector: "email",
            external_channel_id: "thread-1",
            topology: Topology::Unknown,
            title: "forwarded",
        })
        .await
        .unwrap();
    db.store.join_conversation(bridged, ana.actor, world.clock - chrono::Duration::days(1)).await.unwrap();
    world.remember(known, &ana, Some(ana.actor), "Known audience fact").await;
    let (withheld, withheld_rev) =
        world.remember(bridged, &ana, Some(ana.actor), "Budget review moved to Thursday").await;
    let (forgotten, _) = world.remember(bridged, &ana, None, "Another forwarded fact").await;
    db.store.forget_entry(world.agent, forgotten).await.unwrap();

    let page = evidence_review(&db.store, None, None, 50).await.unwrap();
    assert_eq!(page.items.len(), 1, "only the live, current, unknown-evidence revision: {:?}", page.items);
    let item = &page.items[0];
    assert_eq!((item.entry_id, item.revision_id), (withheld, withheld_rev));
    assert_eq!(item.unknown_sources, 1);
    assert_eq!(item.unknown_source_kinds, vec![mesh_memory::store::SourceKind::Message]);
    assert_eq!(item.evidence_bases, vec!["conversation topology is not proven".to_owned()]);
    let flagged = db.store.browse_entries(&BrowseFilter::default(), None, 50).await.unwrap();
    assert!(flagged.entries.iter().any(|e| e.entry_id == withheld && e.evidence_unknown));
    let known_only = flagged.entries.iter().filter(|e| e.entry_id != withheld && e.entry_id != forgotten);
    assert!(known_only.clone().count() == 1 && known_only.clone().all(|e| !e.evidence_unknown));
    // One actor label everywhere: the browser and the review queue render the subject as prompts do.
    let rendered = db.store.actor_summaries(&[ana.actor]).await.unwrap()[0].label();
    assert!(rendered.contains("(id "), "{rendered}");
    assert_eq!(item.subject_label.as_deref(), Some(rendered.as_str()));
    let browsed = flagged.entries.iter().find(|e| e.entry_id == withheld).unwrap();
    assert_eq!(browsed.subject_label.as_deref(), Some(rendered.as_str()));
}

fn unique_role(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

async fn drop_role(db: &common::TestDb, role: &str) {
    let (statement,): (String,) =
        sqlx::query_as("SELECT format('DROP ROLE IF EXISTS %I', $1)").bind(role).fetch_one(&db.pool).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&db.pool).await.unwrap();
}

#[tokio::test]
async fn operator_and_reader_roles_sign_in_with_their_own_rights() {
    let db = test_db().await;
    let operator = unique_role("t_op");
    let reader = unique_role("t_reader");
    create_console_role(&db.pool, &operator, "operator-password-1", ConsoleRoleKind::Operator).await.unwrap();
    create_console_role(&db.pool, &reader, "reader-password-12", ConsoleRoleKind::Reader).await.unwrap();

    let op_pool = connect_as(&db.options, &operator, "operator-password-1").await.unwrap();
    let rights = operator_rights(&op_pool).await.unwrap();
    assert_eq!(rights.role, operator);
    assert!(rights.can_browse && rights.can_approve && rights.can_review_evidence && rights.can_revoke_tokens);
    assert!(rights.limitation.is_none());

    let reader_pool = connect_as(&db.options, &reader, "reader-password-12").await.unwrap();
    let rights = operator_rights(&reader_pool).await.unwrap();
    assert!(rights.can_browse && !rights.can_approve && !rights.can_review_evidence && !rights.can_revoke_tokens);
    assert!(rights.limitation.unwrap().contains("not a member of mesh_operator"));
    let store = mesh_memory::store::Store::new(reader_pool.clone());
    store.browse_entries(&BrowseFilter::default(), None, 10).await.expect("a reader can browse");

    let wrong = connect_as(&db.options, &operator, "not-the-password").await;
    assert!(matches!(wrong, Err(StoreError::Database(_))), "a wrong password is refused");
    let again = create_console_role(&db.pool, &operator, "operator-password-1", ConsoleRoleKind::Operator).await;
    assert!(matches!(again, Err(StoreError::AlreadyExists { .. })));
    let short = create_console_role(&db.pool, &unique_role("t_short"), "short", ConsoleRoleKind::Operator).await;
    assert!(matches!(short, Err(StoreError::InvalidInput { field: "password", .. })));
    let reserved = create_console_role(&db.pool, "mesh_operator", "operator-password-1", ConsoleRoleKind::Operator);
    assert!(matches!(reserved.await, Err(StoreError::InvalidInput { field: "role", .. })));

    op_pool.close().await;
    reader_pool.close().await;
    drop_role(&db, &operator).await;
    drop_role(&db, &reader).await;
}

/// A token's revocation time and the `role:action:reason` revocations logged on it (its issue is
/// logged too).
async fn token_record(db: &common::TestDb, token: uuid::Uuid) -> (bool, Vec<String>) {
    sqlx::query_as(
        "SELECT t.revoked_at IS NOT NULL,
                coalesce((SELECT array_agg(o.role_name || ':' || o.action || ':' || o.reason ORDER BY o.id)
                            FROM operator_actions o
                           WHERE o.target_id = t.id AND o.action = 'revoke_access_token'), '{}')
           FROM mcp_access_tokens t WHERE t.id = $1",
    )
    .bind(token)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn console_lists_access_tokens_labelled_and_only_operators_revoke_them() {
    let db = test_db().await;
    let world = World::new(&db.store, "token-agent").await;
    let ana = world.person("Ana", "U1").await;
    let chan = world.conversation("C-ENG", Topology::Channel, &[&ana]).await;
    let token = common::issue_token(&db, world.agent, chan, "U1", "Ana's laptop").await;
    let operator = unique_role("t_op");
    let reader = unique_role("t_reader");
    create_console_role(&db.pool, &operator, "operator-password-1", ConsoleRoleKind::Operator).await.unwrap();
    create_console_role(&db.pool, &reader, "reader-password-12", ConsoleRoleKind::Reader).await.unwrap();
    let op_pool = connect_as(&db.options, &operator, "operator-password-1").await.unwrap();
    let reader_pool = connect_as(&db.options, &reader, "reader-password-12").await.unwrap();

    // A reader lists tokens through its own role, with the speaker labelled as prompts label them.
    let reader_store = mesh_memory::store::Store::new(reader_pool.clone());
    let rows = views::access_tokens(&reader_store, Some(world.agent)).await.unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!((row.token.id, row.speaker_label.as_str()), (token.id, "Ana (id U1)"));
    assert_eq!((row.token.conversation_title.as_str(), row.token.label.as_str()), ("C-ENG", "Ana's laptop"));
    assert_eq!((row.token.last_used_at, row.token.revoked_at), (None, None));
    assert!(views::access_tokens(&reader_store, Some(World::new(&db.store, "no-tokens").await.agent))
        .await
        .unwrap()
        .is_empty());

    // The reader's revocation is refused by the database itself, and writes nothing.
    let refused = mesh_memory::store::Store::revoke_access_token_as_operator(&reader_pool, token.id, "lost").await;
    let Err(StoreError::Database(err)) = refused else { panic!("a reader may not revoke: {refused:?}") };
    assert_eq!(err.as_database_error().and_then(|d| d.code()).as_deref(), Some("42501"));
    assert_eq!(token_record(&db, token.id).await, (false, vec![]));

    // The operator's revocation is recorded under their role, with the reason; the list shows it.
    mesh_memory::store::Store::revoke_access_token_as_operator(&op_pool, token.id, "laptop lost").await.unwrap();
    assert_eq!(token_record(&db, token.id).await, (true, vec![format!("{operator}:revoke_access_token:laptop lost")]));
    let rows = views::access_tokens(&reader_store, None).await.unwrap();
    assert!(rows.iter().any(|r| r.token.id == token.id && r.token.revoked_at.is_some()));

    op_pool.close().await;
    reader_pool.close().await;
    drop_role(&db, &operator).await;
    drop_role(&db, &reader).await;
}

#[test]
fn scram_verifier_has_postgres_format() {
    let verifier = mesh_memory::store::scram_verifier("pencil", b"0123456789abcdef", 4096);
    let (head, keys) = verifier.split_once('$').unwrap().1.split_once('$').unwrap();
    assert_eq!(verifier.split('$').next(), Some("SCRAM-SHA-256"));
    assert_eq!(head, "4096:MDEyMzQ1Njc4OWFiY2RlZg==");
    let (stored, server) = keys.split_once(':').unwrap();
    assert_eq!((stored.len(), server.len()), (44, 44), "two base64 SHA-256 values");
}

#[tokio::test]
async fn operator_views_label_every_actor_the_shells_show() {
    use mesh_memory::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchRequest};
    use mesh_memory::views;

    let db = test_db().await;
    let mut world = World::new(&db.store, "views-agent").await;
    let ana = world.person("Ana", "U1").await;
    let bo = world.person("Bo", "U2").await;
    let dm = world.conversation("D1", Topology::Direct, &[&ana]).await;
    let chan = world.conversation("C1", Topology::Channel, &[&ana, &bo]).await;
    let (entry, _) = world.remember(dm, &ana, Some(ana.actor), "Prefers tabs over spaces").await;

    let detail = views::entry_detail(&db.store, entry).await.unwrap().expect("entry exists");
    assert_eq!(detail.history.entry_id, entry);
    assert_eq!(detail.messages.len(), 1, "the lineage message is read for the graph");
    assert_eq!(detail.history.revisions[0].subject_label.as_deref(), Some("Ana (id U1)"));
    assert!(views::entry_detail(&db.store, mesh_memory::EntryId::generate()).await.unwrap().is_none());

    let explained = views::explanation(&db.store, None, entry, chan).await.unwrap();
    assert!(!explained.eligible, "a direct message does not reach the channel");
    assert_eq!(explained.rule, mesh_memory::privacy::RuleName::AudienceNotCovered);
    let mut audience = explained.audience.clone();
    audience.sort();
    assert_eq!(audience, ["Ana (id U1)", "Bo (id U2)"]);
    assert_eq!(explained.failing_source.expect("a source rule decided").missing_actors, ["Bo (id U2)"]);

    let request = SearchRequest::new(world.agent, dm, Some(ana.actor), "tabs", RetrievalMode::Recall);
    let outcome = Retriever::new(db.store.clone(), RetrievalConfig::default()).search(&request).await.unwrap();
    let page = views::retrieval_events(&db.store, Some(world.agent), None, 10).await.unwrap();
    assert_eq!(page.events.len(), 1);
    assert_eq!(page.events[0].audience_labels, ["Ana (id U1)"]);
    let event = views::retrieval_event(&db.store, outcome.event_id).await.unwrap().expect("event recorded");
    assert_eq!(event.audience_labels, ["Ana (id U1)"]);
    assert_eq!(event.event.selections[0].entry_id, entry);
}

/// How many rows an evidence review may have written (operator log, evidence log).
async fn review_rows(db: &common::TestDb) -> (i64, i64) {
    sqlx::query_as("SELECT (SELECT count(*) FROM operator_actions), (SELECT count(*) FROM evidence_repairs)")
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_operator_reviews_unknown_evidence_as_their_own_role_and_a_reader_cannot() {
    use mesh_memory::privacy::repair::{review_evidence, EvidenceReviewDecision, RepairError};
    use mesh_memory::store::{EvidenceView, Store};
    use mesh_memory::views;

    let db = test_db().await;
    let mut world = World::new(&db.store, "evidence-agent").await;
    let ana = world.person("Ana", "U1").await;
    let bo = world.person("Bo", "U2").await;
    world.conversation("C1", Topology::Channel, &[&ana, &bo]).await;
    let bridged = db
        .store
        .create_conversation(NewConversation {
            agent: world.agent,
            connector: "email",
            external_channel_id: "thread-7",
            topology: Topology::Unknown,
            title: "forwarded",
        })
        .await
        .unwrap();
    db.store.join_conversation(bridged, ana.actor, world.clock - chrono::Duration::days(1)).await.unwrap();
    let (entry, revision) = world.remember(bridged, &ana, None, "Budget review moved to Thursday").await;

    let operator = unique_role("t_rev_op");
    let reader = unique_role("t_rev_reader");
    create_console_role(&db.pool, &operator, "operator-password-1", ConsoleRoleKind::Operator).await.unwrap();
    create_console_role(&db.pool, &reader, "reader-password-12", ConsoleRoleKind::Reader).await.unwrap();
    let op_pool = connect_as(&db.options, &operator, "operator-password-1").await.unwrap();
    let reader_pool = connect_as(&db.options, &reader, "reader-password-12").await.unwrap();
    let op_store = Store::new(op_pool.clone());

    // What the review form shows: the unknown source with its transcript facts, and the choices.
    let detail = views::evidence_review_detail(&op_store, revision).await.unwrap().expect("revision exists");
    assert_eq!((detail.revision.entry_id, detail.revision.body.as_str()), (entry, "Budget review moved to Thursday"));
    let [source] = &detail.revision.sources[..] else { panic!("one unknown source: {:?}", detail.revision.sources) };
    assert_eq!(source.sender, Some(ana.actor));
    assert_eq!(source.conversation_topology, Some(Topology::Unknown));
    assert_eq!(source.members_when_sent, vec![ana.actor], "recorded members, never the agent");
    assert_eq!(source.kept_unknown_by, None);
    let choices: Vec<&str> = detail.audience_choices.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(choices, ["Ana (id U1)", "Bo (id U2)"], "the agent's people, never the agent itself");
    assert!(views::evidence_review_detail(&op_store, mesh_memory::RevisionId::generate()).await.unwrap().is_none());
    let source_id = source.source_id;
    let proven = EvidenceReviewDecision::Proven { audience: vec![ana.actor] };

    // A reader is refused by the database itself, and nothing is written.
    let before = review_rows(&db).await;
    let refused = review_evidence(&reader_pool, source_id, &proven, "Ana says it was 1:1").await.unwrap_err();
    assert!(matches!(&refused, RepairError::NotAnOperator(role) if role == &reader), "{refused}");
    let blank = review_evidence(&op_pool, source_id, &EvidenceReviewDecision::LeaveUnknown, "  ").await;
    assert!(matches!(blank, Err(RepairError::MissingReason)));
    let long = review_evidence(&op_pool, source_id, &EvidenceReviewDecision::LeaveUnknown, &"x".repeat(2001)).await;
    assert!(matches!(long, Err(RepairError::ReasonTooLong)));
    let nobody = EvidenceReviewDecision::Proven { audience: vec![] };
    assert!(matches!(review_evidence(&op_pool, source_id, &nobody, "who?").await, Err(RepairError::EmptyAudience)));
    assert_eq!(review_rows(&db).await, before, "no refused review wrote anything");

    // Leaving it unknown records the note under the operator's role; the revision stays queued.
    let kept = review_evidence(&op_pool, source_id, &EvidenceReviewDecision::LeaveUnknown, "Ana has not replied yet")
        .await
        .unwrap();
    assert_eq!((kept.entry_id, kept.revision_id, kept.evidence_known), (entry, revision, false));
    assert_eq!(kept.reviewed_by, operator);
    let source = &views::evidence_review_detail(&op_store, revision).await.unwrap().unwrap().revision.sources[0];
    assert_eq!(source.kept_unknown_by.as_deref(), Some(operator.as_str()));
    assert_eq!(source.kept_unknown_note.as_deref(), Some("Ana has not replied yet"));
    assert_eq!(evidence_review(&op_store, None, None, 50).await.unwrap().items.len(), 1);

    // Marking the proven audience makes it known: the lineage shows it, the queue empties.
    let marked = review_evidence(&op_pool, source_id, &proven, "Ana confirmed it was a 1:1 thread").await.unwrap();
    assert!(marked.evidence_known);
    let lineage = views::entry_detail(&op_store, entry).await.unwrap().unwrap();
    let reviewed = &lineage.history.revisions[0].sources[0];
    assert_eq!(
        reviewed.evidence,
        EvidenceView::Known { actors: vec![ana.actor], labels: vec!["Ana (id U1)".to_owned()] }
    );
    assert_eq!(reviewed.evidence_basis, format!("operator review by {operator}"));
    assert!(evidence_review(&op_store, None, None, 50).await.unwrap().items.is_empty());

    // A second review (say, another operator's stale form) is refused and writes nothing.
    let after = review_rows(&db).await;
    let again = review_evidence(&op_pool, source_id, &EvidenceReviewDecision::LeaveUnknown, "late").await.unwrap_err();
    assert!(matches!(again, RepairError::NotReviewable(_)), "{again}");
    assert!(again.to_string().contains("nothing was written"));
    assert_eq!(review_rows(&db).await, after);
    common::assert_projection_matches_canonical(&db.pool).await;

    op_pool.close().await;
    reader_pool.close().await;
    drop_role(&db, &operator).await;
    drop_role(&db, &reader).await;
}
