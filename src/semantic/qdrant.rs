//! The Qdrant adapter (feature `qdrant`): vectors in a Qdrant server or cluster (gRPC), one
//! collection per embedding generation, canonical truth in PostgreSQL.
//!
//! Writes come from the [`IndexWorker`](super::IndexWorker) and rebuilds through
//! [`VectorMirror`]: a point per current revision of a live entry (point id = revision UUID,
//! payload `runtime_agent_id`, `entry_id`, `revision_id`), and no point of any other revision once
//! the worker has caught up ([`super::mirror`] says why nothing resurrects). Searches ask Qdrant
//! only among the eligible set of this search (the set retrieval read, or one this adapter reads
//! with the same predicate, the set form, SQL `memory_eligible_revisions`) as a point-id filter, above the
//! same similarity floor as pgvector, and cap distinct hits at the requested limit; retrieval then
//! keeps only hits of its eligible set and re-checks the canonical rules in the statement that
//! hydrates them, exactly as for pgvector's hits. So a point the worker has not pruned yet can
//! never come back eligible: its revision is in no eligible set.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use qdrant_client::qdrant::{
    point_id::PointIdOptions, Condition, CountPointsBuilder, CreateCollectionBuilder,
    CreateFieldIndexCollectionBuilder, DeletePointsBuilder, Distance, FieldType, Filter, GetPointsBuilder, PointId,
    PointStruct, QueryPointsBuilder, ScrollPointsBuilder, UpsertPointsBuilder, VectorParamsBuilder, WriteOrdering,
    WriteOrderingType,
};
use qdrant_client::{Payload, Qdrant, QdrantError};
use sqlx::PgPool;
use uuid::Uuid;

use super::embedder::Embedder;
use super::generations::{serving_generation, Generation, GenerationState};
use super::mirror::{MirrorBatch, MirrorError, MirrorFuture, VectorMirror};
use super::vector_index::{cap_distinct_hits, DEFAULT_MIN_SIMILARITY, MAX_ELIGIBLE_REVISIONS};
use super::SemanticError;
use crate::ids::RevisionId;
use crate::privacy::EligibilityContext;
use crate::retrieval::{EligibleRows, SemanticFailure, SemanticFuture, SemanticHit, SemanticIndex, SemanticRequest};

/// Where the Qdrant index lives and how its collections are laid out.
#[derive(Clone)]
pub struct QdrantConfig {
    /// The gRPC URL (`http://host:6334`).
    pub url: String,
    /// The API key, if the server requires one (sent as the `api-key` header).
    pub api_key: Option<String>,
    /// Collections are `<prefix>_g<generation>`: one prefix per mesh database sharing a server.
    pub collection_prefix: String,
    /// Shards of a new collection (a cluster spreads them over its nodes); `None`: the server's
    /// default.
    pub shards: Option<u32>,
    /// Copies of each shard on different nodes, so a node can fail; `None`: the server's default.
    pub replication_factor: Option<u32>,
}

impl std::fmt::Debug for QdrantConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API key is a secret: never printed.
        f.debug_struct("QdrantConfig")
            .field("url", &self.url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("collection_prefix", &self.collection_prefix)
            .field("shards", &self.shards)
            .field("replication_factor", &self.replication_factor)
            .finish()
    }
}

/// The collection prefix when `MESH_QDRANT_COLLECTION` is unset.
pub const DEFAULT_COLLECTION_PREFIX: &str = "mesh_memory";

