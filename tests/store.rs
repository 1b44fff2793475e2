//! The canonical store against a real PostgreSQL: append-only history, one current revision,
//! optimistic concurrency, lineage validation, typed errors that commit nothing.

mod common;

use common::{test_db, World};
use mesh_memory::store::{
    Amendment, EvidenceView, NothingChangedReason, SourceRef, StoreError, SubjectUpdate, Topology, WriteOperation,
    WriteOutcome, MAX_BODY_CHARS,
};
use mesh_memory::{EntryId, MessageId, RevisionId};
use sqlx::PgPool;

async fn count(pool: &PgPool, table: &str) -> i64 {
    // Table names come from the test source, never from input.
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}"))).fetch_one(pool).await.unwrap()
}

async fn row_counts(pool: &PgPool) -> Vec<i64> {
    let mut counts = Vec::new();
    for table in
        ["memory_entries", "memory_entry_revisions", "revision_sources", "revision_audience_summary", "index_outbox"]
    {
        counts.push(count(pool, table).await);
    }
    counts
}

fn amendment(world: &World, entry: EntryId, expected: RevisionId, body: &str) -> Amendment {
    Amendment {
        agent: world.agent,
        entry,
        expected_revision: expected,
        body: Some(body.to_owned()),
        subject: SubjectUpdate::Keep,
        source_actor: None,
        sources: vec![],
    }
}

#[tokio::test]
async fn raw_update_or_delete_of_a_revision_is_refused_by_the_database() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let victor = w.person("Victor", "U1").await;
    let eng = w.conversation("C1", Topology::Channel, &[&victor]).await;
    let (_, revision) = w.remember(eng, &victor, Some(victor.actor), "Victor prefers tabs").await;

    let update = sqlx::query("UPDATE memory_entry_revisions SET body = 'Victor prefers spaces' WHERE id = $1")
        .bind(revision)
        .execute(&db.pool)
        .await;
    let err = update.expect_err("the trigger must refuse the update").to_string();
    assert!(err.contains("append-only"), "unexpected error: {err}");

    let subject = sqlx::query("UPDATE memory_entry_revisions SET subject_actor_id = NULL WHERE id = $1")
        .bind(revision)
        .execute(&db.pool)
        .await;
    assert!(subject.is_err(), "subject rewrite must be refused");

    let delete = sqlx::query("DELETE FROM memory_entry_revisions WHERE id = $1").bind(revision).execute(&db.pool).await;
    assert!(delete.is_err(), "delete must be refused");

    let body: String = sqlx::query_scalar("SELECT body FROM memory_entry_revisions WHERE id = $1")
        .bind(revision)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(body, "Victor prefers tabs");
}

#[tokio::test]
async fn current_revision_must_belong_to_its_own_entry() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let victor = w.person("Victor", "U1").await;
    let eng = w.conversation("C1", Topology::Channel, &[&victor]).await;
    let (first, _) = w.remember(eng, &victor, None, "first fact").await;
    let (_, other_revision) = w.remember(eng, &victor, None, "second fact").await;
    let hijack = sqlx::query("UPDATE memory_entries SET current_revision_id = $2 WHERE id = $1")
        .bind(first)
        .bind(other_revision)
        .execute(&db.pool)
        .await;
    assert!(hijack.is_err(), "an entry cannot point at another entry's revision");
}

