//! The semantic-index conformance suite: one set of behaviours every vector index must show,
//! run against each adapter by a thin binding (`tests/semantic.rs`: pgvector,
//! `tests/semantic_qdrant.rs`: Qdrant) through [`conformance_tests!`]:
//! the worker's generations with model and dimension, search over eligible revisions only
//! (floor, limit, foreign audiences), amend and forget, erasure, the eligible set retrieval read (sign bits
//! included) and its cap, no generation or another model, rebuild and abandon, and the
//! degradations to lexical results with their recorded category (deadline, oversized,
//! unreachable).
//!
//! The embedders here are deterministic (hashed bag of words) so that the suite needs no model
//! weights; `tests/semantic_local.rs` runs the real all-MiniLM-L6-v2.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{self, TestDb, World};
use mesh_memory::privacy::EligibilityContext;
use mesh_memory::retrieval::{
    DegradationCategory, EligibleRevision, EligibleRows, RetrievalConfig, RetrievalMode, Retriever, SearchRequest,
    SemanticFailure, SemanticHit, SemanticIndex, SemanticRequest,
};
use mesh_memory::semantic::{
    abandon_rebuild, list_generations, EmbedError, EmbedFuture, Embedder, EmbedderInfo, Generation, GenerationState,
    IndexWorker, RebuildProgress, SemanticError, SignBits,
};
use mesh_memory::store::{Amendment, SubjectUpdate, Topology, WriteOutcome};
use mesh_memory::{ConversationId, EntryId, RevisionId};

// ------------------------------------------------------------------------------------------------
// Test embedders
// ------------------------------------------------------------------------------------------------

/// Hashed bag of words: texts sharing words are close. Deterministic, no weights needed.
pub struct HashEmbedder {
    pub info: EmbedderInfo,
    pub calls: AtomicUsize,
}

impl HashEmbedder {
    pub fn new(model: &str, dimension: usize) -> Arc<Self> {
        Arc::new(Self {
            info: EmbedderInfo { provider: "test".into(), model: model.into(), dimension },
            calls: AtomicUsize::new(0),
        })
    }

    pub fn vector(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.info.dimension];
        v[0] = 0.1;
        for word in text.to_lowercase().split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2) {
            let hash =
                word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
            v[1 + (hash as usize) % (self.info.dimension - 1)] += 1.0;
        }
        v
    }
}

impl Embedder for HashEmbedder {
    fn info(&self) -> &EmbedderInfo {
        &self.info
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
        self.calls.fetch_add(texts.len(), Ordering::SeqCst);
        let vectors = texts.iter().map(|t| self.vector(t)).collect();
        Box::pin(
            async move { mesh_memory::semantic::embedder::validate_vectors(vectors, texts.len(), self.info.dimension) },
        )
    }
}

/// Fails every call with `error`.
pub struct FailingEmbedder {
    pub info: EmbedderInfo,
    pub error: EmbedError,
}

impl Embedder for FailingEmbedder {
    fn info(&self) -> &EmbedderInfo {
        &self.info
    }

    fn embed<'a>(&'a self, _texts: &'a [String]) -> EmbedFuture<'a> {
        let error = self.error.clone();
        Box::pin(async move { Err(error) })
    }
}

/// Answers like `inner`, but only after `delay` (a provider past the retrieval deadline).
pub struct SlowEmbedder {
    pub inner: Arc<HashEmbedder>,
    pub delay: Duration,
}

impl Embedder for SlowEmbedder {
    fn info(&self) -> &EmbedderInfo {
        self.inner.info()
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            self.inner.embed(texts).await
        })
    }
}

// ------------------------------------------------------------------------------------------------
// The adapter under test
// ------------------------------------------------------------------------------------------------

/// How a test wants its index: a similarity floor and an eligible-set cap other than the defaults.
#[derive(Clone, Copy, Debug, Default)]
pub struct IndexOptions {
    pub min_similarity: Option<f32>,
    pub eligible_cap: Option<usize>,
}

impl IndexOptions {
    pub fn unfloored() -> Self {
        Self { min_similarity: Some(-1.0), eligible_cap: None }
    }

    pub fn cap(cap: usize) -> Self {
        Self { min_similarity: None, eligible_cap: Some(cap) }
    }

