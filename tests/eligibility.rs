//! The eligibility predicate against a real PostgreSQL: every rule of the explain API, revision-
//! scoped grants, the delivery recheck, and a property test that recomputes the predicate in Rust
//! from raw rows and compares it with every search result and every explain verdict.

mod common;

use std::collections::{HashMap, HashSet};

use chrono::Duration;
use common::{test_db, Person, World};
use mesh_memory::privacy::{explain_entry, recheck_delivery, revision_verdicts, EligibilityContext, Rule};
use mesh_memory::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchRequest};
use mesh_memory::store::{Amendment, Restriction, SourceRef, Store, SubjectUpdate, Topology, WriteOutcome};
use mesh_memory::{ActorId, AgentId, ConversationId, EntryId, RevisionId};
use proptest::prelude::*;
use uuid::Uuid;

async fn amend(store: &Store, agent: AgentId, entry: EntryId, from: RevisionId, body: &str) -> RevisionId {
    match store
        .amend_entry(Amendment {
            agent,
            entry,
            expected_revision: from,
            body: Some(body.into()),
            subject: SubjectUpdate::Keep,
            source_actor: None,
            sources: vec![],
        })
        .await
        .unwrap()
    {
        WriteOutcome::Committed(c) => c.revision_id,
        other => panic!("amend did not commit: {other:?}"),
    }
}

async fn selected(store: &Store, agent: AgentId, conversation: ConversationId, query: &str) -> Vec<RevisionId> {
    Retriever::new(store.clone(), RetrievalConfig::default())
        .search(&SearchRequest::new(agent, conversation, None, query, RetrievalMode::Recall))
        .await
        .unwrap()
        .used_revisions()
}

struct Scene {
    world: World,
    victor: Person,
    priya: Person,
    dana: Person,
    eng: ConversationId,
    dm_priya: ConversationId,
}

async fn scene(store: &Store) -> Scene {
    let world = World::new(store, "assistant").await;
    let victor = world.person("Victor", "U123").await;
    let priya = world.person("Priya", "U456").await;
    let dana = world.person("Dana", "U321").await;
    let eng = world.conversation("C-ENG", Topology::Channel, &[&victor, &priya, &dana]).await;
    let dm_priya = world.conversation("D-PRIYA", Topology::Direct, &[&priya]).await;
    Scene { world, victor, priya, dana, eng, dm_priya }
}

#[tokio::test]
async fn explain_names_the_first_failing_rule_or_eligible() {
    let db = test_db().await;
    let mut s = scene(&db.store).await;
    let agent = s.world.agent;
    let (shared, _) = s.world.remember(s.eng, &s.victor, None, "Prefers tabs.").await;
    let (private, _) = s.world.remember(s.dm_priya, &s.priya, None, "Interviewing elsewhere.").await;
    let (forgotten, _) = s.world.remember(s.eng, &s.victor, None, "Freeze on Fridays.").await;
    db.store.forget_entry(agent, forgotten).await.unwrap();
    let legacy = s.world.conversation("C-OLD", Topology::Unknown, &[&s.victor, &s.priya, &s.dana]).await;
    let (unknown, _) = s.world.remember(legacy, &s.victor, None, "Legacy fact.").await;
    let message = s.world.say(s.eng, &s.victor, "Bridge code 4242.").await;
    let mut restricted = s.world.memory("Bridge code 4242.", None, s.victor.actor, s.eng, message);
    restricted.restriction = Restriction::ConversationOnly(s.dm_priya);
    let restricted = db.store.create_entry(restricted).await.unwrap().entry_id;

    let explain = |entry| explain_entry(&db.store, None, entry, s.eng);
    assert_eq!(explain(shared).await.unwrap().rule, Rule::Eligible);
    assert!(explain(shared).await.unwrap().eligible);
    assert_eq!(explain(forgotten).await.unwrap().rule, Rule::Forgotten);
    assert_eq!(explain(restricted).await.unwrap().rule, Rule::Restriction);

    let e = explain(unknown).await.unwrap();
    let history = db.store.entry_history(agent, unknown).await.unwrap().unwrap();
    assert_eq!(e.rule, Rule::UnknownEvidence { source_id: history.revisions[0].sources[0].id });
    assert!(e.failing_source.unwrap().missing_actors.is_empty());

    let e = explain(private).await.unwrap();
    let history = db.store.entry_history(agent, private).await.unwrap().unwrap();
    assert_eq!(e.rule, Rule::AudienceNotCovered { source_id: history.revisions[0].sources[0].id });
    let failing = e.failing_source.expect("the failing source is named");
    assert_eq!(failing.kind, mesh_memory::store::SourceKind::Message);
    let mut missing = vec![s.victor.actor, s.dana.actor];
    missing.sort();
    assert_eq!(failing.missing_actors, missing, "Priya could read the DM; Victor and Dana could not");
    assert!(e.explanation.contains(&failing.source_id.to_string()));
    assert_eq!(explain_entry(&db.store, None, private, s.dm_priya).await.unwrap().rule, Rule::Eligible);

    let other = World::new(&db.store, "other-agent").await;
    let someone = other.person("Zed", "U999").await;
    let other_conversation = other.conversation("C-OTHER", Topology::Channel, &[&someone]).await;
    let e = explain_entry(&db.store, Some(other.agent), shared, other_conversation).await.unwrap();
    assert_eq!(e.rule, Rule::ForeignAgent);
    assert!(explain_entry(&db.store, None, EntryId::generate(), s.eng).await.is_err(), "unknown entry is an error");
}

