//! Rebuilds: a new generation, backfilled from every current revision of a live entry, then an
//! atomic switch. Resumable: rerunning continues the building generation of the same model.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use super::embedder::Embedder;
use super::embeddings::store_embeddings;
use super::generations::{
    activate, begin_rebuild, generation_progress, pgvector_available, Generation, RebuildProgress,
};
use super::mirror::{drop_retired_generations, lock_entries, mirror_batch, VectorMirror};
use super::SemanticError;
use crate::ids::{EntryId, RevisionId};

/// Revisions embedded per backfill batch.
pub const REBUILD_BATCH: i64 = 32;

/// Attempts per batch before the rebuild stops (the generation stays `building`; rerun resumes).
pub const REBUILD_BATCH_ATTEMPTS: u32 = 3;

/// Builds a new generation with `embedder`, calling `on_progress` after every batch, and switches
/// to it atomically. Returns the new active generation.
pub async fn rebuild(
    pool: &PgPool,
    embedder: Arc<dyn Embedder>,
    on_progress: impl FnMut(RebuildProgress),
) -> Result<Generation, SemanticError> {
    rebuild_mirrored(pool, embedder, None, on_progress).await
}

/// [`rebuild`], also filling an external index's collection of the new generation (each batch
/// synced like the worker's, [`super::mirror`]); after the switch the retired generations'
/// collections are dropped.
pub async fn rebuild_mirrored(
    pool: &PgPool,
    embedder: Arc<dyn Embedder>,
    mirror: Option<Arc<dyn VectorMirror>>,
    mut on_progress: impl FnMut(RebuildProgress),
) -> Result<Generation, SemanticError> {
    let generation = begin_rebuild(pool, embedder.info()).await?;
    let with_pgvector = pgvector_available(pool).await?;
    loop {
        on_progress(generation_progress(pool, generation.id).await?);
        let written = backfill_batch(pool, embedder.as_ref(), mirror.as_deref(), &generation, with_pgvector).await?;
        if written == 0 && activate(pool, generation.id).await? {
            on_progress(generation_progress(pool, generation.id).await?);
            if let Some(mirror) = &mirror {
                drop_retired_generations(pool, mirror.as_ref()).await?;
            }
            return Ok(Generation { state: super::GenerationState::Active, ..generation });
        }
    }
}

/// Embeds one batch of current revisions missing from `generation`; 0 when none is missing.
async fn backfill_batch(
    pool: &PgPool,
    embedder: &dyn Embedder,
    mirror: Option<&dyn VectorMirror>,
    generation: &Generation,
    with_pgvector: bool,
) -> Result<usize, SemanticError> {
    let batch: Vec<(RevisionId, EntryId, String, Option<String>)> = sqlx::query_as(concat!(
        "SELECT r.id, r.entry_id, r.body, ",
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
    let entries: Vec<EntryId> = batch.iter().map(|(_, entry, _, _)| *entry).collect();
    let (ids, texts): (Vec<RevisionId>, Vec<String>) =
        batch.into_iter().map(|(id, _, body, subject)| (id, super::document_text(subject.as_deref(), &body))).unzip();
    let vectors = embed_with_retries(embedder, &texts).await?;
    let mut tx = pool.begin().await?;
    if let Some(mirror) = mirror {
        // Under the entries' sync locks: an amend that committed since the batch was read is
        // pruned here or by the worker's sync that follows, never left behind.
        let states = lock_entries(&mut tx, &entries).await?;
        let by_revision: HashMap<RevisionId, Vec<f32>> = ids.iter().copied().zip(vectors.iter().cloned()).collect();
        let sync = mirror_batch(&states, &by_revision);
        mirror.apply(generation, sync.as_ref()).await.map_err(|e| SemanticError::Mirror(e.category()))?;
    }
    store_embeddings(&mut tx, generation, &ids, &vectors, with_pgvector).await?;
    tx.commit().await?;
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
