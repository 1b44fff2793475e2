//! Legacy audience repair and operator evidence review.
//!
//! The rules live in SQL (`memory_direct_proof`, `memory_repair_audience_evidence`,
//! `memory_review_source_evidence`, migration `20261202005000_legacy_audience_repair.sql`) so
//! that the forward migration, the CLI and the console apply exactly the same proof. This module
//! runs them: a dry run executes the real repair inside a transaction and rolls it back, so what
//! it reports is precisely what a real run would change.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use crate::ids::{ActorId, ConversationId, IdentityId, RevisionId, SourceId};
use crate::store::Topology;

/// Why a repair or review did not happen. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    /// A repair or review needs a human-readable reason for the log.
    #[error("a reason is required (it is recorded in the evidence log)")]
    MissingReason,
    /// A review must name the audience it asserts.
    #[error("an evidence review must name at least one actor")]
    EmptyAudience,
    /// The connected role is not a member of `mesh_operator`.
    #[error("role {0:?} is not a mesh operator; ask an administrator to grant mesh_operator")]
    NotAnOperator(String),
    /// The source does not exist or is already known.
    #[error("source {0} does not exist or already has known evidence")]
    NotReviewable(SourceId),
    /// A review named an actor id with no actor row: evidence names real actors only.
    #[error("the review names an actor that does not exist")]
    UnknownActor,
    /// PostgreSQL failed; the transaction rolled back.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

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

/// An operator marks the audience of a source whose evidence is unknown, with a reason. Runs on
/// the operator's own connection: the SQL function records `session_user` and refuses roles
/// outside `mesh_operator`.
pub async fn review_source_evidence(
    operator_pool: &PgPool,
    source: SourceId,
    audience: &[ActorId],
    reason: &str,
) -> Result<(), RepairError> {
    if reason.trim().is_empty() {
        return Err(RepairError::MissingReason);
    }
    if audience.is_empty() {
        return Err(RepairError::EmptyAudience);
    }
    let result = sqlx::query("SELECT memory_review_source_evidence($1, $2, $3)")
        .bind(source)
        .bind(audience)
        .bind(reason.trim())
        .execute(operator_pool)
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42501") => {
            let role: String = sqlx::query_scalar("SELECT session_user::text").fetch_one(operator_pool).await?;
            Err(RepairError::NotAnOperator(role))
        }
        Err(sqlx::Error::Database(db)) if matches!(db.code().as_deref(), Some("P0002") | Some("22023")) => {
            Err(RepairError::NotReviewable(source))
        }
        Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("23503") => Err(RepairError::UnknownActor),
        Err(other) => Err(other.into()),
    }
}
