//! Legacy audience repair and operator evidence review.
//!
//! The rules live in SQL (`memory_direct_proof`, `memory_repair_audience_evidence`,
//! `memory_review_source_evidence`, `memory_keep_source_evidence_unknown`; today's definitions are
//! in `schema/current.sql`, `docs/policy.md` says where they sit in the policy) so that the forward
//! migration, the CLI and the console apply exactly the same proof. This module runs them: a dry
//! run executes the real repair inside a transaction and rolls it back, so what it reports is
//! precisely what a real run would change.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::ids::{ActorId, ConversationId, EntryId, IdentityId, RevisionId, SourceId};
use crate::store::Topology;

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