#[tokio::test]
async fn amend_makes_revision_two_and_leaves_revision_one_byte_identical() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let dana = w.person("Dana", "U1").await;
    let eng = w.conversation("C1", Topology::Channel, &[&dana]).await;
    let (entry, rev1) = w.remember(eng, &dana, Some(dana.actor), "Dana leads payments.").await;
    let before: (String, Option<uuid::Uuid>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT body, subject_actor_id, created_at FROM memory_entry_revisions WHERE id = $1")
            .bind(rev1)
            .fetch_one(&db.pool)
            .await
            .unwrap();

    let correction = w.say(eng, &dana, "Actually I lead platform now").await;
    let mut change = amendment(&w, entry, rev1, "Dana leads the platform team.");
    change.sources = vec![SourceRef::Message(correction)];
    let outcome = db.store.amend_entry(change).await.unwrap();
    let WriteOutcome::Committed(written) = outcome else { panic!("amend should commit: {outcome:?}") };
    assert_eq!(written.operation(), WriteOperation::Amend);
    assert_eq!(written.revision_number(), 2);
    assert!(!written.subject_changed());

    let after: (String, Option<uuid::Uuid>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT body, subject_actor_id, created_at FROM memory_entry_revisions WHERE id = $1")
            .bind(rev1)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(before, after, "revision 1 must be untouched");

    let history = db.store.entry_history(w.agent, entry).await.unwrap().unwrap();
    assert_eq!(history.revisions.len(), 2);
    assert_eq!(history.current_revision_id, written.revision_id());
    let rev2 = &history.revisions[1];
    let kinds: Vec<&str> = rev2.sources.iter().map(|s| s.kind.as_str()).collect();
    assert!(kinds.contains(&"parent_revision"), "parent recorded: {kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "message").count(), 2, "earlier evidence kept, new source added");

    // Forget keeps the whole history.
    let forgotten = db.store.forget_entry(w.agent, entry).await.unwrap();
    assert!(
        matches!(forgotten, WriteOutcome::Committed(ref c) if c.operation() == WriteOperation::Forget && c.revision_number() == 2)
    );
    let history = db.store.entry_history(w.agent, entry).await.unwrap().unwrap();
    assert_eq!(history.state, mesh_memory::store::EntryState::Forgotten);
    assert_eq!(history.revisions.len(), 2);
    assert_eq!(history.revisions[0].body, "Dana leads payments.");
}

#[tokio::test]
async fn subject_change_is_reported_only_when_the_subject_changed() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let victor = w.person("Victor", "U1").await;
    let priya = w.person("Priya", "U2").await;
    let eng = w.conversation("C1", Topology::Channel, &[&victor, &priya]).await;
    let (entry, rev1) = w.remember(eng, &victor, Some(priya.actor), "Prefers tabs").await;
    let mut change = amendment(&w, entry, rev1, "Prefers tabs");
    change.body = None;
    change.subject = SubjectUpdate::Set(victor.actor);
    let WriteOutcome::Committed(written) = db.store.amend_entry(change).await.unwrap() else { panic!() };
    assert!(written.subject_changed());

    let unchanged = amendment(&w, entry, written.revision_id(), "Prefers tabs");
    let err = db.store.amend_entry(unchanged).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput { field: "amendment", .. }), "{err}");
}

#[tokio::test]
async fn two_concurrent_amends_of_the_same_revision_commit_exactly_once() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let dana = w.person("Dana", "U1").await;
    let eng = w.conversation("C1", Topology::Channel, &[&dana]).await;
    let (entry, rev1) = w.remember(eng, &dana, None, "original").await;

    for round in 0..5 {
        let history = db.store.entry_history(w.agent, entry).await.unwrap().unwrap();
        let expected = history.current_revision_id;
        let a = db.store.amend_entry(amendment(&w, entry, expected, &format!("A{round}")));
        let b = db.store.amend_entry(amendment(&w, entry, expected, &format!("B{round}")));
        let (a, b) = tokio::join!(a, b);
        let results = [a, b];
        let committed = results.iter().filter(|r| matches!(r, Ok(WriteOutcome::Committed(_)))).count();
        let conflicts = results.iter().filter(|r| matches!(r, Err(StoreError::RevisionConflict { .. }))).count();
        assert_eq!((committed, conflicts), (1, 1), "round {round}: {results:?}");
    }
    let revisions: i64 = sqlx::query_scalar("SELECT count(*) FROM memory_entry_revisions WHERE entry_id = $1")
        .bind(entry)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(revisions, 6);
    let stale = db.store.amend_entry(amendment(&w, entry, rev1, "stale")).await.unwrap_err();
    assert!(matches!(stale, StoreError::RevisionConflict { .. }), "{stale}");
}

