//! Rebuilds: a new generation, backfilled from every current revision of a live entry, then an
//! atomic switch. Resumable: rerunning continues the building generation of the same model.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use super::embedder::Embedder;
use super::embeddings::store_embeddings;
use super::generations::{
    activate, begin_rebuild, generation_progress, pgvector_available, Generation, RebuildProgress,
};
use super::SemanticError;
use crate::ids::RevisionId;

/// Revisions embedded per backfill batch.
pub const REBUILD_BATCH: i64 = 32;

/// Attempts per batch before the rebuild stops (the generation stays `building`; rerun resumes).
pub const REBUILD_BATCH_ATTEMPTS: u32 = 3;

/// Builds a new generation with `embedder`, calling `on_progress` after every batch, and switches
/// to it atomically. Returns the new active generation.
pub async fn rebuild(
    pool: &PgPool,
    embedder: Arc<dyn Embedder>,
    mut on_progress: impl FnMut(RebuildProgress),
) -> Result<Generation, SemanticError> {
    let generation = begin_rebuild(pool, embedder.info()).await?;
    let with_pgvector = pgvector_available(pool).await?;
    loop {
        on_progress(generation_progress(pool, generation.id).await?);
        let written = backfill_batch(pool, embedder.as_ref(), &generation, with_pgvector).await?;
        if written == 0 && activate(pool, generation.id).await? {
            on_progress(generation_progress(pool, generation.id).await?);
            return Ok(Generation { state: super::GenerationState::Active, ..generation });
        }
    }
}

/// Embeds one batch of current revisions missing from `generation`; 0 when none is missing.
async fn backfill_batch(
    pool: &PgPool,
    embedder: &dyn Embedder,
    generation: &Generation,
    with_pgvector: bool,
) -> Result<usize, SemanticError> {
    let batch: Vec<(RevisionId, String, Option<String>)> = sqlx::query_as(concat!(
        "SELECT r.id, r.body, ",
        crate::subject_name_sql!(),
        "
           FROM memory_entries e
           JOIN memory_entry_revisions r ON r.id = e.current_revision_id
          WHERE e.state = 'live'
            AND NOT EXISTS (SELECT 1 FROM revision_embeddings x WHERE x.generation_id = $1 AND x.revision_id = r.id)
          ORDER BY r.id
          LIMIT $2"
    ))
    .bind(generation.id)
    .bind(REBUILD_BATCH)
    .fetch_all(pool)
    .await?;
    if batch.is_empty() {
        return Ok(0);
    }
    let (ids, texts): (Vec<RevisionId>, Vec<String>) =
        batch.into_iter().map(|(id, body, subject)| (id, super::document_text(subject.as_deref(), &body))).unzip();
    let vectors = embed_with_retries(embedder, &texts).await?;
    let mut conn = pool.acquire().await?;
    store_embeddings(&mut conn, generation, &ids, &vectors, with_pgvector).await?;
    Ok(ids.len())
}

async fn embed_with_retries(embedder: &dyn Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, SemanticError> {
    let mut delay = Duration::from_millis(500);
    let mut attempt = 1;
    loop {
        match embedder.embed(texts).await {
            Ok(vectors) => return Ok(vectors),
            Err(err) if attempt >= REBUILD_BATCH_ATTEMPTS => return Err(SemanticError::Embed(err)),
            Err(_) => {
                attempt += 1;
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
}