    /// `index` with these options, through its own `with_min_similarity` and `with_eligible_cap`.
    pub fn apply<I>(self, index: I, floor: impl FnOnce(I, f32) -> I, cap: impl FnOnce(I, usize) -> I) -> I {
        let index = match self.min_similarity {
            Some(value) => floor(index, value),
            None => index,
        };
        match self.eligible_cap {
            Some(value) => cap(index, value),
            None => index,
        }
    }
}

/// A vector index as the suite drives it: searching, the worker that fills it, rebuilds, and an
/// index of the same kind whose backend cannot be reached.
pub trait Adapter {
    /// The index searching with `embedder`'s model.
    fn index(&self, embedder: Arc<dyn Embedder>, options: IndexOptions) -> Arc<dyn SemanticIndex>;
    /// The outbox worker writing into this index.
    fn worker(&self, db: &TestDb, embedder: Arc<dyn Embedder>) -> IndexWorker;
    /// A rebuild into this index.
    fn rebuild(
        &self,
        db: &TestDb,
        embedder: Arc<dyn Embedder>,
        on_progress: &mut dyn FnMut(RebuildProgress),
    ) -> impl std::future::Future<Output = Result<Generation, SemanticError>>;
    /// An index of this kind that cannot reach its backend (a stopped server, a provider that
    /// cannot be reached).
    fn unreachable(&self, embedder: Arc<dyn Embedder>) -> Arc<dyn SemanticIndex>;
    /// Whether this index ranks sign bits (pgvector's shortlist).
    fn ranks_sign_bits(&self) -> bool;
}

// ------------------------------------------------------------------------------------------------
// Scene and helpers
// ------------------------------------------------------------------------------------------------

pub async fn scalar(db: &TestDb, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(&db.pool).await.unwrap()
}

/// An agent with Victor (the CTO) and Ana in an engineering channel, a private DM with Ana, and
/// a few memories.
pub struct Scene {
    pub world: World,
    pub channel: ConversationId,
    pub dm: ConversationId,
    pub victor: common::Person,
    pub tabs: (EntryId, RevisionId),
    pub private: (EntryId, RevisionId),
}

pub async fn scene(db: &TestDb) -> Scene {
    let mut world = World::new(&db.store, "agent").await;
    let victor = world.person("Victor", "U1").await;
    let ana = world.person("Ana", "U2").await;
    let channel = world.conversation("C-eng", Topology::Channel, &[&victor, &ana]).await;
    let dm = world.conversation("D-ana", Topology::Direct, &[&ana]).await;
    let tabs = world.remember(channel, &victor, Some(victor.actor), "Victor prefers tabs over spaces in code").await;
    world.remember(channel, &ana, Some(ana.actor), "The deploy train leaves every Friday afternoon").await;
    world.remember(channel, &ana, Some(ana.actor), "Ana likes sushi for lunch").await;
    let private = world.remember(dm, &ana, Some(ana.actor), "Ana secretly prefers tabs over spaces too").await;
    Scene { world, channel, dm, victor, tabs, private }
}

pub async fn semantic_hits(
    db: &TestDb,
    index: &dyn SemanticIndex,
    ctx: &EligibilityContext,
    query: &str,
    limit: usize,
) -> Result<Vec<SemanticHit>, SemanticFailure> {
    index
        .search(SemanticRequest { pool: &db.pool, eligibility: ctx, query, limit, eligible: EligibleRows::Unknown })
        .await
}

pub async fn channel_context(db: &TestDb, scene: &Scene) -> EligibilityContext {
    EligibilityContext::resolve(&db.store, scene.world.agent, scene.channel).await.unwrap()
}

pub fn recall(scene: &Scene, query: &str) -> SearchRequest {
    SearchRequest::new(scene.world.agent, scene.channel, Some(scene.victor.actor), query, RetrievalMode::Recall)
}

