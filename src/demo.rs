//! A small, realistic demo workspace: the data the console opens on and the README walks through.
//!
//! One runtime agent (`mesh-assistant`) in a Slack-like workspace: a CTO who prefers tabs (said in
//! the shared #engineering channel), a fact learned in a private direct conversation, a
//! favourite-food memory, an amended memory, a forgotten one, and two actors who share the display
//! name "Alex" but stay distinct through their ids.
//!
//! On top of that base, `seed` runs real turns through the [`TurnEngine`] with a
//! [`ScriptedModel`] (see [`run_demo_turns`]): a delivered answer built from retrieved memory, a
//! recall-then-amend correction, a replay of the spec's production incident that the claim guard
//! fails, a sharing request left pending in Priya's direct conversation, and a question whose
//! answer sits in a memory of unknown audience (an `eligibility_withheld_unknown` event). So the
//! workspace has retrieval events, ledgers and a pending request to inspect.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use std::sync::Arc;

use serde_json::{json, Value};

use crate::ids::{ActorId, AgentId, ConversationId, EntryId, IdentityId, MessageId, RetrievalEventId};
use crate::privacy::sharing::SharingRequestId;
use crate::retrieval::RetrievalConfig;
use crate::service::RetrieverSetup;
use crate::store::{
    ActorKind, Amendment, Direction, NewConversation, NewMemory, NewMessage, Restriction, SourceRef, Store, StoreError,
    SubjectUpdate, WriteOutcome,
};
use crate::tools::ToolCall;
use crate::turn::scripted::tool_results;
use crate::turn::{receive, ChatRequest, ChatResponse, ScriptedModel, TurnEngine, TurnError, TurnId, TurnReport};

/// The demo runtime agent's name.
pub const DEMO_AGENT: &str = "mesh-assistant";

/// What `demo seed` created, so that the CLI can point at it.
#[derive(Clone, Debug, Serialize)]
pub struct DemoWorkspace {
    /// The runtime agent.
    pub agent: AgentId,
    /// Conversations by name: `engineering`, `dm-priya`, `dm-victor`, `dm-alex-kim`.
    pub conversations: Vec<(String, ConversationId)>,
    /// Actors by handle (connector external id).
    pub actors: Vec<(String, ActorId)>,
    /// Entries by short name.
    pub entries: Vec<(String, EntryId)>,
    /// Turns run through the engine: (what it shows, turn id, outcome).
    pub turns: Vec<DemoTurn>,
    /// The sharing request left pending for review.
    pub pending_sharing_request: Option<SharingRequestId>,
    /// The retrieval event that recorded `eligibility_withheld_unknown`.
    pub withheld_diagnostic_event: Option<RetrievalEventId>,
}

/// One demo turn, for printing.
#[derive(Clone, Debug, Serialize)]
pub struct DemoTurn {
    /// What the turn demonstrates.
    pub name: String,
    /// The persisted turn (`mesh-memory turn ID`).
    pub turn_id: TurnId,
    /// Its outcome.
    pub outcome: String,
}

/// Why seeding failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A store write failed (e.g. the workspace exists already).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A demo turn failed to run.
    #[error("demo turn failed: {0}")]
    Turn(#[from] TurnError),
}

/// Whether the demo workspace exists already.
pub async fn is_seeded(store: &Store) -> Result<bool, StoreError> {
    Ok(store.find_runtime_agent(DEMO_AGENT).await.is_ok())
}

struct Person {
    actor: ActorId,
    identity: IdentityId,
}

struct Seeder<'a> {
    store: &'a Store,
    agent: AgentId,
    agent_actor: ActorId,
    clock: DateTime<Utc>,
}

