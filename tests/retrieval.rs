//! The one retrieval service against a real PostgreSQL: the spec's evaluation contract (one test
//! per case), withheld private memories, empty-query ranking, packing, audit digest and audit
//! hygiene, semantic revalidation and the explain API.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{test_db, Person, World};
use mesh_memory::retrieval::{
    explain_event, DegradationCategory, DigestKey, EligibleRows, Provenance, RetrievalConfig, RetrievalError,
    RetrievalMode, Retriever, SearchOutcome, SearchRequest, SemanticFailure, SemanticFuture, SemanticHit,
    SemanticIndex, SemanticRequest, SkipReason,
};
use mesh_memory::store::{Amendment, Restriction, SubjectUpdate, Topology, WriteOutcome};
use mesh_memory::{ActorId, ConversationId, EntryId, RevisionId};

async fn ask(world: &World, conversation: ConversationId, actor: Option<ActorId>, query: &str) -> SearchOutcome {
    ask_with(world, RetrievalConfig::default(), conversation, actor, query).await
}

async fn ask_with(
    world: &World,
    config: RetrievalConfig,
    conversation: ConversationId,
    actor: Option<ActorId>,
    query: &str,
) -> SearchOutcome {
    Retriever::new(world.store.clone(), config)
        .search(&SearchRequest::new(world.agent, conversation, actor, query, RetrievalMode::Recall))
        .await
        .expect("search succeeds")
}

fn entries(outcome: &SearchOutcome) -> Vec<EntryId> {
    outcome.selections.iter().map(|s| s.entry_id).collect()
}

/// The demo-like workspace every contract case starts from.
struct Workspace {
    world: World,
    victor: Person,
    priya: Person,
    alex_chen: Person,
    alex_kim: Person,
    dana: Person,
    engineering: ConversationId,
    dm_priya: ConversationId,
    dm_victor: ConversationId,
}

async fn workspace(store: &mesh_memory::store::Store) -> Workspace {
    let world = World::new(store, "assistant").await;
    let victor = world.person("Victor", "U123").await;
    let priya = world.person("Priya", "U456").await;
    let alex_chen = world.person("Alex", "U789").await;
    let alex_kim = world.person("Alex", "U790").await;
    let dana = world.person("Dana", "U321").await;
    let engineering =
        world.conversation("C-ENG", Topology::Channel, &[&victor, &priya, &alex_chen, &alex_kim, &dana]).await;
    let dm_priya = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    let dm_victor = world.conversation("D-VICTOR", Topology::Direct, &[&victor]).await;
    Workspace { world, victor, priya, alex_chen, alex_kim, dana, engineering, dm_priya, dm_victor }
}

// ---------------------------------------------------------------------------------------------
// Evaluation contract, one test per case
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn contract_1_current_actor_asking_about_their_children_gets_their_fact_by_subject_boost() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let (eng, priya, dana) = (w.engineering, w.priya.actor, w.dana.actor);
    let (dana_kids, _) =
        w.world.remember(eng, &w.dana, Some(dana), "Has three children and takes them swimming on Saturdays.").await;
    let (priya_kids, _) = w
        .world
        .remember(eng, &w.priya, Some(priya), "Has two children, Maya and Leo, picked up from school at 4pm.")
        .await;

    let outcome = ask(&w.world, eng, Some(priya), "what do you know about my children?").await;
    assert_eq!(entries(&outcome)[0], priya_kids, "the subject boost puts the asker's own fact first");
    let top = &outcome.selections[0];
    assert!(top.components.subject_boost > 0.0 && top.components.lexical.is_some());
    assert!(top.reason.contains("about the current speaker"), "{}", top.reason);

    let outcome = ask(&w.world, eng, Some(dana), "what do you know about my children?").await;
    assert_eq!(entries(&outcome)[0], dana_kids, "the same query from Dana ranks Dana's fact first");
}

#[tokio::test]
async fn contract_2_another_actor_asking_tabs_or_spaces_gets_the_cto_preference_with_subject_and_source() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let (eng, victor) = (w.engineering, w.victor.actor);
    let (tabs, tabs_rev) = w
        .world
        .remember(eng, &w.victor, Some(victor), "Prefers tabs over spaces for indentation in every repository.")
        .await;

    let outcome = ask(&w.world, eng, Some(w.priya.actor), "tabs or spaces?").await;
    assert_eq!(entries(&outcome), vec![tabs]);
    let s = &outcome.selections[0];
    assert_eq!(s.revision_id, tabs_rev);
    assert_eq!(s.subject.as_ref().unwrap().id, victor);
    assert_eq!(s.subject.as_ref().unwrap().label, "Victor (id U123)");
    assert_eq!(s.source.as_ref().unwrap().label, "Victor (id U123)");
    assert_eq!(s.components.subject_boost, 0.0, "Priya is not the subject: no boost, no penalty");
    // The day the memory was told: the time of the message it was learned from (the test
    // world's clock, a minute before the remember).
    let told = mesh_memory::retrieval::when::told_on(w.world.clock);
    assert!((s.learned_at - w.world.clock).num_milliseconds().abs() < 1, "learned when its message was sent");
    let prompt = outcome.prompt_section();
    assert!(
        prompt.contains(&format!(
            "About Victor (id U123), told by Victor (id U123) on {told} in this conversation: Prefers tabs"
        )),
        "{prompt}"
    );
    let json = outcome.recall_json();
    let line = json["memories"][0].as_str().expect("a recalled memory is one line");
    assert_eq!(
        line,
        format!(
            "[{} rev 1] About Victor (id U123), told by Victor (id U123) on {told} in this conversation: Prefers tabs over spaces for indentation in every repository.",
            tabs.short()
        ),
        "the entry's short id and revision, subject, source, day, place and body: what amend and forget need"
    );
    assert!(!line.contains(&tabs.to_string()) && !line.contains(&tabs_rev.to_string()), "no full ids: {line}");
    for audit_only in ["score", "component", "reason", "rrf"] {
        assert!(!json.to_string().contains(audit_only), "{audit_only} is audit data, not for the model");
    }
    // The audit row keeps what the model no longer receives.
    let event = mesh_memory::retrieval::audit::explain_event(&db.pool, outcome.event_id).await.unwrap().unwrap();
    assert!(event.selections[0].components.lexical.is_some(), "components stay in the audit");
}