/// The eligible set with its sign bits, as retrieval's eligible-set statement reads it.
pub async fn eligible_revisions(db: &TestDb, ctx: &EligibilityContext) -> Vec<EligibleRevision> {
    let rows: Vec<(RevisionId, Option<SignBits>)> = sqlx::query_as(
        "SELECT p.revision_id, p.embedding_bits
           FROM memory_eligible_revisions($1, $2, $3, p_reading => 'class_scan') AS p",
    )
    .bind(ctx.agent())
    .bind(ctx.conversation())
    .bind(ctx.audience_uuids())
    .fetch_all(&db.pool)
    .await
    .unwrap();
    rows.into_iter().map(|(revision_id, sign_bits)| EligibleRevision { revision_id, sign_bits }).collect()
}

pub async fn amend(world: &World, entry: EntryId, expected: RevisionId, body: &str) -> RevisionId {
    let amended = world
        .store
        .amend_entry(Amendment {
            agent: world.agent,
            entry,
            expected_revision: expected,
            body: Some(body.into()),
            subject: SubjectUpdate::Keep,
            source_actor: None,
            sources: vec![],
        })
        .await
        .unwrap();
    let WriteOutcome::Committed(write) = amended else { panic!("amend committed") };
    write.revision_id()
}

fn ids(hits: &[SemanticHit]) -> Vec<RevisionId> {
    hits.iter().map(|h| h.revision_id).collect()
}

fn other_info() -> EmbedderInfo {
    EmbedderInfo { provider: "test".into(), model: "hash-32".into(), dimension: 32 }
}

// ------------------------------------------------------------------------------------------------
// The suite
// ------------------------------------------------------------------------------------------------

/// The worker's first run creates an active generation with the embedder's model and dimension,
/// writes one embedding row per revision with both, and a rerun embeds nothing again.
pub async fn worker_records_model_and_dimension_and_embeds_once(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let _scene = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    let report = adapter.worker(&db, embedder.clone()).drain().await.unwrap();
    assert_eq!((report.claimed, report.embedded), (4, 4));
    let generations = list_generations(&db.pool).await.unwrap();
    assert_eq!(generations.len(), 1, "the first run creates the first generation");
    assert_eq!(generations[0].state, GenerationState::Active);
    assert_eq!((generations[0].model.as_str(), generations[0].dimension), ("hash-64", 64));
    let with_metadata =
        scalar(&db, "SELECT count(*) FROM revision_embeddings WHERE model = 'hash-64' AND dimension = 64").await;
    assert_eq!(with_metadata, 4, "model and dimension are stored with every embedding");
    let again = adapter.worker(&db, embedder.clone()).drain().await.unwrap();
    assert_eq!(again.claimed, 0);
    assert_eq!(embedder.calls.load(Ordering::SeqCst), 4, "nothing is embedded twice");
}

/// The nearest eligible memory comes first; a more similar private one never appears; the floor
/// keeps unrelated memories out; the limit holds; a foreign audience gets nothing.
pub async fn search_never_returns_an_ineligible_revision(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-256", 256);
    adapter.worker(&db, embedder.clone()).drain().await.unwrap();
    let index = adapter.index(embedder.clone(), IndexOptions::default());
    let ctx = channel_context(&db, &s).await;
    let hits = semantic_hits(&db, index.as_ref(), &ctx, "prefers tabs over spaces", 10).await.unwrap();
    assert_eq!(ids(&hits), vec![s.tabs.1], "the eligible match only; unrelated ones stay below the floor");
    let unfloored = adapter.index(embedder.clone(), IndexOptions::unfloored());
    let all = semantic_hits(&db, unfloored.as_ref(), &ctx, "prefers tabs over spaces", 10).await.unwrap();
    assert_eq!(all.len(), 3, "without the floor every eligible current revision is a candidate, nothing else");
    assert!(all.iter().all(|h| h.revision_id != s.private.1));
    assert!(all.windows(2).all(|w| w[0].similarity >= w[1].similarity), "best first");
    assert_eq!(all[0].revision_id, s.tabs.1);

    let dm = EligibilityContext::resolve(&db.store, s.world.agent, s.dm).await.unwrap();
    let dm_hits = semantic_hits(&db, index.as_ref(), &dm, "prefers tabs over spaces", 10).await.unwrap();
    assert!(dm_hits.iter().any(|h| h.revision_id == s.private.1), "in the DM the private memory is eligible");

    let stranger = s.world.person("Mallory", "U9").await;
    let stranger_dm = s.world.conversation("D-mallory", Topology::Direct, &[&stranger]).await;
    let foreign = EligibilityContext::resolve(&db.store, s.world.agent, stranger_dm).await.unwrap();
    assert!(semantic_hits(&db, index.as_ref(), &foreign, "prefers tabs", 10).await.unwrap().is_empty());
    assert_eq!(semantic_hits(&db, unfloored.as_ref(), &ctx, "prefers tabs", 1).await.unwrap().len(), 1);
}

