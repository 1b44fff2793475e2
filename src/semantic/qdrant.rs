//! The Qdrant adapter (feature `qdrant`): vectors in a Qdrant server (gRPC), one collection per
//! embedding generation, canonical truth in PostgreSQL.
//!
//! Writes come from the [`IndexWorker`](super::IndexWorker) through [`VectorMirror`]: each point
//! is a revision (point id = revision UUID) with a payload mirroring what eligibility needs first:
//! `runtime_agent_id`, `entry_id`, `current` and `live`. Searches filter on that payload, then
//! revalidate every hit against the canonical rows with the one eligibility predicate
//! (the set form, SQL `memory_eligible_revisions`) after the provider work, and cap distinct valid hits at the
//! requested limit before retrieval hydrates them. The payload is only a pre-filter: a stale flag
//! (an amend racing a search) can make Qdrant return an ineligible point, never make one eligible.

use std::sync::Arc;

use qdrant_client::qdrant::{
    point_id::PointIdOptions, Condition, CreateCollectionBuilder, Distance, Filter, PointStruct, QueryPointsBuilder,
    SetPayloadPointsBuilder, UpsertPointsBuilder, VectorParamsBuilder,
};
use qdrant_client::{Payload, Qdrant, QdrantError};
use sqlx::PgPool;
use uuid::Uuid;

use super::embedder::Embedder;
use super::generations::{generation_in_state, Generation, GenerationState};
use super::vector_index::{
    cap_distinct_hits, exceeds_cap, revalidate, MirrorError, MirrorFuture, PointRef, VectorMirror,
    MAX_ELIGIBLE_REVISIONS,
};
use crate::ids::{AgentId, EntryId, RevisionId};
use crate::retrieval::{SemanticFailure, SemanticFuture, SemanticHit, SemanticIndex, SemanticRequest};

/// Qdrant is asked for this many times the requested hits, since revalidation may drop some.
const OVERFETCH: usize = 2;

/// A Qdrant-backed vector index.
pub struct QdrantIndex {
    client: Qdrant,
    embedder: Arc<dyn Embedder>,
    collection_prefix: String,
    eligible_cap: usize,
}

impl std::fmt::Debug for QdrantIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdrantIndex").field("collection_prefix", &self.collection_prefix).finish_non_exhaustive()
    }
}

fn mirror_error(err: &QdrantError) -> MirrorError {
    match err {
        QdrantError::ResponseError { status } if status.code() as i32 == GRPC_UNAVAILABLE => MirrorError::Unreachable,
        QdrantError::ResponseError { .. } | QdrantError::ResourceExhaustedError { .. } => MirrorError::Failed,
        _ => MirrorError::Unreachable,
    }
}

/// gRPC status `UNAVAILABLE`: the server could not be reached.
const GRPC_UNAVAILABLE: i32 = 14;

impl QdrantIndex {
    /// Connects to `url` (e.g. `http://127.0.0.1:6334`, the gRPC port) with an optional API key.
    /// Collections are named `<collection_prefix>_g<generation>`.
    pub fn connect(
        url: &str,
        api_key: Option<String>,
        collection_prefix: &str,
        embedder: Arc<dyn Embedder>,
    ) -> Result<Self, MirrorError> {
        let client = Qdrant::from_url(url)
            .api_key(api_key)
            .timeout(std::time::Duration::from_secs(3))
            .connect_timeout(std::time::Duration::from_secs(3))
            .skip_compatibility_check()
            .build()
            .map_err(|e| mirror_error(&e))?;
        Ok(Self {
            client,
            embedder,
            collection_prefix: collection_prefix.to_owned(),
            eligible_cap: MAX_ELIGIBLE_REVISIONS,
        })
    }

    /// The collection of a generation.
    pub fn collection(&self, generation: i64) -> String {
        format!("{}_g{generation}", self.collection_prefix)
    }

    async fn ensure_collection(&self, generation: &Generation) -> Result<String, MirrorError> {
        let name = self.collection(generation.id);
        if !self.client.collection_exists(&name).await.map_err(|e| mirror_error(&e))? {
            let dimension = u64::try_from(generation.dimension).map_err(|_| MirrorError::Failed)?;
            let created = self
                .client
                .create_collection(
                    CreateCollectionBuilder::new(&name)
                        .vectors_config(VectorParamsBuilder::new(dimension, Distance::Cosine)),
                )
                .await;
            // A concurrent worker may have created it meanwhile; check again before failing.
            if let Err(err) = created {
                if !self.client.collection_exists(&name).await.map_err(|e| mirror_error(&e))? {
                    return Err(mirror_error(&err));
                }
            }
        }
        Ok(name)
    }

    async fn set_flags(&self, collection: &str, filter: Filter, key: &str, value: bool) -> Result<(), MirrorError> {
        let mut payload = Payload::new();
        payload.insert(key, value);
        self.client
            .set_payload(SetPayloadPointsBuilder::new(collection, payload).points_selector(filter).wait(true))
            .await
            .map_err(|e| mirror_error(&e))?;
        Ok(())
    }

