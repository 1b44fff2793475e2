//! Conversations, membership over time and transcript messages (tables `conversations`,
//! `conversation_memberships`, `messages`).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::identity::validate_name;
use super::{Store, StoreError, PREVIEW_CHARS};
use crate::ids::{ActorId, AgentId, ConversationId, IdentityId, MessageId};

/// Who can read a conversation, structurally. `Unknown` yields unknown audience evidence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "conversation_topology", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Topology {
    /// The agent and exactly one counterpart.
    Direct,
    /// A private multi-party conversation.
    Group,
    /// A channel; its audience is its members at the time.
    Channel,
    /// Not proven (legacy data): sources from here carry unknown evidence.
    Unknown,
}

/// Whether a message was received by the agent or sent by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "message_direction", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Received from a participant.
    Inbound,
    /// Sent by the runtime agent.
    Outbound,
}

/// Input for [`Store::create_conversation`].
#[derive(Clone, Debug)]
pub struct NewConversation<'a> {
    /// Owning runtime agent.
    pub agent: AgentId,
    /// Connector kind, e.g. `slack`.
    pub connector: &'a str,
    /// The connector's channel id.
    pub external_channel_id: &'a str,
    /// Structural topology.
    pub topology: Topology,
    /// Human title for listings.
    pub title: &'a str,
}

/// Input for [`Store::record_message`].
#[derive(Clone, Debug)]
pub struct NewMessage<'a> {
    /// Owning runtime agent.
    pub agent: AgentId,
    /// Where it was said.
    pub conversation: ConversationId,
    /// Received or sent.
    pub direction: Direction,
    /// Who said it.
    pub sender: ActorId,
    /// The connector identity that authenticated the sender, if any.
    pub sender_identity: Option<IdentityId>,
    /// Text (transcript evidence).
    pub body: &'a str,
    /// When it was said.
    pub sent_at: DateTime<Utc>,
}

/// The destination audience as a search or a turn sees it ([`Store::destination_audience`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DestinationAudience {
    /// Who reads the destination, sorted; empty when `closed`.
    pub readers: Vec<ActorId>,
    /// Why the audience was refused, if it was: nothing is eligible for it.
    pub closed: Option<ClosedAudience>,
}

/// Why a destination audience is implausible and fails closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClosedAudience {
    /// The conversation has no recorded reader besides the agent.
    NoReaders,
    /// The speaker is not a member of the conversation now.
    SpeakerNotMember,
}

/// One membership of a conversation ([`Store::membership_history`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct Membership {
    /// The member.
    pub actor_id: ActorId,
    /// From when they read the conversation.
    pub joined_at: DateTime<Utc>,
    /// From when they no longer do (`None`: still a member).
    pub left_at: Option<DateTime<Utc>>,
}

/// A conversation as listings and rendering need it.
#[derive(Clone, Debug, Serialize, Deserialize, sqlx::FromRow)]
pub struct ConversationSummary {
    /// Stable id.
    pub id: ConversationId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Connector kind.
    pub connector: String,
    /// Connector channel id.
    pub external_channel_id: String,
    /// Topology.
    pub topology: Topology,
    /// Title.
    pub title: String,
}

impl Store {
    /// Creates a conversation of one runtime agent.
    pub async fn create_conversation(&self, new: NewConversation<'_>) -> Result<ConversationId, StoreError> {
        let connector = validate_name("connector", new.connector)?;
        let channel = validate_name("external channel id", new.external_channel_id)?;
        let id = ConversationId::generate();
        sqlx::query(
            "INSERT INTO conversations (id, runtime_agent_id, connector, external_channel_id, topology, title)
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id)
        .bind(new.agent)
        .bind(&connector)
        .bind(&channel)
        .bind(new.topology)
        .bind(new.title.trim())
        .execute(&self.pool)
        .await
        .map_err(|e| StoreError::from_unique(e, || format!("{connector} conversation {channel:?}")))?;
        Ok(id)
    }