#[tokio::test]
async fn contract_3_a_coding_question_does_not_select_the_favourite_food_memory() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let (food, _) = w
        .world
        .remember(eng, &w.alex_chen, Some(w.alex_chen.actor), "Favourite food is spicy ramen; any ramen place works.")
        .await;
    let (tabs, _) =
        w.world.remember(eng, &w.victor, Some(w.victor.actor), "Prefers tabs over spaces for indentation.").await;

    let outcome = ask(&w.world, eng, Some(w.alex_chen.actor), "should I indent this code with tabs?").await;
    assert!(!entries(&outcome).contains(&food), "the food memory is irrelevant even for its own subject");
    assert_eq!(entries(&outcome), vec![tabs]);
}

#[tokio::test]
async fn contract_4_a_food_question_selects_the_favourite_food_memory() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let (food, _) = w
        .world
        .remember(eng, &w.alex_chen, Some(w.alex_chen.actor), "Favourite food is spicy ramen; any ramen place works.")
        .await;
    w.world.remember(eng, &w.victor, Some(w.victor.actor), "Prefers tabs over spaces for indentation.").await;

    let outcome = ask(&w.world, eng, Some(w.dana.actor), "what food should we order for the team lunch?").await;
    assert_eq!(entries(&outcome), vec![food]);
    assert!(outcome.selections[0].components.lexical.is_some());
}

#[tokio::test]
async fn contract_5_a_private_direct_message_memory_is_never_eligible_in_another_actors_turn() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let body = "Is interviewing at another company next month and has not told their manager.";
    let (private, _) = w.world.remember(w.dm_priya, &w.priya, Some(w.priya.actor), body).await;

    // The exact wording, in the shared channel and in Victor's DM, by other actors: never.
    for (conversation, asker) in [(w.engineering, w.victor.actor), (w.dm_victor, w.victor.actor)] {
        let outcome = ask(&w.world, conversation, Some(asker), body).await;
        assert!(!entries(&outcome).contains(&private));
        assert_eq!(outcome.withheld.get("audience_not_covered"), Some(&1), "the withheld match is counted");
        assert!(!outcome.prompt_section().contains("interviewing"));
        assert!(!outcome.recall_json().to_string().contains("interviewing"));
        let event = explain_event(db.store.pool(), outcome.event_id).await.unwrap().unwrap();
        assert_eq!(event.withheld.get("audience_not_covered"), Some(&1), "the event records the withheld category");
    }
    // Even when Priya herself speaks in the shared channel: the audience decides, not the speaker.
    let outcome = ask(&w.world, w.engineering, Some(w.priya.actor), body).await;
    assert!(!entries(&outcome).contains(&private));
    // In the DM with Priya it is eligible (positive control).
    let outcome = ask(&w.world, w.dm_priya, Some(w.priya.actor), body).await;
    assert_eq!(entries(&outcome), vec![private]);
}

#[tokio::test]
async fn contract_6_an_amended_memory_exposes_only_its_current_revision() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let (team, rev1) = w.world.remember(eng, &w.dana, Some(w.dana.actor), "Leads the payments team.").await;
    let correction = w.world.say(eng, &w.dana, "Correction: I lead the platform team now.").await;
    let WriteOutcome::Committed(amended) = db
        .store
        .amend_entry(Amendment {
            agent: w.world.agent,
            entry: team,
            expected_revision: rev1,
            body: Some("Leads the platform team since October.".into()),
            subject: SubjectUpdate::Keep,
            source_actor: Some(w.dana.actor),
            sources: vec![mesh_memory::store::SourceRef::Message(correction)],
        })
        .await
        .unwrap()
    else {
        panic!("amend committed")
    };

    let outcome = ask(&w.world, eng, Some(w.victor.actor), "who leads the payments team?").await;
    assert!(outcome.selections.iter().all(|s| s.revision_id != rev1), "revision 1 is history, not retrievable");
    let outcome = ask(&w.world, eng, Some(w.victor.actor), "which team does Dana lead?").await;
    assert_eq!(outcome.used_revisions(), vec![amended.revision_id()]);
    assert_eq!(outcome.selections[0].revision_number, 2);
    assert!(outcome.selections[0].body.contains("platform"));
}

#[tokio::test]
async fn contract_7_an_actor_rename_changes_rendering_without_rewriting_memory_text() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let body = "Prefers tabs over spaces for indentation.";
    let (tabs, _) = w.world.remember(eng, &w.victor, Some(w.victor.actor), body).await;
    db.store.rename_actor(w.victor.actor, "Victor Hugo").await.unwrap();

    let outcome = ask(&w.world, eng, Some(w.priya.actor), "tabs or spaces?").await;
    assert_eq!(outcome.selections[0].subject.as_ref().unwrap().label, "Victor Hugo (id U123)");
    assert!(outcome.prompt_section().contains("About Victor Hugo (id U123), told by Victor Hugo (id U123)"));
    let history = db.store.entry_history(w.world.agent, tabs).await.unwrap().unwrap();
    assert_eq!(history.revisions.len(), 1, "no revision was written by the rename");
    assert_eq!(history.revisions[0].body, body, "the body is untouched");
}