/// The amend is one call of the schema's `memory_write_amend`: an actor that does not exist is
/// caught by the revision's foreign key and still answered with the typed error naming the field,
/// and nothing of the amend is written.
#[tokio::test]
async fn an_amend_naming_an_actor_that_does_not_exist_is_refused_and_writes_nothing() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let dana = w.person("Dana", "U1").await;
    let eng = w.conversation("C1", Topology::Channel, &[&dana]).await;
    let (entry, rev1) = w.remember(eng, &dana, None, "fact").await;
    let before = row_counts(&db.pool).await;
    let ghost = mesh_memory::ActorId::generate();

    let mut subject = amendment(&w, entry, rev1, "a corrected fact");
    subject.subject = SubjectUpdate::Set(ghost);
    let err = db.store.amend_entry(subject).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput { field: "subject", .. }), "{err}");
    assert!(err.to_string().contains(&ghost.to_string()), "the error names the actor: {err}");

    let mut source_actor = amendment(&w, entry, rev1, "a corrected fact");
    source_actor.source_actor = Some(ghost);
    let err = db.store.amend_entry(source_actor).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput { field: "source actor", .. }), "{err}");
    assert_eq!(before, row_counts(&db.pool).await, "a refused amend writes nothing");

    // The entry is untouched: the revision the caller read is still current and can be amended.
    let WriteOutcome::Committed(written) =
        db.store.amend_entry(amendment(&w, entry, rev1, "a corrected fact")).await.unwrap()
    else {
        panic!("the amend commits")
    };
    assert_eq!(written.revision_number(), 2);
}

#[tokio::test]
async fn unknown_and_forgotten_entries_report_nothing_changed() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let dana = w.person("Dana", "U1").await;
    let eng = w.conversation("C1", Topology::Channel, &[&dana]).await;
    let (entry, rev1) = w.remember(eng, &dana, None, "fact").await;

    let unknown = EntryId::generate();
    let outcome = db.store.forget_entry(w.agent, unknown).await.unwrap();
    assert!(matches!(outcome, WriteOutcome::NothingChanged(ref n) if n.reason == NothingChangedReason::UnknownEntry));

    db.store.forget_entry(w.agent, entry).await.unwrap();
    let before = row_counts(&db.pool).await;
    let again = db.store.forget_entry(w.agent, entry).await.unwrap();
    assert!(matches!(again, WriteOutcome::NothingChanged(ref n) if n.reason == NothingChangedReason::AlreadyForgotten));
    let amend = db.store.amend_entry(amendment(&w, entry, rev1, "new")).await.unwrap();
    assert!(matches!(amend, WriteOutcome::NothingChanged(ref n) if n.reason == NothingChangedReason::AlreadyForgotten));
    assert_eq!(before, row_counts(&db.pool).await, "nothing-changed outcomes write nothing");

    // Another runtime agent's entry is unknown to this agent.
    let other = World::new(&db.store, "other-agent").await;
    let foreign = db.store.forget_entry(other.agent, entry).await.unwrap();
    assert!(matches!(foreign, WriteOutcome::NothingChanged(ref n) if n.reason == NothingChangedReason::UnknownEntry));
}

#[tokio::test]
async fn renaming_an_actor_changes_no_body_and_namesakes_stay_distinct() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let alex_a = w.person("Alex", "U789").await;
    let alex_b = w.person("Alex", "U790").await;
    let eng = w.conversation("C1", Topology::Channel, &[&alex_a, &alex_b]).await;
    let (food, _) = w.remember(eng, &alex_a, Some(alex_a.actor), "Favourite food is ramen").await;
    let (paging, _) = w.remember(eng, &alex_b, Some(alex_b.actor), "Wants Slack pages, not phone").await;

    let bodies_before: Vec<String> =
        sqlx::query_scalar("SELECT body FROM memory_entry_revisions ORDER BY id").fetch_all(&db.pool).await.unwrap();
    db.store.rename_actor(alex_a.actor, "Alexandra").await.unwrap();
    let bodies_after: Vec<String> =
        sqlx::query_scalar("SELECT body FROM memory_entry_revisions ORDER BY id").fetch_all(&db.pool).await.unwrap();
    assert_eq!(bodies_before, bodies_after);

    let food = db.store.entry_history(w.agent, food).await.unwrap().unwrap();
    assert_eq!(food.revisions[0].subject_label.as_deref(), Some("Alexandra (id U789)"));
    let paging = db.store.entry_history(w.agent, paging).await.unwrap().unwrap();
    assert_eq!(paging.revisions[0].subject_label.as_deref(), Some("Alex (id U790)"));
    assert_ne!(food.revisions[0].subject, paging.revisions[0].subject);

    db.store.rename_actor(alex_a.actor, "Alex").await.unwrap();
    let ambiguous = db.store.find_actor("Alex").await.unwrap_err();
    assert!(ambiguous.to_string().contains("ambiguous"), "{ambiguous}");
    assert_eq!(db.store.find_actor("U790").await.unwrap(), alex_b.actor);
}

