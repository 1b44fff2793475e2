//! Adversarial privacy suite: generated workspaces with direct, group, channel, legacy and empty
//! conversations; amendments (some by another voice, from their own direct conversation),
//! forgets, conversation-only restrictions, grants (some revoked), sharing requests confirmed
//! voice by voice, late and future-dated joins, past and future-dated leaves. Then over ten
//! thousand searches from every audience, half of them spoken by someone who may not be a member,
//! many copying the exact wording of private memories, all through a hostile semantic index that
//! proposes ids it should not (forgotten, superseded, another agent's, made up). Every returned
//! memory is checked against an independent model of the policy kept in Rust while the workspace
//! was built. Tool calls probe for existence: forget, amend and request_memory_sharing of an entry
//! the speaker may not see must answer exactly as for a made-up id and change nothing. Some
//! entries, and everything one person told or is about, are erased by an operator: an erased
//! revision returned is a resurrection. The counts are printed; violations and resurrections
//! must be 0.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use chrono::{Duration, Utc};
use common::{test_db, Person, World};
use mesh_memory::bench::synthetic::SplitMix;
use mesh_memory::privacy::sharing::{self, Confirmation, NewSharingRequest};
use mesh_memory::retrieval::{
    RetrievalConfig, RetrievalMode, Retriever, SearchRequest, SemanticFuture, SemanticHit, SemanticIndex,
    SemanticRequest,
};
use mesh_memory::store::{Amendment, Restriction, SourceRef, SubjectUpdate, Topology, WriteOutcome};
use mesh_memory::turn::scripted::tool_results;
use mesh_memory::turn::{ScriptedModel, TurnEngine};
use mesh_memory::{ActorId, ConversationId, EntryId, RevisionId};
use serde_json::{json, Value};

/// The policy model: what a revision's lineage allows, computed without the database.
#[derive(Clone, Debug)]
struct ModelRevision {
    entry: EntryId,
    body: String,
    /// `None` = some source has unknown evidence.
    audience: Option<BTreeSet<ActorId>>,
    /// Live grants: each an audience.
    grants: Vec<BTreeSet<ActorId>>,
    /// A conversation-only restriction.
    restricted_to: Option<ConversationId>,
    /// The voice of the one message it was made from, and that message's audience (memories
    /// citing no earlier revision only), for the every-voice sharing rule.
    voice: Option<(ActorId, Option<BTreeSet<ActorId>>)>,
}

struct ModelConversation {
    id: ConversationId,
    topology: Topology,
    /// Who could read it when the memories were said (the audience of its messages).
    said_to: BTreeSet<ActorId>,
    /// Who reads it now or is recorded to join: the destination audience.
    readers: BTreeSet<ActorId>,
    /// Who may speak in it now (joined, not left).
    members_now: BTreeSet<ActorId>,
}

impl ModelConversation {
    /// The destination audience of a turn spoken by `speaker`: empty (nothing eligible) when the
    /// speaker is no member now.
    fn destination(&self, speaker: ActorId) -> BTreeSet<ActorId> {
        match self.members_now.contains(&speaker) {
            true => self.readers.clone(),
            false => BTreeSet::new(),
        }
    }
}

#[derive(Default)]
struct Model {
    revisions: HashMap<RevisionId, ModelRevision>,
    current: HashMap<EntryId, RevisionId>,
    forgotten: BTreeSet<EntryId>,
    /// Revisions an operator erased: never eligible again, whatever their lineage or grants.
    erased: BTreeSet<RevisionId>,
}

impl Model {
    fn allows(&self, revision: RevisionId, conversation: ConversationId, destination: &BTreeSet<ActorId>) -> bool {
        let Some(r) = self.revisions.get(&revision) else { return false };
        if destination.is_empty()
            || self.erased.contains(&revision)
            || self.forgotten.contains(&r.entry)
            || self.current.get(&r.entry) != Some(&revision)
            || r.restricted_to.is_some_and(|c| c != conversation)
        {
            return false;
        }
        let by_lineage = r.audience.as_ref().is_some_and(|a| destination.is_subset(a));
        by_lineage || r.grants.iter().any(|g| destination.is_subset(g))
    }
}