#[tokio::test]
async fn contract_8_two_actors_with_the_same_display_name_stay_distinct_through_stable_ids() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let (chen, _) = w.world.remember(eng, &w.alex_chen, Some(w.alex_chen.actor), "Wants to be paged by phone.").await;
    let (kim, _) =
        w.world.remember(eng, &w.alex_kim, Some(w.alex_kim.actor), "Wants to be paged on Slack, never by phone.").await;

    let outcome = ask(&w.world, eng, Some(w.alex_kim.actor), "how should I page them?").await;
    let by_entry = |e: EntryId| outcome.selections.iter().find(|s| s.entry_id == e).unwrap();
    assert_eq!(by_entry(chen).subject.as_ref().unwrap().label, "Alex (id U789)");
    assert_eq!(by_entry(kim).subject.as_ref().unwrap().label, "Alex (id U790)");
    assert_ne!(by_entry(chen).subject.as_ref().unwrap().id, by_entry(kim).subject.as_ref().unwrap().id);
    assert_eq!(entries(&outcome)[0], kim, "the subject boost follows the id, not the shared name");
}

// ---------------------------------------------------------------------------------------------
// Withholding, ranking, packing
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_evidence_is_withheld_and_recorded_even_when_other_memories_are_returned() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let legacy = w.world.conversation("C-LEGACY", Topology::Unknown, &[&w.victor, &w.priya]).await;
    let (unknown, _) = w.world.remember(legacy, &w.victor, None, "The deploy key rotates every Monday.").await;
    let (known, _) = w.world.remember(w.engineering, &w.victor, None, "The deploy pipeline runs on merge.").await;

    let outcome = ask(&w.world, w.engineering, Some(w.priya.actor), "when does the deploy key rotate?").await;
    assert_eq!(entries(&outcome), vec![known]);
    assert!(!entries(&outcome).contains(&unknown));
    assert_eq!(
        outcome.degradation_categories,
        vec![DegradationCategory::SemanticUnavailable, DegradationCategory::EligibilityWithheldUnknown]
    );
    let (category, categories, withheld): (Option<String>, Vec<String>, serde_json::Value) = sqlx::query_as(
        "SELECT degradation_category, degradation_categories, withheld FROM memory_retrieval_events WHERE id = $1",
    )
    .bind(outcome.event_id)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(category.as_deref(), Some("semantic_unavailable"), "a semantic failure keeps precedence");
    assert_eq!(categories, vec!["semantic_unavailable", "eligibility_withheld_unknown"]);
    assert_eq!(withheld, serde_json::json!({"unknown_evidence": 1}));
    // The audit reads the stored names back as the categories they are.
    let event = explain_event(db.store.pool(), outcome.event_id).await.unwrap().unwrap();
    assert_eq!(event.degradation_category, Some(DegradationCategory::SemanticUnavailable));
    assert_eq!(event.degradation_categories, outcome.degradation_categories);
    assert!(!outcome.recall_json().to_string().contains("rotates"), "withheld text never reaches the result");
}

#[tokio::test]
async fn withheld_matches_are_counted_once_each_by_rule_and_a_released_revision_is_not_withheld() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let legacy = w.world.conversation("C-LEGACY", Topology::Unknown, &[&w.victor, &w.priya]).await;
    // Each private memory matches two of the query's three terms: counted once, not once per term.
    let mut private = Vec::new();
    for (n, body) in
        ["Quarterly budget forecast slipped.", "Budget forecast for the offsite.", "Forecast budget owner."]
            .into_iter()
            .enumerate()
    {
        let dm = if n % 2 == 0 { w.dm_priya } else { w.dm_victor };
        let speaker = if n % 2 == 0 { &w.priya } else { &w.victor };
        private.push(w.world.remember(dm, speaker, None, body).await);
    }
    let message = w.world.say(eng, &w.victor, "The budget forecast lives in the finance sheet.").await;
    let mut confined =
        w.world.memory("The budget forecast lives in the finance sheet.", None, w.victor.actor, eng, message);
    confined.restriction = Restriction::ConversationOnly(w.dm_victor);
    db.store.create_entry(confined).await.unwrap();
    w.world.remember(legacy, &w.victor, None, "The budget forecast is due Friday.").await;
    let (shared, _) = w.world.remember(eng, &w.dana, None, "Budget forecast review is on Thursday.").await;

    let outcome = ask(&w.world, eng, Some(w.dana.actor), "budget forecast quarterly").await;
    assert_eq!(entries(&outcome), vec![shared]);
    let expected = [("audience_not_covered", 3), ("restriction", 1), ("unknown_evidence", 1)];
    let expected: std::collections::BTreeMap<String, i64> = expected.into_iter().map(|(k, v)| (k.into(), v)).collect();
    assert_eq!(outcome.withheld, expected);

    // A grant that covers the channel's audience releases that exact revision: it is selected,
    // and no longer counted as withheld.
    let (released, released_revision) = private[0];
    let audience: Vec<ActorId> = outcome.context.audience().to_vec();
    common::grant(&db.pool, w.world.agent, released_revision, &audience, false).await;
    let outcome = ask(&w.world, eng, Some(w.dana.actor), "budget forecast quarterly").await;
    assert!(entries(&outcome).contains(&released), "{:?}", entries(&outcome));
    assert_eq!(outcome.withheld.get("audience_not_covered"), Some(&2));
}

