//! The semantic index against a real PostgreSQL with pgvector: the outbox worker, generations and
//! rebuilds, pgvector search with eligibility in the same statement, degradation categories, and
//! the OpenAI-compatible client against a local HTTP server started inside the test.
//!
//! These tests use a small deterministic embedder (hashed bag of words) so that they run without
//! model weights; `tests/semantic_local.rs` runs the real all-MiniLM-L6-v2 (`local-embedder`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{test_db, TestDb, World};
use mesh_memory::privacy::EligibilityContext;
use mesh_memory::retrieval::{
    DegradationCategory, EligibleRevision, EligibleRows, RetrievalConfig, RetrievalMode, Retriever, SearchRequest,
    SemanticFailure, SemanticFuture, SemanticHit, SemanticIndex, SemanticRequest, SubjectMatch,
};
use mesh_memory::semantic::vector_index::shortlist;
use mesh_memory::semantic::{
    abandon_rebuild, availability, list_generations, outbox_status, rebuild, EmbedError, EmbedFuture, Embedder,
    EmbedderInfo, GenerationState, IndexAvailability, IndexWorker, OpenAiConfig, OpenAiEmbedder, PgVectorIndex,
    RebuildProgress, SemanticError, SignBits, WorkerConfig,
};
use mesh_memory::store::{Amendment, SubjectUpdate, Topology};
use mesh_memory::{ConversationId, RevisionId};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// ------------------------------------------------------------------------------------------------
// Test embedders
// ------------------------------------------------------------------------------------------------

/// Hashed bag of words: texts sharing words are close. Deterministic, no weights needed.
struct HashEmbedder {
    info: EmbedderInfo,
    calls: AtomicUsize,
}

impl HashEmbedder {
    fn new(model: &str, dimension: usize) -> Arc<Self> {
        Arc::new(Self {
            info: EmbedderInfo { provider: "test".into(), model: model.into(), dimension },
            calls: AtomicUsize::new(0),
        })
    }

