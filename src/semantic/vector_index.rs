//! Vector indexes behind retrieval's one scoped interface ([`SemanticIndex`]).
//!
//! [`PgVectorIndex`] searches the active generation in PostgreSQL over eligible rows only: the
//! eligible set retrieval read in this search (shortlisted by sign bits, then re-ranked by exact
//! cosine for those revisions alone), or the eligible rows (the policy's set form, SQL
//! `memory_eligible_revisions`)
//! in the same SQL statement as the cosine ordering; an ineligible revision is never a hit.
//! External indexes (Qdrant) implement [`super::VectorMirror`] for the worker's writes and
//! [`SemanticIndex`] for search, restricted to the ids of the eligible set (or, for a provider
//! that cannot restrict its search, every hit revalidated with [`revalidate`]). Either way,
//! distinct hits are capped at the requested limit here, before retrieval hydrates them, whatever
//! a provider returned.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;
use sqlx::PgPool;

use super::embedder::{EmbedError, Embedder};
use super::embeddings::vector_literal;
use super::generations::{pgvector_available, serving_generation, Generation, GenerationState};
use super::SemanticError;
use crate::ids::RevisionId;
use crate::privacy::EligibilityContext;
use crate::retrieval::{
    EligibleRevision, EligibleRows, SemanticFailure, SemanticFuture, SemanticHit, SemanticIndex, SemanticRequest,
    SignedQuery,
};
use uuid::Uuid;

pub use crate::retrieval::MAX_ELIGIBLE_REVISIONS;

/// Hits less similar than this (cosine) are not candidates. Without a floor every eligible memory
/// would get *some* semantic rank and count as relevant, so a coding question would select an
/// unrelated favourite-food memory. 0.2 is conservative for all-MiniLM-L6-v2, where paraphrases
/// score about 0.3 and above and unrelated sentences about 0.1 and below; it is configuration
/// ([`PgVectorIndex::with_min_similarity`]), to be tuned per model on a measured corpus.
pub const DEFAULT_MIN_SIMILARITY: f32 = 0.2;

/// Keeps the best hit per revision, best first, and at most `limit` of them: the cap applied
/// before hydration even when a provider ignores the requested limit or repeats itself.
pub fn cap_distinct_hits(mut hits: Vec<SemanticHit>, limit: usize) -> Vec<SemanticHit> {
    hits.sort_by(|a, b| b.similarity.total_cmp(&a.similarity).then(a.revision_id.cmp(&b.revision_id)));
    let mut seen = HashSet::new();
    hits.retain(|h| seen.insert(h.revision_id));
    hits.truncate(limit);
    hits
}

/// Whether semantic search can run now, and why not.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum IndexAvailability {
    /// Searchable through this generation.
    Ready {
        /// The active generation.
        generation: i64,
    },
    /// No pgvector column in this database.
    NoPgvector,
    /// No active generation yet (run `mesh-memory index run`).
    NoActiveGeneration,
    /// A rebuild is building a new generation.
    Rebuilding {
        /// The generation being built.
        generation: i64,
    },
    /// The active generation was built by another model than the configured embedder.
    ModelMismatch {
        /// The active generation.
        generation: i64,
    },
}

/// Decides availability for an embedder with `info` (provider, model, dimension).
pub async fn availability(
    pool: &PgPool,
    info: &super::EmbedderInfo,
) -> Result<(IndexAvailability, Option<Generation>), SemanticError> {
    if !pgvector_available(pool).await? {
        return Ok((IndexAvailability::NoPgvector, None));
    }
    Ok(generation_availability(serving_generation(pool).await?, info))
}

/// Availability in a database with pgvector, from [`serving_generation`]'s answer.
fn generation_availability(
    serving: Option<Generation>,
    info: &super::EmbedderInfo,
) -> (IndexAvailability, Option<Generation>) {
    match serving {
        None => (IndexAvailability::NoActiveGeneration, None),
        Some(g) if g.state == GenerationState::Building => (IndexAvailability::Rebuilding { generation: g.id }, None),
        Some(active) if !active.matches(info) => (IndexAvailability::ModelMismatch { generation: active.id }, None),
        Some(active) => (IndexAvailability::Ready { generation: active.id }, Some(active)),
    }
}

/// pgvector search over the active generation, eligibility in the same statement.
#[derive(Clone)]
pub struct PgVectorIndex {
    embedder: Arc<dyn Embedder>,
    eligible_cap: usize,
    min_similarity: f32,
    /// Set once the pgvector column was seen: it is never dropped, so later searches skip that
    /// catalog lookup and decide availability with one statement.
    pgvector_seen: Arc<AtomicBool>,
}

impl std::fmt::Debug for PgVectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgVectorIndex").field("embedder", self.embedder.info()).finish()
    }
}