/// The withheld diagnostics stop at `withheld_count_limit`: a count that reaches it is a lower
/// bound, the search still returns what is eligible, and one withheld match with unknown evidence
/// still records `eligibility_withheld_unknown`. A limit of 0 is refused.
#[tokio::test]
async fn withheld_counts_stop_at_the_configured_bound_and_unknown_evidence_is_still_recorded() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let legacy = w.world.conversation("C-LEGACY", Topology::Unknown, &[&w.victor, &w.dana]).await;
    for body in ["Budget forecast one.", "Budget forecast two.", "Budget forecast three."] {
        w.world.remember(w.dm_priya, &w.priya, None, body).await;
    }
    w.world.remember(legacy, &w.victor, None, "The budget forecast is due Friday.").await;
    let (shared, _) = w.world.remember(eng, &w.dana, None, "Budget forecast review is on Thursday.").await;

    let unbounded = ask(&w.world, eng, Some(w.dana.actor), "budget forecast").await;
    assert_eq!(unbounded.withheld.get("audience_not_covered"), Some(&3));

    let config = RetrievalConfig { withheld_count_limit: 2, ..RetrievalConfig::default() };
    assert_eq!(config.validate(), Ok(()));
    let bounded = ask_with(&w.world, config, eng, Some(w.dana.actor), "budget forecast").await;
    assert_eq!(entries(&bounded), vec![shared], "the bound changes diagnostics, never selections");
    assert_eq!(bounded.withheld.get("audience_not_covered"), Some(&2), "{:?}", bounded.withheld);
    assert_eq!(bounded.withheld.get("unknown_evidence"), Some(&1));
    assert!(
        bounded.degradation_categories.contains(&DegradationCategory::EligibilityWithheldUnknown),
        "{:?}",
        bounded.degradation_categories
    );

    let zero = RetrievalConfig { withheld_count_limit: 0, ..RetrievalConfig::default() };
    assert_eq!(zero.validate().unwrap_err().field, "withheld_count_limit");
}

/// The sample of withheld matches with known evidence takes at most `withheld_count_limit` rows
/// in all, term by term: a later term is read only when the earlier ones found fewer, so matches
/// of every term still count up to the bound, and a bound the first term fills is not exceeded.
#[tokio::test]
async fn withheld_sample_goes_on_to_later_terms_until_its_bound() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    // The query's lexemes are read in order ("budget" before "forecast"): one private match for
    // the first, three for the second.
    w.world.remember(w.dm_priya, &w.priya, None, "Budget approved yesterday.").await;
    for body in ["Forecast one slipped.", "Forecast two is late.", "Forecast three moved."] {
        w.world.remember(w.dm_victor, &w.victor, None, body).await;
    }
    let count = |limit: u32| {
        let config = RetrievalConfig { withheld_count_limit: limit, ..RetrievalConfig::default() };
        ask_with(&w.world, config, eng, Some(w.dana.actor), "budget forecast")
    };
    assert_eq!(count(3).await.withheld.get("audience_not_covered"), Some(&3), "the second term fills the bound");
    assert_eq!(count(10).await.withheld.get("audience_not_covered"), Some(&4), "every match, under the bound");
    assert_eq!(count(1).await.withheld.get("audience_not_covered"), Some(&1), "the first term fills the bound");
}

#[tokio::test]
async fn the_lexical_terms_are_the_lexemes_the_lexical_query_ors() {
    let db = test_db().await;
    for text in ["Budget forecast, quarterly budgets!", "it's O'Brien's back\\slash", "the and of", ""] {
        let (query, terms): (Option<String>, Vec<String>) =
            sqlx::query_as("SELECT memory_lexical_query($1)::text, memory_lexical_terms($1)::text[]")
                .bind(text)
                .fetch_one(&db.pool)
                .await
                .unwrap();
        let joined = (!terms.is_empty()).then(|| terms.join(" | "));
        assert_eq!(query, joined, "{text:?}");
    }
}

#[tokio::test]
async fn empty_query_ranks_by_subject_then_conversation_then_recency() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let members = [&w.victor, &w.priya, &w.alex_chen, &w.alex_kim, &w.dana];
    let random = w.world.conversation("C-RANDOM", Topology::Channel, &members).await;
    let eng = w.engineering;
    let (older_here, _) = w.world.remember(eng, &w.victor, None, "The build takes twelve minutes.").await;
    let (about_priya, _) = w.world.remember(random, &w.dana, Some(w.priya.actor), "Runs the book club.").await;
    let (newer_here, _) = w.world.remember(eng, &w.dana, None, "Standup moved to 10am.").await;
    let (unrelated, _) = w.world.remember(random, &w.dana, Some(w.dana.actor), "Plays the cello.").await;
    let (both, _) = w.world.remember(eng, &w.victor, Some(w.priya.actor), "Reviews all database migrations.").await;

    let outcome = ask(&w.world, eng, Some(w.priya.actor), "").await;
    assert_eq!(entries(&outcome), vec![both, about_priya, newer_here, older_here]);
    assert!(!entries(&outcome).contains(&unrelated), "neither about the speaker nor from here");
    assert!(outcome.degradation_categories.is_empty(), "an empty query needs no semantic search");
    let newer = &outcome.selections[2];
    let older = &outcome.selections[3];
    assert!(newer.components.recency > older.components.recency);
    assert_eq!(
        outcome.selections[1].provenance,
        Provenance::SharedConversation { conversation_id: random, title: "C-RANDOM".into() }
    );
}