/// After an amend only the current revision is a hit (and retrieval shows its semantic rank);
/// after forget nothing of the entry is, from either source.
pub async fn amend_and_forget_leave_only_current_revisions(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    let worker = adapter.worker(&db, embedder.clone());
    worker.drain().await.unwrap();
    let amended = amend(&s.world, s.tabs.0, s.tabs.1, "Victor now insists on four spaces, never tabs").await;
    assert_eq!(worker.drain().await.unwrap().embedded, 1);
    common::assert_projection_matches_canonical(&db.pool).await;
    assert_eq!(mesh_memory::semantic::embedding_count(&db.pool, s.tabs.1).await.unwrap(), 1, "history stays");

    let index = adapter.index(embedder.clone(), IndexOptions::default());
    let ctx = channel_context(&db, &s).await;
    let hits = semantic_hits(&db, index.as_ref(), &ctx, "Victor prefers tabs over spaces in code", 10).await.unwrap();
    assert!(ids(&hits).contains(&amended));
    assert!(!ids(&hits).contains(&s.tabs.1), "a superseded revision is excluded");
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(index.clone());
    let outcome = retriever.search(&recall(&s, "Victor prefers tabs over spaces in code")).await.unwrap();
    let current = outcome.selections.iter().find(|x| x.revision_id == amended).expect("the amendment is found");
    assert!(current.components.semantic.is_some(), "semantic rank is shown in the components");
    assert!(outcome.degradation_categories.is_empty(), "{:?}", outcome.degradation_categories);

    s.world.store.forget_entry(s.world.agent, s.tabs.0).await.unwrap();
    assert_eq!(worker.drain().await.unwrap().retired, 1, "the retire_entry work item is processed");
    let hits = semantic_hits(&db, index.as_ref(), &ctx, "Victor now insists on four spaces", 10).await.unwrap();
    assert!(hits.iter().all(|h| h.revision_id != amended && h.revision_id != s.tabs.1));
    let outcome = retriever.search(&recall(&s, "Victor now insists on four spaces")).await.unwrap();
    assert!(outcome.selections.iter().all(|x| x.entry_id != s.tabs.0), "neither lexical nor semantic returns it");
    assert!(outcome.degradation_categories.is_empty());
}

/// An erasure deletes the stored embeddings of every revision of the entry, in every generation,
/// and the worker prunes the index: no search, however unfloored, returns either revision.
pub async fn an_erasure_leaves_no_vector_of_its_revisions(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    let worker = adapter.worker(&db, embedder.clone());
    worker.drain().await.unwrap();
    let amended = amend(&s.world, s.tabs.0, s.tabs.1, "Victor now insists on four spaces, never tabs").await;
    worker.drain().await.unwrap();
    assert_eq!(mesh_memory::semantic::embedding_count(&db.pool, s.tabs.1).await.unwrap(), 1);

    common::erase_as_owner(&db.pool, "entry", s.tabs.0 .0).await;
    for revision in [s.tabs.1, amended] {
        assert_eq!(mesh_memory::semantic::embedding_count(&db.pool, revision).await.unwrap(), 0, "{revision}");
    }
    assert!(worker.drain().await.unwrap().retired >= 1, "the index is told to prune the entry");
    let ctx = channel_context(&db, &s).await;
    let unfloored = adapter.index(embedder.clone(), IndexOptions::unfloored());
    for query in ["Victor prefers tabs over spaces in code", "Victor now insists on four spaces"] {
        let hits = semantic_hits(&db, unfloored.as_ref(), &ctx, query, 10).await.unwrap();
        assert!(hits.iter().all(|h| h.revision_id != amended && h.revision_id != s.tabs.1), "{hits:?}");
    }
    // Nothing embeds it again: a rebuild reads live entries only, and the outbox rows are done.
    assert_eq!(worker.drain().await.unwrap().embedded, 0);
    common::assert_projection_matches_canonical(&db.pool).await;
}