    async fn upsert_points(
        &self,
        generation: &Generation,
        points: &[PointRef],
        vectors: &[Vec<f32>],
    ) -> Result<(), MirrorError> {
        let collection = self.ensure_collection(generation).await?;
        // Older revisions of these entries stop being current before the new points land.
        for (_, entry, _) in points {
            let filter = Filter::must([Condition::matches("entry_id", entry.0.to_string())]);
            self.set_flags(&collection, filter, "current", false).await?;
        }
        let structs: Vec<PointStruct> = points
            .iter()
            .zip(vectors)
            .map(|((agent, entry, revision), vector)| {
                let mut payload = Payload::new();
                payload.insert("runtime_agent_id", agent.0.to_string());
                payload.insert("entry_id", entry.0.to_string());
                payload.insert("revision_id", revision.0.to_string());
                payload.insert("current", true);
                payload.insert("live", true);
                PointStruct::new(revision.0.to_string(), vector.clone(), payload)
            })
            .collect();
        self.client
            .upsert_points(UpsertPointsBuilder::new(&collection, structs).wait(true))
            .await
            .map_err(|e| mirror_error(&e))?;
        Ok(())
    }

    async fn retire(&self, entry: EntryId) -> Result<(), MirrorError> {
        // Every generation's collection may hold the entry's points.
        let collections = self.client.list_collections().await.map_err(|e| mirror_error(&e))?;
        let prefix = format!("{}_g", self.collection_prefix);
        for collection in collections.collections.iter().filter(|c| c.name.starts_with(&prefix)) {
            let filter = Filter::must([Condition::matches("entry_id", entry.0.to_string())]);
            self.set_flags(&collection.name, filter, "live", false).await?;
        }
        Ok(())
    }

    async fn search_inner(&self, request: SemanticRequest<'_>) -> Result<Vec<SemanticHit>, SemanticFailure> {
        let generation = active_generation_for(request.pool, self.embedder.as_ref()).await?;
        if exceeds_cap(&request, self.eligible_cap).await? {
            return Err(SemanticFailure::Oversized);
        }
        let query = [request.query.to_owned()];
        let vector = self.embedder.embed(&query).await.map_err(|_| SemanticFailure::Unavailable)?;
        let vector = vector.into_iter().next().ok_or(SemanticFailure::Failed)?;
        let filter = Filter::must([
            Condition::matches("runtime_agent_id", request.eligibility.agent.0.to_string()),
            Condition::matches("current", true),
            Condition::matches("live", true),
        ]);
        let asked = u64::try_from(request.limit.saturating_mul(OVERFETCH)).unwrap_or(u64::MAX);
        let response = self
            .client
            .query(
                QueryPointsBuilder::new(self.collection(generation.id))
                    .query(vector)
                    .filter(filter)
                    .limit(asked)
                    .with_payload(false),
            )
            .await
            .map_err(|e| match mirror_error(&e) {
                MirrorError::Unreachable => SemanticFailure::Unavailable,
                MirrorError::Failed => SemanticFailure::Failed,
            })?;
        let raw: Vec<SemanticHit> = response
            .result
            .iter()
            .filter_map(|point| {
                let id = match point.id.as_ref()?.point_id_options.as_ref()? {
                    PointIdOptions::Uuid(text) => Uuid::parse_str(text).ok()?,
                    PointIdOptions::Num(_) => return None,
                };
                Some(SemanticHit { revision_id: RevisionId(id), similarity: point.score })
            })
            .collect();
        let valid = revalidate(request.pool, request.eligibility, raw).await.map_err(|_| SemanticFailure::Failed)?;
        Ok(cap_distinct_hits(valid, request.limit))
    }
}

/// The active generation if it serves `embedder`'s model; rebuilding and mismatches degrade.
async fn active_generation_for(pool: &PgPool, embedder: &dyn Embedder) -> Result<Generation, SemanticFailure> {
    let lookup = |state| async move { generation_in_state(pool, state).await.map_err(|_| SemanticFailure::Failed) };
    if lookup(GenerationState::Building).await?.is_some() {
        return Err(SemanticFailure::Rebuilding);
    }
    match lookup(GenerationState::Active).await? {
        Some(active) if active.matches(embedder.info()) => Ok(active),
        _ => Err(SemanticFailure::Unavailable),
    }
}

impl VectorMirror for QdrantIndex {
    fn upsert<'a>(
        &'a self,
        generation: &'a Generation,
        points: &'a [PointRef],
        vectors: &'a [Vec<f32>],
    ) -> MirrorFuture<'a> {
        Box::pin(self.upsert_points(generation, points, vectors))
    }

    fn retire_entry<'a>(&'a self, _agent: AgentId, entry: EntryId) -> MirrorFuture<'a> {
        Box::pin(self.retire(entry))
    }
}

impl SemanticIndex for QdrantIndex {
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        Box::pin(self.search_inner(request))
    }
}