impl PgVectorIndex {
    /// An index that embeds queries with `embedder` (the same model as the active generation).
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        Self {
            embedder,
            eligible_cap: MAX_ELIGIBLE_REVISIONS,
            min_similarity: DEFAULT_MIN_SIMILARITY,
            pgvector_seen: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Overrides the similarity floor (see [`DEFAULT_MIN_SIMILARITY`]); `-1.0` disables it.
    pub fn with_min_similarity(mut self, min_similarity: f32) -> Self {
        self.min_similarity = min_similarity;
        self
    }

    /// Overrides the eligible-set cap (tests; operators with a measured larger budget).
    pub fn with_eligible_cap(mut self, cap: usize) -> Self {
        self.eligible_cap = cap;
        self
    }

    /// [`availability`], without the catalog lookup once pgvector was seen.
    async fn availability(&self, pool: &PgPool) -> Result<(IndexAvailability, Option<Generation>), SemanticError> {
        if self.pgvector_seen.load(Ordering::Relaxed) {
            return Ok(generation_availability(serving_generation(pool).await?, self.embedder.info()));
        }
        let decided = availability(pool, self.embedder.info()).await?;
        if decided.0 != IndexAvailability::NoPgvector {
            self.pgvector_seen.store(true, Ordering::Relaxed);
        }
        Ok(decided)
    }

    async fn search_inner(&self, request: SemanticRequest<'_>) -> Result<Vec<SemanticHit>, SemanticFailure> {
        let (state, active) = self.availability(request.pool).await.map_err(|_| SemanticFailure::Failed)?;
        let generation = match (state, active) {
            (IndexAvailability::Rebuilding { .. }, _) => return Err(SemanticFailure::Rebuilding),
            (IndexAvailability::Ready { .. }, Some(active)) => active,
            _ => return Err(SemanticFailure::Unavailable),
        };
        if exceeds_cap(&request, self.eligible_cap).await? {
            return Err(SemanticFailure::Oversized);
        }
        let query = [request.query.to_owned()];
        let vector = self.embedder.embed(&query).await.map_err(|e| query_failure(&e))?;
        let vector = vector.into_iter().next().ok_or(SemanticFailure::Failed)?;
        let nearest =
            Nearest { generation: &generation, vector: &vector, limit: request.limit, min: self.min_similarity };
        let hits = match request.eligible {
            EligibleRows::Read(eligible) => nearest_by_shortlist(request.pool, eligible, nearest).await,
            EligibleRows::MoreThan(_) | EligibleRows::Unknown => {
                nearest_eligible(request.pool, request.eligibility, nearest).await
            }
        }
        .map_err(|_| SemanticFailure::Failed)?;
        Ok(cap_distinct_hits(hits, request.limit))
    }
}

impl SemanticIndex for PgVectorIndex {
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        Box::pin(self.search_inner(request))
    }

    fn ranks_sign_bits(&self) -> bool {
        true
    }
}

/// A provider that cannot be reached (or a missing local model) is `semantic_unavailable`;
/// anything else it does wrong is `semantic_failed`.
fn query_failure(err: &EmbedError) -> SemanticFailure {
    match err {
        EmbedError::Unreachable | EmbedError::LocalModel(_) => SemanticFailure::Unavailable,
        _ => SemanticFailure::Failed,
    }
}

/// Whether the request's eligible set is larger than `cap`: from what retrieval passed when that
/// decides it (a 33 ms count at a million revisions saved for every search in a large channel),
/// otherwise a count ([`eligible_set_exceeds`]).
pub async fn exceeds_cap(request: &SemanticRequest<'_>, cap: usize) -> Result<bool, SemanticFailure> {
    match request.eligible {
        EligibleRows::Read(eligible) => Ok(eligible.len() > cap),
        EligibleRows::MoreThan(known) if known >= cap => Ok(true),
        EligibleRows::MoreThan(_) | EligibleRows::Unknown => {
            eligible_set_exceeds(request.pool, request.eligibility, cap).await.map_err(|_| SemanticFailure::Failed)
        }
    }
}

/// Whether more than `cap` revisions are eligible: counts the eligible projection rows (driven by
/// the audience's GIN index), stopping at `cap + 1`.
pub async fn eligible_set_exceeds(pool: &PgPool, ctx: &EligibilityContext, cap: usize) -> Result<bool, sqlx::Error> {
    let probe = i64::try_from(cap).unwrap_or(i64::MAX - 1) + 1;
    let eligible: i64 = sqlx::query_scalar(
        "SELECT count(*)
           FROM (SELECT 1 FROM memory_eligible_revisions($1, $2, $3, p_reading => 'audience_array') AS p LIMIT $4)
             AS eligible",
    )
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(probe)
    .fetch_one(pool)
    .await?;
    Ok(eligible >= probe)
}