/// The eligible set retrieval read (with sign bits where the index ranks them) gives the same
/// hits as an index-side read; only revisions of the set given can be hits; a set over the cap is
/// oversized without a count, and so is a set retrieval found larger than the cap.
pub async fn the_eligible_set_retrieval_read_bounds_the_hits(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    adapter.worker(&db, embedder.clone()).drain().await.unwrap();
    let index = adapter.index(embedder.clone(), IndexOptions::unfloored());
    assert_eq!(index.ranks_sign_bits(), adapter.ranks_sign_bits());
    let ctx = channel_context(&db, &s).await;
    let eligible = eligible_revisions(&db, &ctx).await;
    assert_eq!(eligible.len(), 3);
    assert!(eligible.iter().all(|e| e.sign_bits.is_some()), "indexed rows carry their bits");
    let request = |query, eligible| SemanticRequest { pool: &db.pool, eligibility: &ctx, query, limit: 10, eligible };
    for query in ["prefers tabs over spaces", "kids school", "deploy on friday"] {
        let unknown = semantic_hits(&db, index.as_ref(), &ctx, query, 10).await.unwrap();
        let read = index.search(request(query, EligibleRows::Read(&eligible))).await.unwrap();
        assert_eq!(ids(&read), ids(&unknown), "{query:?}: the read set gives the same hits");
    }
    let one = [eligible.iter().find(|e| e.revision_id != s.tabs.1).unwrap().clone()];
    let hits = index.search(request("prefers tabs over spaces", EligibleRows::Read(&one))).await.unwrap();
    assert!(hits.iter().all(|h| h.revision_id == one[0].revision_id), "only the set given: {hits:?}");
    let capped = adapter.index(embedder.clone(), IndexOptions::cap(eligible.len() - 1));
    assert_eq!(capped.search(request("tabs", EligibleRows::Read(&eligible))).await, Err(SemanticFailure::Oversized));
    let cap = adapter.index(embedder, IndexOptions::cap(100));
    assert_eq!(cap.search(request("tabs", EligibleRows::MoreThan(100))).await, Err(SemanticFailure::Oversized));
    assert!(cap.search(request("tabs", EligibleRows::MoreThan(99))).await.is_ok(), "below the cap the set is read");
}

/// Without an active generation, or with another model's, search is unavailable; a worker of
/// another model is refused with the rebuild hint.
pub async fn no_generation_or_another_model_is_unavailable(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    let ctx = channel_context(&db, &s).await;
    let index = adapter.index(embedder.clone(), IndexOptions::default());
    assert_eq!(semantic_hits(&db, index.as_ref(), &ctx, "tabs", 10).await, Err(SemanticFailure::Unavailable));
    adapter.worker(&db, embedder.clone()).drain().await.unwrap();
    assert!(semantic_hits(&db, index.as_ref(), &ctx, "tabs", 10).await.is_ok());
    let other = adapter.index(HashEmbedder::new("hash-32", 32), IndexOptions::default());
    assert_eq!(semantic_hits(&db, other.as_ref(), &ctx, "tabs", 10).await, Err(SemanticFailure::Unavailable));
    let err = adapter.worker(&db, HashEmbedder::new("hash-32", 32)).run_once().await.unwrap_err();
    assert!(matches!(err, SemanticError::EmbedderMismatch { .. }), "{err}");
    assert!(err.to_string().contains("mesh-memory index rebuild"));
}