const TOPICS: &[&str] = &[
    "salary negotiation",
    "tabs versus spaces",
    "favourite ramen",
    "school pickup",
    "deploy freeze",
    "job interview",
    "medical appointment",
    "birthday surprise",
    "incident review",
    "budget cuts",
    "vacation plans",
    "codename falcon",
];

/// A semantic index that ignores eligibility and proposes whatever it was given: forgotten and
/// superseded revisions, another agent's, made-up ids. Retrieval must keep none it may not.
#[derive(Default)]
struct HostileIndex {
    proposals: Mutex<Vec<RevisionId>>,
}

impl SemanticIndex for HostileIndex {
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        let hits: Vec<SemanticHit> = self
            .proposals
            .lock()
            .unwrap()
            .iter()
            .take(request.limit)
            .map(|r| SemanticHit { revision_id: *r, similarity: 0.99 })
            .collect();
        Box::pin(async move { Ok(hits) })
    }
}

struct Workspace {
    world: World,
    model: Model,
    conversations: Vec<ModelConversation>,
    people: Vec<Person>,
    /// Each person's direct conversation, where they have one.
    direct: HashMap<ActorId, ConversationId>,
    /// Sharing requests, voice confirmations and grants created through the every-voice rule.
    sharing: [usize; 3],
}

