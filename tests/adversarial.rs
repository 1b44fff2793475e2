//! Adversarial privacy suite: generated workspaces with direct, group, channel and legacy
//! conversations, amendments, forgets, grants (some revoked) and late joiners; thousands of
//! searches from every audience, many of them copying the exact wording of private memories.
//! Every returned memory is checked against an independent model of the policy kept in Rust
//! while the workspace was built. The violation count is printed and must be 0.

mod common;

use std::collections::{BTreeSet, HashMap};

use chrono::Duration;
use common::{test_db, Person, World};
use mesh_memory::bench::synthetic::SplitMix;
use mesh_memory::retrieval::{RetrievalConfig, RetrievalMode, Retriever, SearchRequest};
use mesh_memory::store::{Amendment, SourceRef, SubjectUpdate, Topology, WriteOutcome};
use mesh_memory::{ActorId, ConversationId, EntryId, RevisionId};

/// The policy model: what a revision's lineage allows, computed without the database.
#[derive(Clone, Debug)]
struct ModelRevision {
    entry: EntryId,
    body: String,
    /// `None` = some source has unknown evidence.
    audience: Option<BTreeSet<ActorId>>,
    /// Live grants: each an audience.
    grants: Vec<BTreeSet<ActorId>>,
}

struct ModelConversation {
    id: ConversationId,
    topology: Topology,
    members: BTreeSet<ActorId>,
}

#[derive(Default)]
struct Model {
    revisions: HashMap<RevisionId, ModelRevision>,
    current: HashMap<EntryId, RevisionId>,
    forgotten: BTreeSet<EntryId>,
}