/// While a rebuild builds, search degrades to `index_rebuilding` with lexical results; writes meanwhile
/// reach the new generation; the switch is atomic; the new model serves and the old one no longer
/// does. An abandoned rebuild restores the active generation.
pub async fn a_rebuild_degrades_then_switches_and_an_abandoned_one_restores(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let old = HashEmbedder::new("hash-64", 64);
    adapter.worker(&db, old.clone()).drain().await.unwrap();
    let old_generation = list_generations(&db.pool).await.unwrap()[0].clone();
    let ctx = channel_context(&db, &s).await;

    // An abandoned rebuild of another model first.
    let abandoned = mesh_memory::semantic::generations::begin_rebuild(&db.pool, &other_info()).await.unwrap();
    let old_index = adapter.index(old.clone(), IndexOptions::default());
    assert_eq!(semantic_hits(&db, old_index.as_ref(), &ctx, "tabs", 10).await, Err(SemanticFailure::Rebuilding));
    assert_eq!(abandon_rebuild(&db.pool).await.unwrap(), Some(abandoned.id));
    assert!(semantic_hits(&db, old_index.as_ref(), &ctx, "tabs", 10).await.is_ok(), "the active one serves again");

    let new = HashEmbedder::new("hash-32", 32);
    let building = mesh_memory::semantic::generations::begin_rebuild(&db.pool, new.info()).await.unwrap();
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(old_index.clone());
    let during = retriever.search(&recall(&s, "tabs")).await.unwrap();
    assert_eq!(during.degradation_categories, vec![DegradationCategory::IndexRebuilding]);
    assert_eq!(during.used_revisions(), vec![s.tabs.1], "lexical results still come back");

    let mut world = s.world;
    let someone = world.person("Victor2", "U7").await;
    let (_, hal) = world.remember(s.channel, &someone, None, "The build server is called hal").await;
    adapter.worker(&db, old.clone()).drain().await.unwrap();
    let mut seen: Vec<RebuildProgress> = Vec::new();
    let active = adapter.rebuild(&db, new.clone(), &mut |p| seen.push(p)).await.unwrap();
    assert_eq!(active.id, building.id, "the rebuild resumed the building generation");
    assert!(seen.last().unwrap().is_complete() && seen.last().unwrap().embedded == 5, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].embedded <= w[1].embedded), "progress is monotonic: {seen:?}");
    let generations = list_generations(&db.pool).await.unwrap();
    let state_of = |id: i64| generations.iter().find(|g| g.id == id).unwrap().state;
    assert_eq!(state_of(building.id), GenerationState::Active);
    assert_eq!(state_of(old_generation.id), GenerationState::Retired);
    common::assert_projection_matches_canonical(&db.pool).await;

    let new_index = adapter.index(new.clone(), IndexOptions::default());
    let hits = semantic_hits(&db, new_index.as_ref(), &ctx, "prefers tabs over spaces", 10).await.unwrap();
    assert_eq!(hits.first().map(|h| h.revision_id), Some(s.tabs.1));
    let hal_hits = semantic_hits(&db, new_index.as_ref(), &ctx, "build server hal", 10).await.unwrap();
    assert_eq!(
        hal_hits.first().map(|h| h.revision_id),
        Some(hal),
        "a write during the rebuild is in the new generation"
    );
    assert_eq!(semantic_hits(&db, old_index.as_ref(), &ctx, "tabs", 10).await, Err(SemanticFailure::Unavailable));
}

/// A provider past the deadline: lexical results, `semantic_timeout` recorded, within the deadline.
pub async fn a_search_past_the_deadline_degrades_to_lexical(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    adapter.worker(&db, embedder.clone()).drain().await.unwrap();
    let slow: Arc<dyn Embedder> = Arc::new(SlowEmbedder { inner: embedder, delay: Duration::from_secs(5) });
    let config = RetrievalConfig::default();
    assert_eq!(config.semantic_deadline, Duration::from_secs(3), "the spec's deadline is the default");
    let retriever =
        Retriever::new(db.store.clone(), config).with_semantic_index(adapter.index(slow, IndexOptions::default()));
    let started = Instant::now();
    let outcome = retriever.search(&recall(&s, "tabs")).await.unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(4500), "the deadline cut the provider short: {elapsed:?}");
    assert_degraded_to_lexical(&db, &s, &outcome, DegradationCategory::SemanticTimeout).await;
}

/// An eligible set over the cap: `semantic_oversized`, counting eligibility rather than live rows.
pub async fn an_oversized_eligible_set_degrades_to_lexical(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    adapter.worker(&db, embedder.clone()).drain().await.unwrap();
    let ctx = channel_context(&db, &s).await;
    let at_cap = adapter.index(embedder.clone(), IndexOptions::cap(3));
    assert!(semantic_hits(&db, at_cap.as_ref(), &ctx, "tabs", 10).await.is_ok());
    let over_cap = adapter.index(embedder.clone(), IndexOptions::cap(2));
    assert_eq!(semantic_hits(&db, over_cap.as_ref(), &ctx, "tabs", 10).await, Err(SemanticFailure::Oversized));
    let dm_ctx = EligibilityContext::resolve(&db.store, s.world.agent, s.dm).await.unwrap();
    assert_eq!(semantic_hits(&db, at_cap.as_ref(), &dm_ctx, "tabs", 10).await, Err(SemanticFailure::Oversized));
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(over_cap);
    let outcome = retriever.search(&recall(&s, "tabs")).await.unwrap();
    assert_degraded_to_lexical(&db, &s, &outcome, DegradationCategory::SemanticOversized).await;
}