/// Builds one generated workspace and returns its model and conversations.
async fn generate(db: &common::TestDb, seed: u64) -> Workspace {
    let mut rng = SplitMix::new(seed);
    let mut world = World::new(&db.store, &format!("adversarial-{seed}")).await;
    let mut people = Vec::new();
    for i in 0..10 {
        people.push(world.person(&format!("Person{}", i % 7), &format!("U{seed}-{i}")).await);
    }
    let mut conversations = Vec::new();
    let shapes: [(Topology, usize); 12] = [
        (Topology::Direct, 1),
        (Topology::Direct, 1),
        (Topology::Direct, 1),
        (Topology::Direct, 1),
        (Topology::Group, 3),
        (Topology::Group, 4),
        (Topology::Group, 3),
        (Topology::Channel, 7),
        (Topology::Channel, 10),
        (Topology::Channel, 5),
        (Topology::Unknown, 2),
        (Topology::Channel, 0),
    ];
    let mut direct = HashMap::new();
    for (i, (topology, size)) in shapes.iter().enumerate() {
        let mut members: Vec<&Person> = Vec::new();
        while members.len() < *size {
            let p = &people[rng.range(0, people.len())];
            let taken = *topology == Topology::Direct && direct.contains_key(&p.actor);
            if !members.iter().any(|m| m.actor == p.actor) && !taken {
                members.push(p);
            }
        }
        let id = world.conversation(&format!("C{seed}-{i}"), *topology, &members).await;
        if *topology == Topology::Direct {
            direct.insert(members[0].actor, id);
        }
        let set: BTreeSet<ActorId> = members.iter().map(|m| m.actor).collect();
        conversations.push(ModelConversation {
            id,
            topology: *topology,
            said_to: set.clone(),
            readers: set.clone(),
            members_now: set,
        });
    }

    let mut model = Model::default();
    let spoken: Vec<usize> = (0..conversations.len()).filter(|c| !conversations[*c].said_to.is_empty()).collect();
    for n in 0..110 {
        let c = spoken[rng.range(0, spoken.len())];
        let speaker_id = *conversations[c].said_to.iter().nth(rng.range(0, conversations[c].said_to.len())).unwrap();
        let speaker = people.iter().find(|p| p.actor == speaker_id).unwrap();
        let topic = TOPICS[rng.range(0, TOPICS.len())];
        let body = format!("{topic} detail {n}: token{seed}x{n} was mentioned by the speaker");
        let message = world.say(conversations[c].id, speaker, &body).await;
        let mut memory = world.memory(&body, Some(speaker.actor), speaker.actor, conversations[c].id, message);
        let restricted_to = (rng.unit() < 0.1).then_some(conversations[c].id);
        if let Some(here) = restricted_to {
            memory.restriction = Restriction::ConversationOnly(here);
        }
        // Some memories also cite an earlier memory (retrieved in the same turn).
        let mut inherited: Option<RevisionId> = None;
        if n > 5 && rng.unit() < 0.2 {
            let earlier: Vec<RevisionId> = model.revisions.keys().copied().collect();
            let pick = earlier[rng.range(0, earlier.len())];
            memory.sources.push(SourceRef::RetrievedRevision(pick));
            inherited = Some(pick);
        }
        let written = db.store.create_entry(memory).await.unwrap();
        let own = (conversations[c].topology != Topology::Unknown).then(|| conversations[c].said_to.clone());
        let audience = match inherited {
            None => own.clone(),
            Some(parent) => match (own.clone(), model.revisions[&parent].audience.clone()) {
                (Some(a), Some(b)) => Some(a.intersection(&b).copied().collect()),
                _ => None,
            },
        };
        let voice = inherited.is_none().then_some((speaker.actor, own));
        model.revisions.insert(
            written.revision_id(),
            ModelRevision { entry: written.entry_id(), body, audience, grants: vec![], restricted_to, voice },
        );
        model.current.insert(written.entry_id(), written.revision_id());
    }

    // Amend some (a few by another voice, from their own direct conversation), forget some.
    let mut entries: Vec<EntryId> = model.current.keys().copied().collect();
    entries.sort();
    let mut other_voices = Vec::new();
    for entry in entries {
        let roll = rng.unit();
        let current = model.current[&entry];
        if roll < 0.15 {
            let body = format!("{} (amended)", model.revisions[&current].body);
            let committed = amend(db, &world, entry, current, &body, None).await;
            let previous = model.revisions[&current].clone();
            model.revisions.insert(committed, ModelRevision { body, grants: vec![], ..previous });
            model.current.insert(entry, committed);
        } else if roll < 0.27 {
            // Another person, who could read the memory, corrects it from their direct conversation.
            let previous = model.revisions[&current].clone();
            let readers = previous.audience.clone().unwrap_or_default();
            let Some(&amender) = readers.iter().find(|a| direct.contains_key(a)) else { continue };
            let person = people.iter().find(|p| p.actor == amender).unwrap();
            let body = format!("{} (corrected by another voice)", previous.body);
            let said = world.say(direct[&amender], person, &body).await;
            let committed = amend(db, &world, entry, current, &body, Some((amender, said))).await;
            let narrowed = previous.audience.as_ref().map(|a| a & &BTreeSet::from([amender]));
            model.revisions.insert(
                committed,
                ModelRevision { body, audience: narrowed, grants: vec![], voice: None, ..previous.clone() },
            );
            model.current.insert(entry, committed);
            if let Some((voice, said_to)) = previous.voice.filter(|(v, _)| *v != amender) {
                other_voices.push((committed, amender, voice, said_to));
            }
        } else if roll < 0.37 {
            db.store.forget_entry(world.agent, entry).await.unwrap();
            model.forgotten.insert(entry);
        }
    }
    let mut revisions: Vec<RevisionId> = model.revisions.keys().copied().collect();
    revisions.sort();
    for revision in revisions {
        if rng.unit() < 0.12 {
            let target = &conversations[rng.range(0, conversations.len())].readers;
            let revoked = rng.unit() < 0.3;
            let audience: Vec<ActorId> = target.iter().copied().collect();
            common::grant(&db.pool, world.agent, revision, &audience, revoked).await;
            if !revoked {
                model.revisions.get_mut(&revision).unwrap().grants.push(target.clone());
            }
        }
    }
    let sharing =
        share_voice_by_voice(db, &mut world, &mut model, &conversations, &people, &direct, other_voices).await;

    // An operator erases some entries (grants, sharing and all) and everything one person told or
    // is about (their messages too; memories with mixed lineage keep their text).
    let mut entries: Vec<EntryId> = model.current.keys().copied().collect();
    entries.sort();
    for entry in entries {
        if rng.unit() < 0.08 {
            common::erase_as_owner(&db.pool, "entry", entry.0).await;
            model.erased.extend(model.revisions.iter().filter(|(_, r)| r.entry == entry).map(|(id, _)| *id));
        }
    }
    let erased_person = people[rng.range(0, people.len())].actor;
    common::erase_as_owner(&db.pool, "person", erased_person.0).await;
    let told_or_about: Vec<RevisionId> = sqlx::query_scalar(
        "SELECT id FROM memory_entry_revisions
          WHERE runtime_agent_id = $1 AND (subject_actor_id = $2 OR source_actor_id = $2)",
    )
    .bind(world.agent)
    .bind(erased_person)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    model.erased.extend(told_or_about);

    // Membership over time: a late joiner (already in), someone who left a minute ago, someone
    // leaving in an hour (still a reader and a member), someone joining in an hour (a reader who
    // may not speak yet).
    let late = &people[rng.range(0, people.len())];
    let group = conversations.iter_mut().find(|c| c.topology == Topology::Group).unwrap();
    if !group.readers.contains(&late.actor) {
        db.store.join_conversation(group.id, late.actor, world.clock + Duration::minutes(30)).await.unwrap();
        group.readers.insert(late.actor);
        group.members_now.insert(late.actor);
    }
    let channels: Vec<usize> = (0..conversations.len())
        .filter(|c| conversations[*c].topology == Topology::Channel && conversations[*c].said_to.len() > 1)
        .collect();
    let left = &mut conversations[channels[0]];
    let leaver = *left.readers.iter().next().unwrap();
    db.store.leave_conversation(left.id, leaver, Utc::now() - Duration::minutes(1)).await.unwrap();
    left.readers.remove(&leaver);
    left.members_now.remove(&leaver);
    let leaving = &mut conversations[channels[1]];
    let later = *leaving.readers.iter().last().unwrap();
    db.store.leave_conversation(leaving.id, later, Utc::now() + Duration::hours(1)).await.unwrap();
    let groups: Vec<usize> =
        (0..conversations.len()).filter(|c| conversations[*c].topology == Topology::Group).collect();
    let joining = &mut conversations[*groups.last().unwrap()];
    if let Some(newcomer) = people.iter().find(|p| !joining.readers.contains(&p.actor)) {
        db.store.join_conversation(joining.id, newcomer.actor, Utc::now() + Duration::hours(1)).await.unwrap();
        joining.readers.insert(newcomer.actor);
    }
    Workspace { world, model, conversations, people, direct, sharing }
}