impl Seeder<'_> {
    async fn person(&self, name: &str, handle: &str) -> Result<Person, StoreError> {
        let actor = self.store.create_actor(ActorKind::Human, name).await?;
        let identity = self.store.add_connector_identity(actor, "slack", handle).await?;
        Ok(Person { actor, identity })
    }

    async fn conversation(
        &self,
        channel: &str,
        topology: crate::store::Topology,
        title: &str,
        members: &[&Person],
    ) -> Result<ConversationId, StoreError> {
        let id = self
            .store
            .create_conversation(NewConversation {
                agent: self.agent,
                connector: "slack",
                external_channel_id: channel,
                topology,
                title,
            })
            .await?;
        let joined = self.clock - Duration::days(1);
        self.store.join_conversation(id, self.agent_actor, joined).await?;
        for member in members {
            self.store.join_conversation(id, member.actor, joined).await?;
        }
        Ok(id)
    }

    async fn said(&mut self, conversation: ConversationId, by: &Person, body: &str) -> Result<MessageId, StoreError> {
        self.clock += Duration::minutes(7);
        self.store
            .record_message(NewMessage {
                agent: self.agent,
                conversation,
                direction: Direction::Inbound,
                sender: by.actor,
                sender_identity: Some(by.identity),
                body,
                sent_at: self.clock,
            })
            .await
    }

    async fn remember(
        &self,
        conversation: ConversationId,
        message: MessageId,
        body: &str,
        subject: Option<ActorId>,
        source: ActorId,
        always_on: bool,
    ) -> Result<EntryId, StoreError> {
        let written = self
            .store
            .create_entry(NewMemory {
                agent: self.agent,
                body: body.to_owned(),
                subject,
                source_actor: Some(source),
                origin_conversation: Some(conversation),
                always_on,
                restriction: Restriction::None,
                sources: vec![SourceRef::Message(message)],
            })
            .await?;
        Ok(written.entry_id())
    }
}

/// Seeds the demo workspace and runs the demo turns. Fails with `AlreadyExists` if it is there
/// already.
pub async fn seed(store: &Store) -> Result<DemoWorkspace, DemoError> {
    let mut workspace = seed_base(store).await?;
    run_demo_turns(store, &mut workspace).await?;
    Ok(workspace)
}

/// The base workspace (identities, conversations, memories) without any turn.
pub async fn seed_base(store: &Store) -> Result<DemoWorkspace, StoreError> {
    let agent = store.create_runtime_agent(DEMO_AGENT).await?;
    let agent_actor = store.agent_actor(agent).await?;
    let mut s = Seeder { store, agent, agent_actor, clock: Utc::now() - Duration::days(30) };

    let victor = s.person("Victor", "U123").await?;
    let priya = s.person("Priya", "U456").await?;
    let alex_chen = s.person("Alex", "U789").await?;
    let alex_kim = s.person("Alex", "U790").await?;
    let dana = s.person("Dana", "U321").await?;

    use crate::store::Topology::{Channel, Direct};
    let engineering =
        s.conversation("C-ENG", Channel, "#engineering", &[&victor, &priya, &alex_chen, &alex_kim, &dana]).await?;
    let dm_priya = s.conversation("D-PRIYA", Direct, "DM with Priya", &[&priya]).await?;
    let dm_victor = s.conversation("D-VICTOR", Direct, "DM with Victor", &[&victor]).await?;
    let dm_alex_kim = s.conversation("D-ALEXKIM", Direct, "DM with Alex (U790)", &[&alex_kim]).await?;

    let m = s.said(engineering, &victor, "For the record: I prefer tabs over spaces, in every repo.").await?;
    let tabs = s
        .remember(
            engineering,
            m,
            "Prefers tabs over spaces for indentation in every repository.",
            Some(victor.actor),
            victor.actor,
            false,
        )
        .await?;

    let m = s
        .said(dm_priya, &priya, "Between us: I'm interviewing at another company next month. My manager doesn't know.")
        .await?;
    let private = s
        .remember(
            dm_priya,
            m,
            "Is interviewing at another company next month and has not told their manager.",
            Some(priya.actor),
            priya.actor,
            false,
        )
        .await?;

    let m = s
        .said(
            engineering,
            &alex_chen,
            "Team lunch idea: my favourite food is spicy ramen, any ramen place works for me.",
        )
        .await?;
    let food = s
        .remember(
            engineering,
            m,
            "Favourite food is spicy ramen; any ramen place works for team lunches.",
            Some(alex_chen.actor),
            alex_chen.actor,
            false,
        )
        .await?;

    let m = s
        .said(
            engineering,
            &priya,
            "I have two kids, Maya and Leo; I pick them up from school at 4pm so I'm offline then.",
        )
        .await?;
    let children = s
        .remember(
            engineering,
            m,
            "Has two children, Maya and Leo, and picks them up from school at 4pm (offline then).",
            Some(priya.actor),
            priya.actor,
            false,
        )
        .await?;

    let m = s.said(dm_alex_kim, &alex_kim, "Please page me on Slack, never by phone.").await?;
    let paging = s
        .remember(
            dm_alex_kim,
            m,
            "Wants to be paged on Slack, never by phone.",
            Some(alex_kim.actor),
            alex_kim.actor,
            false,
        )
        .await?;

    let m = s.said(engineering, &dana, "I lead the payments team.").await?;
    let team = s.remember(engineering, m, "Leads the payments team.", Some(dana.actor), dana.actor, false).await?;
    let correction =
        s.said(engineering, &dana, "Correction: since October I lead the platform team, not payments.").await?;
    let history = store.entry_history(agent, team).await?.expect("entry just created");
    let amended = store
        .amend_entry(Amendment {
            agent,
            entry: team,
            expected_revision: history.current_revision_id,
            body: Some("Leads the platform team since October (previously payments).".to_owned()),
            subject: SubjectUpdate::Keep,
            source_actor: Some(dana.actor),
            sources: vec![SourceRef::Message(correction)],
        })
        .await?;
    debug_assert!(matches!(amended, WriteOutcome::Committed(_)));

    let m = s.said(dm_victor, &victor, "The deploy freeze starts on Fridays at noon.").await?;
    let freeze =
        s.remember(dm_victor, m, "The deploy freeze starts on Fridays at noon.", None, victor.actor, false).await?;
    store.forget_entry(agent, freeze).await?;

    let m =
        s.said(engineering, &victor, "Team rule: answers about code must name the repository they refer to.").await?;
    let rule = s
        .remember(
            engineering,
            m,
            "Team rule: answers about code must name the repository they refer to.",
            None,
            victor.actor,
            true,
        )
        .await?;

    Ok(DemoWorkspace {
        agent,
        conversations: vec![
            ("engineering".into(), engineering),
            ("dm-priya".into(), dm_priya),
            ("dm-victor".into(), dm_victor),
            ("dm-alex-kim".into(), dm_alex_kim),
        ],
        actors: vec![
            ("U123 Victor (CTO)".into(), victor.actor),
            ("U456 Priya".into(), priya.actor),
            ("U789 Alex".into(), alex_chen.actor),
            ("U790 Alex".into(), alex_kim.actor),
            ("U321 Dana".into(), dana.actor),
        ],
        entries: vec![
            ("tabs-preference".into(), tabs),
            ("private-interview".into(), private),
            ("favourite-food".into(), food),
            ("children".into(), children),
            ("paging-preference".into(), paging),
            ("amended-team".into(), team),
            ("forgotten-freeze".into(), freeze),
            ("always-on-rule".into(), rule),
        ],
        turns: Vec::new(),
        pending_sharing_request: None,
        withheld_diagnostic_event: None,
    })
}

