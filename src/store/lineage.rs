//! Lineage sources and their audience evidence (table `revision_sources`; a source's audience is
//! its `audience` column, sorted actor ids, NULL exactly when the evidence is unknown).
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

/// One lineage source of a revision being written, with its id chosen by the caller so that
/// sources keep the order in which they were named (ids are time-ordered) however they are
/// batched into statements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PlannedSource {
    /// The source row's id.
    pub id: SourceId,
    /// The runtime agent writing; every referenced row must belong to it.
    pub agent: AgentId,
    /// The revision the source is recorded for.
    pub revision: RevisionId,
    /// What the source names.
    pub source: SourceRef,
}

/// Inserts the sources with their computed evidence: every message source of every revision in
/// one statement, then each retrieved-revision source. A foreign or missing reference rejects
/// the call (and so the caller's transaction) with the first such reference.
pub(crate) async fn insert_sources(
    tx: &mut Transaction<'_, Postgres>,
    planned: &[PlannedSource],
) -> Result<(), StoreError> {
    insert_message_sources(tx, planned).await?;
    for p in planned {
        if let SourceRef::RetrievedRevision(r) = p.source {
            insert_revision_source_with_id(tx, p.id, p.agent, p.revision, r, "retrieved_revision").await?;
        }
    }
    Ok(())
}

/// One statement for all message sources: finds each message (of the writing agent only),
/// inserts the source with its evidence and, when known, the audience: the members when the
/// message was sent plus its inbound sender, without the agent's own actor. Nothing is inserted
/// for a foreign or missing message, and the first such message is reported.
async fn insert_message_sources(
    tx: &mut Transaction<'_, Postgres>,
    planned: &[PlannedSource],
) -> Result<(), StoreError> {
    let mut ids = Vec::new();
    let mut agents = Vec::new();
    let mut revisions = Vec::new();
    let mut messages = Vec::new();
    let mut kinds = Vec::new();
    for p in planned {
        let (message, kind) = match p.source {
            SourceRef::Message(m) => (m, "message"),
            SourceRef::HistoryMessage(m) => (m, "history_message"),
            SourceRef::RetrievedRevision(_) => continue,
        };
        ids.push(p.id.0);
        agents.push(p.agent.0);
        revisions.push(p.revision.0);
        messages.push(message.0);
        kinds.push(kind);
    }
    if ids.is_empty() {
        return Ok(());
    }
    let inserted: Vec<uuid::Uuid> = sqlx::query_scalar(
        "WITH input AS (
             SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[])
                        AS i(source_id, agent_id, revision_id, message_id, kind)
         ), msg AS (
             SELECT i.source_id, i.agent_id, i.revision_id, i.kind, m.id, c.topology <> 'unknown' AS known,
                    ARRAY(SELECT readers.actor_id
                            FROM (SELECT cm.actor_id FROM conversation_memberships cm
                                   WHERE cm.conversation_id = m.conversation_id AND cm.joined_at <= m.sent_at
                                     AND (cm.left_at IS NULL OR cm.left_at > m.sent_at)
                                  UNION
                                  SELECT m.sender_actor_id WHERE m.direction = 'inbound') readers
                           WHERE readers.actor_id <> ra.actor_id
                           ORDER BY readers.actor_id) AS readers
               FROM input i
               JOIN messages m ON m.id = i.message_id AND m.runtime_agent_id = i.agent_id
               JOIN conversations c ON c.id = m.conversation_id
               JOIN runtime_agents ra ON ra.id = m.runtime_agent_id
         )
         INSERT INTO revision_sources (id, revision_id, runtime_agent_id, kind, message_id, evidence, evidence_basis,
                                       audience)
         SELECT msg.source_id, msg.revision_id, msg.agent_id, msg.kind::revision_source_kind, msg.id,
                CASE WHEN msg.known THEN 'known' ELSE 'unknown' END::audience_evidence_state,
                CASE WHEN msg.known THEN 'conversation members when the message was sent'
                     ELSE 'conversation topology is not proven' END,
                CASE WHEN msg.known THEN msg.readers END
           FROM msg
         RETURNING id",
    )
    .bind(&ids)
    .bind(&agents)
    .bind(&revisions)
    .bind(&messages)
    .bind(&kinds)
    .fetch_all(&mut **tx)
    .await?;
    if inserted.len() == ids.len() {
        return Ok(());
    }
    let inserted: std::collections::HashSet<uuid::Uuid> = inserted.into_iter().collect();
    let missing = ids.iter().zip(&messages).find(|(id, _)| !inserted.contains(*id)).map(|(_, m)| *m);
    Err(StoreError::ForeignOrMissingSource { kind: "message", id: missing.unwrap_or_default() })
}

/// Inserts a source naming another revision, with the intersection of its evidence.
pub(crate) async fn insert_revision_source(
    tx: &mut Transaction<'_, Postgres>,
    agent: AgentId,
    revision: RevisionId,
    parent: RevisionId,
    kind: &str,
) -> Result<(), StoreError> {
    insert_revision_source_with_id(tx, SourceId::generate(), agent, revision, parent, kind).await
}

async fn insert_revision_source_with_id(
    tx: &mut Transaction<'_, Postgres>,
    source: SourceId,
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
    let (evidence, basis) = if known {
        ("known", "intersection of the audiences of that revision's sources")
    } else {
        ("unknown", "that revision has a source of unknown audience")
    };
    sqlx::query(
        "INSERT INTO revision_sources (id, revision_id, runtime_agent_id, kind, parent_revision_id, evidence, evidence_basis,
                                       audience)
         VALUES ($1, $2, $3, $4::revision_source_kind, $5, $6::audience_evidence_state, $7,
                 CASE WHEN $8 THEN memory_source_audience_intersection($5) END)",
    )
    .bind(source)
    .bind(revision)
    .bind(agent)
    .bind(kind)
    .bind(parent)
    .bind(evidence)
    .bind(basis)
    .bind(known)
    .execute(&mut **tx)
    .await?;
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
        "INSERT INTO revision_sources (id, revision_id, runtime_agent_id, kind, message_id, parent_revision_id,
                                       evidence, evidence_basis, audience)
         SELECT gen_random_uuid(), $2, runtime_agent_id, kind, message_id, parent_revision_id, evidence,
                evidence_basis, audience
           FROM revision_sources WHERE revision_id = $1",
    )
    .bind(from)
    .bind(to)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