/// What to search for in [`nearest_eligible`].
struct Nearest<'a> {
    generation: &'a Generation,
    vector: &'a [f32],
    limit: usize,
    min: f32,
}

/// The nearest eligible current revisions in `generation`, by cosine similarity, at least `min`
/// similar: an exact search over the eligible set, which the spec's cap keeps at 10,000 revisions
/// or fewer. One statement: the eligible projection rows (the same predicate as every candidate
/// source) joined to their embeddings in this generation. Exact beats the HNSW index here: an
/// audience typically admits well under 1% of an archive, and a filtered approximate search that
/// selective walks most of the graph to find its neighbours. The generation id and dimension are
/// integers from `embedding_generations` (never input), set into the text so that the vector type
/// has its dimension. Stored vectors are read as `vector(dimension)`: in half precision where
/// pgvector has `halfvec` (migration `20261218100000`), compared with the query's own single
/// precision vector, never a rounded one.
async fn nearest_eligible(
    pool: &PgPool,
    ctx: &EligibilityContext,
    nearest: Nearest<'_>,
) -> Result<Vec<SemanticHit>, sqlx::Error> {
    let (id, dim) = (nearest.generation.id, nearest.generation.dimension);
    let sql = format!(
        "SELECT d.revision_id, (1 - d.distance)::float4 AS similarity
           FROM (SELECT p.revision_id, x.embedding::vector({dim}) <=> (SELECT $4::text::vector({dim})) AS distance
                   FROM memory_eligible_revisions($1, $2, $3, p_reading => 'audience_array') AS p
                   JOIN revision_embeddings x ON x.generation_id = {id} AND x.revision_id = p.revision_id
                 OFFSET 0) AS d
          WHERE d.distance <= $6
          ORDER BY d.distance, d.revision_id
          LIMIT $5"
    );
    let rows: Vec<(RevisionId, f32)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(ctx.agent)
        .bind(ctx.conversation)
        .bind(ctx.audience_uuids())
        .bind(vector_literal(nearest.vector))
        .bind(i64::try_from(nearest.limit).unwrap_or(i64::MAX))
        .bind(1.0 - f64::from(nearest.min))
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|(revision_id, similarity)| SemanticHit { revision_id, similarity }).collect())
}

/// How many eligible revisions, closest by their quantized embeddings ([`SignedQuery`]), are
/// re-ranked by exact cosine per wanted hit. With fewer eligible revisions than the shortlist the
/// search is exact. Two: on dense (MiniLM) vectors a shortlist of 400 for 200 hits finds every
/// exact top 50 and 0.977 of the top 200 (docs/benchmarks-history.md, "2026-12-15"), and each
/// re-ranked revision is a probe of `revision_embeddings`, the largest cost of a hybrid search.
pub const SHORTLIST_PER_HIT: usize = 2;

/// The shortlist is never smaller than this, so small limits still re-rank a useful pool.
pub const MIN_SHORTLIST: usize = 400;

/// The nearest eligible current revisions in `generation`, at least `min` similar, among the
/// eligible set that retrieval read in this search ([`EligibleRows::Read`]): its rows are
/// ranked here by the query's real components signed by their sign bits ([`SignedQuery`]: binary
/// quantization with re-ranking, asymmetric: the query is not quantized; ties by revision id), and
/// the shortlist is re-ranked by exact cosine against `revision_embeddings`, in
/// [`RERANK_PARTS`] statements at once ([`rerank`]). Only revisions of that set are ever looked
/// up, so nothing outside it can be a hit. Rows without bits have no embedding in the active
/// generation and cannot be hits either.
async fn nearest_by_shortlist(
    pool: &PgPool,
    eligible: &[EligibleRevision],
    nearest: Nearest<'_>,
) -> Result<Vec<SemanticHit>, sqlx::Error> {
    let shortlist = shortlist(eligible, nearest.vector, shortlist_size(nearest.limit));
    let mut parts: [Vec<RevisionId>; RERANK_PARTS] = Default::default();
    for (position, revision) in shortlist.into_iter().enumerate() {
        parts[position % RERANK_PARTS].push(revision);
    }
    // Probed in key order: time-ordered ids lie in the order they were written, so consecutive
    // probes share index pages and walk the table forward (5-9% off a part's statement, measured
    // with 400 random revisions of a 1M store).
    parts.iter_mut().for_each(|part| part.sort_unstable());
    let [first, second] = &parts;
    let query = vector_literal(nearest.vector);
    let (mut hits, more) =
        tokio::try_join!(rerank(pool, first, &query, &nearest), rerank(pool, second, &query, &nearest))?;
    hits.extend(more);
    hits.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    hits.truncate(nearest.limit);
    Ok(hits
        .into_iter()
        .map(|(revision_id, distance)| SemanticHit { revision_id, similarity: (1.0 - distance) as f32 })
        .collect())
}

