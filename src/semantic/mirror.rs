//! External vector indexes (Qdrant) kept in line with PostgreSQL, so that nothing resurrects.
//!
//! PostgreSQL decides what is current; an external index only mirrors it. Each outbox batch (and
//! each rebuild batch) locks the entries it touches (transaction-level advisory locks, in one
//! order, so concurrent workers neither deadlock nor interleave on an entry), reads their
//! canonical state under the lock, and then makes each target generation's collection hold, per
//! touched entry, the point of its current revision if the entry is live and no other point
//! ([`MirrorBatch`]). Every write enqueues its outbox row in its own transaction, so a sync that
//! starts after a write committed reads that write's state; syncs of one entry run one at a time,
//! so the last one to run reflects the newest state. Out-of-order retries (an old revision's row
//! retried after its amendment's row) therefore cannot bring an old point back: the retried row
//! reads the entry's current state and prunes instead. Collections of retired and failed
//! generations are dropped whole ([`drop_retired_generations`]); PostgreSQL keeps the history.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use sqlx::{PgConnection, PgPool};

use super::generations::Generation;
use super::SemanticError;
use crate::ids::{AgentId, EntryId, RevisionId};

/// Why an external index write failed (category only, never a provider body).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    /// The index server could not be reached.
    #[error("vector index unreachable")]
    Unreachable,
    /// The index server refused or failed the request.
    #[error("vector index request failed")]
    Failed,
}

impl MirrorError {
    /// The stable category recorded in `index_outbox.last_error_category`.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Unreachable => "index_unreachable",
            Self::Failed => "index_failed",
        }
    }
}

/// Boxed future of [`VectorMirror`] calls.
pub type MirrorFuture<'a> = Pin<Box<dyn Future<Output = Result<(), MirrorError>> + Send + 'a>>;

/// One point to write: whose, which entry, which revision.
pub type PointRef = (AgentId, EntryId, RevisionId);

/// What one sync changes in a generation's collection.
#[derive(Clone, Copy, Debug)]
pub struct MirrorBatch<'a> {
    /// Entries whose points go, except the given revision's (`None`: every point, the entry is
    /// forgotten). Applied before the upserts.
    pub prunes: &'a [(EntryId, Option<RevisionId>)],
    /// Points to write (current revisions of live entries) with their vectors.
    pub upserts: &'a [(PointRef, Vec<f32>)],
}

/// An owned [`MirrorBatch`].
#[derive(Clone, Debug, Default)]
pub struct OwnedMirrorBatch {
    /// See [`MirrorBatch::prunes`].
    pub prunes: Vec<(EntryId, Option<RevisionId>)>,
    /// See [`MirrorBatch::upserts`].
    pub upserts: Vec<(PointRef, Vec<f32>)>,
}

impl OwnedMirrorBatch {
    /// Borrowed, for [`VectorMirror::apply`].
    pub fn as_ref(&self) -> MirrorBatch<'_> {
        MirrorBatch { prunes: &self.prunes, upserts: &self.upserts }
    }
}

/// An external vector index the worker keeps in line with PostgreSQL (e.g. Qdrant).
pub trait VectorMirror: Send + Sync {
    /// Applies `batch` to `generation`'s collection (created with the generation's dimension if
    /// missing): the prunes, then the upserts. Idempotent.
    fn apply<'a>(&'a self, generation: &'a Generation, batch: MirrorBatch<'a>) -> MirrorFuture<'a>;

    /// Drops the collections of these generations (retired or failed: never searched again).
    /// Idempotent; a missing collection is not an error.
    fn drop_generations<'a>(&'a self, generations: &'a [i64]) -> MirrorFuture<'a>;
}

/// An entry's canonical state, read under its sync lock.
#[derive(Clone, Copy, Debug, sqlx::FromRow)]
pub(crate) struct EntryState {
    pub entry_id: EntryId,
    pub runtime_agent_id: AgentId,
    pub current_revision_id: RevisionId,
    pub live: bool,
    pub revision_number: i32,
}

/// The advisory-lock class of mirror syncs (`pg_advisory_xact_lock(class, hashtext(entry))`),
/// apart from every other advisory lock of the schema.
const SYNC_LOCK_CLASS: i32 = 0x6d6d_5164;

/// Takes the sync lock of each of `entries` (sorted, so two workers never wait on each other in
/// a cycle; held until the transaction ends) and reads their canonical state.
pub(crate) async fn lock_entries(
    conn: &mut PgConnection,
    entries: &[EntryId],
) -> Result<Vec<EntryState>, SemanticError> {
    let ids: Vec<uuid::Uuid> = entries.iter().map(|e| e.0).collect();
    sqlx::query(
        "SELECT count(pg_advisory_xact_lock($2, k))
           FROM (SELECT DISTINCT hashtext(id::text) AS k FROM unnest($1::uuid[]) AS id ORDER BY 1) AS keys",
    )
    .bind(&ids)
    .bind(SYNC_LOCK_CLASS)
    .execute(&mut *conn)
    .await?;
    Ok(sqlx::query_as(
        "SELECT e.id AS entry_id, e.runtime_agent_id, e.current_revision_id, e.state = 'live' AS live,
                r.revision_number
           FROM memory_entries e
           JOIN memory_entry_revisions r ON r.id = e.current_revision_id
          WHERE e.id = ANY($1)",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?)
}

/// The sync for entries in `states`: the current revision of a live entry is written when its
/// vector is at hand; a forgotten entry loses every point, a live one with earlier revisions every
/// point but its current one (a first revision has no other point to lose).
pub(crate) fn mirror_batch(states: &[EntryState], vectors: &HashMap<RevisionId, Vec<f32>>) -> OwnedMirrorBatch {
    let mut batch = OwnedMirrorBatch::default();
    for state in states {
        if !state.live {
            batch.prunes.push((state.entry_id, None));
            continue;
        }
        if state.revision_number > 1 {
            batch.prunes.push((state.entry_id, Some(state.current_revision_id)));
        }
        if let Some(vector) = vectors.get(&state.current_revision_id) {
            batch.upserts.push(((state.runtime_agent_id, state.entry_id, state.current_revision_id), vector.clone()));
        }
    }
    batch
}

/// Drops the mirror's collections of retired and failed generations. Only those: a generation
/// begun after this read is building or active, never dropped.
pub async fn drop_retired_generations(pool: &PgPool, mirror: &dyn VectorMirror) -> Result<(), SemanticError> {
    let retired: Vec<i64> =
        sqlx::query_scalar("SELECT id FROM embedding_generations WHERE state IN ('retired', 'failed') ORDER BY id")
            .fetch_all(pool)
            .await?;
    if !retired.is_empty() {
        // A mirror that cannot be reached now is cleaned on a later pass.
        if let Err(err) = mirror.drop_generations(&retired).await {
            tracing::warn!(category = err.category(), "dropping retired collections failed; retried later");
        }
    }
    Ok(())
}
