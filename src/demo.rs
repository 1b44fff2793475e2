//! A small, realistic demo workspace: the data the console opens on and the README walks through.
//!
//! One runtime agent (`mesh-assistant`) in a Slack-like workspace: a CTO who prefers tabs (said in
//! the shared #engineering channel), a fact learned in a private direct conversation, a
//! favourite-food memory, an amended memory, a forgotten one, and two actors who share the display
//! name "Alex" but stay distinct through their ids.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use crate::ids::{ActorId, AgentId, ConversationId, EntryId, IdentityId, MessageId};
use crate::store::{
    ActorKind, Amendment, Direction, NewConversation, NewMemory, NewMessage, Restriction, SourceRef, Store, StoreError,
    SubjectUpdate, WriteOutcome,
};

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
        Ok(written.entry_id)
    }
}

/// Seeds the demo workspace. Fails with `AlreadyExists` if it is there already.
pub async fn seed(store: &Store) -> Result<DemoWorkspace, StoreError> {
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
    })
}