    /// Records that `actor` joined the conversation at `at`. Joining twice without leaving is
    /// refused by the schema.
    pub async fn join_conversation(
        &self,
        conversation: ConversationId,
        actor: ActorId,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        sqlx::query("INSERT INTO conversation_memberships (conversation_id, actor_id, joined_at) VALUES ($1, $2, $3)")
            .bind(conversation)
            .bind(actor)
            .bind(at)
            .execute(&self.pool)
            .await
            .map_err(|e| StoreError::from_unique(e, || format!("open membership of actor {actor}")))?;
        Ok(())
    }

    /// Records that `actor` left the conversation at `at`.
    pub async fn leave_conversation(
        &self,
        conversation: ConversationId,
        actor: ActorId,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let n = sqlx::query(
            "UPDATE conversation_memberships SET left_at = $3
              WHERE conversation_id = $1 AND actor_id = $2 AND left_at IS NULL",
        )
        .bind(conversation)
        .bind(actor)
        .bind(at)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(n > 0)
    }

    /// Stores a transcript message. The body is evidence only; it never becomes memory by itself.
    pub async fn record_message(&self, new: NewMessage<'_>) -> Result<MessageId, StoreError> {
        record_message_on(&self.pool, new).await
    }

    /// Who reads a conversation now: its members other than the runtime agent's own actor whose
    /// membership has not ended (no `left_at`, or one still in the future), including members
    /// recorded to join later: a destination is judged by everyone who can read what is said in
    /// it, so a leave takes effect at its time, not when it is recorded. Sorted.
    /// `UnknownReference` when the conversation is not this agent's. One statement.
    ///
    /// The membership times mean: `joined_at`, from when the actor reads the conversation;
    /// `left_at`, from when they no longer do (messages are evidence for the members at their
    /// `sent_at`).
    pub async fn current_audience(
        &self,
        agent: AgentId,
        conversation: ConversationId,
    ) -> Result<Vec<ActorId>, StoreError> {
        Ok(self.destination_audience(agent, conversation, None).await?.readers)
    }

    /// The destination audience of a search or a turn in `conversation`, spoken in by `speaker`:
    /// [`Self::current_audience`]'s readers, or, when that audience is implausible, an empty
    /// one with the reason ([`ClosedAudience`]): no recorded reader, or a speaker who is not a
    /// member now (a message from outside the membership must not be answered from memories
    /// chosen for the members). An empty audience admits nothing in SQL (migration
    /// `20261205100000_fail_closed_audiences.sql`). `UnknownReference` for a conversation that is
    /// not this agent's or a speaker who is no actor, checked before anything is searched.
    pub async fn destination_audience(
        &self,
        agent: AgentId,
        conversation: ConversationId,
        speaker: Option<ActorId>,
    ) -> Result<DestinationAudience, StoreError> {
        destination_audience_on(&self.pool, agent, conversation, speaker).await
    }