#[tokio::test]
async fn a_grant_on_revision_1_does_not_cover_revision_2_after_an_amend() {
    let db = test_db().await;
    let mut s = scene(&db.store).await;
    let agent = s.world.agent;
    let (entry, rev1) = s.world.remember(s.dm_priya, &s.priya, None, "Priya will present the roadmap.").await;
    assert!(selected(&db.store, agent, s.eng, "roadmap").await.is_empty(), "private before the grant");

    let audience = db.store.current_audience(agent, s.eng).await.unwrap();
    let grant_id = common::grant(&db.pool, agent, rev1, &audience, false).await;
    assert_eq!(selected(&db.store, agent, s.eng, "roadmap").await, vec![rev1], "the grant releases revision 1");

    let rev2 = amend(&db.store, agent, entry, rev1, "Priya will present the roadmap on Tuesday.").await;
    assert!(selected(&db.store, agent, s.eng, "roadmap").await.is_empty(), "no grant covers revision 2");
    let e = explain_entry(&db.store, None, entry, s.eng).await.unwrap();
    assert_eq!(e.revision_id, rev2);
    assert!(matches!(e.rule, Rule::AudienceNotCovered { .. }));
    let ctx = EligibilityContext::resolve(&db.store, agent, s.eng).await.unwrap();
    let verdicts = revision_verdicts(db.store.pool(), &ctx, &[rev1, rev2]).await.unwrap();
    assert_eq!(verdicts[0].rule, Rule::NotCurrent, "revision 1 is history even with its grant");

    // A grant on revision 2 releases it, but only while it is live and covers the whole audience.
    let partial = common::grant(&db.pool, agent, rev2, &audience[..1], false).await;
    assert!(selected(&db.store, agent, s.eng, "roadmap").await.is_empty(), "a partial grant covers nobody");
    let _ = (partial, grant_id);
    let full = common::grant(&db.pool, agent, rev2, &audience, false).await;
    assert_eq!(selected(&db.store, agent, s.eng, "roadmap").await, vec![rev2]);
    sqlx::query("UPDATE sharing_grants SET revoked_at = now(), revoked_by = 'test' WHERE id = $1")
        .bind(full)
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(selected(&db.store, agent, s.eng, "roadmap").await.is_empty(), "a revoked grant releases nothing");
}

