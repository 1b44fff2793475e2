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
        WriteOutcome::Committed(c) => c.revision_id(),
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
    let restricted = db.store.create_entry(restricted).await.unwrap().entry_id();

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
// Property: both forms of the policy (the set form through either access path, the per-revision
// verdict with its failing source) and the withheld diagnostics equal an independent model of the
// policy over generated workspaces, and no search returns a revision the model rejects.
//
// `MESH_POLICY_CASES` sets how many workspaces are generated (default 100; run
// `MESH_POLICY_CASES=1000 cargo test --test eligibility property` for the long run).
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
    /// An operator erases the entry (every revision) at the end.
    erase: bool,
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
    /// People who join a conversation tomorrow (a membership dated in the future).
    future_joins: Vec<(usize, usize)>,
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
        prop::option::weighted(0.2, 0..CONVERSATIONS),
        (prop::bool::weighted(0.15), prop::bool::weighted(0.2), prop::bool::weighted(0.1)),
        prop::option::weighted(0.3, (0..CONVERSATIONS, 0..WORDS.len())),
        prop::option::weighted(0.35, grant_spec()),
    )
        .prop_map(
            |(conversation, speaker, subject, word, restricted_to, (forget, always_on, erase), amend_in, grant)| {
                MemorySpec {
                    conversation,
                    speaker,
                    subject,
                    word,
                    restricted_to,
                    forget,
                    erase,
                    always_on,
                    amend_in,
                    grant,
                }
            },
        )
}

fn workspace_spec() -> impl Strategy<Value = WorkspaceSpec> {
    (
        prop::collection::vec(0..4usize, CONVERSATIONS),
        prop::collection::vec(prop::collection::vec(any::<bool>(), PEOPLE), CONVERSATIONS),
        prop::collection::vec(memory_spec(), 1..8),
        prop::collection::vec((0..CONVERSATIONS, 0..PEOPLE), 0..3),
        prop::collection::vec((0..CONVERSATIONS, 0..PEOPLE), 0..2),
        0..PEOPLE,
    )
        .prop_map(|(topologies, members, memories, toggles, future_joins, actor)| WorkspaceSpec {
            topologies,
            members,
            memories,
            toggles,
            future_joins,
            actor,
        })
}

fn topology(index: usize) -> Topology {
    [Topology::Direct, Topology::Group, Topology::Channel, Topology::Unknown][index]
}

/// A lineage source as the model sees it: ordered by `(created_at, id)`, like the verdict.
struct SourceFact {
    id: Uuid,
    created_at: chrono::DateTime<chrono::Utc>,
    known: bool,
    audience: HashSet<Uuid>,
}

/// One entry as the model sees it.
struct EntryFact {
    live: bool,
    current: Uuid,
    restricted_to: Option<Option<Uuid>>,
}

/// One `revision_sources` row as read.
#[derive(sqlx::FromRow)]
struct SourceRow {
    id: Uuid,
    revision_id: Uuid,
    created_at: chrono::DateTime<chrono::Utc>,
    evidence: String,
    audience: Vec<Uuid>,
}