/// How many statements re-rank a shortlist at the same time. Each exact probe is a few
/// microseconds of one backend's CPU (a shortlist's probes are the largest part of a hybrid search
/// at a million revisions), and while they run the rest of the search waits: two halves on two pooled
/// connections use both cores of a small machine for one search, the way PostgreSQL's own
/// parallel query would, and give the same hits as one statement (each half keeps its best
/// `limit`, merged by the same order).
pub const RERANK_PARTS: usize = 2;

/// The best `limit` of `revisions` in `generation` by exact cosine distance to `query` (the
/// vector as pgvector text), at most `1 - min`, closest first (ties by revision id):
/// `(revision, distance)`. Each stored vector is read as `vector(dimension)`, as in
/// [`nearest_eligible`].
async fn rerank(
    pool: &PgPool,
    revisions: &[RevisionId],
    query: &str,
    nearest: &Nearest<'_>,
) -> Result<Vec<(RevisionId, f64)>, sqlx::Error> {
    if revisions.is_empty() {
        return Ok(Vec::new());
    }
    let (id, dim) = (nearest.generation.id, nearest.generation.dimension);
    let sql = format!(
        "SELECT d.revision_id, d.distance
           FROM (SELECT x.revision_id, x.embedding::vector({dim}) <=> (SELECT $1::text::vector({dim})) AS distance
                   FROM unnest($2::uuid[]) AS shortlist(revision_id)
                   JOIN revision_embeddings x ON x.generation_id = {id} AND x.revision_id = shortlist.revision_id
                 OFFSET 0) AS d
          WHERE d.distance <= $4
          ORDER BY d.distance, d.revision_id
          LIMIT $3"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(query)
        .bind(revisions)
        .bind(i64::try_from(nearest.limit).unwrap_or(i64::MAX))
        .bind(1.0 - f64::from(nearest.min))
        .fetch_all(pool)
        .await
}

/// How many revisions are re-ranked by exact cosine when `limit` hits are wanted.
pub fn shortlist_size(limit: usize) -> usize {
    limit.saturating_mul(SHORTLIST_PER_HIT).max(MIN_SHORTLIST)
}

/// The `size` eligible revisions closest to `query` by their sign bits ([`SignedQuery`]), closest
/// first, ties by revision id; revisions without comparable bits are left out.
pub fn shortlist(eligible: &[EligibleRevision], query: &[f32], size: usize) -> Vec<RevisionId> {
    let scorer = SignedQuery::of(query);
    let mut ranked: Vec<(f64, RevisionId)> =
        eligible.iter().filter_map(|e| Some((scorer.score(e.sign_bits.as_ref()?)?, e.revision_id))).collect();
    let closest_first = |a: &(f64, RevisionId), b: &(f64, RevisionId)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if ranked.len() > size {
        ranked.select_nth_unstable_by(size, closest_first);
        ranked.truncate(size);
    }
    ranked.sort_unstable_by(closest_first);
    ranked.into_iter().map(|(_, revision)| revision).collect()
}

/// Keeps only the hits that are eligible now, by the same predicate as every candidate query,
/// in the provider's order (one statement over all hits). For an external index that cannot
/// restrict its search to the eligible set's ids (Qdrant can, and does), after its provider work
/// and before [`cap_distinct_hits`].
pub async fn revalidate(
    pool: &PgPool,
    ctx: &EligibilityContext,
    hits: Vec<SemanticHit>,
) -> Result<Vec<SemanticHit>, sqlx::Error> {
    let ids: Vec<Uuid> = hits.iter().map(|h| h.revision_id.0).collect();
    let eligible: Vec<RevisionId> = sqlx::query_scalar(
        "SELECT p.revision_id FROM unnest($4::uuid[]) AS hit(id)
           JOIN memory_eligible_revisions($1, $2, $3, p_reading => 'audience_array') AS p ON p.revision_id = hit.id",
    )
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(ids)
    .fetch_all(pool)
    .await?;
    let keep: std::collections::HashSet<RevisionId> = eligible.into_iter().collect();
    Ok(hits.into_iter().filter(|h| keep.contains(&h.revision_id)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_keeps_best_distinct_hits() {
        let a = RevisionId::generate();
        let b = RevisionId::generate();
        let c = RevisionId::generate();
        let hits = vec![
            SemanticHit { revision_id: a, similarity: 0.1 },
            SemanticHit { revision_id: b, similarity: 0.9 },
            SemanticHit { revision_id: b, similarity: 0.5 },
            SemanticHit { revision_id: c, similarity: 0.7 },
        ];
        let capped = cap_distinct_hits(hits, 2);
        assert_eq!(capped.iter().map(|h| h.revision_id).collect::<Vec<_>>(), vec![b, c]);
        assert_eq!(capped[0].similarity, 0.9);
    }
}
