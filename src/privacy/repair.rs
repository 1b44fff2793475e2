//! Legacy audience repair, operator evidence review and the review queue it is decided from
//! ([`evidence_review`], [`revision_under_review`]: current revisions withheld for sources of
//! unknown audience evidence, with the transcript facts an operator weighs).
//!
//! The rules live in SQL (`memory_direct_proof`, `memory_repair_audience_evidence`,
//! `memory_review_source_evidence`, `memory_keep_source_evidence_unknown`; today's definitions are
//! in `schema/current.sql`, `docs/policy.md` says where they sit in the policy) so that the forward
//! migration, the CLI and the console apply exactly the same proof. This module runs them: a dry
//! run executes the real repair inside a transaction and rolls it back, so what it reports is
//! precisely what a real run would change.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, QueryBuilder};

use crate::ids::{ActorId, AgentId, ConversationId, EntryId, IdentityId, MessageId, RevisionId, SourceId};
use crate::store::{page_size, SourceKind, Store, StoreError, Topology, PREVIEW_CHARS};

/// Why a repair or review did not happen. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    /// A repair or review needs a human-readable reason for the log.
    #[error("a reason is required (it is recorded in the evidence log)")]
    MissingReason,
    /// The log keeps reasons of at most [`MAX_REASON_CHARS`] characters.
    #[error("the reason is too long: at most {MAX_REASON_CHARS} characters")]
    ReasonTooLong,
    /// A review must name the audience it asserts.
    #[error("an evidence review must name at least one actor")]
    EmptyAudience,
    /// The connected role is not a member of `mesh_operator`.
    #[error("role {0:?} is not a mesh operator; ask an administrator to grant mesh_operator")]
    NotAnOperator(String),
    /// The source does not exist or is already known (e.g. another operator reviewed it first).
    #[error("source {0} does not exist or already has known evidence (perhaps another operator reviewed it); nothing was written")]
    NotReviewable(SourceId),
    /// A review named an actor id with no actor row: evidence names real actors only.
    #[error("the review names an actor that does not exist")]
    UnknownActor,
    /// PostgreSQL failed; the transaction rolled back.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

/// The longest reason the logs (`evidence_repairs`, `operator_actions`) keep.
pub const MAX_REASON_CHARS: usize = 2000;

/// One source whose evidence a repair turned from unknown into known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct RepairedSource {
    /// The source row.
    pub source_id: SourceId,
    /// The revision it belongs to.
    pub revision_id: RevisionId,
    /// Which proof applied: `direct_topology`, `later_direct_observation` or
    /// `derived_from_known_revision`.
    pub rule: String,
    /// The audience now recorded.
    pub audience: Vec<ActorId>,
}

/// Runs the legacy audience repair. With `dry_run` the changes are computed by the real repair
/// and rolled back.
pub async fn repair_audience_evidence(
    pool: &PgPool,
    reason: &str,
    dry_run: bool,
) -> Result<Vec<RepairedSource>, RepairError> {
    if reason.trim().is_empty() {
        return Err(RepairError::MissingReason);
    }
    let mut tx = pool.begin().await?;
    let repaired: Vec<RepairedSource> =
        sqlx::query_as("SELECT source_id, revision_id, rule, audience FROM memory_repair_audience_evidence($1)")
            .bind(reason.trim())
            .fetch_all(&mut *tx)
            .await?;
    if dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
    }
    Ok(repaired)
}

/// Records an authenticated connector observation of a conversation's topology and counterpart
/// (e.g. a later direct-message event for the same channel): the proof that repair rule 2 uses.
pub async fn record_observation(
    pool: &PgPool,
    conversation: ConversationId,
    topology: Topology,
    counterpart: Option<IdentityId>,
    authenticated: bool,
    observed_at: DateTime<Utc>,
) -> Result<(), RepairError> {
    sqlx::query(
        "INSERT INTO conversation_observations (conversation_id, topology, counterpart_identity_id, authenticated, observed_at)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(conversation)
    .bind(topology)
    .bind(counterpart)
    .bind(authenticated)
    .bind(observed_at)
    .execute(pool)
    .await?;
    Ok(())
}

/// What an operator concluded about a source of unknown audience evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EvidenceReviewDecision {
    /// These actors (and only they) could read the source: its evidence becomes known, and the
    /// revision becomes eligible wherever that audience covers the readers.
    Proven {
        /// The proven audience; at least one existing actor.
        audience: Vec<ActorId>,
    },
    /// No proof was found: the evidence stays unknown (the revision stays withheld); the note
    /// records why, so the next operator does not start over.
    LeaveUnknown,
}