    fn vector(&self, text: &str) -> Vec<f32> {
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
struct FailingEmbedder {
    info: EmbedderInfo,
    error: EmbedError,
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
struct SlowEmbedder {
    inner: Arc<HashEmbedder>,
    delay: Duration,
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

fn worker(db: &TestDb, embedder: Arc<dyn Embedder>) -> IndexWorker {
    IndexWorker::new(db.pool.clone(), embedder, WorkerConfig::default())
}

async fn scalar(db: &TestDb, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(&db.pool).await.unwrap()
}

/// An agent with Victor (the CTO) and Ana in an engineering channel, a private DM with Ana, and
/// a few memories. Returns the world, the channel, the DM and the tabs revision.
struct Scene {
    world: World,
    channel: ConversationId,
    dm: ConversationId,
    victor: common::Person,
    tabs: (mesh_memory::EntryId, RevisionId),
    private: (mesh_memory::EntryId, RevisionId),
}

async fn scene(db: &TestDb) -> Scene {
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

async fn semantic_hits(
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

async fn channel_context(db: &TestDb, scene: &Scene) -> EligibilityContext {
    EligibilityContext::resolve(&db.store, scene.world.agent, scene.channel).await.unwrap()
}

fn recall(scene: &Scene, query: &str) -> SearchRequest {
    SearchRequest::new(scene.world.agent, scene.channel, Some(scene.victor.actor), query, RetrievalMode::Recall)
}

// ------------------------------------------------------------------------------------------------
// Worker
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn worker_embeds_every_outbox_row_once_and_a_rerun_does_nothing() {
    let db = test_db().await;
    let _scene = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    let report = worker(&db, embedder.clone()).drain().await.unwrap();
    assert_eq!(report.claimed, 4);
    assert_eq!(report.embedded, 4);
    assert_eq!(scalar(&db, "SELECT count(*) FROM revision_embeddings").await, 4);
    assert_eq!(scalar(&db, "SELECT count(*) FROM index_outbox WHERE completed_at IS NULL").await, 0);
    let generations = list_generations(&db.pool).await.unwrap();
    assert_eq!(generations.len(), 1, "the first run creates the first generation");
    assert_eq!(generations[0].state, GenerationState::Active);
    assert_eq!((generations[0].model.as_str(), generations[0].dimension), ("hash-64", 64));
    let stored_dims: i64 = scalar(&db, "SELECT count(*) FROM revision_embeddings WHERE vector_dims(embedding) = 64 AND model = 'hash-64' AND dimension = 64").await;
    assert_eq!(stored_dims, 4, "model and dimension are stored with every embedding");

    let again = worker(&db, embedder.clone()).drain().await.unwrap();
    assert_eq!(again.claimed, 0);
    assert_eq!(embedder.calls.load(Ordering::SeqCst), 4, "nothing is embedded twice");

    // A crash between writing embeddings and marking the rows done cannot happen (one transaction),
    // but even a replayed row (completed_at cleared by hand) writes no duplicate.
    sqlx::query("UPDATE index_outbox SET completed_at = NULL").execute(&db.pool).await.unwrap();
    let replay = worker(&db, embedder.clone()).drain().await.unwrap();
    assert_eq!((replay.claimed, replay.embedded), (4, 0));
    assert_eq!(scalar(&db, "SELECT count(*) FROM revision_embeddings").await, 4);
    assert_eq!(embedder.calls.load(Ordering::SeqCst), 4, "already embedded revisions are not re-embedded");
}

#[tokio::test]
async fn rows_claimed_by_a_crashed_worker_are_skipped_meanwhile_and_processed_after_the_crash() {
    let db = test_db().await;
    let _scene = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);

    // Another worker holds two rows in its transaction (as a worker mid-batch does).
    let mut other = db.pool.begin().await.unwrap();
    let held: Vec<i64> = sqlx::query_scalar("SELECT id FROM index_outbox ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED")
        .fetch_all(&mut *other)
        .await
        .unwrap();
    assert_eq!(held.len(), 2);

    let first = worker(&db, embedder.clone()).drain().await.unwrap();
    assert_eq!(first.claimed, 2, "locked rows are skipped, never processed twice concurrently");
    assert_eq!(outbox_status(&db.pool).await.unwrap().due, 2);

    // The other worker dies: its transaction rolls back and its rows become claimable again.
    other.rollback().await.unwrap();
    let second = worker(&db, embedder.clone()).drain().await.unwrap();
    assert_eq!(second.claimed, 2, "no work is lost");
    assert_eq!(scalar(&db, "SELECT count(*) FROM revision_embeddings").await, 4);
    assert_eq!(embedder.calls.load(Ordering::SeqCst), 4);
    let status = outbox_status(&db.pool).await.unwrap();
    assert_eq!((status.due, status.done), (0, 4));
}

#[tokio::test]
async fn a_failing_provider_is_retried_with_backoff_then_parked_with_only_a_category() {
    let db = test_db().await;
    let _scene = scene(&db).await;
    let failing: Arc<dyn Embedder> = Arc::new(FailingEmbedder {
        info: EmbedderInfo { provider: "test".into(), model: "hash-64".into(), dimension: 64 },
        error: EmbedError::ProviderFailed { status: 503 },
    });
    let config =
        WorkerConfig { max_attempts: 2, initial_backoff: Duration::from_secs(3600), ..WorkerConfig::default() };
    let w = IndexWorker::new(db.pool.clone(), failing.clone(), config.clone());

    let first = w.run_once().await.unwrap();
    assert_eq!((first.claimed, first.retried, first.gave_up), (4, 4, 0));
    let status = outbox_status(&db.pool).await.unwrap();
    assert_eq!((status.due, status.waiting), (0, 4), "backoff: nothing is due for an hour");
    let categories: Vec<(i32, Option<String>)> =
        sqlx::query_as("SELECT attempts, last_error_category FROM index_outbox").fetch_all(&db.pool).await.unwrap();
    assert!(categories.iter().all(|(a, c)| *a == 1 && c.as_deref() == Some("provider_failed")), "{categories:?}");
    assert_eq!(w.run_once().await.unwrap().claimed, 0, "rows waiting for their backoff are not claimed");

    sqlx::query("UPDATE index_outbox SET next_attempt_at = now()").execute(&db.pool).await.unwrap();
    let second = w.run_once().await.unwrap();
    assert_eq!(second.gave_up, 4, "bounded: parked after max_attempts");
    assert_eq!(outbox_status(&db.pool).await.unwrap().parked, 4);
    assert_eq!(scalar(&db, "SELECT count(*) FROM revision_embeddings").await, 0);

    // A rebuild (same model, new generation) covers what the parked rows missed.
    let healthy = HashEmbedder::new("hash-64", 64);
    let rebuilt = rebuild(&db.pool, healthy, |_| {}).await.unwrap();
    assert_eq!(rebuilt.state, GenerationState::Active);
    let embedded: i64 = sqlx::query_scalar("SELECT count(*) FROM revision_embeddings WHERE generation_id = $1")
        .bind(rebuilt.id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(embedded, 4);
}

// ------------------------------------------------------------------------------------------------
// pgvector search: eligibility in the statement, amend, forget
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn pgvector_search_never_returns_an_ineligible_revision_however_similar() {
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-256", 256);
    worker(&db, embedder.clone()).drain().await.unwrap();
    let index = PgVectorIndex::new(embedder.clone());

    // In the channel (Victor and Ana) the private DM memory is nearest but not eligible.
    let ctx = channel_context(&db, &s).await;
    let hits = semantic_hits(&db, &index, &ctx, "prefers tabs over spaces", 10).await.unwrap();
    let ids: Vec<RevisionId> = hits.iter().map(|h| h.revision_id).collect();
    assert_eq!(ids.first(), Some(&s.tabs.1), "the closest eligible memory comes first: {hits:?}");
    assert!(!ids.contains(&s.private.1), "the private DM memory must never be a semantic hit");
    assert_eq!(ids, vec![s.tabs.1], "unrelated memories stay below the similarity floor");
    let unfloored = PgVectorIndex::new(embedder.clone()).with_min_similarity(-1.0);
    let all = semantic_hits(&db, &unfloored, &ctx, "prefers tabs over spaces", 10).await.unwrap();
    assert_eq!(all.len(), 3, "without the floor every eligible current revision is a candidate, nothing else");
    assert!(all.iter().all(|h| h.revision_id != s.private.1));
    assert!(hits.windows(2).all(|w| w[0].similarity >= w[1].similarity), "best first");

    // In the DM with Ana alone both tabs memories are eligible.
    let dm = EligibilityContext::resolve(&db.store, s.world.agent, s.dm).await.unwrap();
    let dm_hits = semantic_hits(&db, &index, &dm, "prefers tabs over spaces", 10).await.unwrap();
    assert!(dm_hits.iter().any(|h| h.revision_id == s.private.1));

    // A foreign audience (someone outside every source audience) gets nothing at all.
    let stranger = s.world.person("Mallory", "U9").await;
    let stranger_dm = s.world.conversation("D-mallory", Topology::Direct, &[&stranger]).await;
    let foreign = EligibilityContext::resolve(&db.store, s.world.agent, stranger_dm).await.unwrap();
    assert!(semantic_hits(&db, &index, &foreign, "prefers tabs", 10).await.unwrap().is_empty());
    // The limit is honoured.
    assert_eq!(semantic_hits(&db, &index, &ctx, "prefers tabs", 1).await.unwrap().len(), 1);
}

#[tokio::test]
async fn after_an_amend_only_the_current_revisions_embedding_is_used() {
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    let w = worker(&db, embedder.clone());
    w.drain().await.unwrap();
    let amended = s
        .world
        .store
        .amend_entry(Amendment {
            agent: s.world.agent,
            entry: s.tabs.0,
            expected_revision: s.tabs.1,
            body: Some("Victor now insists on four spaces, never tabs".into()),
            subject: SubjectUpdate::Keep,
            source_actor: Some(s.victor.actor),
            sources: vec![],
        })
        .await
        .unwrap();
    let mesh_memory::store::WriteOutcome::Committed(amend) = amended else { panic!("amend committed") };
    assert_eq!(w.drain().await.unwrap().embedded, 1);
    common::assert_projection_matches_canonical(&db.pool).await;

    // The old revision's embedding stays as history...
    assert_eq!(mesh_memory::semantic::embedding_count(&db.pool, s.tabs.1).await.unwrap(), 1);
    // ...but only the current revision is a hit.
    let index = PgVectorIndex::new(embedder.clone());
    let ctx = channel_context(&db, &s).await;
    let hits = semantic_hits(&db, &index, &ctx, "Victor prefers tabs over spaces in code", 10).await.unwrap();
    let ids: Vec<RevisionId> = hits.iter().map(|h| h.revision_id).collect();
    assert!(ids.contains(&amend.revision_id()));
    assert!(!ids.contains(&s.tabs.1), "a superseded revision is excluded by revision state");

    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(Arc::new(index));
    let outcome = retriever.search(&recall(&s, "Victor prefers tabs over spaces in code")).await.unwrap();
    let selected = outcome.used_revisions();
    assert!(selected.contains(&amend.revision_id()) && !selected.contains(&s.tabs.1), "{selected:?}");
    let current = outcome.selections.iter().find(|x| x.revision_id == amend.revision_id()).unwrap();
    assert!(current.components.semantic.is_some(), "semantic rank is shown in the components");
    assert!(outcome.degradation_categories.is_empty(), "{:?}", outcome.degradation_categories);
}

/// The eligible set with its sign bits, as retrieval's eligible-set statement reads it.
async fn eligible_revisions(db: &TestDb, ctx: &EligibilityContext) -> Vec<EligibleRevision> {
    let rows: Vec<(RevisionId, Option<SignBits>)> = sqlx::query_as(
        "SELECT p.revision_id, p.embedding_bits
           FROM memory_eligible_revisions($1, $2, $3, p_through_classes => true) AS p",
    )
    .bind(ctx.agent())
    .bind(ctx.conversation())
    .bind(ctx.audience_uuids())
    .fetch_all(&db.pool)
    .await
    .unwrap();
    rows.into_iter().map(|(revision_id, sign_bits)| EligibleRevision { revision_id, sign_bits }).collect()
}

#[tokio::test]
async fn the_shortlist_over_the_read_eligible_set_finds_what_the_exact_search_finds() {
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    worker(&db, embedder.clone()).drain().await.unwrap();
    common::assert_projection_matches_canonical(&db.pool).await;
    let index = PgVectorIndex::new(embedder.clone()).with_min_similarity(-1.0);
    assert!(index.ranks_sign_bits(), "retrieval must read the bits for this index");
    let ctx = channel_context(&db, &s).await;
    let eligible = eligible_revisions(&db, &ctx).await;
    assert!(!eligible.is_empty() && eligible.iter().all(|e| e.sign_bits.is_some()), "indexed rows carry their bits");
    let request = |query, eligible| SemanticRequest { pool: &db.pool, eligibility: &ctx, query, limit: 10, eligible };
    for query in ["prefers tabs over spaces", "kids school", "deploy on friday"] {
        let exact = semantic_hits(&db, &index, &ctx, query, 10).await.unwrap();
        let shortlisted = index.search(request(query, EligibleRows::Read(&eligible))).await.unwrap();
        let ids = |hits: &[SemanticHit]| hits.iter().map(|h| h.revision_id).collect::<Vec<_>>();
        assert_eq!(ids(&shortlisted), ids(&exact), "{query:?}: a set smaller than the shortlist is searched exactly");
    }
    // Only revisions of the set it was given can be hits, whatever else is similar.
    let one = [eligible[0].clone()];
    let hits = index.search(request("tabs", EligibleRows::Read(&one))).await.unwrap();
    assert!(hits.len() <= 1 && hits.iter().all(|h| h.revision_id == one[0].revision_id), "{hits:?}");
    // A set larger than the index's cap is oversized without another count.
    let capped = PgVectorIndex::new(embedder).with_eligible_cap(eligible.len() - 1);
    assert_eq!(capped.search(request("tabs", EligibleRows::Read(&eligible))).await, Err(SemanticFailure::Oversized));
    // A set retrieval found larger than it reads is oversized for a cap no larger, uncounted
    // (this channel's few memories would pass a count); a larger cap still counts.
    let cap = PgVectorIndex::new(HashEmbedder::new("hash-64", 64)).with_eligible_cap(100);
    assert_eq!(cap.search(request("tabs", EligibleRows::MoreThan(100))).await, Err(SemanticFailure::Oversized));
    assert!(cap.search(request("tabs", EligibleRows::MoreThan(99))).await.is_ok(), "below the cap the set is counted");
}

#[tokio::test]
async fn sign_bits_rank_the_shortlist_as_pgvector_ranks_it() {
    let db = test_db().await;
    let mut s = scene(&db).await;
    for fact in ["Victor reviews code on Mondays", "Victor prefers short standups", "Victor deploys on Friday"] {
        let victor = common::Person { actor: s.victor.actor, identity: s.victor.identity };
        s.world.remember(s.channel, &victor, Some(victor.actor), fact).await;
    }
    let embedder = HashEmbedder::new("hash-64", 64);
    worker(&db, embedder.clone()).drain().await.unwrap();
    let ctx = channel_context(&db, &s).await;
    let eligible = eligible_revisions(&db, &ctx).await;
    assert!(eligible.len() >= 6, "the channel admits several memories: {}", eligible.len());
    for query in ["prefers tabs over spaces", "kids school", "deploy on friday", "q"] {
        let vector = embedder.vector(query);
        let literal = format!("[{}]", vector.iter().map(f32::to_string).collect::<Vec<_>>().join(","));
        // The query's bits computed here are pgvector's binary_quantize, bit for bit.
        let quantized: SignBits = sqlx::query_scalar("SELECT binary_quantize($1::text::vector)::varbit")
            .bind(&literal)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(SignBits::of(&vector), quantized, "{query:?}");
        // The Rust shortlist is the SQL ordering `bits <~> query, revision_id` cut at the same size.
        for size in [1, 2, eligible.len() - 1, eligible.len() + 5] {
            let expected: Vec<RevisionId> = sqlx::query_scalar(
                "SELECT p.revision_id FROM memory_eligible_revisions($1, $2, $3, p_through_classes => true) AS p
                  WHERE p.embedding_bits IS NOT NULL
                  ORDER BY p.embedding_bits::bit(64) <~> binary_quantize($4::text::vector)::bit(64), p.revision_id
                  LIMIT $5",
            )
            .bind(ctx.agent())
            .bind(ctx.conversation())
            .bind(ctx.audience_uuids())
            .bind(&literal)
            .bind(size as i64)
            .fetch_all(&db.pool)
            .await
            .unwrap();
            assert_eq!(shortlist(&eligible, &quantized, size), expected, "{query:?} cut at {size}");
        }
    }
}

#[tokio::test]
async fn after_forget_nothing_is_returned_from_either_index() {
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    let w = worker(&db, embedder.clone());
    w.drain().await.unwrap();
    s.world.store.forget_entry(s.world.agent, s.tabs.0).await.unwrap();
    let report = w.drain().await.unwrap();
    assert_eq!(report.retired, 1, "the retire_entry work item is processed");

    let index = PgVectorIndex::new(embedder.clone());
    let ctx = channel_context(&db, &s).await;
    let hits = semantic_hits(&db, &index, &ctx, "Victor prefers tabs over spaces in code", 10).await.unwrap();
    assert!(hits.iter().all(|h| h.revision_id != s.tabs.1));

    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(Arc::new(index));
    let outcome = retriever.search(&recall(&s, "Victor prefers tabs over spaces in code")).await.unwrap();
    assert!(outcome.selections.iter().all(|x| x.entry_id != s.tabs.0), "neither lexical nor semantic returns it");
    assert!(outcome.degradation_categories.is_empty());
}

// ------------------------------------------------------------------------------------------------
// Degradation
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_slow_embedder_past_the_deadline_yields_lexical_results_and_semantic_timeout() {
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    worker(&db, embedder.clone()).drain().await.unwrap();
    // A provider far slower than any load could make the search itself: the bound below proves
    // the deadline cut it short without timing the search tightly (4 test threads share 2 cores).
    let slow: Arc<dyn Embedder> = Arc::new(SlowEmbedder { inner: embedder, delay: Duration::from_secs(120) });
    let config = RetrievalConfig::default();
    assert_eq!(config.semantic_deadline, Duration::from_secs(3), "the spec's deadline is the default");
    let retriever = Retriever::new(db.store.clone(), config).with_semantic_index(Arc::new(PgVectorIndex::new(slow)));

    let started = Instant::now();
    let outcome = retriever.search(&recall(&s, "tabs")).await.unwrap();
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(30), "the deadline cut the provider short: {elapsed:?}");
    assert_eq!(outcome.degradation_categories, vec![DegradationCategory::SemanticTimeout]);
    assert_eq!(outcome.used_revisions(), vec![s.tabs.1], "authorized lexical results still come back");
    assert!(outcome.selections[0].components.lexical.is_some() && outcome.selections[0].components.semantic.is_none());
    let recorded: Option<String> =
        sqlx::query_scalar("SELECT degradation_category FROM memory_retrieval_events WHERE id = $1")
            .bind(outcome.event_id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(recorded.as_deref(), Some("semantic_timeout"));
}

#[tokio::test]
async fn an_oversized_eligible_set_yields_its_category_and_lexical_results() {
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    worker(&db, embedder.clone()).drain().await.unwrap();
    let ctx = channel_context(&db, &s).await;

    // Three memories are eligible in the channel: a cap of 3 passes, a cap of 2 does not.
    let at_cap = PgVectorIndex::new(embedder.clone()).with_eligible_cap(3);
    assert!(semantic_hits(&db, &at_cap, &ctx, "tabs", 10).await.is_ok());
    let over_cap = PgVectorIndex::new(embedder.clone()).with_eligible_cap(2);
    assert_eq!(semantic_hits(&db, &over_cap, &ctx, "tabs", 10).await, Err(SemanticFailure::Oversized));
    // Four live memories exist but only three are eligible in the channel (so the cap of 3 above
    // counted eligibility, not live rows); in the DM with Ana all four are, which is over 3.
    let dm_ctx = EligibilityContext::resolve(&db.store, s.world.agent, s.dm).await.unwrap();
    assert_eq!(semantic_hits(&db, &at_cap, &dm_ctx, "tabs", 10).await, Err(SemanticFailure::Oversized));

    let retriever =
        Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(Arc::new(over_cap));
    let outcome = retriever.search(&recall(&s, "tabs")).await.unwrap();
    assert_eq!(outcome.degradation_categories, vec![DegradationCategory::SemanticOversized]);
    assert_eq!(outcome.used_revisions(), vec![s.tabs.1]);
    assert_eq!(mesh_memory::semantic::MAX_ELIGIBLE_REVISIONS, 10_000);
}

/// A provider that ignores the limit: three times as many hits as asked, each twice.
struct GreedyIndex {
    revisions: Vec<RevisionId>,
}

impl SemanticIndex for GreedyIndex {
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        let hits: Vec<SemanticHit> = self
            .revisions
            .iter()
            .cycle()
            .take(request.limit * 3)
            .flat_map(|r| [SemanticHit { revision_id: *r, similarity: 0.5 }; 2])
            .collect();
        Box::pin(async move { Ok(hits) })
    }
}

/// Records the query text each search receives; finds nothing.
#[derive(Default)]
struct RecordingIndex {
    queries: std::sync::Mutex<Vec<String>>,
}

impl SemanticIndex for RecordingIndex {
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        self.queries.lock().unwrap().push(request.query.to_owned());
        Box::pin(async { Ok(Vec::new()) })
    }
}

#[tokio::test]
async fn semantic_search_embeds_the_query_without_the_names_of_the_members_it_names() {
    let db = test_db().await;
    let s = scene(&db).await;
    let index = Arc::new(RecordingIndex::default());
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(index.clone());
    let named = retriever.search(&recall(&s, "What does Ana like for lunch?")).await.unwrap();
    retriever.search(&recall(&s, "Who likes sushi?")).await.unwrap();
    retriever.search(&recall(&s, "Ana?")).await.unwrap();
    assert_eq!(
        *index.queries.lock().unwrap(),
        ["what does like for lunch", "Who likes sushi?", "Ana?"],
        "a member's name leaves the semantic query (the subject match stands for it); a query with no \
         member's name, or nothing but one, is embedded as asked"
    );
    let sushi = named.selections.iter().find(|x| x.body.contains("sushi")).expect("the sushi memory is found");
    assert_eq!(sushi.components.subject_match, Some(SubjectMatch::NamedInQuery), "found as a memory about Ana");
}

#[tokio::test]
async fn a_provider_returning_more_than_asked_is_capped_before_hydration() {
    let db = test_db().await;
    let s = scene(&db).await;
    let all: Vec<RevisionId> = sqlx::query_scalar("SELECT current_revision_id FROM memory_entries ORDER BY id")
        .fetch_all(&db.pool)
        .await
        .unwrap();
    let config = RetrievalConfig { per_source_limit: 2, ..RetrievalConfig::default() };
    let retriever =
        Retriever::new(db.store.clone(), config).with_semantic_index(Arc::new(GreedyIndex { revisions: all.clone() }));
    let outcome = retriever.search(&recall(&s, "zzzz qqqq")).await.unwrap();
    let semantic: Vec<_> = outcome.selections.iter().filter(|x| x.components.semantic.is_some()).collect();
    assert!(semantic.len() <= 2, "at most per_source_limit distinct semantic hits: {}", semantic.len());
    assert!(!semantic.is_empty());
    assert!(outcome.used_revisions().iter().all(|r| *r != s.private.1), "revalidation drops the private memory");

    // The adapter-side cap does the same for providers used directly.
    let hits: Vec<SemanticHit> =
        all.iter().flat_map(|r| [SemanticHit { revision_id: *r, similarity: 0.3 }; 3]).collect();
    let capped = mesh_memory::semantic::cap_distinct_hits(hits, 2);
    assert_eq!(capped.len(), 2);
    assert_ne!(capped[0].revision_id, capped[1].revision_id);
}

#[tokio::test]
async fn no_active_generation_or_a_mismatched_model_is_semantic_unavailable() {
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    let ctx = channel_context(&db, &s).await;
    let index = PgVectorIndex::new(embedder.clone());
    assert_eq!(semantic_hits(&db, &index, &ctx, "tabs", 10).await, Err(SemanticFailure::Unavailable));
    worker(&db, embedder.clone()).drain().await.unwrap();
    assert!(semantic_hits(&db, &index, &ctx, "tabs", 10).await.is_ok());
    let other = PgVectorIndex::new(HashEmbedder::new("hash-32", 32));
    assert_eq!(semantic_hits(&db, &other, &ctx, "tabs", 10).await, Err(SemanticFailure::Unavailable));
    let (state, _) = availability(&db.pool, other_info()).await.unwrap();
    assert!(matches!(state, IndexAvailability::ModelMismatch { .. }), "{state:?}");
    let err = worker(&db, HashEmbedder::new("hash-32", 32)).run_once().await.unwrap_err();
    assert!(matches!(err, SemanticError::EmbedderMismatch { .. }), "{err}");
    assert!(err.to_string().contains("mesh-memory index rebuild"));
}

fn other_info() -> &'static EmbedderInfo {
    static INFO: std::sync::OnceLock<EmbedderInfo> = std::sync::OnceLock::new();
    INFO.get_or_init(|| EmbedderInfo { provider: "test".into(), model: "hash-32".into(), dimension: 32 })
}

// ------------------------------------------------------------------------------------------------
// Rebuild
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_rebuild_degrades_to_index_rebuilding_then_switches_atomically() {
    let db = test_db().await;
    let s = scene(&db).await;
    let old = HashEmbedder::new("hash-64", 64);
    worker(&db, old.clone()).drain().await.unwrap();
    let old_generation = list_generations(&db.pool).await.unwrap()[0].clone();
    let new = HashEmbedder::new("hash-32", 32);

    // A rebuild begins: while the new generation is building, semantic search degrades.
    let building = mesh_memory::semantic::generations::begin_rebuild(&db.pool, new.info()).await.unwrap();
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default())
        .with_semantic_index(Arc::new(PgVectorIndex::new(old.clone())));
    let during = retriever.search(&recall(&s, "tabs")).await.unwrap();
    assert_eq!(during.degradation_categories, vec![DegradationCategory::IndexRebuilding]);
    assert_eq!(during.used_revisions(), vec![s.tabs.1], "lexical results still come back");
    let progress = mesh_memory::semantic::rebuild_progress(&db.pool).await.unwrap().unwrap();
    assert_eq!(progress, RebuildProgress { generation: building.id, embedded: 0, total: 4 });

    // Writes during the rebuild reach the building generation too (the worker writes both).
    let mut world = s.world;
    let victor = world.person("Victor2", "U7").await;
    world.remember(s.channel, &victor, None, "The build server is called hal").await;
    // The old-model worker only fills the old generation; the new-model worker fills the new one.
    worker(&db, old.clone()).drain().await.unwrap();

    let mut seen: Vec<RebuildProgress> = Vec::new();
    let active = rebuild(&db.pool, new.clone(), |p| seen.push(p)).await.unwrap();
    assert_eq!(active.id, building.id, "the rebuild resumed the building generation");
    assert_eq!(seen.last().unwrap().embedded, 5);
    assert!(seen.last().unwrap().is_complete());
    assert!(seen.windows(2).all(|w| w[0].embedded <= w[1].embedded), "progress is monotonic: {seen:?}");

    let generations = list_generations(&db.pool).await.unwrap();
    let state_of = |id: i64| generations.iter().find(|g| g.id == id).unwrap().state;
    assert_eq!(state_of(building.id), GenerationState::Active);
    assert_eq!(state_of(old_generation.id), GenerationState::Retired);
    common::assert_projection_matches_canonical(&db.pool).await;
    let old_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM revision_embeddings WHERE generation_id = $1")
        .bind(old_generation.id)
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(old_rows, 5, "historical embeddings stay");

    // After the switch: the new model serves, the old one no longer matches.
    let ctx = EligibilityContext::resolve(&db.store, world.agent, s.channel).await.unwrap();
    let new_index = PgVectorIndex::new(new.clone());
    let hits = semantic_hits(&db, &new_index, &ctx, "prefers tabs over spaces", 10).await.unwrap();
    assert_eq!(hits.first().map(|h| h.revision_id), Some(s.tabs.1));
    let old_index = PgVectorIndex::new(old.clone());
    assert_eq!(semantic_hits(&db, &old_index, &ctx, "tabs", 10).await, Err(SemanticFailure::Unavailable));
    assert_eq!(abandon_rebuild(&db.pool).await.unwrap(), None, "nothing is building any more");
}

#[tokio::test]
async fn an_abandoned_rebuild_restores_the_active_generation() {
    let db = test_db().await;
    let s = scene(&db).await;
    let old = HashEmbedder::new("hash-64", 64);
    worker(&db, old.clone()).drain().await.unwrap();
    let building = mesh_memory::semantic::generations::begin_rebuild(&db.pool, other_info()).await.unwrap();
    let ctx = channel_context(&db, &s).await;
    let index = PgVectorIndex::new(old.clone());
    assert_eq!(semantic_hits(&db, &index, &ctx, "tabs", 10).await, Err(SemanticFailure::Rebuilding));
    let err = rebuild(&db.pool, old.clone(), |_| {}).await.unwrap_err();
    assert!(matches!(err, SemanticError::RebuildInProgress { .. }), "{err}");
    assert_eq!(abandon_rebuild(&db.pool).await.unwrap(), Some(building.id));
    assert!(semantic_hits(&db, &index, &ctx, "tabs", 10).await.is_ok());
}

// ------------------------------------------------------------------------------------------------
// OpenAI-compatible client against a local HTTP server
// ------------------------------------------------------------------------------------------------

/// One canned HTTP response per connection, in order; records the request bodies.
async fn serve(responses: Vec<(u16, String, Duration)>) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for (status, body, delay) in responses {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let log = log.clone();
            // Each connection on its own task, so a slow answer does not block the retries.
            tokio::spawn(async move {
                let request = read_request(&mut socket).await;
                log.lock().unwrap().push(request);
                tokio::time::sleep(delay).await;
                let reply = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(reply.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, seen)
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> String {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buffer);
        if let Some(head_end) = text.find("\r\n\r\n") {
            let length = text[..head_end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0usize);
            if buffer.len() >= head_end + 4 + length {
                return text.into_owned();
            }
        }
    }
    String::from_utf8_lossy(&buffer).into_owned()
}

fn client(url: &str, dimension: usize) -> OpenAiEmbedder {
    let mut config = OpenAiConfig::new(url, "test-embed", dimension);
    config.api_key = Some("sk-test-secret".into());
    config.request_timeout = Duration::from_millis(500);
    config.initial_backoff = Duration::from_millis(10);
    config.max_retries = 2;
    OpenAiEmbedder::new(config).unwrap()
}

const OK_BODY: &str = r#"{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.0,2.0]},{"object":"embedding","index":0,"embedding":[3.0,4.0]}],"model":"test-embed"}"#;

#[tokio::test]
async fn openai_client_orders_by_index_normalises_and_sends_model_and_key() {
    let (url, seen) = serve(vec![(200, OK_BODY.into(), Duration::ZERO)]).await;
    let vectors = client(&url, 2).embed(&["a".into(), "b".into()]).await.unwrap();
    assert_eq!(vectors, vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
    let request = seen.lock().unwrap()[0].clone();
    assert!(request.starts_with("POST /v1/embeddings "), "{request}");
    assert!(request.to_ascii_lowercase().contains("authorization: bearer sk-test-secret"));
    assert!(request.contains(r#""model":"test-embed""#) && request.contains(r#""input":["a","b"]"#));
}

#[tokio::test]
async fn openai_client_retries_transient_failures_boundedly() {
    let (url, seen) = serve(vec![
        (503, "{}".into(), Duration::ZERO),
        (429, "{}".into(), Duration::ZERO),
        (200, OK_BODY.into(), Duration::ZERO),
    ])
    .await;
    assert!(client(&url, 2).embed(&["a".into(), "b".into()]).await.is_ok());
    assert_eq!(seen.lock().unwrap().len(), 3);

    let always_failing = vec![(500, "{}".into(), Duration::ZERO); 5];
    let (url, seen) = serve(always_failing).await;
    let err = client(&url, 2).embed(&["a".into()]).await.unwrap_err();
    assert_eq!(err, EmbedError::ProviderFailed { status: 500 });
    assert_eq!(seen.lock().unwrap().len(), 3, "one attempt plus max_retries");
}

#[tokio::test]
async fn openai_client_errors_are_typed_and_carry_no_provider_body() {
    let secret_body = r#"{"error":{"message":"invalid key sk-test-secret for input PRIVATE-TEXT"}}"#;
    let (url, seen) = serve(vec![(401, secret_body.into(), Duration::ZERO)]).await;
    let err = client(&url, 2).embed(&["PRIVATE-TEXT".into()]).await.unwrap_err();
    assert_eq!(err, EmbedError::Rejected { status: 401 });
    assert_eq!(seen.lock().unwrap().len(), 1, "a rejection is not retried");
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("PRIVATE-TEXT") && !shown.contains("sk-test"), "{shown}");
    assert_eq!(err.category(), "provider_rejected");

    let (url, _) =
        serve(vec![(200, r#"{"data":[{"index":0,"embedding":[1.0,2.0,3.0]}]}"#.into(), Duration::ZERO)]).await;
    let err = client(&url, 2).embed(&["a".into()]).await.unwrap_err();
    assert_eq!(err, EmbedError::DimensionMismatch { expected: 2, actual: 3 });

    let (url, _) = serve(vec![(200, "not json".into(), Duration::ZERO)]).await;
    assert!(matches!(client(&url, 2).embed(&["a".into()]).await, Err(EmbedError::Malformed(_))));

    // Far slower than the 500 ms timeout: three attempts end long before one answer would come.
    let slow = vec![(200, OK_BODY.into(), Duration::from_secs(120)); 3];
    let (url, seen) = serve(slow).await;
    let started = Instant::now();
    let err = client(&url, 2).embed(&["a".into(), "b".into()]).await.unwrap_err();
    assert_eq!(err, EmbedError::Timeout);
    assert!(started.elapsed() < Duration::from_secs(30), "timeouts are bounded: {:?}", started.elapsed());
    assert_eq!(seen.lock().unwrap().len(), 3);

    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    assert_eq!(client(&dead_url, 2).embed(&["a".into()]).await.unwrap_err(), EmbedError::Unreachable);
}

#[tokio::test]
async fn the_worker_indexes_through_an_openai_compatible_endpoint() {
    let db = test_db().await;
    let mut w = World::new(&db.store, "agent").await;
    let victor = w.person("Victor", "U1").await;
    let channel = w.conversation("C", Topology::Channel, &[&victor]).await;
    w.remember(channel, &victor, None, "one").await;
    let (url, seen) =
        serve(vec![(200, r#"{"data":[{"index":0,"embedding":[1.0,0.0]}]}"#.into(), Duration::ZERO)]).await;
    let report = worker(&db, Arc::new(client(&url, 2))).drain().await.unwrap();
    assert_eq!(report.embedded, 1);
    assert_eq!(seen.lock().unwrap().len(), 1);
    let generations = list_generations(&db.pool).await.unwrap();
    assert_eq!((generations[0].provider.as_str(), generations[0].model.as_str()), ("openai", "test-embed"));
}

#[tokio::test]
async fn revalidation_drops_ineligible_hits_and_the_cap_keeps_distinct_ones() {
    let db = test_db().await;
    let s = scene(&db).await;
    let ctx = channel_context(&db, &s).await;
    // What an external provider might return: the private memory, a duplicate, more than asked.
    let all: Vec<RevisionId> =
        sqlx::query_scalar("SELECT id FROM memory_entry_revisions ORDER BY id").fetch_all(&db.pool).await.unwrap();
    let raw: Vec<SemanticHit> = all
        .iter()
        .chain(all.iter())
        .enumerate()
        .map(|(i, r)| SemanticHit { revision_id: *r, similarity: 1.0 - i as f32 / 100.0 })
        .collect();
    let valid = mesh_memory::semantic::revalidate(&db.pool, &ctx, raw).await.unwrap();
    assert!(valid.iter().all(|h| h.revision_id != s.private.1));
    assert_eq!(valid.len(), 6, "three eligible revisions, each returned twice");
    let capped = mesh_memory::semantic::cap_distinct_hits(valid, 2);
    assert_eq!(capped.len(), 2);
    assert_ne!(capped[0].revision_id, capped[1].revision_id);
}