/// Amends `entry` from `current` to `body`; by another voice when `by` names them and the message
/// they said it in. Returns the new revision.
async fn amend(
    db: &common::TestDb,
    world: &World,
    entry: EntryId,
    current: RevisionId,
    body: &str,
    by: Option<(ActorId, mesh_memory::MessageId)>,
) -> RevisionId {
    let outcome = db
        .store
        .amend_entry(Amendment {
            agent: world.agent,
            entry,
            expected_revision: current,
            body: Some(body.to_owned()),
            subject: SubjectUpdate::Keep,
            source_actor: by.map(|(actor, _)| actor),
            sources: by.map(|(_, said)| vec![SourceRef::Message(said)]).unwrap_or_default(),
        })
        .await
        .unwrap();
    let WriteOutcome::Committed(c) = outcome else { panic!("amend failed: {outcome:?}") };
    c.revision_id()
}

/// For revisions amended by another voice: the amender asks to release it to a conversation and
/// confirms; the grant must wait for the original voice whenever that voice's words were not
/// already readable there, and exists once every voice confirmed. Returns (requests,
/// confirmations, grants).
async fn share_voice_by_voice(
    db: &common::TestDb,
    world: &mut World,
    model: &mut Model,
    conversations: &[ModelConversation],
    people: &[Person],
    direct: &HashMap<ActorId, ConversationId>,
    amended: Vec<(RevisionId, ActorId, ActorId, Option<BTreeSet<ActorId>>)>,
) -> [usize; 3] {
    let mut counts = [0usize; 3];
    let person = |actor: ActorId| people.iter().find(|p| p.actor == actor).unwrap();
    for (i, (revision, amender, voice, said_to)) in amended.into_iter().enumerate() {
        if model.forgotten.contains(&model.revisions[&revision].entry) {
            continue;
        }
        let target = &conversations[(i * 5 + 3) % conversations.len()];
        // (A target only the amender reads needs no one else's word: not this case.)
        if target.readers.is_subset(&BTreeSet::from([amender])) || model.revisions[&revision].restricted_to.is_some() {
            continue;
        }
        let via = world.say(direct[&amender], person(amender), "please share my correction").await;
        let request = sharing::create_request(
            &db.store,
            NewSharingRequest {
                agent: world.agent,
                via_message: via,
                revision,
                target_conversation: target.id,
                rationale: "asked by the amender".into(),
            },
        )
        .await
        .unwrap();
        counts[0] += 1;
        let yes = world.say(direct[&amender], person(amender), "yes, release it").await;
        let first = sharing::confirm_by_source_actor(&db.pool, request, yes).await.unwrap();
        counts[1] += 1;
        let voice_covers = said_to.as_ref().is_some_and(|a| target.readers.is_subset(a));
        match (&first, voice_covers) {
            (Confirmation::Granted { .. }, true) => {}
            (Confirmation::Recorded { missing }, false) => {
                assert_eq!(missing, &vec![voice], "the original voice is the one missing");
                let Some(&own) = direct.get(&voice) else { continue };
                let yes = world.say(own, person(voice), "yes, I agree").await;
                let second = sharing::confirm_by_source_actor(&db.pool, request, yes).await.unwrap();
                counts[1] += 1;
                assert!(matches!(second, Confirmation::Granted { .. }), "every voice confirmed: {second:?}");
            }
            (other, covers) => panic!("amender's confirmation gave {other:?} (original voice covers: {covers})"),
        }
        counts[2] += 1;
        model.revisions.get_mut(&revision).unwrap().grants.push(target.readers.clone());
    }
    counts
}