    /// Every membership of a conversation, open and closed, oldest first: who joined and left
    /// when ([`Self::current_audience`] explains what the times mean). `UnknownReference` when
    /// the conversation is not this agent's.
    pub async fn membership_history(
        &self,
        agent: AgentId,
        conversation: ConversationId,
    ) -> Result<Vec<Membership>, StoreError> {
        self.conversation(agent, conversation).await?;
        Ok(sqlx::query_as(
            "SELECT actor_id, joined_at, left_at FROM conversation_memberships
              WHERE conversation_id = $1 ORDER BY joined_at, id",
        )
        .bind(conversation)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Of `conversations` (this agent's), the titles of those whose members now include
    /// every one of `readers` (none for no readers): the conversations a destination audience may be told a memory
    /// came from. The others (and ids that are not this agent's) are absent. One statement for
    /// every origin a search renders, instead of two or three per origin.
    pub async fn titles_readable_by(
        &self,
        agent: AgentId,
        conversations: &[ConversationId],
        readers: &[ActorId],
    ) -> Result<HashMap<ConversationId, String>, StoreError> {
        let ids: Vec<Uuid> = conversations.iter().map(|c| c.0).collect();
        let readers: Vec<Uuid> = readers.iter().map(|r| r.0).collect();
        let rows: Vec<(ConversationId, String)> = sqlx::query_as(
            "SELECT c.id, c.title
               FROM conversations c
              WHERE c.runtime_agent_id = $1 AND c.id = ANY($2::uuid[]) AND cardinality($3::uuid[]) > 0
                AND NOT EXISTS (SELECT 1 FROM unnest($3::uuid[]) AS reader(actor_id)
                                 WHERE NOT EXISTS (SELECT 1 FROM conversation_memberships cm
                                                    WHERE cm.conversation_id = c.id AND cm.actor_id = reader.actor_id
                                                      AND cm.joined_at <= now()
                                                      AND (cm.left_at IS NULL OR cm.left_at > now())))",
        )
        .bind(agent)
        .bind(ids)
        .bind(readers)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.into_iter().collect())
    }

    /// One conversation of this runtime agent, or `UnknownReference`.
    pub async fn conversation(
        &self,
        agent: AgentId,
        conversation: ConversationId,
    ) -> Result<ConversationSummary, StoreError> {
        sqlx::query_as(
            "SELECT id, runtime_agent_id, connector, external_channel_id, topology, title
               FROM conversations WHERE id = $1 AND runtime_agent_id = $2",
        )
        .bind(conversation)
        .bind(agent)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::UnknownReference { kind: ConversationId::LABEL, id: conversation.0 })
    }

    /// Finds a conversation by id text or external channel id (CLI convenience).
    pub async fn find_conversation(&self, agent: AgentId, text: &str) -> Result<ConversationId, StoreError> {
        let rows: Vec<(ConversationId,)> = sqlx::query_as(
            "SELECT id FROM conversations
              WHERE runtime_agent_id = $1 AND (id::text = lower($2) OR external_channel_id = $2)",
        )
        .bind(agent)
        .bind(text.trim())
        .fetch_all(&self.pool)
        .await?;
        match rows.as_slice() {
            [(id,)] => Ok(*id),
            [] => Err(StoreError::invalid("conversation", format!("no conversation matches {text:?}"))),
            _ => {
                Err(StoreError::invalid("conversation", format!("{text:?} matches several conversations; use its id")))
            }
        }
    }
}

/// A conversation for pickers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ConversationChoice {
    /// Conversation id.
    pub id: ConversationId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Title (e.g. `#engineering`).
    pub title: String,
    /// Who can read it, structurally.
    pub topology: Topology,
    /// Connector name.
    pub connector: String,
}

/// A transcript message as the lineage graph shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct LineageMessage {
    /// Message id.
    pub id: MessageId,
    /// Where it was said.
    pub conversation_id: ConversationId,
    /// That conversation's title.
    pub conversation_title: String,
    /// Received or sent by the agent.
    pub direction: Direction,
    /// Sender actor.
    pub sender: ActorId,
    /// Sender display name (current).
    pub sender_name: String,
    /// Whether a connector authenticated the sender.
    pub authenticated: bool,
    /// When it was sent.
    pub sent_at: DateTime<Utc>,
    /// The start of the message (`[erased]` once erased).
    pub excerpt: String,
    /// Who erased it, when and why (`None`: not erased).
    #[sqlx(skip)]
    pub erased: Option<crate::erasure::ErasureNote>,
}

impl Store {
    /// Conversations of `agent` (or of every agent), by title, for the explain picker.
    pub async fn list_conversations(&self, agent: Option<AgentId>) -> Result<Vec<ConversationChoice>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT id, runtime_agent_id, title, topology, connector FROM conversations
              WHERE $1::uuid IS NULL OR runtime_agent_id = $1
              ORDER BY title, id",
        )
        .bind(agent)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The transcript messages a lineage names, with sender and conversation, for the graph.
    pub async fn lineage_messages(&self, messages: &[MessageId]) -> Result<Vec<LineageMessage>, StoreError> {
        let mut rows: Vec<LineageMessage> = sqlx::query_as(
            "SELECT m.id, m.conversation_id, c.title AS conversation_title, m.direction,
                    m.sender_actor_id AS sender, a.display_name AS sender_name,
                    m.sender_identity_id IS NOT NULL AS authenticated, m.sent_at, left(m.body, $2) AS excerpt
               FROM messages m
               JOIN conversations c ON c.id = m.conversation_id
               JOIN actors a ON a.id = m.sender_actor_id
              WHERE m.id = ANY($1)
              ORDER BY m.sent_at, m.id",
        )
        .bind(messages)
        .bind(PREVIEW_CHARS)
        .fetch_all(&self.pool)
        .await?;
        let mut notes = crate::erasure::notes_for_messages(&self.pool, messages).await?;
        for row in &mut rows {
            row.erased = notes.remove(&row.id);
        }
        Ok(rows)
    }
}