/// How a search reads the destination's eligible set, for the test that compares the three.
#[derive(Clone, Copy, Debug)]
enum SetRead {
    /// No semantic index searches within the set: the structural sources read their newest rows.
    Rows,
    /// An index searches within it (this one finds nothing): the whole set is read.
    Whole,
    /// An index searches within it but the set is over the limit (0 here): newest rows again, and
    /// the index is told the set is too large.
    OverLimit,
}

/// A vector index that searches within the eligible set and finds nothing there.
struct FindsNothing;

impl SemanticIndex for FindsNothing {
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        Box::pin(async move {
            assert!(
                matches!(request.eligible, EligibleRows::Read(_) | EligibleRows::MoreThan(_)),
                "an index that searches the set gets it, or is told it is too large"
            );
            Ok(Vec::new())
        })
    }
}

async fn ask_reading(
    world: &World,
    read: SetRead,
    per_source_limit: u32,
    conversation: ConversationId,
    actor: Option<ActorId>,
    query: &str,
) -> SearchOutcome {
    let eligible_set_limit = match read {
        SetRead::OverLimit => 0,
        SetRead::Rows | SetRead::Whole => RetrievalConfig::default().eligible_set_limit,
    };
    let config = RetrievalConfig { eligible_set_limit, per_source_limit, ..RetrievalConfig::default() };
    let retriever = Retriever::new(world.store.clone(), config);
    let retriever = match read {
        SetRead::Whole | SetRead::OverLimit => retriever.with_semantic_index(Arc::new(FindsNothing)),
        SetRead::Rows => retriever,
    };
    retriever
        .search(&SearchRequest::new(world.agent, conversation, actor, query, RetrievalMode::Recall))
        .await
        .expect("search succeeds")
}

/// The structural sources' newest rows select exactly what they take from the whole eligible
/// set, also when each source takes fewer rows than match (a per-source limit of 1 and 2 here, with
/// rows of several audience classes, covering and not, in each source's index).
#[tokio::test]
async fn the_whole_eligible_set_and_the_structural_sources_newest_rows_select_the_same() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let (dm_priya, dm_victor) = (w.dm_priya, w.dm_victor);
    w.world.remember(eng, &w.victor, None, "The build takes twelve minutes.").await;
    w.world.remember(eng, &w.dana, Some(w.priya.actor), "Priya reviews all database migrations.").await;
    w.world.remember(dm_priya, &w.priya, Some(w.priya.actor), "Priya's kids go to school in Lisbon.").await;
    w.world.remember(eng, &w.priya, Some(w.priya.actor), "Priya owns the database backups.").await;
    w.world.remember(dm_priya, &w.priya, Some(w.priya.actor), "Priya's school run is at eight.").await;
    w.world.remember(dm_victor, &w.victor, Some(w.victor.actor), "Victor prefers tabs over spaces.").await;
    for (place, body) in
        [(eng, "Answers about code must name the repository."), (dm_priya, "Answers about school must be kind.")]
    {
        let message = w.world.say(place, &w.victor, "Team rule.").await;
        let mut rule = w.world.memory(body, None, w.victor.actor, place, message);
        rule.always_on = true;
        db.store.create_entry(rule).await.unwrap();
    }

    let places = [(eng, Some(w.priya.actor)), (dm_priya, Some(w.priya.actor)), (dm_victor, Some(w.victor.actor))];
    let shape = |o: &SearchOutcome| {
        o.selections.iter().map(|s| (s.entry_id, s.revision_id, s.reason.clone())).collect::<Vec<_>>()
    };
    for per_source in [1, 2, 200] {
        for (conversation, actor) in places.into_iter().chain([(eng, None)]) {
            for query in ["", "database migrations", "kids school", "tabs or spaces"] {
                let whole = ask_reading(&w.world, SetRead::Whole, per_source, conversation, actor, query).await;
                assert!(!whole.selections.is_empty() || !query.is_empty(), "an empty query selects something here");
                for read in [SetRead::Rows, SetRead::OverLimit] {
                    let other = ask_reading(&w.world, read, per_source, conversation, actor, query).await;
                    let case = format!("{read:?}, {per_source} a source, {query:?} in {conversation}");
                    assert_eq!(shape(&other), shape(&whole), "{case}");
                    assert_eq!(other.candidate_count, whole.candidate_count, "{case}");
                    assert_eq!(other.withheld, whole.withheld, "{case}");
                }
            }
        }
    }
    let private = ask(&w.world, eng, Some(w.priya.actor), "kids school").await;
    assert!(
        private.selections.iter().all(|s| !s.body.contains("kids")),
        "a direct-message memory never reaches the channel"
    );
}

#[tokio::test]
async fn a_non_empty_query_requires_relevance_but_always_on_entries_are_included() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let message = w.world.say(eng, &w.victor, "Team rule: answers must name the repository.").await;
    let mut rule = w.world.memory("Answers about code must name the repository.", None, w.victor.actor, eng, message);
    rule.always_on = true;
    let rule = db.store.create_entry(rule).await.unwrap().entry_id();
    let (about_priya, _) = w.world.remember(eng, &w.priya, Some(w.priya.actor), "Likes hiking in the Alps.").await;

    let outcome = ask(&w.world, eng, Some(w.priya.actor), "what is the weather in Lisbon").await;
    assert_eq!(entries(&outcome), vec![rule], "subject and conversation alone do not make a memory relevant");
    assert!(!entries(&outcome).contains(&about_priya));
    assert!(outcome.selections[0].components.always_on > 0.0);
}