#[tokio::test]
async fn a_foreign_or_missing_parent_rejects_the_whole_write() {
    let db = test_db().await;
    let mut mine = World::new(&db.store, "mine").await;
    let mut theirs = World::new(&db.store, "theirs").await;
    let me = mine.person("Me", "U1").await;
    let them = theirs.person("Them", "U2").await;
    let my_conv = mine.conversation("C1", Topology::Channel, &[&me]).await;
    let their_conv = theirs.conversation("C2", Topology::Channel, &[&them]).await;
    let (_, their_revision) = theirs.remember(their_conv, &them, None, "their secret").await;
    let their_message = theirs.say(their_conv, &them, "another secret").await;
    let my_message = mine.say(my_conv, &me, "my fact").await;

    let (entry, revision) = mine.remember(my_conv, &me, None, "an earlier fact").await;
    let missing_message = MessageId::generate();
    let missing_revision = RevisionId::generate();
    let before = row_counts(&db.pool).await;
    // Retrieved revisions are written after the batch's one statement, in the same transaction;
    // message sources inside it: either way the first bad reference is named and nothing commits.
    for (bad, kind, id) in [
        (SourceRef::RetrievedRevision(their_revision), "revision", their_revision.0),
        (SourceRef::RetrievedRevision(missing_revision), "revision", missing_revision.0),
        (SourceRef::HistoryMessage(their_message), "message", their_message.0),
        (SourceRef::Message(missing_message), "message", missing_message.0),
    ] {
        let mut memory = mine.memory("my fact", None, me.actor, my_conv, my_message);
        memory.sources.push(bad);
        let err = db.store.create_entry(memory).await.unwrap_err();
        assert!(
            matches!(err, StoreError::ForeignOrMissingSource { kind: k, id: i } if k == kind && i == id),
            "{bad:?}: {err}"
        );
        let mut amend = amendment(&mine, entry, revision, "my amended fact");
        amend.sources = vec![SourceRef::Message(my_message), bad];
        let err = db.store.amend_entry(amend).await.unwrap_err();
        assert!(
            matches!(err, StoreError::ForeignOrMissingSource { kind: k, id: i } if k == kind && i == id),
            "amend with {bad:?}: {err}"
        );
    }
    assert_eq!(before, row_counts(&db.pool).await, "nothing of a rejected write is committed");
}

#[tokio::test]
async fn bad_input_gets_a_typed_error_and_commits_nothing() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let me = w.person("Me", "U1").await;
    let conv = w.conversation("C1", Topology::Channel, &[&me]).await;
    let message = w.say(conv, &me, "hello").await;
    let before = row_counts(&db.pool).await;

    let cases: Vec<(&str, String)> = vec![
        ("empty", String::new()),
        ("blank", "   \n\t ".to_owned()),
        ("too long", "x".repeat(MAX_BODY_CHARS + 1)),
        ("nul", "a\0b".to_owned()),
    ];
    for (name, body) in cases {
        let err = db.store.create_entry(w.memory(&body, None, me.actor, conv, message)).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidInput { field: "body", .. }), "{name}: {err}");
        assert!(!err.to_string().is_empty());
    }
    let mut no_sources = w.memory("fact", None, me.actor, conv, message);
    no_sources.sources.clear();
    assert!(matches!(db.store.create_entry(no_sources).await, Err(StoreError::InvalidInput { field: "sources", .. })));

    let ok_at_limit = w.memory(&"é".repeat(MAX_BODY_CHARS), None, me.actor, conv, message);
    assert!(db.store.create_entry(ok_at_limit).await.is_ok(), "the limit counts characters, not bytes");
    let after = row_counts(&db.pool).await;
    assert_eq!(after[0], before[0] + 1, "only the valid write committed");

    let malformed = "not-a-uuid".parse::<EntryId>().unwrap_err();
    assert!(malformed.to_string().contains("malformed entry id"), "{malformed}");
}

