//! Embedding rows (table `revision_embeddings`): one per (generation, revision), with the model
//! and dimension that produced it. Written idempotently (`ON CONFLICT DO NOTHING`), so a worker
//! that crashed after embedding but before marking its outbox rows done repeats nothing harmful.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::generations::Generation;
use super::SemanticError;
use crate::ids::RevisionId;

/// pgvector's text form of a vector (`[0.1,0.2,...]`); `f32`'s `Display` round-trips exactly.
pub(crate) fn vector_literal(vector: &[f32]) -> String {
    let parts: Vec<String> = vector.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(","))
}

/// Stores `vectors[i]` for `revisions[i]` in `generation`. With pgvector the vector goes into the
/// `embedding` column (in half precision where pgvector has `halfvec`, migration `20261218100000`:
/// the `vector` value is cast to the column's type on insert); without it only the metadata row is
/// written (an external index such as Qdrant holds the vector).
pub(crate) async fn store_embeddings(
    conn: &mut PgConnection,
    generation: &Generation,
    revisions: &[RevisionId],
    vectors: &[Vec<f32>],
    with_pgvector: bool,
) -> Result<u64, SemanticError> {
    let ids: Vec<Uuid> = revisions.iter().map(|r| r.0).collect();
    let result = if with_pgvector {
        let literals: Vec<String> = vectors.iter().map(|v| vector_literal(v)).collect();
        sqlx::query(
            "INSERT INTO revision_embeddings (generation_id, revision_id, model, dimension, embedding)
             SELECT $1, u.revision_id, $2, $3, u.vector::vector
               FROM unnest($4::uuid[], $5::text[]) AS u(revision_id, vector)
             ON CONFLICT (generation_id, revision_id) DO NOTHING",
        )
        .bind(generation.id)
        .bind(&generation.model)
        .bind(generation.dimension)
        .bind(ids)
        .bind(literals)
        .execute(&mut *conn)
        .await?
    } else {
        sqlx::query(
            "INSERT INTO revision_embeddings (generation_id, revision_id, model, dimension)
             SELECT $1, u.revision_id, $2, $3 FROM unnest($4::uuid[]) AS u(revision_id)
             ON CONFLICT (generation_id, revision_id) DO NOTHING",
        )
        .bind(generation.id)
        .bind(&generation.model)
        .bind(generation.dimension)
        .bind(ids)
        .execute(&mut *conn)
        .await?
    };
    Ok(result.rows_affected())
}

/// Of `revisions`, those not yet embedded in `generation` (so nothing is embedded twice).
pub(crate) async fn missing_in(
    conn: &mut PgConnection,
    generation: i64,
    revisions: &[RevisionId],
) -> Result<Vec<RevisionId>, SemanticError> {
    let ids: Vec<Uuid> = revisions.iter().map(|r| r.0).collect();
    Ok(sqlx::query_scalar(
        "SELECT u.id FROM unnest($2::uuid[]) AS u(id)
          WHERE NOT EXISTS (SELECT 1 FROM revision_embeddings x WHERE x.generation_id = $1 AND x.revision_id = u.id)",
    )
    .bind(generation)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?)
}

/// How many embeddings `revision` has across all generations (history included): for tests and
/// diagnostics (an amended revision keeps its embeddings as audit history).
pub async fn embedding_count(pool: &PgPool, revision: RevisionId) -> Result<i64, SemanticError> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM revision_embeddings WHERE revision_id = $1")
        .bind(revision)
        .fetch_one(pool)
        .await?)
}