/// One search, checked against the model. Returns (selections checked, violations).
fn check(
    model: &Model,
    conversation: ConversationId,
    destination: &BTreeSet<ActorId>,
    outcome: &mesh_memory::retrieval::SearchOutcome,
) -> (usize, usize) {
    let mut violations = 0;
    for s in &outcome.selections {
        let allowed = model.allows(s.revision_id, conversation, destination);
        let text_matches = model.revisions.get(&s.revision_id).is_some_and(|r| r.body == s.body);
        if !allowed || !text_matches {
            violations += 1;
            eprintln!("VIOLATION: revision {} returned to {destination:?} in {conversation}", s.revision_id);
        }
    }
    if outcome.context.audience().iter().copied().collect::<BTreeSet<_>>() != *destination {
        violations += 1;
        eprintln!(
            "VIOLATION: audience {:?} in {conversation}, the model says {destination:?}",
            outcome.context.audience()
        );
    }
    // Nothing withheld may surface in the rendered prompt or the recall JSON either.
    let rendered = format!("{}{}", outcome.prompt_section(), outcome.recall_json());
    for (id, r) in &model.revisions {
        // (An amended body quotes its earlier revision; a selected body may contain it legitimately.)
        let quoted_by_selection = outcome.selections.iter().any(|s| s.body.contains(&r.body));
        if !model.allows(*id, conversation, destination) && !quoted_by_selection && rendered.contains(&r.body) {
            violations += 1;
            eprintln!("VIOLATION: withheld text of {id} rendered");
        }
    }
    (outcome.selections.len(), violations)
}