#[tokio::test]
async fn the_delivery_recheck_names_what_changed() {
    let db = test_db().await;
    let mut s = scene(&db.store).await;
    let agent = s.world.agent;
    let (tabs, _) = s.world.remember(s.eng, &s.victor, None, "Prefers tabs.").await;
    let (food, _) = s.world.remember(s.eng, &s.dana, None, "Loves tabs of ramen.").await;
    let outcome = Retriever::new(db.store.clone(), RetrievalConfig::default())
        .search(&SearchRequest::new(agent, s.eng, None, "tabs", RetrievalMode::Prompt))
        .await
        .unwrap();
    let used = outcome.used_revisions();
    assert_eq!(used.len(), 2);
    let snapshot = outcome.context.audience().to_vec();

    let clear = recheck_delivery(&db.store, agent, s.eng, &snapshot, &used).await.unwrap();
    assert!(clear.is_clear(), "{clear:?}");

    db.store.forget_entry(agent, food).await.unwrap();
    let history = db.store.entry_history(agent, tabs).await.unwrap().unwrap();
    let tabs_rev2 = amend(&db.store, agent, tabs, history.current_revision_id, "Prefers tabs, width 4.").await;
    let changed = recheck_delivery(&db.store, agent, s.eng, &snapshot, &used).await.unwrap();
    assert!(!changed.is_clear());
    assert!(changed.audience_change.is_none());
    let rules: HashMap<RevisionId, Rule> = changed.stale_revisions.iter().map(|r| (r.revision_id, r.rule)).collect();
    assert_eq!(rules.len(), 2);
    assert!(rules.values().any(|r| *r == Rule::Forgotten));
    assert!(rules.values().any(|r| *r == Rule::NotCurrent));

    let newcomer = s.world.person("Nia", "U555").await;
    db.store.join_conversation(s.eng, newcomer.actor, chrono::Utc::now()).await.unwrap();
    let joined = recheck_delivery(&db.store, agent, s.eng, &snapshot, &[tabs_rev2]).await.unwrap();
    let change = joined.audience_change.expect("the audience changed");
    assert_eq!(change.joined, vec![newcomer.actor]);
    assert!(change.left.is_empty());
    assert_eq!(joined.stale_revisions.len(), 1, "Nia could not read the source of the tabs memory");
}

// ---------------------------------------------------------------------------------------------
// Property: no search result and no explain verdict disagrees with the predicate recomputed in
// Rust from raw rows.
// ---------------------------------------------------------------------------------------------

const PEOPLE: usize = 4;
const CONVERSATIONS: usize = 3;
const WORDS: [&str; 4] = ["tabs", "ramen", "deploy", "children"];

#[derive(Clone, Debug)]
struct GrantSpec {
    on_current: bool,
    audience: Vec<bool>,
    revoked: bool,
}

#[derive(Clone, Debug)]
struct MemorySpec {
    conversation: usize,
    speaker: usize,
    subject: Option<usize>,
    word: usize,
    restricted_to: Option<usize>,
    forget: bool,
    always_on: bool,
    amend_in: Option<(usize, usize)>,
    grant: Option<GrantSpec>,
}

#[derive(Clone, Debug)]
struct WorkspaceSpec {
    topologies: Vec<usize>,
    members: Vec<Vec<bool>>,
    memories: Vec<MemorySpec>,
    toggles: Vec<(usize, usize)>,
    actor: usize,
}

fn grant_spec() -> impl Strategy<Value = GrantSpec> {
    (any::<bool>(), prop::collection::vec(any::<bool>(), PEOPLE), prop::bool::weighted(0.2))
        .prop_map(|(on_current, audience, revoked)| GrantSpec { on_current, audience, revoked })
}

fn memory_spec() -> impl Strategy<Value = MemorySpec> {
    (
        0..CONVERSATIONS,
        0..PEOPLE,
        prop::option::of(0..PEOPLE),
        0..WORDS.len(),
        prop::option::weighted(0.15, 0..CONVERSATIONS),
        (prop::bool::weighted(0.15), prop::bool::weighted(0.2)),
        prop::option::weighted(0.3, (0..CONVERSATIONS, 0..WORDS.len())),
        prop::option::weighted(0.3, grant_spec()),
    )
        .prop_map(|(conversation, speaker, subject, word, restricted_to, (forget, always_on), amend_in, grant)| {
            MemorySpec { conversation, speaker, subject, word, restricted_to, forget, always_on, amend_in, grant }
        })
}

