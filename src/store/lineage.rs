//! Lineage sources and their audience evidence (tables `revision_sources`,
//! `revision_source_audience`).
//!
//! Evidence is computed here, in SQL, from structured rows, never taken from a caller:
//! - a message source's audience is the conversation's members at the time the message was sent
//!   (plus its inbound sender); a conversation of `unknown` topology gives `unknown` evidence;
//! - a retrieved-revision or parent-revision source's audience is the intersection of that
//!   revision's own source audiences, and `unknown` if any of them is unknown. Grants on the
//!   retrieved revision are deliberately not inherited: a derived memory with mixed sources is
//!   withheld for review rather than silently widened.

use serde::{Deserialize, Serialize};
use sqlx::{Postgres, Transaction};

use super::StoreError;
use crate::ids::{AgentId, MessageId, RevisionId, SourceId};

/// A lineage reference supplied with a write. The store validates that each belongs to the same
/// runtime agent; a foreign or missing one rejects the whole write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum SourceRef {
    /// The turn's authenticated inbound message.
    Message(MessageId),
    /// A transcript message loaded into the turn's history.
    HistoryMessage(MessageId),
    /// A memory revision retrieved during the turn.
    RetrievedRevision(RevisionId),
}

/// Inserts one source row with its computed evidence.
pub(crate) async fn insert_source(
    tx: &mut Transaction<'_, Postgres>,
    agent: AgentId,
    revision: RevisionId,
    source: SourceRef,
) -> Result<(), StoreError> {
    match source {
        SourceRef::Message(m) => insert_message_source(tx, agent, revision, m, "message").await,
        SourceRef::HistoryMessage(m) => insert_message_source(tx, agent, revision, m, "history_message").await,
        SourceRef::RetrievedRevision(r) => insert_revision_source(tx, agent, revision, r, "retrieved_revision").await,
    }
}

/// One statement: finds the message (of this agent only), inserts the source with its evidence
/// and, when known, the audience: the members when the message was sent plus its inbound sender,
/// without the agent's own actor. Nothing is inserted for a foreign or missing message.
async fn insert_message_source(
    tx: &mut Transaction<'_, Postgres>,
    agent: AgentId,
    revision: RevisionId,
    message: MessageId,
    kind: &str,
) -> Result<(), StoreError> {
    let inserted: i64 = sqlx::query_scalar(
        "WITH msg AS (
             SELECT m.id, m.conversation_id, m.sent_at, m.sender_actor_id, m.direction,
                    c.topology <> 'unknown' AS known
               FROM messages m JOIN conversations c ON c.id = m.conversation_id
              WHERE m.id = $1 AND m.runtime_agent_id = $2
         ), source AS (
             INSERT INTO revision_sources (id, revision_id, runtime_agent_id, kind, message_id, evidence, evidence_basis)
             SELECT $3, $4, $2, $5::revision_source_kind, msg.id,
                    CASE WHEN msg.known THEN 'known' ELSE 'unknown' END::audience_evidence_state,
                    CASE WHEN msg.known THEN 'conversation members when the message was sent'
                         ELSE 'conversation topology is not proven' END
               FROM msg
             RETURNING id
         ), audience AS (
             INSERT INTO revision_source_audience (source_id, actor_id)
             SELECT DISTINCT $3::uuid, readers.actor_id
               FROM msg
               CROSS JOIN LATERAL (
                   SELECT cm.actor_id FROM conversation_memberships cm
                    WHERE cm.conversation_id = msg.conversation_id AND cm.joined_at <= msg.sent_at
                      AND (cm.left_at IS NULL OR cm.left_at > msg.sent_at)
                   UNION
                   SELECT msg.sender_actor_id WHERE msg.direction = 'inbound'
               ) readers
               JOIN runtime_agents ra ON ra.id = $2
              WHERE msg.known AND readers.actor_id <> ra.actor_id
         )
         SELECT count(*) FROM source",
    )
    .bind(message)
    .bind(agent)
    .bind(SourceId::generate())
    .bind(revision)
    .bind(kind)
    .fetch_one(&mut **tx)
    .await?;
    if inserted == 0 {
        return Err(StoreError::ForeignOrMissingSource { kind: "message", id: message.0 });
    }
    Ok(())
}

/// Inserts a source naming another revision, with the intersection of its evidence.
pub(crate) async fn insert_revision_source(
    tx: &mut Transaction<'_, Postgres>,
    agent: AgentId,
    revision: RevisionId,
    parent: RevisionId,
    kind: &str,
) -> Result<(), StoreError> {
    let found: Option<(i64, bool)> = sqlx::query_as(
        "SELECT count(s.id), coalesce(bool_or(s.evidence = 'unknown'), false)
           FROM memory_entry_revisions r LEFT JOIN revision_sources s ON s.revision_id = r.id
          WHERE r.id = $1 AND r.runtime_agent_id = $2
          GROUP BY r.id",
    )
    .bind(parent)
    .bind(agent)
    .fetch_optional(&mut **tx)
    .await?;
    let Some((source_count, any_unknown)) = found else {
        return Err(StoreError::ForeignOrMissingSource { kind: "revision", id: parent.0 });
    };
    let known = source_count > 0 && !any_unknown;
    let source = SourceId::generate();
    let (evidence, basis) = if known {
        ("known", "intersection of the audiences of that revision's sources")
    } else {
        ("unknown", "that revision has a source of unknown audience")
    };
    sqlx::query(
        "INSERT INTO revision_sources (id, revision_id, runtime_agent_id, kind, parent_revision_id, evidence, evidence_basis)
         VALUES ($1, $2, $3, $4::revision_source_kind, $5, $6::audience_evidence_state, $7)",
    )
    .bind(source)
    .bind(revision)
    .bind(agent)
    .bind(kind)
    .bind(parent)
    .bind(evidence)
    .bind(basis)
    .execute(&mut **tx)
    .await?;
    if known {
        sqlx::query(
            "INSERT INTO revision_source_audience (source_id, actor_id)
             SELECT $1, a.actor_id FROM revision_source_audience a
               JOIN revision_sources s ON s.id = a.source_id
              WHERE s.revision_id = $2
              GROUP BY a.actor_id
             HAVING count(*) = $3",
        )
        .bind(source)
        .bind(parent)
        .bind(source_count)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Copies every source of `from` (with its evidence) onto `to`: an amendment keeps all earlier
/// evidence, so it can never become more shareable than what it amends.
pub(crate) async fn copy_sources(
    tx: &mut Transaction<'_, Postgres>,
    from: RevisionId,
    to: RevisionId,
) -> Result<(), StoreError> {
    sqlx::query(
        "WITH old AS MATERIALIZED (
             SELECT s.*, gen_random_uuid() AS new_id FROM revision_sources s WHERE s.revision_id = $1
         ), copied AS (
             INSERT INTO revision_sources (id, revision_id, runtime_agent_id, kind, message_id,
                                           parent_revision_id, evidence, evidence_basis)
             SELECT new_id, $2, runtime_agent_id, kind, message_id, parent_revision_id, evidence, evidence_basis
               FROM old
             RETURNING id
         )
         INSERT INTO revision_source_audience (source_id, actor_id)
         SELECT old.new_id, a.actor_id FROM old JOIN revision_source_audience a ON a.source_id = old.id",
    )
    .bind(from)
    .bind(to)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