fn lookup<T: Copy>(list: &[(String, T)], name: &str) -> Option<T> {
    list.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
}

/// A tool-call step that acts on the memory of the latest recall result whose line contains
/// `needle`, given its entry id and revision number as the line shows them; if recall did not
/// return it, the scripted model says so instead of guessing.
fn on_recalled(
    needle: &'static str,
    call: impl Fn(&str, u32) -> (&'static str, Value) + Send + Sync + 'static,
) -> impl Fn(&ChatRequest) -> ChatResponse + Send + Sync + 'static {
    move |request| {
        let found = tool_results(request).last().and_then(|r| {
            r["memories"].as_array().and_then(|lines| {
                lines
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|line| line.contains(needle))
                    .and_then(crate::retrieval::render::line_reference)
                    .map(|(entry, revision)| (entry.to_owned(), revision))
            })
        });
        match found {
            Some((entry, revision)) => {
                let (name, arguments) = call(&entry, revision);
                ChatResponse {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "call-1".into(),
                        name: name.into(),
                        arguments: arguments.to_string(),
                    }],
                }
            }
            None => ChatResponse::text("I could not find that memory."),
        }
    }
}

async fn demo_turn(
    store: &Store,
    agent: AgentId,
    conversation: ConversationId,
    handle: &str,
    text: &str,
    model: ScriptedModel,
) -> Result<TurnReport, TurnError> {
    // The default configuration is valid and reads no environment: this cannot fail.
    let retriever =
        crate::service::configured_retriever(store, RetrieverSetup::explicit(RetrievalConfig::default(), None))
            .expect("the default retrieval configuration is valid")
            .retriever;
    let engine = TurnEngine::new(store.clone(), retriever, Arc::new(model));
    let inbound = receive(store, agent, conversation, "slack", handle, text).await?;
    engine.run_turn(inbound).await
}