#[tokio::test]
async fn an_oversized_entry_is_skipped_and_reported_never_cut() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    // 3,900 characters (under the body limit) but over 4,096 bytes: the em dash is three bytes.
    let long_body = format!("Glossary of the billing domain: {}", "invoice ledger settlement — ".repeat(138));
    let (big, big_rev) = w.world.remember(eng, &w.dana, None, &long_body).await;
    let (small, _) = w.world.remember(eng, &w.dana, None, "Billing invoices are settled nightly.").await;

    let outcome = ask(&w.world, eng, None, "billing invoice settlement ledger").await;
    assert_eq!(entries(&outcome), vec![small]);
    assert_eq!(outcome.skipped.len(), 1);
    assert_eq!(outcome.skipped[0].entry_id, big);
    assert_eq!(outcome.skipped[0].revision_id, big_rev);
    assert_eq!(outcome.skipped[0].reason, SkipReason::LargerThanAllowance);
    assert!(outcome.skipped[0].cost_tokens > 4096);
    assert!(outcome.cost_tokens <= 4096);
    assert!(!outcome.prompt_section().contains("Glossary"), "no part of the oversized entry is rendered");
    let skipped: serde_json::Value =
        sqlx::query_scalar("SELECT skipped_oversized FROM memory_retrieval_events WHERE id = $1")
            .bind(outcome.event_id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(skipped[0]["entry_id"], big.to_string());

    // With a larger allowance the same entry is admitted whole.
    let outcome = Retriever::new(db.store.clone(), RetrievalConfig::default())
        .search(&SearchRequest {
            token_budget: 20_000,
            ..SearchRequest::new(w.world.agent, eng, None, "billing ledger", RetrievalMode::Prompt)
        })
        .await
        .unwrap();
    let admitted = outcome.selections.iter().find(|s| s.entry_id == big).expect("admitted");
    assert_eq!(admitted.body, long_body, "admitted whole");
}