impl QdrantConfig {
    /// A single-server configuration for `url` with the default prefix.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            api_key: None,
            collection_prefix: DEFAULT_COLLECTION_PREFIX.into(),
            shards: None,
            replication_factor: None,
        }
    }

    /// From the environment: `QDRANT_URL` (required), `QDRANT_API_KEY`, `MESH_QDRANT_COLLECTION`
    /// (the prefix), `MESH_QDRANT_SHARDS`, `MESH_QDRANT_REPLICATION`. A number that does not parse
    /// is an error, not a default.
    pub fn from_env() -> Result<Self, SemanticError> {
        let bad = |what: &str| SemanticError::VectorIndexConfig(what.to_owned());
        let url = std::env::var("QDRANT_URL").ok().filter(|u| !u.is_empty()).ok_or_else(|| {
            bad("MESH_VECTOR_INDEX=qdrant needs QDRANT_URL (the gRPC URL, e.g. http://127.0.0.1:6334)")
        })?;
        let number = |name: &str| -> Result<Option<u32>, SemanticError> {
            match std::env::var(name).ok().filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v.parse().map(Some).map_err(|_| bad(&format!("{name} is not a positive number"))),
            }
        };
        let prefix = std::env::var("MESH_QDRANT_COLLECTION")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or(DEFAULT_COLLECTION_PREFIX.into());
        if !prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(bad("MESH_QDRANT_COLLECTION may hold only letters, digits, '_' and '-'"));
        }
        Ok(Self {
            url,
            api_key: std::env::var("QDRANT_API_KEY").ok().filter(|k| !k.is_empty()),
            collection_prefix: prefix,
            shards: number("MESH_QDRANT_SHARDS")?,
            replication_factor: number("MESH_QDRANT_REPLICATION")?,
        })
    }
}

/// A Qdrant-backed vector index: retrieval's [`SemanticIndex`] and the worker's [`VectorMirror`].
pub struct QdrantIndex {
    client: Qdrant,
    embedder: Arc<dyn Embedder>,
    config: QdrantConfig,
    eligible_cap: usize,
    min_similarity: f32,
    /// Collections known to exist, so a batch does not ask the server every time.
    known: Mutex<HashSet<String>>,
}

impl std::fmt::Debug for QdrantIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdrantIndex").field("config", &self.config).finish_non_exhaustive()
    }
}

/// gRPC status `NOT_FOUND` (a collection that does not exist).
const GRPC_NOT_FOUND: i32 = 5;
/// gRPC status `UNAVAILABLE`: the server could not be reached.
const GRPC_UNAVAILABLE: i32 = 14;
/// gRPC status `DEADLINE_EXCEEDED`.
const GRPC_DEADLINE_EXCEEDED: i32 = 4;
/// gRPC status `INTERNAL`.
const GRPC_INTERNAL: i32 = 13;

/// Whether the server could not be reached at all: unavailable, timed out, or a connection the
/// client could not open (which qdrant-client reports as `INTERNAL` "Failed to connect ...").
fn unreachable(err: &QdrantError) -> bool {
    match err {
        QdrantError::ResponseError { status } => match status.code() as i32 {
            GRPC_UNAVAILABLE | GRPC_DEADLINE_EXCEEDED => true,
            GRPC_INTERNAL => status.message().starts_with("Failed to connect"),
            _ => false,
        },
        QdrantError::ResourceExhaustedError { .. } => false,
        _ => true,
    }
}

fn mirror_error(err: &QdrantError) -> MirrorError {
    if unreachable(err) {
        MirrorError::Unreachable
    } else {
        MirrorError::Failed
    }
}

fn search_failure(err: &QdrantError) -> SemanticFailure {
    // Unreachable, or no collection for the active generation (indexed without Qdrant).
    if unreachable(err)
        || matches!(err, QdrantError::ResponseError { status } if status.code() as i32 == GRPC_NOT_FOUND)
    {
        SemanticFailure::Unavailable
    } else {
        SemanticFailure::Failed
    }
}