/// What one operator review recorded, as the console confirms it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ReviewedSource {
    /// The reviewed source.
    pub source_id: SourceId,
    /// The revision it belongs to.
    pub revision_id: RevisionId,
    /// That revision's entry (whose lineage now shows the outcome).
    pub entry_id: EntryId,
    /// Whether the source's evidence is known now (false after `LeaveUnknown`).
    pub evidence_known: bool,
    /// The login role the database recorded as the reviewer (`session_user`).
    pub reviewed_by: String,
}

/// An operator's review of one source of unknown evidence: marks the proven audience or records
/// that it stays unknown, with a note, in one transaction (nothing is written on any failure).
/// `operator_pool` must be connected as the operator's own login role: the `SECURITY DEFINER`
/// functions refuse roles outside `mesh_operator` and record `session_user`.
pub async fn review_evidence(
    operator_pool: &PgPool,
    source: SourceId,
    decision: &EvidenceReviewDecision,
    reason: &str,
) -> Result<ReviewedSource, RepairError> {
    let reason = checked_reason(reason)?;
    if matches!(decision, EvidenceReviewDecision::Proven { audience } if audience.is_empty()) {
        return Err(RepairError::EmptyAudience);
    }
    let mut tx = operator_pool.begin().await?;
    let recorded = match decision {
        EvidenceReviewDecision::Proven { audience } => {
            sqlx::query("SELECT memory_review_source_evidence($1, $2, $3)").bind(source).bind(audience).bind(reason)
        }
        EvidenceReviewDecision::LeaveUnknown => {
            sqlx::query("SELECT memory_keep_source_evidence_unknown($1, $2)").bind(source).bind(reason)
        }
    }
    .execute(&mut *tx)
    .await;
    if let Err(err) = recorded {
        drop(tx);
        return Err(review_error(operator_pool, source, err).await);
    }
    let reviewed: (RevisionId, EntryId, bool, String) = sqlx::query_as(
        "SELECT s.revision_id, r.entry_id, s.evidence = 'known', session_user::text
           FROM revision_sources s JOIN memory_entry_revisions r ON r.id = s.revision_id
          WHERE s.id = $1",
    )
    .bind(source)
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    let (revision_id, entry_id, evidence_known, reviewed_by) = reviewed;
    Ok(ReviewedSource { source_id: source, revision_id, entry_id, evidence_known, reviewed_by })
}

/// An operator marks the audience of a source whose evidence is unknown, with a reason. Runs on
/// the operator's own connection: the SQL function records `session_user` and refuses roles
/// outside `mesh_operator`.
pub async fn review_source_evidence(
    operator_pool: &PgPool,
    source: SourceId,
    audience: &[ActorId],
    reason: &str,
) -> Result<(), RepairError> {
    let decision = EvidenceReviewDecision::Proven { audience: audience.to_vec() };
    review_evidence(operator_pool, source, &decision, reason).await.map(|_| ())
}

/// The trimmed reason, if the logs can keep it.
fn checked_reason(reason: &str) -> Result<&str, RepairError> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(RepairError::MissingReason);
    }
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(RepairError::ReasonTooLong);
    }
    Ok(reason)
}

/// The typed error of a refused review function call.
async fn review_error(operator_pool: &PgPool, source: SourceId, err: sqlx::Error) -> RepairError {
    match err.as_database_error().and_then(|db| db.code()).as_deref() {
        Some("42501") => match sqlx::query_scalar("SELECT session_user::text").fetch_one(operator_pool).await {
            Ok(role) => RepairError::NotAnOperator(role),
            Err(lookup) => RepairError::Database(lookup),
        },
        Some("P0002") | Some("22023") => RepairError::NotReviewable(source),
        Some("23503") => RepairError::UnknownActor,
        _ => RepairError::Database(err),
    }
}