/// One membership row.
#[derive(sqlx::FromRow)]
struct MembershipFact {
    conversation: Uuid,
    actor: Uuid,
    joined_at: chrono::DateTime<chrono::Utc>,
    left_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Raw rows of one agent, loaded with plain SELECTs (no eligibility SQL involved).
struct Facts {
    entries: HashMap<Uuid, EntryFact>,
    /// Revisions an operator erased.
    erased: HashSet<Uuid>,
    revision_entry: HashMap<Uuid, Uuid>,
    bodies: HashMap<Uuid, String>,
    sources: HashMap<Uuid, Vec<SourceFact>>,
    /// Per revision: the audience of each unrevoked grant.
    live_grants: HashMap<Uuid, Vec<HashSet<Uuid>>>,
    memberships: Vec<MembershipFact>,
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
    let revisions: Vec<(Uuid, Uuid, String)> =
        sqlx::query_as("SELECT id, entry_id, body FROM memory_entry_revisions WHERE runtime_agent_id = $1")
            .bind(agent)
            .fetch_all(pool)
            .await
            .unwrap();
    let sources: Vec<SourceRow> = sqlx::query_as(
        "SELECT id, revision_id, created_at, evidence::text AS evidence, coalesce(audience, '{}') AS audience
           FROM revision_sources WHERE runtime_agent_id = $1 ORDER BY created_at, id",
    )
    .bind(agent)
    .fetch_all(pool)
    .await
    .unwrap();
    let grants: Vec<(Uuid, Uuid)> =
        sqlx::query_as("SELECT id, revision_id FROM sharing_grants WHERE runtime_agent_id = $1 AND revoked_at IS NULL")
            .bind(agent)
            .fetch_all(pool)
            .await
            .unwrap();
    let grant_audience: Vec<(Uuid, Uuid)> =
        sqlx::query_as("SELECT grant_id, actor_id FROM sharing_grant_audience").fetch_all(pool).await.unwrap();
    let memberships: Vec<MembershipFact> = sqlx::query_as(
        "SELECT m.conversation_id AS conversation, m.actor_id AS actor, m.joined_at, m.left_at
           FROM conversation_memberships m JOIN conversations c ON c.id = m.conversation_id
          WHERE c.runtime_agent_id = $1",
    )
    .bind(agent)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut grant_members: HashMap<Uuid, HashSet<Uuid>> = HashMap::new();
    for (grant, actor) in grant_audience {
        grant_members.entry(grant).or_default().insert(actor);
    }
    let erased: Vec<Uuid> = sqlx::query_scalar(
        "SELECT x.revision_id FROM erased_revisions x JOIN memory_entry_revisions r ON r.id = x.revision_id
          WHERE r.runtime_agent_id = $1",
    )
    .bind(agent)
    .fetch_all(pool)
    .await
    .unwrap();
    let mut facts = Facts {
        erased: erased.into_iter().collect(),
        entries: entries
            .into_iter()
            .map(|(id, state, current, restriction, to)| {
                let restricted_to = (restriction == "conversation_only").then_some(to);
                (id, EntryFact { live: state == "live", current, restricted_to })
            })
            .collect(),
        revision_entry: revisions.iter().map(|(id, entry, _)| (*id, *entry)).collect(),
        bodies: revisions.into_iter().map(|(id, _, body)| (id, body)).collect(),
        sources: HashMap::new(),
        live_grants: HashMap::new(),
        memberships,
    };
    for row in sources {
        let source = SourceFact {
            id: row.id,
            created_at: row.created_at,
            known: row.evidence == "known",
            audience: row.audience.into_iter().collect(),
        };
        facts.sources.entry(row.revision_id).or_default().push(source);
    }
    for sources in facts.sources.values_mut() {
        sources.sort_by_key(|s| (s.created_at, s.id));
    }
    for (grant, revision) in grants {
        facts.live_grants.entry(revision).or_default().push(grant_members.remove(&grant).unwrap_or_default());
    }
    facts
}

/// The policy of docs/policy.md, written independently of the SQL: the first failing rule (and
/// the source it names), or "eligible".
fn model_rule(
    facts: &Facts,
    revision: Uuid,
    conversation: Uuid,
    audience: &HashSet<Uuid>,
) -> (&'static str, Option<Uuid>) {
    if audience.is_empty() {
        return ("audience_unknown", None);
    }
    let Some(entry) = facts.revision_entry.get(&revision).map(|e| &facts.entries[e]) else {
        return ("foreign_agent", None);
    };
    if facts.erased.contains(&revision) {
        return ("erased", None);
    }
    if !entry.live {
        return ("forgotten", None);
    }
    if entry.current != revision {
        return ("not_current", None);
    }
    if entry.restricted_to.is_some_and(|to| to != Some(conversation)) {
        return ("restriction", None);
    }
    if facts.live_grants.get(&revision).into_iter().flatten().any(|members| audience.is_subset(members)) {
        return ("eligible", None);
    }
    let sources = facts.sources.get(&revision).map(Vec::as_slice).unwrap_or_default();
    if sources.is_empty() {
        return ("no_lineage", None);
    }
    if let Some(unknown) = sources.iter().find(|s| !s.known) {
        return ("unknown_evidence", Some(unknown.id));
    }
    if let Some(uncovered) = sources.iter().find(|s| !audience.is_subset(&s.audience)) {
        return ("audience_not_covered", Some(uncovered.id));
    }
    ("eligible", None)
}

fn model_eligible(facts: &Facts, revision: Uuid, conversation: Uuid, audience: &HashSet<Uuid>) -> bool {
    model_rule(facts, revision, conversation, audience).0 == "eligible"
}

/// Who reads `conversation` now, from raw membership rows: every member whose membership has not
/// ended (one dated in the future counts: the audience is never narrower than who may read it),
/// except the agent. Empty (closed) when the speaker is not a member now.
fn model_audience(
    facts: &Facts,
    agent_actor: ActorId,
    conversation: ConversationId,
    speaker: Option<ActorId>,
) -> HashSet<Uuid> {
    let now = chrono::Utc::now();
    let open = |m: &&MembershipFact| m.conversation == conversation.0 && m.left_at.is_none_or(|left| left > now);
    let readers: HashSet<Uuid> =
        facts.memberships.iter().filter(open).map(|m| m.actor).filter(|a| *a != agent_actor.0).collect();
    let speaker_is_member = speaker.is_none_or(|speaker| {
        facts
            .memberships
            .iter()
            .filter(open)
            .any(|m| m.actor == speaker.0 && m.joined_at <= now && m.actor != agent_actor.0)
    });
    if speaker_is_member {
        readers
    } else {
        HashSet::new()
    }
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
        let mut current = written.revision_id();
        if let Some((c, word)) = m.amend_in {
            let correction = world.say(conversations[c], &people[m.speaker], &format!("fix {i}")).await;
            let outcome = store
                .amend_entry(Amendment {
                    agent: world.agent,
                    entry: written.entry_id(),
                    expected_revision: current,
                    body: Some(format!("Memory {i} now mentions {} instead.", WORDS[word])),
                    subject: SubjectUpdate::Keep,
                    source_actor: Some(people[m.speaker].actor),
                    sources: vec![SourceRef::Message(correction)],
                })
                .await
                .unwrap();
            if let WriteOutcome::Committed(c) = outcome {
                current = c.revision_id();
            }
        }
        if let Some(g) = &m.grant {
            // A grant on revision 1 of an amended entry releases nothing: grants are per revision.
            let target = if g.on_current { current } else { written.revision_id() };
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
            store.forget_entry(world.agent, written.entry_id()).await.unwrap();
        }
        if m.erase {
            common::erase_as_owner(pool, "entry", written.entry_id().0).await;
        }
    }
    world.clock += Duration::minutes(5);
    for (c, p) in &spec.toggles {
        let (conversation, actor) = (conversations[*c], people[*p].actor);
        if !store.leave_conversation(conversation, actor, world.clock).await.unwrap() {
            store.join_conversation(conversation, actor, world.clock).await.unwrap();
        }
    }
    let tomorrow = chrono::Utc::now() + Duration::days(1);
    for (c, p) in &spec.future_joins {
        // Only someone with no open membership can have one dated tomorrow.
        let _ = store.join_conversation(conversations[*c], people[*p].actor, tomorrow).await;
    }
    (world, people, conversations)
}

