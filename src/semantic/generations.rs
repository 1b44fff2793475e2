//! Embedding generations (table `embedding_generations`): which model's vectors serve queries.
//!
//! At most one generation is `active`, at most one `building`. A rebuild builds a new generation
//! beside the active one and switches in one transaction; the old one is `retired` and its rows
//! stay as audit history. While a generation is `building`, semantic search degrades to lexical
//! (`index_rebuilding`), because the two generations' vectors are not comparable.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::embedder::EmbedderInfo;
use super::SemanticError;

/// Lifecycle of a generation (the `embedding_generation_state` enum).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[sqlx(type_name = "embedding_generation_state", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum GenerationState {
    /// Being backfilled by a rebuild; not queried.
    Building,
    /// Serving queries.
    Active,
    /// Replaced by a newer generation; kept as history.
    Retired,
    /// A rebuild was abandoned.
    Failed,
}

/// One generation row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
pub struct Generation {
    /// Its id (embedding rows reference it).
    pub id: i64,
    /// Provider kind.
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Vector length.
    pub dimension: i32,
    /// Which text of a memory its vectors embed ([`super::document::DOCUMENT_FORM`]).
    pub document_form: String,
    /// Lifecycle state.
    pub state: GenerationState,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it started serving, if it did.
    pub activated_at: Option<DateTime<Utc>>,
}

impl Generation {
    /// Whether vectors from `info`, of the current document form, belong in this generation.
    pub fn matches(&self, info: &EmbedderInfo) -> bool {
        self.document_form == super::document::DOCUMENT_FORM
            && self.provider == info.provider
            && self.model == info.model
            && usize::try_from(self.dimension).is_ok_and(|d| d == info.dimension)
    }

    /// The dimension as a `usize` (checked positive by the schema).
    pub fn dimension_usize(&self) -> usize {
        usize::try_from(self.dimension).unwrap_or(0)
    }
}

const GENERATION_COLUMNS: &str = "id, provider, model, dimension, document_form, state, created_at, activated_at";

/// The generation in `state`, if any (at most one is active and one building).
pub async fn generation_in_state(pool: &PgPool, state: GenerationState) -> Result<Option<Generation>, SemanticError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {GENERATION_COLUMNS} FROM embedding_generations WHERE state = $1 ORDER BY id DESC LIMIT 1"
    )))
    .bind(state)
    .fetch_optional(pool)
    .await?)
}

/// The generation that decides whether semantic search can run: the one `building`, if a rebuild
/// is under way (its vectors are not comparable with the active ones), else the `active` one.
/// One statement, read on every semantic search.
pub async fn serving_generation(pool: &PgPool) -> Result<Option<Generation>, SemanticError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {GENERATION_COLUMNS} FROM embedding_generations WHERE state IN ('building', 'active')
          ORDER BY state = 'building' DESC, id DESC LIMIT 1"
    )))
    .fetch_optional(pool)
    .await?)
}

/// Every generation, newest first (for `mesh-memory index status` and the console).
pub async fn list_generations(pool: &PgPool) -> Result<Vec<Generation>, SemanticError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {GENERATION_COLUMNS} FROM embedding_generations ORDER BY id DESC"
    )))
    .fetch_all(pool)
    .await?)
}

/// Whether this database has the pgvector column (`revision_embeddings.embedding`).
pub async fn pgvector_available(pool: &PgPool) -> Result<bool, SemanticError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM information_schema.columns
                         WHERE table_schema = current_schema() AND table_name = 'revision_embeddings'
                           AND column_name = 'embedding')",
    )
    .fetch_one(pool)
    .await?)
}

async fn insert_generation(
    pool: &PgPool,
    info: &EmbedderInfo,
    state: GenerationState,
) -> Result<Generation, SemanticError> {
    let dimension = i32::try_from(info.dimension).map_err(|_| SemanticError::InvalidDimension(info.dimension))?;
    let inserted = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "INSERT INTO embedding_generations (provider, model, dimension, state, activated_at, document_form)
         VALUES ($1, $2, $3, $4, CASE WHEN $4 = 'active'::embedding_generation_state THEN now() END, $5)
         RETURNING {GENERATION_COLUMNS}"
    )))
    .bind(&info.provider)
    .bind(&info.model)
    .bind(dimension)
    .bind(state)
    .bind(super::document::DOCUMENT_FORM)
    .fetch_one(pool)
    .await;
    match inserted {
        Ok(generation) => Ok(generation),
        Err(sqlx::Error::Database(db)) if db.is_unique_violation() => Err(SemanticError::ConcurrentGenerationChange),
        Err(err) => Err(err.into()),
    }
}