/// The tool result the model saw for one call, with the ids it named (`named`) written as `ID`.
async fn probe(
    engine: &TurnEngine,
    model: &ScriptedModel,
    inbound: mesh_memory::MessageId,
    named: (EntryId, RevisionId),
) -> String {
    engine.run_turn(inbound).await.unwrap();
    let result: Value = tool_results(model.requests().last().unwrap()).pop().expect("a tool result");
    result
        .to_string()
        .replace(&named.0.to_string(), "ID")
        .replace(named.0.short().as_str(), "ID")
        .replace(&named.1.to_string(), "ID")
}

/// Existence probing through every tool: for entries the speaker may not see in `conversation`
/// (private, restricted elsewhere, forgotten), forget, amend and request_memory_sharing answer
/// exactly as they do for a made-up id, and nothing is written. Returns (probes, violations).
async fn probe_existence(
    db: &common::TestDb,
    ws: &mut Workspace,
    conversation: usize,
    speaker: &Person,
    hidden: &[(EntryId, RevisionId)],
) -> (usize, usize) {
    let (mut probes, mut violations) = (0, 0);
    let target = ws.conversations.iter().find(|c| c.topology == Topology::Channel).unwrap().id;
    let made_up = (EntryId::generate(), RevisionId::generate());
    // Every tool that names an entry, by its full id and by the short id recall shows.
    let calls = |(entry, _): (EntryId, RevisionId)| {
        [entry.to_string(), entry.short().to_string()].into_iter().flat_map(move |id| {
            [
                ("forget", json!({"entry_id": id})),
                ("amend", json!({"entry_id": id, "expected_revision": 1, "body": "x"})),
                (
                    "request_memory_sharing",
                    json!({"entry_id": id, "revision": 1, "rationale": "probe", "target_conversation": target.to_string()}),
                ),
            ]
        })
    };
    let rows_before = count_rows(db).await;
    for (index, (tool, made_up_args)) in calls(made_up).enumerate() {
        let answer = |args: Value| {
            let model = Arc::new(ScriptedModel::new().calls(vec![(tool, args)]).reply("Done."));
            let engine = TurnEngine::new(
                db.store.clone(),
                Retriever::new(db.store.clone(), RetrievalConfig::default()),
                model.clone(),
            );
            (engine, model)
        };
        let inbound = ws.world.say(ws.conversations[conversation].id, speaker, "do it").await;
        let (engine, model) = answer(made_up_args);
        let expected = probe(&engine, &model, inbound, made_up).await;
        for &target_entry in hidden {
            let args = calls(target_entry).nth(index).unwrap().1;
            let inbound = ws.world.say(ws.conversations[conversation].id, speaker, "do it").await;
            let (engine, model) = answer(args);
            let got = probe(&engine, &model, inbound, target_entry).await;
            probes += 1;
            if got != expected {
                violations += 1;
                eprintln!(
                    "VIOLATION: {tool} of hidden {} answered {got} where a made-up id gets {expected}",
                    target_entry.0
                );
            }
        }
    }
    if count_rows(db).await != rows_before {
        violations += 1;
        eprintln!("VIOLATION: a probe wrote memory, a sharing request or a grant");
    }
    (probes, violations)
}