/// The readings of the set form (SQL type `memory_set_reading`) that return the whole eligible
/// set: they differ in how they read "known and covering", never in what it means.
const WHOLE_SET_READINGS: [&str; 2] = ["audience_array", "class_scan"];

/// Revision ids that the set form admits when read as `reading`.
async fn set_form(
    pool: &sqlx::PgPool,
    agent: AgentId,
    conversation: ConversationId,
    audience: &[Uuid],
    reading: &str,
) -> HashSet<Uuid> {
    let sql = "SELECT p.revision_id FROM memory_eligible_revisions($1, $2, $3, $4::memory_set_reading) AS p";
    let ids: Vec<Uuid> = sqlx::query_scalar(sql)
        .bind(agent)
        .bind(conversation)
        .bind(audience)
        .bind(reading)
        .fetch_all(pool)
        .await
        .unwrap();
    ids.into_iter().collect()
}

/// What a structural source asks the set form for: the newest eligible rows about a subject, from
/// an origin conversation, or flagged always-on.
#[derive(Clone, Copy, Debug)]
enum NewestFilter {
    About(Uuid),
    From(Uuid),
    AlwaysOn,
}

/// The newest `newest` eligible revisions passing `filter`, newest first, read both ways: from the
/// set form's newest reading (as the structural sources read them) and from the whole set
/// (`class_scan`) filtered, ordered and cut by the caller. Returns `(newest reading, whole set)`.
async fn newest_both_ways(
    pool: &sqlx::PgPool,
    agent: AgentId,
    conversation: ConversationId,
    audience: &[Uuid],
    filter: NewestFilter,
    newest: i64,
) -> (Vec<Uuid>, Vec<Uuid>) {
    let (reading, key) = match filter {
        NewestFilter::About(subject) => ("newest_about", Some(subject)),
        NewestFilter::From(origin) => ("newest_from", Some(origin)),
        NewestFilter::AlwaysOn => ("newest_always_on", None),
    };
    let read_newest = "SELECT p.revision_id
                         FROM memory_eligible_revisions($1, $2, $3, $4::memory_set_reading, $5, $6) AS p
                        ORDER BY p.created_at DESC, p.revision_id LIMIT $6";
    let read_whole = "SELECT p.revision_id FROM memory_eligible_revisions($1, $2, $3, 'class_scan') AS p
                       WHERE CASE $4::memory_set_reading WHEN 'newest_about' THEN p.subject_actor_id = $5
                                                         WHEN 'newest_from' THEN p.origin_conversation_id = $5
                                                         ELSE p.always_on END
                       ORDER BY p.created_at DESC, p.revision_id LIMIT $6";
    let mut read = Vec::new();
    for sql in [read_newest, read_whole] {
        let ids: Vec<Uuid> = sqlx::query_scalar(sql)
            .bind(agent)
            .bind(conversation)
            .bind(audience)
            .bind(reading)
            .bind(key)
            .bind(newest)
            .fetch_all(pool)
            .await
            .unwrap();
        read.push(ids);
    }
    let whole = read.pop().unwrap();
    (read.pop().unwrap(), whole)
}