#[tokio::test]
async fn evidence_is_the_audience_at_message_time_and_unknown_topology_is_unknown() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let priya = w.person("Priya", "U1").await;
    let victor = w.person("Victor", "U2").await;
    let dm = w.conversation("D1", Topology::Direct, &[&priya]).await;
    let legacy = w.conversation("L1", Topology::Unknown, &[&priya, &victor]).await;
    let (private, _) = w.remember(dm, &priya, Some(priya.actor), "Interviewing elsewhere").await;
    // Victor joins the DM conversation later: that does not widen the earlier evidence.
    db.store.join_conversation(dm, victor.actor, w.clock + chrono::Duration::minutes(5)).await.unwrap();
    let (old, _) = w.remember(legacy, &priya, None, "Legacy fact").await;

    let private = db.store.entry_history(w.agent, private).await.unwrap().unwrap();
    match &private.revisions[0].sources[0].evidence {
        EvidenceView::Known { actors, .. } => assert_eq!(actors, &vec![priya.actor]),
        other => panic!("expected known evidence, got {other:?}"),
    }
    let old = db.store.entry_history(w.agent, old).await.unwrap().unwrap();
    assert_eq!(old.revisions[0].sources[0].evidence, EvidenceView::Unknown);
}

/// A source's audience is one sorted array on the source row (migration 20261203200000): the
/// members when the message was sent without the agent, copied whole by an amend, and for a source
/// naming another revision the intersection of that revision's sources.
#[tokio::test]
async fn a_source_audience_is_one_sorted_array_that_amends_copy_and_derived_sources_intersect() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let (priya, victor, ana) =
        (w.person("Priya", "U1").await, w.person("Victor", "U2").await, w.person("Ana", "U3").await);
    let everyone = w.conversation("G1", Topology::Group, &[&ana, &victor, &priya]).await;
    let pair = w.conversation("G2", Topology::Group, &[&victor, &priya]).await;
    let audiences = |revision: RevisionId| {
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, Vec<uuid::Uuid>>(
                "SELECT audience FROM revision_sources WHERE revision_id = $1 ORDER BY kind, created_at",
            )
            .bind(revision)
            .fetch_all(&pool)
            .await
            .unwrap()
        }
    };
    let mut all_three = vec![priya.actor.0, victor.actor.0, ana.actor.0];
    all_three.sort();
    let mut two = vec![priya.actor.0, victor.actor.0];
    two.sort();

    let (entry, first) = w.remember(everyone, &priya, None, "The launch slips a week").await;
    assert_eq!(audiences(first).await, vec![all_three.clone()], "sorted members at send time, agent excluded");

    let WriteOutcome::Committed(amended) =
        db.store.amend_entry(amendment(&w, entry, first, "The launch slips two weeks")).await.unwrap()
    else {
        panic!("the amend commits")
    };
    assert_eq!(
        audiences(amended.revision_id()).await,
        vec![all_three.clone(), all_three.clone()],
        "copied message source and parent source"
    );

    let message = w.say(pair, &victor, "what did we decide?").await;
    let mut derived = w.memory("Victor asked about the launch", None, victor.actor, pair, message);
    derived.sources.push(SourceRef::RetrievedRevision(amended.revision_id()));
    let derived = db.store.create_entry(derived).await.unwrap();
    assert_eq!(audiences(derived.revision_id()).await, vec![two.clone(), all_three.clone()]);
    let summary: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT audience FROM revision_audience_summary WHERE revision_id = $1")
            .bind(derived.revision_id())
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(summary, two, "a revision is readable by whom all of its sources were");
    common::assert_projection_matches_canonical(&db.pool).await;
}

#[tokio::test]
async fn every_revision_write_enqueues_index_work_in_the_same_transaction() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let me = w.person("Me", "U1").await;
    let conv = w.conversation("C1", Topology::Channel, &[&me]).await;
    let (entry, rev1) = w.remember(conv, &me, None, "fact one").await;
    let WriteOutcome::Committed(rev2) = db.store.amend_entry(amendment(&w, entry, rev1, "fact two")).await.unwrap()
    else {
        panic!()
    };
    db.store.forget_entry(w.agent, entry).await.unwrap();
    let work: Vec<(uuid::Uuid, String)> =
        sqlx::query_as("SELECT revision_id, work::text FROM index_outbox ORDER BY id")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(
        work,
        vec![
            (rev1.0, "index_revision".to_owned()),
            (rev2.revision_id().0, "index_revision".to_owned()),
            (rev2.revision_id().0, "retire_entry".to_owned())
        ]
    );
}