/// Runs the demo turns on a seeded base workspace (see the module documentation).
pub async fn run_demo_turns(store: &Store, workspace: &mut DemoWorkspace) -> Result<(), DemoError> {
    let agent = workspace.agent;
    let conversation = |name: &str| {
        lookup(&workspace.conversations, name)
            .ok_or(StoreError::InvalidInput { field: "demo", reason: format!("conversation {name} missing") })
    };
    let engineering = conversation("engineering")?;
    let dm_priya = conversation("dm-priya")?;
    let mut turns = Vec::new();

    // 1. An answer from retrieved memory: another engineer asks; the CTO's preference is relevant.
    let model = ScriptedModel::new().reply(
        "Victor (id U123) prefers tabs over spaces in every repository, so use tabs in the payments-service repo.",
    );
    let report =
        demo_turn(store, agent, engineering, "U456", "Tabs or spaces for the payments-service repo?", model).await?;
    turns.push(("answer from retrieved memory", report));

    // 2. Recall precedes a correction: the amend needs the entry id and revision that recall returns.
    let model = ScriptedModel::new()
        .calls(vec![("recall", json!({"query": "platform team"}))])
        .step(on_recalled("platform team", |entry, revision| {
            ("amend", json!({"entry_id": entry, "expected_revision": revision,
                             "body": "Leads the platform and infrastructure teams since October (previously payments)."}))
        }))
        .reply("I've updated that memory: you lead the platform and infrastructure teams.");
    let report =
        demo_turn(store, agent, engineering, "U321", "I now lead infrastructure too, not just platform.", model)
            .await?;
    turns.push(("recall then amend", report));

    // 3. The spec's production incident, replayed: two creates, then a reply claiming a
    //    re-attribution and a supersession that never committed. The claim guard fails the turn.
    let model = ScriptedModel::new()
        .calls(vec![
            ("remember", json!({"body": "Insists on tabs over spaces.", "subject": "U790"})),
            ("remember", json!({"body": "Does not insist on tabs; that was Alex.", "subject": "U123"})),
        ])
        .reply("I've re-attributed the earlier memory to Alex and marked the old entry as superseded.");
    let report =
        demo_turn(store, agent, engineering, "U123", "It's Alex (U790), not me, who insists on tabs.", model).await?;
    turns.push(("production incident: claim guard", report));

    // 4. A sharing request in an authenticated direct conversation: pending, nothing shared.
    let model = ScriptedModel::new()
        .calls(vec![("recall", json!({"query": "interviewing"}))])
        .step(on_recalled("interviewing", |entry, revision| {
            ("request_memory_sharing", json!({"entry_id": entry, "revision": revision, "target_conversation": "C-ENG",
                                               "rationale": "Priya said the engineering channel may know about her interviews."}))
        }))
        .reply("I've asked for approval to share that with #engineering; nothing is shared until it is approved.");
    let report =
        demo_turn(store, agent, dm_priya, "U456", "You can tell #engineering that I'm interviewing elsewhere.", model)
            .await?;
    workspace.pending_sharing_request = report.ledger.sharing_requests.first().map(|r| r.request_id);
    turns.push(("sharing request (pending)", report));

    // 5. A memory of unknown audience (legacy conversation without proven topology) matches the
    //    question's wording elsewhere: withheld, and the audit records eligibility_withheld_unknown.
    let legacy = store
        .create_conversation(NewConversation {
            agent,
            connector: "slack",
            external_channel_id: "C-LEGACY",
            topology: crate::store::Topology::Unknown,
            title: "#ops-legacy (imported, topology unknown)",
        })
        .await?;
    let victor = lookup(&workspace.actors, "U123 Victor (CTO)")
        .ok_or(StoreError::InvalidInput { field: "demo", reason: "actor U123 missing".into() })?;
    let said =
        receive(store, agent, legacy, "slack", "U123", "The staging cluster is rebuilt every Monday night.").await?;
    let legacy_entry = store
        .create_entry(NewMemory {
            agent,
            body: "The staging cluster is rebuilt every Monday night.".into(),
            subject: None,
            source_actor: Some(victor),
            origin_conversation: Some(legacy),
            always_on: false,
            restriction: Restriction::None,
            sources: vec![SourceRef::Message(said)],
        })
        .await?;
    workspace.conversations.push(("ops-legacy".into(), legacy));
    workspace.entries.push(("unknown-audience".into(), legacy_entry.entry_id()));
    let model = ScriptedModel::new().reply("I don't have anything I can share here about when staging is rebuilt.");
    let report = demo_turn(store, agent, engineering, "U321", "When is the staging cluster rebuilt?", model).await?;
    workspace.withheld_diagnostic_event = report.retrieval_event_ids.first().copied();
    turns.push(("withheld: unknown audience", report));

    workspace.turns = turns
        .into_iter()
        .map(|(name, r)| DemoTurn { name: name.to_owned(), turn_id: r.turn_id, outcome: r.outcome.name().to_owned() })
        .collect();
    Ok(())
}