#[tokio::test]
async fn the_count_budget_and_the_token_budget_bound_the_selection() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    for i in 0..12 {
        w.world.remember(w.engineering, &w.dana, None, &format!("Runbook step {i}: restart the worker pool.")).await;
    }
    // The default allowance holds the default count of such one-line entries...
    let outcome = ask(&w.world, w.engineering, None, "runbook worker").await;
    assert_eq!(outcome.selections.len(), outcome.count_budget as usize, "4096 holds a whole page of one-liners");
    assert!(outcome.cost_tokens <= 4096);
    // ...and a small one bounds the selection by tokens, skipping what no longer fits.
    let budget = 1000;
    let outcome = Retriever::new(db.store.clone(), RetrievalConfig::default())
        .search(&SearchRequest {
            token_budget: budget,
            ..SearchRequest::new(w.world.agent, w.engineering, None, "runbook worker", RetrievalMode::Prompt)
        })
        .await
        .unwrap();
    let total: u32 = outcome.selections.iter().map(|s| s.cost_tokens).sum();
    assert!(outcome.selections.len() < 8, "1000 upper-bound tokens hold fewer than eight such entries");
    assert!(!outcome.selections.is_empty());
    assert_eq!(outcome.cost_tokens, total);
    assert!(total <= budget);
    assert!(outcome
        .skipped
        .iter()
        .all(|s| s.reason == SkipReason::LargerThanRemaining && total + s.cost_tokens > budget));
    assert!(!outcome.skipped.is_empty());
    let outcome = Retriever::new(db.store.clone(), RetrievalConfig::default())
        .search(&SearchRequest {
            max_count: 3,
            token_budget: 100_000,
            ..SearchRequest::new(w.world.agent, w.engineering, None, "runbook worker", RetrievalMode::Prompt)
        })
        .await
        .unwrap();
    assert_eq!(outcome.selections.len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Audit
// ---------------------------------------------------------------------------------------------

async fn digest_of(pool: &sqlx::PgPool, outcome: &SearchOutcome) -> Option<Vec<u8>> {
    sqlx::query_scalar("SELECT query_digest FROM memory_retrieval_events WHERE id = $1")
        .bind(outcome.event_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_query_digest_is_keyed_changes_with_the_key_and_is_absent_without_one() {
    let db = test_db().await;
    let w = workspace(&db.store).await;
    let keyed = |master: &str| RetrievalConfig {
        digest_key: Some(DigestKey::from_master_key(master.as_bytes()).unwrap()),
        ..RetrievalConfig::default()
    };
    let query = "tabs or spaces?";
    let none = ask_with(&w.world, RetrievalConfig::default(), w.engineering, None, query).await;
    let first = ask_with(&w.world, keyed("master-key-one-0123456789"), w.engineering, None, query).await;
    let again = ask_with(&w.world, keyed("master-key-one-0123456789"), w.engineering, None, query).await;
    let other = ask_with(&w.world, keyed("master-key-two-0123456789"), w.engineering, None, query).await;

    assert_eq!(digest_of(&db.pool, &none).await, None, "no key, no digest (never a plain hash)");
    let d1 = digest_of(&db.pool, &first).await.expect("digest with a key");
    assert_eq!(d1.len(), 32);
    assert_eq!(digest_of(&db.pool, &again).await.as_ref(), Some(&d1), "same key, same query, same digest");
    assert_ne!(digest_of(&db.pool, &other).await.as_ref(), Some(&d1), "the digest changes with the key");
    use sha2::Digest;
    assert_ne!(d1, sha2::Sha256::digest(query.as_bytes()).to_vec(), "not a plain SHA-256");
    assert!(DigestKey::from_master_key(b"short").is_err(), "a weak master key is refused");
}

#[tokio::test]
async fn no_audit_row_contains_the_query_text_or_withheld_text_and_each_search_writes_exactly_one() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let private = "Quokka zebrafish allergy is a secret medical detail.";
    w.world.remember(w.dm_priya, &w.priya, Some(w.priya.actor), private).await;
    w.world.remember(w.engineering, &w.victor, None, "Zebrafish tanks live in lab two.").await;
    let key = DigestKey::from_master_key(b"0123456789abcdef0123").unwrap();
    let config = RetrievalConfig { digest_key: Some(key), ..RetrievalConfig::default() };
    let queries = ["zebrafish quokka allergy", "", "narwhal"];
    for query in queries {
        ask_with(&w.world, config.clone(), w.engineering, Some(w.victor.actor), query).await;
    }
    let rows: Vec<String> = sqlx::query_scalar("SELECT row_to_json(e)::text FROM memory_retrieval_events e")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    assert_eq!(rows.len(), queries.len(), "exactly one audit row per search");
    for row in &rows {
        let lower = row.to_lowercase();
        for needle in ["zebrafish", "quokka", "narwhal", "allergy", "secret", "lab two"] {
            assert!(!lower.contains(needle), "audit row contains {needle:?}: {row}");
        }
    }
}

#[tokio::test]
async fn explain_event_returns_the_stored_selection_with_components() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let (tabs, rev) = w.world.remember(w.engineering, &w.victor, Some(w.victor.actor), "Prefers tabs.").await;
    let outcome = ask(&w.world, w.engineering, Some(w.victor.actor), "tabs?").await;
    let event = explain_event(db.store.pool(), outcome.event_id).await.unwrap().expect("event stored");
    assert_eq!(event.selections.len(), 1);
    assert_eq!(event.selections[0].entry_id, tabs);
    assert_eq!(event.selections[0].revision_id, rev);
    let (stored, live) = (&event.selections[0].components, &outcome.selections[0].components);
    assert_eq!(stored.sources, live.sources);
    assert_eq!(stored.lexical.map(|c| c.rank), live.lexical.map(|c| c.rank));
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    assert!(close(stored.lexical.unwrap().rrf, live.lexical.unwrap().rrf), "jsonb keeps the components");
    assert!(close(stored.subject_boost, live.subject_boost) && stored.subject_boost > 0.0);
    assert!(close(stored.conversation_boost, live.conversation_boost) && close(stored.recency, live.recency));
    assert_eq!(event.selections[0].reason, outcome.selections[0].reason);
    assert!((event.selections[0].score - outcome.selections[0].score).abs() < 1e-12);
    assert_eq!(event.destination_audience, outcome.context.audience());
    assert_eq!(event.mode, RetrievalMode::Recall);
    assert!(!event.has_query_digest);
    let missing = mesh_memory::RetrievalEventId::generate();
    assert!(explain_event(db.store.pool(), missing).await.unwrap().is_none());
}

// ---------------------------------------------------------------------------------------------
// Semantic source: revalidated, bounded, degraded
// ---------------------------------------------------------------------------------------------

/// A vector index that returns fixed hits (or sleeps), to exercise the service's side of the
/// contract; it is not a stand-in for the database.
struct FixedHits {
    hits: Vec<RevisionId>,
    sleep: Option<Duration>,
}

impl SemanticIndex for FixedHits {
    fn search<'a>(&'a self, _request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        Box::pin(async move {
            if let Some(d) = self.sleep {
                tokio::time::sleep(d).await;
            }
            Ok(self.hits.iter().map(|r| SemanticHit { revision_id: *r, similarity: 0.99 }).collect())
        })
    }
}

#[tokio::test]
async fn semantic_hits_are_revalidated_so_no_similarity_restores_a_private_memory() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let (_, private_rev) =
        w.world.remember(w.dm_priya, &w.priya, Some(w.priya.actor), "Is interviewing at another company.").await;
    let (ok, ok_rev) = w.world.remember(w.engineering, &w.victor, None, "Hiring plan: two backend engineers.").await;
    let index = FixedHits { hits: vec![private_rev, ok_rev, ok_rev], sleep: None };
    let outcome = Retriever::new(db.store.clone(), RetrievalConfig::default())
        .with_semantic_index(Arc::new(index))
        .search(&SearchRequest::new(w.world.agent, w.engineering, None, "job change", RetrievalMode::Prompt))
        .await
        .unwrap();
    assert_eq!(entries(&outcome), vec![ok]);
    assert_eq!(outcome.selections[0].components.semantic.unwrap().rank, 1, "hits are deduplicated and reranked");
    assert!(outcome.degradation_categories.is_empty());

    let slow = FixedHits { hits: vec![ok_rev], sleep: Some(Duration::from_millis(400)) };
    let config = RetrievalConfig { semantic_deadline: Duration::from_millis(50), ..RetrievalConfig::default() };
    let outcome = Retriever::new(db.store.clone(), config)
        .with_semantic_index(Arc::new(slow))
        .search(&SearchRequest::new(w.world.agent, w.engineering, None, "hiring plan", RetrievalMode::Prompt))
        .await
        .unwrap();
    assert_eq!(outcome.degradation_categories, vec![DegradationCategory::SemanticTimeout]);
    assert_eq!(entries(&outcome), vec![ok], "lexical results survive the semantic timeout");
    let _ = SemanticFailure::Unavailable;
}

/// Fixed hits from an index that says it does not search within the eligible set, so retrieval
/// reads only the structural sources' picks and must check the hits against the set itself.
struct HitsOutsideTheSet(Vec<RevisionId>);