/// Revisions, live entries, sharing requests and grants: what a probe must never change.
async fn count_rows(db: &common::TestDb) -> (i64, i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM memory_entry_revisions), (SELECT count(*) FROM memory_entries WHERE state = 'live'),
                (SELECT count(*) FROM sharing_requests), (SELECT count(*) FROM sharing_grants)",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn ten_thousand_queries_from_every_audience_and_speaker_leak_nothing() {
    let db = test_db().await;
    let (mut queries, mut returned, mut violations, mut probes) = (0usize, 0usize, 0usize, 0usize);
    let mut resurrections = 0usize;
    let mut sharing = [0usize; 3];
    let mut workspaces = Vec::new();
    for seed in [11u64, 29, 47, 83] {
        workspaces.push(generate(&db, seed).await);
    }
    // Every revision ever written, in every workspace, plus made-up ids: what the hostile index
    // proposes to every search.
    let mut proposals: Vec<RevisionId> = workspaces.iter().flat_map(|w| w.model.revisions.keys().copied()).collect();
    proposals.extend((0..20).map(|_| RevisionId::generate()));
    proposals.sort();
    let hostile = Arc::new(HostileIndex { proposals: Mutex::new(proposals) });
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(hostile);
    for ws in &mut workspaces {
        for (i, counted) in ws.sharing.iter().enumerate() {
            sharing[i] += counted;
        }
        // Query wording copied from every memory (private ones included), plus broad and empty.
        let mut texts: Vec<String> = ws.model.revisions.values().map(|r| r.body.clone()).collect();
        texts.sort();
        texts.extend(TOPICS.iter().map(|t| t.to_string()));
        texts.push(String::new());
        texts.push("what's new?".into());
        for c in 0..ws.conversations.len() {
            let conversation = &ws.conversations[c];
            for (i, text) in texts.iter().enumerate() {
                // A member, and anyone at all (often someone outside the membership).
                let member = conversation.members_now.iter().nth(i % conversation.members_now.len().max(1)).copied();
                let anyone = ws.people[(i * 7 + c) % ws.people.len()].actor;
                for speaker in [member, Some(anyone)].into_iter().flatten() {
                    let mode = if i % 2 == 0 { RetrievalMode::Recall } else { RetrievalMode::Prompt };
                    let mut request =
                        SearchRequest::new(ws.world.agent, conversation.id, Some(speaker), text.clone(), mode);
                    request.max_count = 20;
                    let outcome = retriever.search(&request).await.unwrap();
                    queries += 1;
                    let destination = conversation.destination(speaker);
                    let (checked, found) = check(&ws.model, conversation.id, &destination, &outcome);
                    resurrections +=
                        outcome.selections.iter().filter(|s| ws.model.erased.contains(&s.revision_id)).count();
                    returned += checked;
                    violations += found;
                }
            }
        }
        // Existence probes from a member of each of a few conversations.
        for c in [4usize, 7, 0] {
            let Some(&speaker) = ws.conversations[c].members_now.iter().next() else { continue };
            let destination = ws.conversations[c].destination(speaker);
            let conversation = ws.conversations[c].id;
            let mut hidden: Vec<(EntryId, RevisionId)> = ws
                .model
                .current
                .iter()
                .filter(|(_, r)| !ws.model.allows(**r, conversation, &destination))
                .map(|(e, r)| (*e, *r))
                .collect();
            hidden.sort();
            hidden.truncate(6);
            let speaker = Person { ..*ws.people.iter().find(|p| p.actor == speaker).unwrap() };
            let (p, v) = probe_existence(&db, ws, c, &speaker, &hidden).await;
            probes += p;
            violations += v;
        }
        let _ = &ws.direct;
    }
    let erased: usize = workspaces.iter().map(|w| w.model.erased.len()).sum();
    println!(
        "adversarial suite: {queries} queries, {returned} selections checked, {probes} existence probes, \
         sharing {} requests / {} voice confirmations / {} grants, {erased} erased revisions, \
         violations: {violations}, resurrections: {resurrections}",
        sharing[0], sharing[1], sharing[2]
    );
    assert!(queries >= 10_000, "the suite must run over ten thousand queries, ran {queries}");
    assert!(returned > 0, "searches must return something, or the suite proves nothing");
    assert!(probes >= 100 && sharing[2] > 0, "probes {probes}, grants {}", sharing[2]);
    assert!(erased > 0, "the workspaces must hold erased memories");
    assert_eq!(violations, 0);
    assert_eq!(resurrections, 0, "an erased revision was returned");
}