/// A revision withheld from retrieval because a source's audience is not proven.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EvidenceReviewItem {
    /// The revision (also the keyset cursor).
    pub revision_id: RevisionId,
    /// Its entry.
    pub entry_id: EntryId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Its name.
    pub agent_name: String,
    /// Revision number.
    pub revision_number: i32,
    /// The start of the body.
    pub body_preview: String,
    /// Rendered subject label.
    pub subject_label: Option<String>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// How many of its sources have unknown evidence.
    #[cfg_attr(feature = "specta", specta(type = u32))] // a count: a plain TypeScript number
    pub unknown_sources: i64,
    /// Which kinds of source they are, deduplicated (in the order of their names).
    pub unknown_source_kinds: Vec<SourceKind>,
    /// Why their evidence is unknown, deduplicated.
    pub evidence_bases: Vec<String>,
}

/// An evidence-review row as read, before its subject is labelled.
#[derive(sqlx::FromRow)]
struct ReviewRow {
    #[sqlx(flatten)]
    item: EvidenceReviewItem,
    subject_actor_id: Option<ActorId>,
}

/// A page of the evidence-review queue.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EvidenceReviewPage {
    /// Newest first.
    pub items: Vec<EvidenceReviewItem>,
    /// Pass as `after` to get the next page.
    pub next_after: Option<RevisionId>,
}

/// A revision in the evidence-review queue, with each of its sources of unknown evidence: what
/// an operator needs to decide who could read them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RevisionUnderReview {
    /// The revision.
    pub revision_id: RevisionId,
    /// Its entry.
    pub entry_id: EntryId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Revision number.
    pub revision_number: i32,
    /// The whole body: the operator judges what it would reveal.
    pub body: String,
    /// Its sources whose audience evidence is unknown, oldest first (empty once all are known).
    pub sources: Vec<UnknownSource>,
}

/// One source of unknown audience evidence, with the transcript facts an operator weighs (who
/// said it, where, who was recorded in that conversation then) and the last "left unknown" note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct UnknownSource {
    /// The source row (what a review names).
    pub source_id: SourceId,
    /// What it points at.
    pub kind: SourceKind,
    /// Why its evidence is unknown.
    pub evidence_basis: String,
    /// The message, for message sources.
    pub message_id: Option<MessageId>,
    /// Where the message was said.
    pub conversation_title: Option<String>,
    /// That conversation's recorded topology (`unknown` is the usual reason for review).
    pub conversation_topology: Option<Topology>,
    /// Who sent the message.
    pub sender: Option<ActorId>,
    /// Whether a connector authenticated the sender.
    pub sender_authenticated: Option<bool>,
    /// When it was sent.
    pub sent_at: Option<DateTime<Utc>>,
    /// The start of the message, or of the referenced revision for revision sources.
    pub excerpt: Option<String>,
    /// The referenced revision, for revision sources.
    pub parent_revision_id: Option<RevisionId>,
    /// Actors recorded as members of the conversation when the message was sent (never the agent
    /// itself): a hint, not proof, since the topology is what is unknown.
    pub members_when_sent: Vec<ActorId>,
    /// The last operator note that left this source unknown: who, when and why.
    pub kept_unknown_by: Option<String>,
    /// When.
    pub kept_unknown_at: Option<DateTime<Utc>>,
    /// The note.
    pub kept_unknown_note: Option<String>,
}

