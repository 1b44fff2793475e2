//! The authenticated context of a turn: who spoke, where, to whom, read from the stored inbound
//! message and its connector identity, never from the model. Also the loaded history.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::TurnError;
use crate::ids::{ActorId, AgentId, ConversationId, IdentityId, MessageId};
use crate::store::{Direction, NewMessage, Store, Topology};

/// Everything the engine knows about the turn's origin, all from connector-authenticated rows.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TurnContext {
    /// The runtime agent answering.
    pub agent: AgentId,
    /// The actor the agent speaks as: the sender of its reply (read with the context, so the
    /// delivery's transaction needs no lookup).
    pub agent_actor: ActorId,
    /// The conversation (destination of the reply).
    pub conversation: ConversationId,
    /// The conversation's title.
    pub conversation_title: String,
    /// Its topology (sharing requests need `direct`).
    pub topology: Topology,
    /// The connector (identity references in tool arguments resolve on it).
    pub connector: String,
    /// The inbound message that started the turn.
    pub inbound: MessageId,
    /// Its text.
    pub body: String,
    /// When it was sent.
    pub sent_at: DateTime<Utc>,
    /// The authenticated sender (the source actor of anything remembered in this turn).
    pub sender: ActorId,
    /// The connector identity that authenticated the sender.
    pub sender_identity: IdentityId,
    /// The sender's rendered label.
    pub sender_label: String,
}

/// One loaded transcript message.
#[derive(Clone, Debug)]
pub struct HistoryMessage {
    /// Its id (a lineage source of memories written in the turn).
    pub id: MessageId,
    /// Received or sent.
    pub direction: Direction,
    /// Rendered speaker label.
    pub speaker: String,
    /// Text.
    pub body: String,
}

type ContextRow =
    (AgentId, ActorId, ConversationId, String, Topology, String, String, DateTime<Utc>, ActorId, IdentityId);

/// Loads the context of `inbound`, which must be an inbound message whose sender was
/// authenticated by a connector identity belonging to that very actor.
pub async fn load_context(store: &Store, inbound: MessageId) -> Result<TurnContext, TurnError> {
    let row: Option<ContextRow> = sqlx::query_as(
        "SELECT m.runtime_agent_id, ra.actor_id, m.conversation_id, c.title, c.topology, c.connector, m.body, m.sent_at,
                m.sender_actor_id, m.sender_identity_id
           FROM messages m
           JOIN conversations c ON c.id = m.conversation_id
           JOIN runtime_agents ra ON ra.id = m.runtime_agent_id
           JOIN connector_identities ci ON ci.id = m.sender_identity_id AND ci.actor_id = m.sender_actor_id
          WHERE m.id = $1 AND m.direction = 'inbound'",
    )
    .bind(inbound)
    .fetch_optional(store.pool())
    .await?;
    let Some((agent, agent_actor, conversation, title, topology, connector, body, sent_at, sender, identity)) = row
    else {
        return Err(TurnError::NotAuthenticatedInbound(inbound));
    };
    let sender_label =
        store.actor_summaries(&[sender]).await?.first().map(|a| a.label()).unwrap_or_else(|| sender.to_string());
    Ok(TurnContext {
        agent,
        agent_actor,
        conversation,
        conversation_title: title,
        topology,
        connector,
        inbound,
        body,
        sent_at,
        sender,
        sender_identity: identity,
        sender_label,
    })
}

/// The last `limit` messages of the conversation before the inbound one, oldest first.
pub async fn load_history(store: &Store, ctx: &TurnContext, limit: u32) -> Result<Vec<HistoryMessage>, TurnError> {
    let rows: Vec<(MessageId, Direction, ActorId, String)> = sqlx::query_as(
        "SELECT id, direction, sender_actor_id, body FROM (
             SELECT m.id, m.direction, m.sender_actor_id, m.body, m.sent_at
               FROM messages m
              WHERE m.conversation_id = $1 AND m.runtime_agent_id = $2 AND m.id <> $3
                AND (m.sent_at, m.id) < ($4, $3)
              ORDER BY m.sent_at DESC, m.id DESC
              LIMIT $5) recent
          ORDER BY sent_at, id",
    )
    .bind(ctx.conversation)
    .bind(ctx.agent)
    .bind(ctx.inbound)
    .bind(ctx.sent_at)
    .bind(i64::from(limit))
    .fetch_all(store.pool())
    .await?;
    let mut actors: Vec<ActorId> = rows.iter().map(|r| r.2).collect();
    actors.sort();
    actors.dedup();
    let labels: std::collections::HashMap<ActorId, String> =
        store.actor_summaries(&actors).await?.into_iter().map(|a| (a.id, a.label())).collect();
    Ok(rows
        .into_iter()
        .map(|(id, direction, sender, body)| HistoryMessage {
            id,
            direction,
            speaker: labels.get(&sender).cloned().unwrap_or_else(|| sender.to_string()),
            body,
        })
        .collect())
}

/// Records an inbound message from a connector-authenticated sender (`connector`, `external_id`)
/// and returns its id, ready for [`super::TurnEngine::run_turn`]. Fails if the identity is unknown:
/// an unauthenticated message never starts a turn.
pub async fn receive(
    store: &Store,
    agent: AgentId,
    conversation: ConversationId,
    connector: &str,
    external_id: &str,
    body: &str,
) -> Result<MessageId, TurnError> {
    let Some((identity, actor)) = store.resolve_identity(connector, external_id).await? else {
        return Err(TurnError::UnknownIdentity {
            connector: connector.to_owned(),
            external_id: external_id.to_owned(),
        });
    };
    Ok(store
        .record_message(NewMessage {
            agent,
            conversation,
            direction: Direction::Inbound,
            sender: actor,
            sender_identity: Some(identity),
            body,
            sent_at: Utc::now(),
        })
        .await?)
}