/// The withheld diagnostics for one word, with a limit no workspace reaches (so they are exact).
async fn withheld_for(
    pool: &sqlx::PgPool,
    agent: AgentId,
    conversation: ConversationId,
    audience: &[Uuid],
    word: &str,
) -> HashMap<String, i64> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT w.rule, w.matches
           FROM memory_withheld_rules($1, $2, $3, plainto_tsquery('english', $4), memory_lexical_terms($4), 1000) AS w",
    )
    .bind(agent)
    .bind(conversation)
    .bind(audience)
    .bind(word)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().collect()
}

fn policy_cases() -> u32 {
    std::env::var("MESH_POLICY_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(100)
}

#[test]
fn property_both_policy_forms_and_the_withheld_diagnostics_equal_an_independent_model() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let db = runtime.block_on(test_db());
    let case = std::cell::Cell::new(0u32);
    // A revision of the previous workspace's agent: foreign to every later one.
    let foreign = std::cell::Cell::new(None::<Uuid>);
    let config = ProptestConfig { cases: policy_cases(), failure_persistence: None, ..ProptestConfig::default() };
    eprintln!("policy property: {} generated workspaces", config.cases);
    proptest!(config, |(spec in workspace_spec())| {
        case.set(case.get() + 1);
        runtime.block_on(async {
            let (world, people, conversations) = build(&db.store, &db.pool, &spec, case.get()).await;
            common::assert_projection_matches_canonical(&db.pool).await;
            let facts = load_facts(&db.pool, world.agent).await;
            let mut revisions: Vec<Uuid> = facts.revision_entry.keys().copied().collect();
            revisions.extend(foreign.get());
            let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default());
            let speaker = people[spec.actor].actor;
            for conversation in &conversations {
                // Explain and the delivery recheck judge the audience as it is, with no speaker.
                let audience = model_audience(&facts, world.agent_actor, *conversation, None);
                let context = EligibilityContext::resolve(&db.store, world.agent, *conversation).await.unwrap();
                let resolved: HashSet<Uuid> = context.audience_uuids().into_iter().collect();
                assert_eq!(resolved, audience, "destination audience of {conversation} (spec {spec:?})");
                let ids: Vec<RevisionId> = revisions.iter().map(|r| RevisionId(*r)).collect();
                for verdict in revision_verdicts(&db.pool, &context, &ids).await.unwrap() {
                    let (rule, source) = model_rule(&facts, verdict.revision_id.0, conversation.0, &audience);
                    let named = match verdict.rule {
                        Rule::UnknownEvidence { source_id } | Rule::AudienceNotCovered { source_id } => Some(source_id.0),
                        _ => None,
                    };
                    assert_eq!((verdict.rule.name(), named), (rule, source),
                        "the verdict on {} disagrees with the model in {conversation} (spec {spec:?})", verdict.revision_id);
                }
                // The set form admits exactly the revisions the model finds eligible, through
                // either access path: no more (privacy), no fewer (recall).
                let expected: HashSet<Uuid> =
                    revisions.iter().copied().filter(|r| model_eligible(&facts, *r, conversation.0, &audience)).collect();
                let audience_ids: Vec<Uuid> = audience.iter().copied().collect();
                for reading in WHOLE_SET_READINGS {
                    let admitted = set_form(&db.pool, world.agent, *conversation, &audience_ids, reading).await;
                    assert_eq!(admitted, expected,
                        "the set form (reading {reading}) disagrees with the model in {conversation} (spec {spec:?})");
                }
                // The newest eligible rows about each person, from each conversation and
                // always-on, read as the structural sources read them (newest first, each row
                // checked, stopping at the bound), are the whole set's, filtered and cut.
                let mut filters = vec![NewestFilter::AlwaysOn];
                filters.extend(people.iter().map(|p| NewestFilter::About(p.actor.0)));
                filters.extend(conversations.iter().map(|c| NewestFilter::From(c.0)));
                for filter in filters {
                    for newest in [1, 2, 100] {
                        let (read_newest, whole) =
                            newest_both_ways(&db.pool, world.agent, *conversation, &audience_ids, filter, newest).await;
                        assert_eq!(read_newest, whole,
                            "the newest {newest} of {filter:?} in {conversation} differ from the whole set's (spec {spec:?})");
                    }
                }
                // The withheld diagnostics: every matching live current revision the model rejects,
                // by rule.
                for word in WORDS {
                    let mut expected: HashMap<String, i64> = HashMap::new();
                    for entry in facts.entries.values().filter(|e| e.live) {
                        let (rule, _) = model_rule(&facts, entry.current, conversation.0, &audience);
                        if rule != "eligible" && facts.bodies[&entry.current].contains(word) {
                            *expected.entry(rule.to_owned()).or_default() += 1;
                        }
                    }
                    let withheld = withheld_for(&db.pool, world.agent, *conversation, &audience_ids, word).await;
                    assert_eq!(withheld, expected, "withheld diagnostics for {word:?} in {conversation} (spec {spec:?})");
                }
                // Searches by a speaker: the snapshot is the model's audience for that speaker, and
                // nothing returned is rejected by the model.
                let asked = model_audience(&facts, world.agent_actor, *conversation, Some(speaker));
                for query in ["", WORDS[0], WORDS[2], "memory mentions"] {
                    let request = SearchRequest::new(world.agent, *conversation, Some(speaker), query, RetrievalMode::Recall);
                    let outcome = retriever.search(&request).await.unwrap();
                    let snapshot: HashSet<Uuid> = outcome.context.audience().iter().map(|a| a.0).collect();
                    assert_eq!(snapshot, asked, "audience snapshot");
                    for s in &outcome.selections {
                        assert!(
                            model_eligible(&facts, s.revision_id.0, conversation.0, &asked),
                            "returned revision {} violates the policy in {conversation} (spec {spec:?})",
                            s.revision_id
                        );
                    }
                }
            }
            foreign.set(revisions.iter().copied().find(|r| facts.revision_entry.contains_key(r)));
        });
    });
}