/// [`Store::record_message`] on `executor`: the turn engine records a reply in the transaction
/// that rechecked it and persists its turn, so an erasure finds all of it or the recheck saw it.
pub(crate) async fn record_message_on<'e>(
    executor: impl PgExecutor<'e>,
    new: NewMessage<'_>,
) -> Result<MessageId, StoreError> {
    if new.body.contains('\0') {
        return Err(StoreError::invalid("message body", "must not contain NUL characters"));
    }
    let id = MessageId::generate();
    let inserted = sqlx::query(
        "INSERT INTO messages (id, runtime_agent_id, conversation_id, direction, sender_actor_id,
                               sender_identity_id, body, sent_at)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8
          WHERE EXISTS (SELECT 1 FROM conversations WHERE id = $3 AND runtime_agent_id = $2)",
    )
    .bind(id)
    .bind(new.agent)
    .bind(new.conversation)
    .bind(new.direction)
    .bind(new.sender)
    .bind(new.sender_identity)
    .bind(new.body)
    .bind(new.sent_at)
    .execute(executor)
    .await?
    .rows_affected();
    if inserted == 0 {
        return Err(StoreError::UnknownReference { kind: ConversationId::LABEL, id: new.conversation.0 });
    }
    Ok(id)
}

/// [`Store::destination_audience`] on `executor`: a delivery's recheck reads the audience in the
/// transaction that records the reply.
pub(crate) async fn destination_audience_on<'e>(
    executor: impl PgExecutor<'e>,
    agent: AgentId,
    conversation: ConversationId,
    speaker: Option<ActorId>,
) -> Result<DestinationAudience, StoreError> {
    let row: Option<(Vec<Uuid>, bool, bool)> = sqlx::query_as(
        "SELECT coalesce((SELECT array_agg(DISTINCT cm.actor_id ORDER BY cm.actor_id)
                            FROM conversation_memberships cm
                           WHERE cm.conversation_id = c.id AND cm.actor_id <> ra.actor_id
                             AND (cm.left_at IS NULL OR cm.left_at > now())), '{}'),
                $3::uuid IS NULL OR EXISTS (SELECT 1 FROM actors a WHERE a.id = $3),
                EXISTS (SELECT 1 FROM conversation_memberships cm
                         WHERE cm.conversation_id = c.id AND cm.actor_id = $3 AND cm.actor_id <> ra.actor_id
                           AND cm.joined_at <= now() AND (cm.left_at IS NULL OR cm.left_at > now()))
           FROM conversations c
           JOIN runtime_agents ra ON ra.id = c.runtime_agent_id
          WHERE c.id = $2 AND c.runtime_agent_id = $1",
    )
    .bind(agent)
    .bind(conversation)
    .bind(speaker)
    .fetch_optional(executor)
    .await?;
    let (readers, speaker_known, speaker_member) =
        row.ok_or(StoreError::UnknownReference { kind: ConversationId::LABEL, id: conversation.0 })?;
    if let (Some(speaker), false) = (speaker, speaker_known) {
        return Err(StoreError::UnknownReference { kind: ActorId::LABEL, id: speaker.0 });
    }
    let closed = match (readers.is_empty(), speaker) {
        (true, _) => Some(ClosedAudience::NoReaders),
        (false, Some(_)) if !speaker_member => Some(ClosedAudience::SpeakerNotMember),
        _ => None,
    };
    Ok(match closed {
        Some(reason) => DestinationAudience { readers: Vec::new(), closed: Some(reason) },
        None => DestinationAudience { readers: readers.into_iter().map(ActorId).collect(), closed: None },
    })
}