#[tokio::test]
async fn unknown_references_are_typed_errors_that_commit_nothing() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let me = w.person("Me", "U1").await;
    let conv = w.conversation("C1", Topology::Channel, &[&me]).await;
    let message = w.say(conv, &me, "hello").await;
    let before = row_counts(&db.pool).await;

    let mut unknown_subject = w.memory("fact", None, me.actor, conv, message);
    unknown_subject.subject = Some(mesh_memory::ActorId::generate());
    let err = db.store.create_entry(unknown_subject).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidInput { field: "subject", .. }), "{err}");

    let other = World::new(&db.store, "other").await;
    let foreign_conversation = other.conversation("C2", Topology::Channel, &[]).await;
    let mut foreign_origin = w.memory("fact", None, me.actor, conv, message);
    foreign_origin.origin_conversation = Some(foreign_conversation);
    let err = db.store.create_entry(foreign_origin).await.unwrap_err();
    assert!(matches!(err, StoreError::UnknownReference { kind: "conversation", .. }), "{err}");

    let mut no_agent = w.memory("fact", None, me.actor, conv, message);
    no_agent.agent = mesh_memory::AgentId::generate();
    let err = db.store.create_entry(no_agent).await.unwrap_err();
    assert!(matches!(err, StoreError::UnknownReference { kind: "runtime agent", .. }), "{err}");
    assert_eq!(before, row_counts(&db.pool).await);
}

/// Concurrent remembers are group-committed: several share one transaction (one `xmin`), and
/// each caller still gets the entry it asked for, with its own lineage and evidence, even when
/// the batch mixes runtime agents.
#[tokio::test]
async fn concurrent_remembers_share_a_transaction_and_each_gets_its_own_write() {
    let db = test_db().await;
    let mut a = World::new(&db.store, "agent-a").await;
    let mut b = World::new(&db.store, "agent-b").await;
    let (pa, pb) = (a.person("Priya", "U1").await, b.person("Bo", "U2").await);
    let conv_a = a.conversation("CA", Topology::Direct, &[&pa]).await;
    let conv_b = b.conversation("CB", Topology::Channel, &[&pb]).await;
    let message_a = a.say(conv_a, &pa, "source a").await;
    let message_b = b.say(conv_b, &pb, "source b").await;

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..24 {
        let (world, person, conv, message) =
            if i % 2 == 0 { (&a, &pa, conv_a, message_a) } else { (&b, &pb, conv_b, message_b) };
        let memory = world.memory(&format!("fact number {i}"), Some(person.actor), person.actor, conv, message);
        let store = db.store.clone();
        tasks.spawn(async move { (i, memory.agent, store.create_entry(memory).await) });
    }
    let mut written = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (i, agent, result) = joined.unwrap();
        let write = result.unwrap_or_else(|e| panic!("create {i} failed: {e}"));
        assert_eq!(write.operation(), WriteOperation::Create);
        let history = db.store.entry_history(agent, write.entry_id()).await.unwrap().expect("the entry exists");
        let revision = &history.revisions[0];
        assert_eq!(revision.body, format!("fact number {i}"), "each caller gets the entry it asked for");
        assert_eq!(revision.id, write.revision_id());
        let expected_reader = if i % 2 == 0 { pa.actor } else { pb.actor };
        match &revision.sources[0].evidence {
            EvidenceView::Known { actors, .. } => assert_eq!(actors, &vec![expected_reader]),
            other => panic!("create {i}: expected known evidence, got {other:?}"),
        }
        written.push(write.entry_id().0);
    }
    let transactions: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT xmin::text) FROM memory_entries WHERE id = ANY($1)")
            .bind(&written)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(transactions < 24, "24 concurrent remembers were written in {transactions} transactions");
    common::assert_projection_matches_canonical(&db.pool).await;
}