/// The generations an indexing worker with `info` writes into: the active and the building one
/// where they match its model. A database without any generation gets its first one, active at
/// once (the outbox still holds every revision ever written, so the worker fills it).
pub async fn worker_targets(pool: &PgPool, info: &EmbedderInfo) -> Result<Vec<Generation>, SemanticError> {
    let active = generation_in_state(pool, GenerationState::Active).await?;
    let building = generation_in_state(pool, GenerationState::Building).await?;
    if active.is_none() && building.is_none() && list_generations(pool).await?.is_empty() {
        let first = insert_generation(pool, info, GenerationState::Active).await?;
        return Ok(vec![first]);
    }
    let targets: Vec<Generation> = active.iter().chain(building.iter()).filter(|g| g.matches(info)).cloned().collect();
    if targets.is_empty() {
        let current = active.or(building).map(|g| format!("{}/{} ({})", g.provider, g.model, g.dimension));
        return Err(SemanticError::EmbedderMismatch {
            embedder: format!("{}/{} ({})", info.provider, info.model, info.dimension),
            generation: current.unwrap_or_else(|| "none (all retired)".into()),
        });
    }
    Ok(targets)
}

/// Starts a rebuild for `info`, or resumes the building generation of the same model. A building
/// generation of another model is an error: finish or abandon it first.
pub async fn begin_rebuild(pool: &PgPool, info: &EmbedderInfo) -> Result<Generation, SemanticError> {
    if let Some(building) = generation_in_state(pool, GenerationState::Building).await? {
        if building.matches(info) {
            return Ok(building);
        }
        return Err(SemanticError::RebuildInProgress { generation: building.id, model: building.model });
    }
    insert_generation(pool, info, GenerationState::Building).await
}

/// Marks the building generation `failed` (e.g. the model is gone); semantic search then uses
/// the active generation again. Returns the abandoned generation's id, if there was one.
pub async fn abandon_rebuild(pool: &PgPool) -> Result<Option<i64>, SemanticError> {
    Ok(sqlx::query_scalar(
        "UPDATE embedding_generations SET state = 'failed', retired_at = now() WHERE state = 'building' RETURNING id",
    )
    .fetch_optional(pool)
    .await?)
}

/// How far a rebuild is: current revisions of live entries embedded in the generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebuildProgress {
    /// The generation being built.
    pub generation: i64,
    /// Current revisions already embedded in it.
    pub embedded: i64,
    /// Current revisions of live entries in total.
    pub total: i64,
}

impl RebuildProgress {
    /// Whether every current revision is embedded.
    pub fn is_complete(&self) -> bool {
        self.embedded >= self.total
    }
}

/// Progress of generation `generation` (the CLI's progress bar and the console poll this).
pub async fn generation_progress(pool: &PgPool, generation: i64) -> Result<RebuildProgress, SemanticError> {
    let (embedded, total): (i64, i64) = sqlx::query_as(
        "SELECT count(x.revision_id), count(*)
           FROM memory_entries e
           LEFT JOIN revision_embeddings x ON x.generation_id = $1 AND x.revision_id = e.current_revision_id
          WHERE e.state = 'live'",
    )
    .bind(generation)
    .fetch_one(pool)
    .await?;
    Ok(RebuildProgress { generation, embedded, total })
}

/// Progress of the running rebuild, or `None` when no generation is building.
pub async fn rebuild_progress(pool: &PgPool) -> Result<Option<RebuildProgress>, SemanticError> {
    match generation_in_state(pool, GenerationState::Building).await? {
        Some(building) => Ok(Some(generation_progress(pool, building.id).await?)),
        None => Ok(None),
    }
}

/// Switches atomically: in one transaction, checks that every current revision of a live entry
/// is embedded in `generation`, retires the active generation and activates this one. Returns
/// `false` (and changes nothing) if revisions are still missing, so the caller backfills again.
pub async fn activate(pool: &PgPool, generation: i64) -> Result<bool, SemanticError> {
    let mut tx = pool.begin().await?;
    // Serialise switches and stop concurrent generation changes until commit.
    sqlx::query("LOCK TABLE embedding_generations IN SHARE ROW EXCLUSIVE MODE").execute(&mut *tx).await?;
    let missing: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM memory_entries e
          WHERE e.state = 'live'
            AND NOT EXISTS (SELECT 1 FROM revision_embeddings x
                             WHERE x.generation_id = $1 AND x.revision_id = e.current_revision_id)",
    )
    .bind(generation)
    .fetch_one(&mut *tx)
    .await?;
    if missing > 0 {
        return Ok(false);
    }
    sqlx::query("UPDATE embedding_generations SET state = 'retired', retired_at = now() WHERE state = 'active'")
        .execute(&mut *tx)
        .await?;
    let switched = sqlx::query(
        "UPDATE embedding_generations SET state = 'active', activated_at = now() WHERE id = $1 AND state = 'building'",
    )
    .bind(generation)
    .execute(&mut *tx)
    .await?;
    if switched.rows_affected() != 1 {
        return Err(SemanticError::ConcurrentGenerationChange);
    }
    tx.commit().await?;
    Ok(true)
}