fn workspace_spec() -> impl Strategy<Value = WorkspaceSpec> {
    (
        prop::collection::vec(0..4usize, CONVERSATIONS),
        prop::collection::vec(prop::collection::vec(any::<bool>(), PEOPLE), CONVERSATIONS),
        prop::collection::vec(memory_spec(), 1..8),
        prop::collection::vec((0..CONVERSATIONS, 0..PEOPLE), 0..3),
        0..PEOPLE,
    )
        .prop_map(|(topologies, members, memories, toggles, actor)| WorkspaceSpec {
            topologies,
            members,
            memories,
            toggles,
            actor,
        })
}

fn topology(index: usize) -> Topology {
    [Topology::Direct, Topology::Group, Topology::Channel, Topology::Unknown][index]
}

/// Raw rows of one agent, loaded with plain SELECTs (no eligibility SQL involved).
struct Facts {
    entries: HashMap<Uuid, (String, Uuid, String, Option<Uuid>)>,
    revision_entry: HashMap<Uuid, Uuid>,
    sources: HashMap<Uuid, Vec<(Uuid, String)>>,
    source_audience: HashMap<Uuid, HashSet<Uuid>>,
    grants: HashMap<Uuid, Vec<(Uuid, bool)>>,
    grant_audience: HashMap<Uuid, HashSet<Uuid>>,
}