/// Medium ordering: a shard's writes go through one replica (Qdrant's dynamically chosen
/// leader), so replicas apply them in one order, and a dead node does not block them.
fn ordering() -> WriteOrdering {
    WriteOrdering { r#type: WriteOrderingType::Medium as i32 }
}

impl QdrantIndex {
    /// Connects to `config.url` (no request is made until the first use). Queries are embedded
    /// with `embedder`, the model of the active generation.
    pub fn new(config: QdrantConfig, embedder: Arc<dyn Embedder>) -> Result<Self, MirrorError> {
        let client = client(&config)?;
        Ok(Self {
            client,
            embedder,
            config,
            eligible_cap: MAX_ELIGIBLE_REVISIONS,
            min_similarity: DEFAULT_MIN_SIMILARITY,
            known: Mutex::new(HashSet::new()),
        })
    }

    /// [`new`](Self::new) with a URL, an optional API key and a collection prefix.
    pub fn connect(
        url: &str,
        api_key: Option<String>,
        collection_prefix: &str,
        embedder: Arc<dyn Embedder>,
    ) -> Result<Self, MirrorError> {
        let config =
            QdrantConfig { api_key, collection_prefix: collection_prefix.to_owned(), ..QdrantConfig::new(url) };
        Self::new(config, embedder)
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

    /// The client, for diagnostics and tests that inspect a collection directly.
    pub fn client(&self) -> &Qdrant {
        &self.client
    }

    /// The collection of a generation.
    pub fn collection(&self, generation: i64) -> String {
        format!("{}_g{generation}", self.config.collection_prefix)
    }

    /// Every point (revision) in `generation`'s collection, for checks that it mirrors the
    /// canonical current revisions (tests, the bench). A missing collection holds none.
    pub async fn point_revisions(&self, generation: i64) -> Result<Vec<RevisionId>, MirrorError> {
        let name = self.collection(generation);
        if !self.client.collection_exists(&name).await.map_err(|e| mirror_error(&e))? {
            return Ok(Vec::new());
        }
        let mut revisions = Vec::new();
        let mut offset: Option<PointId> = None;
        loop {
            let mut request = ScrollPointsBuilder::new(&name).limit(1000).with_payload(false).with_vectors(false);
            if let Some(offset) = offset.take() {
                request = request.offset(offset);
            }
            let page = self.client.scroll(request).await.map_err(|e| mirror_error(&e))?;
            revisions.extend(page.result.iter().filter_map(|p| point_revision(p.id.as_ref()?)));
            match page.next_page_offset {
                Some(next) => offset = Some(next),
                None => return Ok(revisions),
            }
        }
    }

    /// How many points `generation`'s collection holds (exact count).
    pub async fn point_count(&self, generation: i64) -> Result<u64, MirrorError> {
        let response = self
            .client
            .count(CountPointsBuilder::new(self.collection(generation)).exact(true))
            .await
            .map_err(|e| mirror_error(&e))?;
        Ok(response.result.map_or(0, |r| r.count))
    }

    async fn ensure_collection(&self, generation: &Generation) -> Result<String, MirrorError> {
        let name = self.collection(generation.id);
        if self.known.lock().is_ok_and(|k| k.contains(&name)) {
            return Ok(name);
        }
        if !self.client.collection_exists(&name).await.map_err(|e| mirror_error(&e))? {
            let dimension = u64::try_from(generation.dimension).map_err(|_| MirrorError::Failed)?;
            let mut create = CreateCollectionBuilder::new(&name)
                .vectors_config(VectorParamsBuilder::new(dimension, Distance::Cosine));
            if let Some(shards) = self.config.shards {
                create = create.shard_number(shards);
            }
            if let Some(replication) = self.config.replication_factor {
                create = create.replication_factor(replication);
            }
            // A concurrent worker may have created it meanwhile; check again before failing.
            if let Err(err) = self.client.create_collection(create).await {
                if !self.client.collection_exists(&name).await.map_err(|e| mirror_error(&e))? {
                    return Err(mirror_error(&err));
                }
            }
            // Prunes select by entry: index it (idempotent when a concurrent worker did too).
            self.client
                .create_field_index(
                    CreateFieldIndexCollectionBuilder::new(&name, "entry_id", FieldType::Keyword).wait(true),
                )
                .await
                .map_err(|e| mirror_error(&e))?;
        }
        if let Ok(mut known) = self.known.lock() {
            known.insert(name.clone());
        }
        Ok(name)
    }

    async fn apply_batch(&self, generation: &Generation, batch: MirrorBatch<'_>) -> Result<(), MirrorError> {
        if batch.prunes.is_empty() && batch.upserts.is_empty() {
            return Ok(());
        }
        let collection = self.ensure_collection(generation).await?;
        if !batch.prunes.is_empty() {
            // One request: points of these entries, except each entry's current revision.
            let each = batch.prunes.iter().map(|(entry, keep)| {
                let of_entry = vec![Condition::matches("entry_id", entry.0.to_string())];
                let keep: Vec<Condition> =
                    keep.iter().map(|revision| Condition::has_id([PointId::from(revision.0.to_string())])).collect();
                Condition::from(Filter { must: of_entry, must_not: keep, ..Filter::default() })
            });
            self.client
                .delete_points(
                    DeletePointsBuilder::new(&collection).points(Filter::should(each)).wait(true).ordering(ordering()),
                )
                .await
                .map_err(|e| mirror_error(&e))?;
        }
        if !batch.upserts.is_empty() {
            let points: Vec<PointStruct> = batch
                .upserts
                .iter()
                .map(|((agent, entry, revision), vector)| {
                    let mut payload = Payload::new();
                    payload.insert("runtime_agent_id", agent.0.to_string());
                    payload.insert("entry_id", entry.0.to_string());
                    payload.insert("revision_id", revision.0.to_string());
                    PointStruct::new(revision.0.to_string(), vector.clone(), payload)
                })
                .collect();
            self.client
                .upsert_points(UpsertPointsBuilder::new(&collection, points).wait(true).ordering(ordering()))
                .await
                .map_err(|e| mirror_error(&e))?;
        }
        Ok(())
    }

    async fn drop_collections(&self, generations: &[i64]) -> Result<(), MirrorError> {
        let doomed: HashSet<String> = generations.iter().map(|g| self.collection(*g)).collect();
        let existing = self.client.list_collections().await.map_err(|e| mirror_error(&e))?;
        for collection in existing.collections.iter().filter(|c| doomed.contains(&c.name)) {
            self.client.delete_collection(&collection.name).await.map_err(|e| mirror_error(&e))?;
            if let Ok(mut known) = self.known.lock() {
                known.remove(&collection.name);
            }
        }
        Ok(())
    }

    /// The ids of the eligible set for this search, or `Oversized` when it is larger than the
    /// cap: the set retrieval read, else read here (at most cap + 1 rows) with the same
    /// predicate.
    async fn eligible_ids(&self, request: &SemanticRequest<'_>) -> Result<Vec<Uuid>, SemanticFailure> {
        if let EligibleRows::MoreThan(known) = request.eligible {
            if known >= self.eligible_cap {
                return Err(SemanticFailure::Oversized);
            }
        }
        let ids = match request.eligible {
            EligibleRows::Read(rows) => rows.iter().map(|r| r.revision_id.0).collect(),
            _ => read_eligible_ids(request.pool, request.eligibility, self.eligible_cap + 1)
                .await
                .map_err(|_| SemanticFailure::Failed)?,
        };
        if ids.len() > self.eligible_cap {
            return Err(SemanticFailure::Oversized);
        }
        Ok(ids)
    }

    async fn search_inner(&self, request: SemanticRequest<'_>) -> Result<Vec<SemanticHit>, SemanticFailure> {
        let generation = active_generation_for(request.pool, self.embedder.as_ref()).await?;
        let eligible = self.eligible_ids(&request).await?;
        if eligible.is_empty() {
            return Ok(Vec::new());
        }
        let query = [request.query.to_owned()];
        let vector = self.embedder.embed(&query).await.map_err(|_| SemanticFailure::Unavailable)?;
        let vector = vector.into_iter().next().ok_or(SemanticFailure::Failed)?;
        let filter = Filter::must([Condition::has_id(eligible.iter().map(|id| PointId::from(id.to_string())))]);
        let mut query = QueryPointsBuilder::new(self.collection(generation.id))
            .query(vector)
            .filter(filter)
            .limit(u64::try_from(request.limit).unwrap_or(u64::MAX))
            .with_payload(false);
        if self.min_similarity > -1.0 {
            query = query.score_threshold(self.min_similarity);
        }
        let response = self.client.query(query).await.map_err(|e| search_failure(&e))?;
        let raw: Vec<SemanticHit> = response
            .result
            .iter()
            .filter_map(|point| {
                Some(SemanticHit { revision_id: point_revision(point.id.as_ref()?)?, similarity: point.score })
            })
            .collect();
        // Every hit is one of the eligible ids this search read (the point-id filter), as pgvector's
        // hits are rows of that set; retrieval keeps only hits of its set and re-checks the
        // canonical rules when it hydrates them.
        Ok(cap_distinct_hits(raw, request.limit))
    }
}

/// A client for `config`'s server (3 s timeouts: a search has its own, shorter deadline).
fn client(config: &QdrantConfig) -> Result<Qdrant, MirrorError> {
    Qdrant::from_url(&config.url)
        .api_key(config.api_key.clone())
        .timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(3))
        .skip_compatibility_check()
        .build()
        .map_err(|e| mirror_error(&e))
}

/// Which of `revisions` still have a point in the collection of any of `generations` (`erase
/// verify`: an erased revision must have none). Needs no embedder; a missing collection holds none.
pub async fn points_left(
    config: &QdrantConfig,
    generations: &[i64],
    revisions: &[RevisionId],
) -> Result<Vec<RevisionId>, MirrorError> {
    let client = client(config)?;
    let ids: Vec<PointId> = revisions.iter().map(|r| PointId::from(r.0.to_string())).collect();
    let mut left = Vec::new();
    for generation in generations {
        let name = format!("{}_g{generation}", config.collection_prefix);
        if ids.is_empty() || !client.collection_exists(&name).await.map_err(|e| mirror_error(&e))? {
            continue;
        }
        let found = client
            .get_points(GetPointsBuilder::new(name, ids.clone()).with_payload(false).with_vectors(false))
            .await
            .map_err(|e| mirror_error(&e))?;
        left.extend(found.result.iter().filter_map(|p| point_revision(p.id.as_ref()?)));
    }
    left.sort_unstable();
    left.dedup();
    Ok(left)
}

/// The revision a point stands for (points are keyed by revision UUID).
fn point_revision(id: &PointId) -> Option<RevisionId> {
    match id.point_id_options.as_ref()? {
        PointIdOptions::Uuid(text) => Uuid::parse_str(text).ok().map(RevisionId),
        PointIdOptions::Num(_) => None,
    }
}

/// At most `limit` revision ids of the eligible set, by the predicate every candidate source uses.
async fn read_eligible_ids(pool: &PgPool, ctx: &EligibilityContext, limit: usize) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT p.revision_id FROM memory_eligible_revisions($1, $2, $3, p_reading => 'class_scan') AS p LIMIT $4",
    )
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(pool)
    .await
}

/// The active generation if it serves `embedder`'s model (one statement, as pgvector decides it);
/// rebuilding and mismatches degrade.
async fn active_generation_for(pool: &PgPool, embedder: &dyn Embedder) -> Result<Generation, SemanticFailure> {
    match serving_generation(pool).await.map_err(|_| SemanticFailure::Failed)? {
        Some(g) if g.state == GenerationState::Building => Err(SemanticFailure::Rebuilding),
        Some(active) if active.matches(embedder.info()) => Ok(active),
        _ => Err(SemanticFailure::Unavailable),
    }
}

impl VectorMirror for QdrantIndex {
    fn apply<'a>(&'a self, generation: &'a Generation, batch: MirrorBatch<'a>) -> MirrorFuture<'a> {
        Box::pin(self.apply_batch(generation, batch))
    }

    fn drop_generations<'a>(&'a self, generations: &'a [i64]) -> MirrorFuture<'a> {
        Box::pin(self.drop_collections(generations))
    }
}

impl SemanticIndex for QdrantIndex {
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        Box::pin(self.search_inner(request))
    }
}