/// A group commit that fails (here: two bad creates among good ones) is written again one create
/// at a time, so each caller gets its own typed error or its own committed write.
#[tokio::test]
async fn one_bad_remember_in_a_batch_fails_alone() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let mut other = World::new(&db.store, "other").await;
    let me = w.person("Me", "U1").await;
    let them = other.person("Them", "U2").await;
    let conv = w.conversation("C1", Topology::Channel, &[&me]).await;
    let their_conv = other.conversation("C2", Topology::Channel, &[&them]).await;
    let message = w.say(conv, &me, "hello").await;
    let their_message = other.say(their_conv, &them, "secret").await;
    let before = row_counts(&db.pool).await;

    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let mut memory = w.memory(&format!("fact {i}"), None, me.actor, conv, message);
        match i {
            3 => memory.sources.push(SourceRef::HistoryMessage(their_message)),
            7 => memory.subject = Some(mesh_memory::ActorId::generate()),
            _ => {}
        }
        let store = db.store.clone();
        tasks.spawn(async move { (i, store.create_entry(memory).await) });
    }
    let mut committed = 0;
    while let Some(joined) = tasks.join_next().await {
        match joined.unwrap() {
            (3, result) => assert!(
                matches!(result, Err(StoreError::ForeignOrMissingSource { kind: "message", id }) if id == their_message.0),
                "{result:?}"
            ),
            (7, result) => {
                assert!(matches!(result, Err(StoreError::InvalidInput { field: "subject", .. })), "{result:?}")
            }
            (i, result) => {
                let write = result.unwrap_or_else(|e| panic!("good create {i} failed: {e}"));
                let history = db.store.entry_history(w.agent, write.entry_id()).await.unwrap().unwrap();
                assert_eq!(history.revisions[0].body, format!("fact {i}"));
                committed += 1;
            }
        }
    }
    assert_eq!(committed, 10);
    let after = row_counts(&db.pool).await;
    assert_eq!(after[0], before[0] + 10, "exactly the ten good entries committed");
    assert_eq!(after[2], before[2] + 10, "with one source each; nothing of the bad ones");
    common::assert_projection_matches_canonical(&db.pool).await;
}

#[tokio::test]
async fn every_pool_the_crate_opens_plans_prepared_statements_once() {
    let db = test_db().await;
    let production = mesh_memory::database::connect(&db.url).await.unwrap();
    for pool in [&db.pool, &production] {
        let mode: String =
            sqlx::query_scalar("SELECT current_setting('plan_cache_mode')").fetch_one(pool).await.unwrap();
        assert_eq!(mode, "force_generic_plan");
    }
    production.close().await;
}

#[tokio::test]
async fn a_chain_of_amends_keeps_every_message_source_and_one_parent_edge_per_revision() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let dana = w.person("Dana", "U1").await;
    let priya = w.person("Priya", "U2").await;
    let eng = w.conversation("C1", Topology::Channel, &[&dana, &priya]).await;
    let dm = w.conversation("D1", Topology::Direct, &[&dana]).await;
    let (entry, mut current) = w.remember(eng, &dana, Some(dana.actor), "Dana leads payments.").await;
    let before = mesh_memory::privacy::explain_entry(&db.store, Some(w.agent), entry, eng).await.unwrap();
    assert!(before.rule.is_eligible(), "{before:?}");
    for i in 0..6 {
        // Every other correction comes from the private DM: the audience narrows and must stay narrow.
        let said = w.say(if i % 2 == 0 { eng } else { dm }, &dana, &format!("Correction {i}")).await;
        let mut change = amendment(&w, entry, current, &format!("Dana leads payments, correction {i}."));
        change.sources = vec![SourceRef::Message(said)];
        let WriteOutcome::Committed(written) = db.store.amend_entry(change).await.unwrap() else { panic!() };
        current = written.revision_id();
    }
    let history = db.store.entry_history(w.agent, entry).await.unwrap().unwrap();
    for (k, revision) in history.revisions.iter().enumerate() {
        let kinds: Vec<&str> = revision.sources.iter().map(|s| s.kind.as_str()).collect();
        let edges = kinds.iter().filter(|kind| **kind == "parent_revision").count();
        assert_eq!(edges, usize::from(k > 0), "revision {}: one edge to its parent: {kinds:?}", k + 1);
        assert_eq!(kinds.iter().filter(|kind| **kind == "message").count(), k + 1, "every message so far");
    }
    // The latest revision is as narrow as its narrowest source: the DM's audience (Dana only).
    let last = history.revisions.last().unwrap();
    let audiences: Vec<Vec<mesh_memory::ActorId>> = last
        .sources
        .iter()
        .map(|s| match &s.evidence {
            EvidenceView::Known { actors, .. } => actors.clone(),
            EvidenceView::Unknown => panic!("all evidence is known here"),
        })
        .collect();
    let narrowest = audiences.iter().map(Vec::len).min().unwrap();
    assert_eq!(narrowest, 1, "{audiences:?}");
    let channel = mesh_memory::privacy::explain_entry(&db.store, Some(w.agent), entry, eng).await.unwrap();
    assert!(!channel.rule.is_eligible(), "a DM correction keeps the memory out of the channel");
}