async fn load_facts(pool: &sqlx::PgPool, agent: AgentId) -> Facts {
    let entries: Vec<(Uuid, String, Uuid, String, Option<Uuid>)> = sqlx::query_as(
        "SELECT id, state::text, current_revision_id, restriction::text, restricted_conversation_id
           FROM memory_entries WHERE runtime_agent_id = $1",
    )
    .bind(agent)
    .fetch_all(pool)
    .await
    .unwrap();
    let revisions: Vec<(Uuid, Uuid)> =
        sqlx::query_as("SELECT id, entry_id FROM memory_entry_revisions WHERE runtime_agent_id = $1")
            .bind(agent)
            .fetch_all(pool)
            .await
            .unwrap();
    let sources: Vec<(Uuid, Uuid, String)> =
        sqlx::query_as("SELECT id, revision_id, evidence::text FROM revision_sources WHERE runtime_agent_id = $1")
            .bind(agent)
            .fetch_all(pool)
            .await
            .unwrap();
    let source_audience: Vec<(Uuid, Uuid)> = sqlx::query_as(
        "SELECT s.id, a.actor_id FROM revision_sources s CROSS JOIN LATERAL unnest(s.audience) AS a(actor_id)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let grants: Vec<(Uuid, Uuid, bool)> =
        sqlx::query_as("SELECT id, revision_id, revoked_at IS NULL FROM sharing_grants WHERE runtime_agent_id = $1")
            .bind(agent)
            .fetch_all(pool)
            .await
            .unwrap();
    let grant_audience: Vec<(Uuid, Uuid)> =
        sqlx::query_as("SELECT grant_id, actor_id FROM sharing_grant_audience").fetch_all(pool).await.unwrap();
    let mut facts = Facts {
        entries: entries.into_iter().map(|(id, st, cur, r, rc)| (id, (st, cur, r, rc))).collect(),
        revision_entry: revisions.into_iter().collect(),
        sources: HashMap::new(),
        source_audience: HashMap::new(),
        grants: HashMap::new(),
        grant_audience: HashMap::new(),
    };
    for (id, revision, evidence) in sources {
        facts.sources.entry(revision).or_default().push((id, evidence));
    }
    for (source, actor) in source_audience {
        facts.source_audience.entry(source).or_default().insert(actor);
    }
    for (id, revision, live) in grants {
        facts.grants.entry(revision).or_default().push((id, live));
    }
    for (grant, actor) in grant_audience {
        facts.grant_audience.entry(grant).or_default().insert(actor);
    }
    facts
}

/// The predicate of DESIGN.md, written independently of the SQL function.
fn rust_eligible(facts: &Facts, revision: Uuid, conversation: Uuid, audience: &HashSet<Uuid>) -> bool {
    if audience.is_empty() {
        return false; // an empty destination audience fails closed
    }
    let Some(entry) = facts.revision_entry.get(&revision) else { return false };
    let (state, current, restriction, restricted_to) = &facts.entries[entry];
    if state != "live" || *current != revision {
        return false;
    }
    if restriction == "conversation_only" && *restricted_to != Some(conversation) {
        return false;
    }
    let empty = HashSet::new();
    let granted = facts
        .grants
        .get(&revision)
        .into_iter()
        .flatten()
        .any(|(grant, live)| *live && audience.is_subset(facts.grant_audience.get(grant).unwrap_or(&empty)));
    if granted {
        return true;
    }
    let sources = facts.sources.get(&revision).cloned().unwrap_or_default();
    !sources.is_empty()
        && sources.iter().all(|(source, evidence)| {
            evidence == "known" && audience.is_subset(facts.source_audience.get(source).unwrap_or(&empty))
        })
}

async fn independent_audience(
    pool: &sqlx::PgPool,
    agent_actor: ActorId,
    conversation: ConversationId,
) -> HashSet<Uuid> {
    let rows: Vec<Uuid> = sqlx::query_scalar(
        "SELECT actor_id FROM conversation_memberships
          WHERE conversation_id = $1 AND (left_at IS NULL OR left_at > now())",
    )
    .bind(conversation)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().filter(|a| *a != agent_actor.0).collect()
}

async fn build(
    store: &Store,
    pool: &sqlx::PgPool,
    spec: &WorkspaceSpec,
    case: u32,
) -> (World, Vec<Person>, Vec<ConversationId>) {
    let mut world = World::new(store, &format!("agent-{case}")).await;
    let mut people = Vec::new();
    for p in 0..PEOPLE {
        people.push(world.person(&format!("P{p}"), &format!("U{case}-{p}")).await);
    }
    let mut conversations = Vec::new();
    for c in 0..CONVERSATIONS {
        let members: Vec<&Person> =
            people.iter().enumerate().filter(|(p, _)| spec.members[c][*p]).map(|x| x.1).collect();
        conversations.push(world.conversation(&format!("C{c}"), topology(spec.topologies[c]), &members).await);
    }
    for (i, m) in spec.memories.iter().enumerate() {
        let conversation = conversations[m.conversation];
        let message = world.say(conversation, &people[m.speaker], &format!("note {i}")).await;
        let mut new = world.memory(
            &format!("Memory {i} mentions {}.", WORDS[m.word]),
            m.subject.map(|s| people[s].actor),
            people[m.speaker].actor,
            conversation,
            message,
        );
        new.always_on = m.always_on;
        if let Some(r) = m.restricted_to {
            new.restriction = Restriction::ConversationOnly(conversations[r]);
        }
        let written = store.create_entry(new).await.unwrap();
        let mut current = written.revision_id;
        if let Some((c, word)) = m.amend_in {
            let correction = world.say(conversations[c], &people[m.speaker], &format!("fix {i}")).await;
            let outcome = store
                .amend_entry(Amendment {
                    agent: world.agent,
                    entry: written.entry_id,
                    expected_revision: current,
                    body: Some(format!("Memory {i} now mentions {} instead.", WORDS[word])),
                    subject: SubjectUpdate::Keep,
                    source_actor: Some(people[m.speaker].actor),
                    sources: vec![SourceRef::Message(correction)],
                })
                .await
                .unwrap();
            if let WriteOutcome::Committed(c) = outcome {
                current = c.revision_id;
            }
        }
        if let Some(g) = &m.grant {
            let target = if g.on_current { current } else { written.revision_id };
            let audience: Vec<ActorId> =
                people.iter().zip(&g.audience).filter(|(_, on)| **on).map(|(p, _)| p.actor).collect();
            let id = common::grant(pool, world.agent, target, &audience, false).await;
            if g.revoked {
                sqlx::query("UPDATE sharing_grants SET revoked_at = now(), revoked_by = 'test' WHERE id = $1")
                    .bind(id)
                    .execute(pool)
                    .await
                    .unwrap();
            }
        }
        if m.forget {
            store.forget_entry(world.agent, written.entry_id).await.unwrap();
        }
    }
    world.clock += Duration::minutes(5);
    for (c, p) in &spec.toggles {
        let (conversation, actor) = (conversations[*c], people[*p].actor);
        if !store.leave_conversation(conversation, actor, world.clock).await.unwrap() {
            store.join_conversation(conversation, actor, world.clock).await.unwrap();
        }
    }
    (world, people, conversations)
}

#[test]
fn property_no_returned_revision_violates_the_predicate_recomputed_in_rust() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let db = runtime.block_on(test_db());
    let case = std::cell::Cell::new(0u32);
    let config = ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() };
    proptest!(config, |(spec in workspace_spec())| {
        case.set(case.get() + 1);
        runtime.block_on(async {
            let (world, people, conversations) = build(&db.store, &db.pool, &spec, case.get()).await;
            common::assert_projection_matches_canonical(&db.pool).await;
            let facts = load_facts(&db.pool, world.agent).await;
            let entries: Vec<EntryId> = facts.entries.keys().map(|e| EntryId(*e)).collect();
            let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default());
            for conversation in &conversations {
                let audience = independent_audience(&db.pool, world.agent_actor, *conversation).await;
                // A speaker outside the membership gets an empty (closed) audience.
                let speaker = people[spec.actor].actor;
                let asked = if audience.contains(&speaker.0) { audience.clone() } else { HashSet::new() };
                for query in ["", WORDS[0], WORDS[1], WORDS[2], WORDS[3], "memory mentions"] {
                    let request = SearchRequest::new(
                        world.agent, *conversation, Some(speaker), query, RetrievalMode::Recall);
                    let outcome = retriever.search(&request).await.unwrap();
                    let snapshot: HashSet<Uuid> = outcome.context.audience().iter().map(|a| a.0).collect();
                    assert_eq!(snapshot, asked, "audience snapshot");
                    for s in &outcome.selections {
                        assert!(
                            rust_eligible(&facts, s.revision_id.0, conversation.0, &asked),
                            "returned revision {} violates the predicate in {conversation} (spec {spec:?})",
                            s.revision_id
                        );
                    }
                }
                for entry in &entries {
                    let e = explain_entry(&db.store, Some(world.agent), *entry, *conversation).await.unwrap();
                    let expected = rust_eligible(&facts, e.revision_id.0, conversation.0, &audience);
                    assert_eq!(e.eligible, expected, "explain disagrees for {entry}: {:?} (spec {spec:?})", e.rule);
                    let summary_rule: String = sqlx::query_scalar("SELECT memory_eligibility_rule($1, $2, $3, $4)")
                        .bind(world.agent)
                        .bind(e.revision_id)
                        .bind(conversation)
                        .bind(e.context.audience_uuids())
                        .fetch_one(&db.pool)
                        .await
                        .unwrap();
                    assert_eq!(summary_rule, e.rule.name(), "the withheld-count rule disagrees for {entry}");
                }
                // The searchable projection admits exactly the eligible current revisions: no more
                // (privacy), no fewer (recall), after every create, amend, grant and forget above.
                let admitted_by = |sql: &'static str| {
                    let audience: Vec<Uuid> = audience.iter().copied().collect();
                    let pool = db.pool.clone();
                    async move {
                        let ids: Vec<Uuid> = sqlx::query_scalar(sql)
                            .bind(world.agent)
                            .bind(conversation)
                            .bind(audience)
                            .fetch_all(&pool)
                            .await
                            .unwrap();
                        ids.into_iter().collect::<HashSet<Uuid>>()
                    }
                };
                let admitted = admitted_by(concat!(
                    "SELECT p.revision_id FROM ", mesh_memory::eligible_searchable_rows!(), " AS p")).await;
                let expected: HashSet<Uuid> = facts
                    .entries
                    .values()
                    .map(|(_, current, _, _)| *current)
                    .filter(|r| rust_eligible(&facts, *r, conversation.0, &audience))
                    .collect();
                assert_eq!(admitted, expected, "the projection disagrees with the policy in {conversation} (spec {spec:?})");
                // The same set read through audience classes (retrieval's eligible-set statement).
                let by_class = admitted_by(concat!(
                    "SELECT p.revision_id FROM ", mesh_memory::eligible_class_rows!(), " AS p")).await;
                assert_eq!(by_class, expected, "audience classes disagree with the policy in {conversation} (spec {spec:?})");
            }
        });
    });
}
