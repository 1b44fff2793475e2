//! Lineage sources and their audience evidence (table `revision_sources`; a source's audience is
//! its `audience` column, sorted actor ids, NULL exactly when the evidence is unknown).
//!
//! Evidence is computed in SQL from structured rows, never taken from a caller (message sources
//! by the schema's `memory_insert_message_sources`, migration `20261204000000`; derived sources by
//! the statements here):
//! - a message source's audience is the conversation's members at the time the message was sent
//!   (plus its inbound sender); a conversation of `unknown` topology gives `unknown` evidence;
//! - a retrieved-revision or parent-revision source's audience is the intersection of that
//!   revision's own source audiences, and `unknown` if any of them is unknown. Grants on the
//!   retrieved revision are deliberately not inherited: a derived memory with mixed sources is
//!   withheld for review rather than silently widened.

use serde::{Deserialize, Serialize};
use sqlx::postgres::PgArguments;
use sqlx::query::{Query, QueryAs};
use sqlx::{Postgres, Transaction};

use chrono::{DateTime, Utc};

use super::{StoreError, PREVIEW_CHARS};
use crate::ids::{AgentId, EntryId, MessageId, RevisionId, SourceId};

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

/// What a stored lineage source points at (the `revision_source_kind` enum), so readers of
/// `revision_sources` get a closed set instead of a string to compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "revision_source_kind", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// The authenticated inbound message of the turn that wrote the revision.
    Message,
    /// A transcript message loaded into that turn.
    HistoryMessage,
    /// The revision an amendment replaced.
    ParentRevision,
    /// A memory retrieved in that turn.
    RetrievedRevision,
}

impl SourceKind {
    /// The stored name (`message`, `history_message`, ...), as the CLI prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::HistoryMessage => "history_message",
            Self::ParentRevision => "parent_revision",
            Self::RetrievedRevision => "retrieved_revision",
        }
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
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

/// Inserts the retrieved-revision sources among `planned`, one at a time (each computes the
/// intersection of the retrieved revision's evidence).
pub(crate) async fn insert_retrieved_revision_sources(
    tx: &mut Transaction<'_, Postgres>,
    planned: &[PlannedSource],
) -> Result<(), StoreError> {
    for p in planned {
        if let SourceRef::RetrievedRevision(r) = p.source {
            insert_revision_source_with_id(tx, p.id, p.agent, p.revision, r, "retrieved_revision").await?;
        }
    }
    Ok(())
}

/// Whether any of `planned` names a retrieved revision (written by
/// [`insert_retrieved_revision_sources`], not by the message-source statement).
pub(crate) fn names_retrieved_revisions(planned: &[PlannedSource]) -> bool {
    planned.iter().any(|p| matches!(p.source, SourceRef::RetrievedRevision(_)))
}

/// The message sources of a write as parallel columns: the array parameters of the schema's
/// `memory_insert_message_sources` (and `memory_write_creates`), which find each message of the
/// writing agent and compute its evidence in SQL: the conversation's members when the message was
/// sent plus its inbound sender, without the agent's own actor; `unknown` for a conversation of
/// unknown topology.
#[derive(Debug, Default)]
pub(crate) struct MessageSourceColumns {
    ids: Vec<uuid::Uuid>,
    agents: Vec<uuid::Uuid>,
    revisions: Vec<uuid::Uuid>,
    messages: Vec<uuid::Uuid>,
    kinds: Vec<&'static str>,
}

impl MessageSourceColumns {
    /// The message and history-message sources among `planned`, in order.
    pub(crate) fn of(planned: &[PlannedSource]) -> Self {
        let mut columns = MessageSourceColumns::default();
        for p in planned {
            let (message, kind) = match p.source {
                SourceRef::Message(m) => (m, "message"),
                SourceRef::HistoryMessage(m) => (m, "history_message"),
                SourceRef::RetrievedRevision(_) => continue,
            };
            columns.ids.push(p.id.0);
            columns.agents.push(p.agent.0);
            columns.revisions.push(p.revision.0);
            columns.messages.push(message.0);
            columns.kinds.push(kind);
        }
        columns
    }

    /// Binds the columns as the query's next five parameters, in the order both schema functions
    /// take them (source ids, agents, revisions, messages, kinds).
    pub(crate) fn bind<'q>(&'q self, query: Query<'q, Postgres, PgArguments>) -> Query<'q, Postgres, PgArguments> {
        query.bind(&self.ids).bind(&self.agents).bind(&self.revisions).bind(&self.messages).bind(&self.kinds)
    }

    /// [`Self::bind`] for a query that returns rows as `O`.
    pub(crate) fn bind_as<'q, O>(
        &'q self,
        query: QueryAs<'q, Postgres, O, PgArguments>,
    ) -> QueryAs<'q, Postgres, O, PgArguments> {
        query.bind(&self.ids).bind(&self.agents).bind(&self.revisions).bind(&self.messages).bind(&self.kinds)
    }
}

/// The constraint name `memory_insert_message_sources` raises for a missing or foreign message.
const MESSAGE_OF_THE_WRITING_AGENT: &str = "revision_sources_message_of_the_writing_agent";

/// The typed error for a message source that is missing or belongs to another runtime agent
/// (the schema reports the first such message's id in the error's detail); `None` for any other
/// error.
pub(crate) fn foreign_message_source(err: &sqlx::Error) -> Option<StoreError> {
    let sqlx::Error::Database(db) = err else { return None };
    if db.constraint() != Some(MESSAGE_OF_THE_WRITING_AGENT) {
        return None;
    }
    let detail = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().and_then(|pg| pg.detail());
    let id = detail.and_then(|d| d.parse().ok()).unwrap_or_default();
    Some(StoreError::ForeignOrMissingSource { kind: "message", id })
}

/// Inserts a source naming another revision, with the intersection of its evidence.
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

/// A revision that another revision names as a source, for the lineage graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct LineageRevision {
    /// Revision id.
    pub id: RevisionId,
    /// Its entry.
    pub entry_id: EntryId,
    /// Revision number.
    pub revision_number: i32,
    /// When it was learned (`memory_learned_times`).
    pub learned_at: DateTime<Utc>,
    /// The start of its body (`[erased]` once erased).
    pub body_preview: String,
    /// Who erased its text, when and why (`None`: not erased).
    #[sqlx(skip)]
    pub erased: Option<crate::erasure::ErasureNote>,
}

impl super::Store {
    /// The revisions a lineage names (parents and retrieved memories), for the graph.
    pub async fn lineage_revisions(&self, revisions: &[RevisionId]) -> Result<Vec<LineageRevision>, StoreError> {
        let mut rows: Vec<LineageRevision> = sqlx::query_as(
            "SELECT r.id, r.entry_id, r.revision_number, t.learned_at, left(r.body, $2) AS body_preview
               FROM memory_entry_revisions r
              CROSS JOIN LATERAL memory_learned_times(ARRAY[r.id]) AS t
              WHERE r.id = ANY($1) ORDER BY r.id",
        )
        .bind(revisions)
        .bind(PREVIEW_CHARS)
        .fetch_all(&self.pool)
        .await?;
        let mut notes = crate::erasure::notes_for_revisions(&self.pool, revisions).await?;
        for row in &mut rows {
            row.erased = notes.remove(&row.id);
        }
        Ok(rows)
    }
}