/// A backend that cannot be reached: lexical results, `semantic_unavailable` recorded, quickly.
pub async fn an_unreachable_index_degrades_to_lexical(adapter: &impl Adapter) {
    let db = common::test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    adapter.worker(&db, embedder.clone()).drain().await.unwrap();
    let retriever =
        Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(adapter.unreachable(embedder));
    let started = Instant::now();
    let outcome = retriever.search(&recall(&s, "tabs")).await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(3500), "within the deadline: {:?}", started.elapsed());
    assert_degraded_to_lexical(&db, &s, &outcome, DegradationCategory::SemanticUnavailable).await;
}

async fn assert_degraded_to_lexical(
    db: &TestDb,
    s: &Scene,
    outcome: &mesh_memory::retrieval::SearchOutcome,
    category: DegradationCategory,
) {
    assert_eq!(outcome.degradation_categories, vec![category]);
    assert_eq!(outcome.used_revisions(), vec![s.tabs.1], "authorized lexical results still come back");
    assert!(outcome.selections[0].components.lexical.is_some() && outcome.selections[0].components.semantic.is_none());
    let recorded: Option<String> =
        sqlx::query_scalar("SELECT degradation_category FROM memory_retrieval_events WHERE id = $1")
            .bind(outcome.event_id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    let expected = serde_json::to_value(category).unwrap();
    assert_eq!(recorded.as_deref(), expected.as_str(), "the category is recorded in the audit row");
}

/// Expands into one `#[tokio::test]` per conformance behaviour, each getting its adapter from
/// `$make().await`.
#[macro_export]
macro_rules! conformance_tests {
    ($make:ident) => {
        mod conformance {
            use super::semantic_conformance as suite;

            #[tokio::test]
            async fn worker_records_model_and_dimension_and_embeds_once() {
                suite::worker_records_model_and_dimension_and_embeds_once(&super::$make().await).await
            }

            #[tokio::test]
            async fn search_never_returns_an_ineligible_revision() {
                suite::search_never_returns_an_ineligible_revision(&super::$make().await).await
            }

            #[tokio::test]
            async fn amend_and_forget_leave_only_current_revisions() {
                suite::amend_and_forget_leave_only_current_revisions(&super::$make().await).await
            }

            #[tokio::test]
            async fn an_erasure_leaves_no_vector_of_its_revisions() {
                suite::an_erasure_leaves_no_vector_of_its_revisions(&super::$make().await).await
            }

            #[tokio::test]
            async fn the_eligible_set_retrieval_read_bounds_the_hits() {
                suite::the_eligible_set_retrieval_read_bounds_the_hits(&super::$make().await).await
            }

            #[tokio::test]
            async fn no_generation_or_another_model_is_unavailable() {
                suite::no_generation_or_another_model_is_unavailable(&super::$make().await).await
            }

            #[tokio::test]
            async fn a_rebuild_degrades_then_switches_and_an_abandoned_one_restores() {
                suite::a_rebuild_degrades_then_switches_and_an_abandoned_one_restores(&super::$make().await).await
            }

            #[tokio::test]
            async fn a_search_past_the_deadline_degrades_to_lexical() {
                suite::a_search_past_the_deadline_degrades_to_lexical(&super::$make().await).await
            }

            #[tokio::test]
            async fn an_oversized_eligible_set_degrades_to_lexical() {
                suite::an_oversized_eligible_set_degrades_to_lexical(&super::$make().await).await
            }

            #[tokio::test]
            async fn an_unreachable_index_degrades_to_lexical() {
                suite::an_unreachable_index_degrades_to_lexical(&super::$make().await).await
            }
        }
    };
}