impl Model {
    fn allows(&self, revision: RevisionId, destination: &BTreeSet<ActorId>) -> bool {
        let Some(r) = self.revisions.get(&revision) else { return false };
        if self.forgotten.contains(&r.entry) || self.current.get(&r.entry) != Some(&revision) {
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

/// Builds one generated workspace and returns its model and conversations.
async fn generate(db: &common::TestDb, seed: u64) -> (World, Model, Vec<ModelConversation>, Vec<Person>) {
    let mut rng = SplitMix::new(seed);
    let mut world = World::new(&db.store, &format!("adversarial-{seed}")).await;
    let mut people = Vec::new();
    for i in 0..10 {
        people.push(world.person(&format!("Person{}", i % 7), &format!("U{seed}-{i}")).await);
    }
    let mut conversations = Vec::new();
    let shapes: [(Topology, usize); 9] = [
        (Topology::Direct, 1),
        (Topology::Direct, 1),
        (Topology::Direct, 1),
        (Topology::Direct, 1),
        (Topology::Group, 3),
        (Topology::Group, 4),
        (Topology::Channel, 7),
        (Topology::Channel, 10),
        (Topology::Unknown, 2),
    ];
    for (i, (topology, size)) in shapes.iter().enumerate() {
        let mut members: Vec<&Person> = Vec::new();
        while members.len() < *size {
            let p = &people[rng.range(0, people.len())];
            if !members.iter().any(|m| m.actor == p.actor) {
                members.push(p);
            }
        }
        let id = world.conversation(&format!("C{seed}-{i}"), *topology, &members).await;
        conversations.push(ModelConversation {
            id,
            topology: *topology,
            members: members.iter().map(|m| m.actor).collect(),
        });
    }

    let mut model = Model::default();
    for n in 0..90 {
        let c = rng.range(0, conversations.len());
        let speaker_id = *conversations[c].members.iter().nth(rng.range(0, conversations[c].members.len())).unwrap();
        let speaker = people.iter().find(|p| p.actor == speaker_id).unwrap();
        let topic = TOPICS[rng.range(0, TOPICS.len())];
        let body = format!("{topic} detail {n}: token{seed}x{n} was mentioned by the speaker");
        let message = world.say(conversations[c].id, speaker, &body).await;
        let mut memory = world.memory(&body, Some(speaker.actor), speaker.actor, conversations[c].id, message);
        // Some memories also cite an earlier memory (retrieved in the same turn).
        let mut inherited: Option<RevisionId> = None;
        if n > 5 && rng.unit() < 0.2 {
            let earlier: Vec<RevisionId> = model.revisions.keys().copied().collect();
            let pick = earlier[rng.range(0, earlier.len())];
            memory.sources.push(SourceRef::RetrievedRevision(pick));
            inherited = Some(pick);
        }
        let written = db.store.create_entry(memory).await.unwrap();
        let own = (conversations[c].topology != Topology::Unknown).then(|| conversations[c].members.clone());
        let audience = match inherited {
            None => own,
            Some(parent) => match (own, model.revisions[&parent].audience.clone()) {
                (Some(a), Some(b)) => Some(a.intersection(&b).copied().collect()),
                _ => None,
            },
        };
        model
            .revisions
            .insert(written.revision_id, ModelRevision { entry: written.entry_id, body, audience, grants: vec![] });
        model.current.insert(written.entry_id, written.revision_id);
    }

    // Amend some, forget some, grant some (a few revoked), and let someone join a group late.
    let entries: Vec<EntryId> = model.current.keys().copied().collect();
    for entry in entries {
        let roll = rng.unit();
        let current = model.current[&entry];
        if roll < 0.15 {
            let body = format!("{} (amended)", model.revisions[&current].body);
            let outcome = db
                .store
                .amend_entry(Amendment {
                    agent: world.agent,
                    entry,
                    expected_revision: current,
                    body: Some(body.clone()),
                    subject: SubjectUpdate::Keep,
                    source_actor: None,
                    sources: vec![],
                })
                .await
                .unwrap();
            let WriteOutcome::Committed(c) = outcome else { panic!("amend failed") };
            let audience = model.revisions[&current].audience.clone();
            model.revisions.insert(c.revision_id, ModelRevision { entry, body, audience, grants: vec![] });
            model.current.insert(entry, c.revision_id);
        } else if roll < 0.25 {
            db.store.forget_entry(world.agent, entry).await.unwrap();
            model.forgotten.insert(entry);
        }
    }
    let revisions: Vec<RevisionId> = model.revisions.keys().copied().collect();
    for revision in revisions {
        if rng.unit() < 0.12 {
            let target = &conversations[rng.range(0, conversations.len())].members;
            let revoked = rng.unit() < 0.3;
            let audience: Vec<ActorId> = target.iter().copied().collect();
            common::grant(&db.pool, world.agent, revision, &audience, revoked).await;
            if !revoked {
                model.revisions.get_mut(&revision).unwrap().grants.push(target.clone());
            }
        }
    }
    let late = &people[rng.range(0, people.len())];
    let group = conversations.iter_mut().find(|c| c.topology == Topology::Group).unwrap();
    if !group.members.contains(&late.actor) {
        db.store.join_conversation(group.id, late.actor, world.clock + Duration::minutes(30)).await.unwrap();
        group.members.insert(late.actor);
    }
    (world, model, conversations, people)
}

#[tokio::test]
async fn thousands_of_queries_from_every_audience_leak_nothing() {
    let db = test_db().await;
    let mut queries = 0usize;
    let mut returned = 0usize;
    let mut violations = 0usize;
    for seed in [11u64, 29] {
        let (world, model, conversations, _people) = generate(&db, seed).await;
        let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default());
        // Query wording copied from every memory (private ones included), plus broad and empty.
        let mut texts: Vec<String> = model.revisions.values().map(|r| r.body.clone()).collect();
        texts.sort();
        texts.extend(TOPICS.iter().map(|t| t.to_string()));
        texts.push(String::new());
        texts.push("what's new?".into());
        for conversation in &conversations {
            let destination = &conversation.members;
            for (i, text) in texts.iter().enumerate() {
                let asker = *destination.iter().nth(i % destination.len()).unwrap();
                let mode = if i % 2 == 0 { RetrievalMode::Recall } else { RetrievalMode::Prompt };
                let mut request = SearchRequest::new(world.agent, conversation.id, Some(asker), text.clone(), mode);
                request.max_count = 20;
                let outcome = retriever.search(&request).await.unwrap();
                queries += 1;
                for s in &outcome.selections {
                    returned += 1;
                    let allowed = model.allows(s.revision_id, destination);
                    let text_matches = model.revisions.get(&s.revision_id).is_some_and(|r| r.body == s.body);
                    if !allowed || !text_matches {
                        violations += 1;
                        eprintln!(
                            "VIOLATION: revision {} returned to {:?} in {}",
                            s.revision_id, destination, conversation.id
                        );
                    }
                }
                // Nothing withheld may surface in the rendered prompt or the recall JSON either.
                let rendered = format!("{}{}", outcome.prompt_section(), outcome.recall_json());
                for (id, r) in &model.revisions {
                    // (An amended body quotes its earlier revision; a selected body may contain it legitimately.)
                    let quoted_by_selection = outcome.selections.iter().any(|s| s.body.contains(&r.body));
                    if !model.allows(*id, destination) && !quoted_by_selection && rendered.contains(&r.body) {
                        violations += 1;
                        eprintln!("VIOLATION: withheld text of {id} rendered");
                    }
                }
            }
        }
    }
    println!("adversarial suite: {queries} queries, {returned} selections checked, violations: {violations}");
    assert!(queries >= 1000, "the suite must run thousands of queries, ran {queries}");
    assert!(returned > 0, "searches must return something, or the suite proves nothing");
    assert_eq!(violations, 0);
}