impl SemanticIndex for HitsOutsideTheSet {
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        Box::pin(async move {
            assert!(matches!(request.eligible, EligibleRows::Unknown), "the set was not read, so it is not passed");
            Ok(self.0.iter().map(|r| SemanticHit { revision_id: *r, similarity: 0.99 }).collect())
        })
    }

    fn searches_eligible_set(&self) -> bool {
        false
    }
}

#[tokio::test]
async fn hits_of_an_index_that_does_not_search_the_set_are_still_kept_only_where_it_admits_them() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let (_, private_rev) =
        w.world.remember(w.dm_priya, &w.priya, Some(w.priya.actor), "Is interviewing at another company.").await;
    let (ok, ok_rev) = w.world.remember(w.engineering, &w.victor, None, "Hiring plan: two backend engineers.").await;
    let index = HitsOutsideTheSet(vec![private_rev, ok_rev]);
    let outcome = Retriever::new(db.store.clone(), RetrievalConfig::default())
        .with_semantic_index(Arc::new(index))
        .search(&SearchRequest::new(w.world.agent, w.engineering, None, "job change", RetrievalMode::Prompt))
        .await
        .unwrap();
    assert_eq!(entries(&outcome), vec![ok], "the direct message's revision is not eligible in the channel");
    assert_eq!(outcome.selections[0].components.semantic.unwrap().rank, 1, "ranked among the kept hits");
}

// ---------------------------------------------------------------------------------------------
// Restrictions, forgetting, bad input
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn conversation_only_and_forgotten_entries_are_not_retrieved() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let message = w.world.say(eng, &w.victor, "The incident bridge code is 4242.").await;
    let mut restricted = w.world.memory("The incident bridge code is 4242.", None, w.victor.actor, eng, message);
    restricted.restriction = Restriction::ConversationOnly(w.dm_victor);
    let restricted = db.store.create_entry(restricted).await.unwrap().entry_id();
    let in_dm = ask(&w.world, w.dm_victor, Some(w.victor.actor), "incident bridge").await;
    assert_eq!(entries(&in_dm), vec![restricted], "eligible in the one conversation it is confined to");
    let (forgotten, _) = w.world.remember(eng, &w.victor, None, "The incident bridge moved to Zoom.").await;
    db.store.forget_entry(w.world.agent, forgotten).await.unwrap();

    let outcome = ask(&w.world, eng, Some(w.victor.actor), "incident bridge").await;
    assert!(outcome.selections.is_empty(), "{:?}", entries(&outcome));
    assert_eq!(outcome.withheld.get("restriction"), Some(&1));
}

#[tokio::test]
async fn a_bad_request_is_a_typed_error_and_writes_no_audit_row() {
    let db = test_db().await;
    let w = workspace(&db.store).await;
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default());
    let mut request = SearchRequest::new(w.world.agent, w.engineering, None, "a\0b", RetrievalMode::Recall);
    assert!(matches!(retriever.search(&request).await, Err(RetrievalError::InvalidRequest { field: "query", .. })));
    request.query = "ok".into();
    request.max_count = 10_000;
    assert!(matches!(retriever.search(&request).await, Err(RetrievalError::InvalidRequest { .. })));
    let other_agent = World::new(&db.store, "other").await;
    let foreign = SearchRequest::new(other_agent.agent, w.engineering, None, "x", RetrievalMode::Recall);
    assert!(retriever.search(&foreign).await.is_err(), "a conversation of another agent is refused");
    let count: i64 =
        sqlx::query_scalar("SELECT count(*) FROM memory_retrieval_events").fetch_one(&db.pool).await.unwrap();
    assert_eq!(count, 0);
}

/// The full-text side tells three cases apart: a query with no searchable term (only stop
/// words) is ranked without relevance and reports `query_without_terms`; a query whose terms match
/// nothing eligible still requires relevance, so it selects nothing (not the recent memories of the
/// conversation) and reports no such category, even when its only match is withheld; a query
/// that matches is ranked by it.
#[tokio::test]
async fn a_query_with_terms_but_no_eligible_match_still_requires_relevance() {
    let db = test_db().await;
    let mut w = workspace(&db.store).await;
    let eng = w.engineering;
    let (build, _) = w.world.remember(eng, &w.victor, None, "The build takes twelve minutes.").await;
    w.world.remember(w.dm_priya, &w.priya, None, "The offsite budget is confidential.").await;
    let no_terms = DegradationCategory::QueryWithoutTerms;

    let stop_words = ask(&w.world, eng, Some(w.dana.actor), "what is it about?").await;
    assert!(stop_words.degradation_categories.contains(&no_terms), "{:?}", stop_words.degradation_categories);
    assert_eq!(entries(&stop_words), vec![build], "without terms, recent memories of the conversation");

    for (query, withheld) in [("zeppelin schedules", None), ("offsite budget", Some(&1))] {
        let unmatched = ask(&w.world, eng, Some(w.dana.actor), query).await;
        assert!(
            !unmatched.degradation_categories.contains(&no_terms),
            "{query}: {:?}",
            unmatched.degradation_categories
        );
        assert!(entries(&unmatched).is_empty(), "{query}: relevance is required, nothing matches");
        assert_eq!(unmatched.withheld.get("audience_not_covered"), withheld, "{query}");
    }

    let matched = ask(&w.world, eng, Some(w.dana.actor), "how long does the build take?").await;
    assert_eq!(entries(&matched), vec![build]);
    assert!(matched.selections[0].components.lexical.is_some());
}