/// The evidence-review queue: current revisions of live entries with at least one source of
/// unknown audience evidence (retrieval withholds them), newest first, keyset on revision id.
pub async fn evidence_review(
    store: &Store,
    agent: Option<AgentId>,
    after: Option<RevisionId>,
    limit: u32,
) -> Result<EvidenceReviewPage, StoreError> {
    let size = page_size(limit);
    let mut query = QueryBuilder::<Postgres>::new(
        "SELECT r.id AS revision_id, r.entry_id, r.runtime_agent_id, ra.name AS agent_name, r.revision_number,
                left(r.body, ",
    );
    query.push_bind(PREVIEW_CHARS);
    query.push(
        ") AS body_preview,
                r.subject_actor_id, NULL::text AS subject_label,
                r.created_at,
                count(*) AS unknown_sources,
                array_agg(DISTINCT s.kind::text)::revision_source_kind[] AS unknown_source_kinds,
                array_agg(DISTINCT s.evidence_basis) AS evidence_bases
           FROM revision_sources s
           JOIN memory_entry_revisions r ON r.id = s.revision_id
           JOIN memory_entries e ON e.current_revision_id = r.id AND e.state = 'live'
           JOIN runtime_agents ra ON ra.id = r.runtime_agent_id
          WHERE s.evidence = 'unknown'",
    );
    if let Some(agent) = agent {
        query.push(" AND r.runtime_agent_id = ").push_bind(agent);
    }
    if let Some(after) = after {
        query.push(" AND r.id < ").push_bind(after);
    }
    query.push(" GROUP BY r.id, ra.name ORDER BY r.id DESC LIMIT ").push_bind(size);
    let rows: Vec<ReviewRow> = query.build_query_as().fetch_all(store.pool()).await?;
    let labels = store.actor_labels(rows.iter().filter_map(|r| r.subject_actor_id).collect()).await?;
    let items: Vec<EvidenceReviewItem> = rows
        .into_iter()
        .map(|row| {
            let mut item = row.item;
            item.subject_label = row.subject_actor_id.and_then(|s| labels.get(&s).cloned());
            item
        })
        .collect();
    let next_after = if items.len() as i64 == size { items.last().map(|i| i.revision_id) } else { None };
    Ok(EvidenceReviewPage { items, next_after })
}

/// One revision with its sources of unknown evidence, for the review form; `None` when there
/// is no such revision.
pub async fn revision_under_review(
    store: &Store,
    revision: RevisionId,
) -> Result<Option<RevisionUnderReview>, StoreError> {
    let row: Option<(EntryId, AgentId, i32, String)> = sqlx::query_as(
        "SELECT entry_id, runtime_agent_id, revision_number, body FROM memory_entry_revisions WHERE id = $1",
    )
    .bind(revision)
    .fetch_optional(store.pool())
    .await?;
    let Some((entry_id, runtime_agent_id, revision_number, body)) = row else { return Ok(None) };
    let sources: Vec<UnknownSource> = sqlx::query_as(
        "SELECT s.id AS source_id, s.kind, s.evidence_basis, s.message_id,
                c.title AS conversation_title, c.topology AS conversation_topology,
                m.sender_actor_id AS sender, m.sender_identity_id IS NOT NULL AS sender_authenticated,
                m.sent_at, left(coalesce(m.body, p.body), $2) AS excerpt, s.parent_revision_id,
                coalesce((SELECT array_agg(DISTINCT cm.actor_id) FROM conversation_memberships cm
                           WHERE cm.conversation_id = m.conversation_id AND cm.joined_at <= m.sent_at
                             AND (cm.left_at IS NULL OR cm.left_at > m.sent_at)
                             AND cm.actor_id <> (SELECT ra.actor_id FROM runtime_agents ra
                                                  WHERE ra.id = s.runtime_agent_id)), '{}') AS members_when_sent,
                k.role_name AS kept_unknown_by, k.acted_at AS kept_unknown_at, k.reason AS kept_unknown_note
           FROM revision_sources s
           LEFT JOIN messages m ON m.id = s.message_id
           LEFT JOIN conversations c ON c.id = m.conversation_id
           LEFT JOIN memory_entry_revisions p ON p.id = s.parent_revision_id
           LEFT JOIN LATERAL (SELECT o.role_name, o.acted_at, o.reason FROM operator_actions o
                               WHERE o.target_id = s.id AND o.action = 'keep_source_evidence_unknown'
                               ORDER BY o.id DESC LIMIT 1) k ON true
          WHERE s.revision_id = $1 AND s.evidence = 'unknown'
          ORDER BY s.created_at, s.id",
    )
    .bind(revision)
    .bind(PREVIEW_CHARS)
    .fetch_all(store.pool())
    .await?;
    Ok(Some(RevisionUnderReview { revision_id: revision, entry_id, runtime_agent_id, revision_number, body, sources }))
}
