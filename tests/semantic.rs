//! The semantic index against a real PostgreSQL with pgvector: the conformance suite every vector
//! index passes (`tests/semantic_conformance`, bound here to pgvector and in
//! `tests/semantic_qdrant.rs` to Qdrant), then what is pgvector's or the worker's own: the outbox
//! worker's crash and retry behaviour, the sign-bit shortlist, the cap before hydration, and the
//! OpenAI-compatible client against a local HTTP server started inside the test.
//!
//! These tests use a small deterministic embedder (hashed bag of words) so that they run without
//! model weights; `tests/semantic_local.rs` runs the real all-MiniLM-L6-v2 (`local-embedder`).

mod common;
mod semantic_conformance;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{test_db, TestDb, World};
use mesh_memory::retrieval::{
    EligibleRows, RetrievalConfig, Retriever, SemanticFailure, SemanticFuture, SemanticHit, SemanticIndex,
    SemanticRequest, SubjectMatch,
};
use mesh_memory::semantic::vector_index::shortlist;
use mesh_memory::semantic::{
    list_generations, outbox_status, rebuild, EmbedError, Embedder, EmbedderInfo, Generation, GenerationState,
    IndexWorker, OpenAiConfig, OpenAiEmbedder, PgVectorIndex, RebuildProgress, SemanticError, SignBits, SignedQuery,
    WorkerConfig,
};
use mesh_memory::store::Topology;
use mesh_memory::RevisionId;
use semantic_conformance::{
    channel_context, eligible_revisions, recall, scalar, scene, semantic_hits, Adapter, FailingEmbedder, HashEmbedder,
    IndexOptions,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// ------------------------------------------------------------------------------------------------
// The conformance suite, bound to pgvector
// ------------------------------------------------------------------------------------------------

/// pgvector: the worker writes `revision_embeddings`; an unreachable index is one whose query
/// embedder cannot be reached (the index itself lives in PostgreSQL).
struct PgVector;

impl Adapter for PgVector {
    fn index(&self, embedder: Arc<dyn Embedder>, options: IndexOptions) -> Arc<dyn SemanticIndex> {
        let index = PgVectorIndex::new(embedder);
        Arc::new(options.apply(index, PgVectorIndex::with_min_similarity, PgVectorIndex::with_eligible_cap))
    }

    fn worker(&self, db: &TestDb, embedder: Arc<dyn Embedder>) -> IndexWorker {
        worker(db, embedder)
    }

    async fn rebuild(
        &self,
        db: &TestDb,
        embedder: Arc<dyn Embedder>,
        on_progress: &mut dyn FnMut(RebuildProgress),
    ) -> Result<Generation, SemanticError> {
        rebuild(&db.pool, embedder, on_progress).await
    }

    fn unreachable(&self, embedder: Arc<dyn Embedder>) -> Arc<dyn SemanticIndex> {
        let info = embedder.info().clone();
        Arc::new(PgVectorIndex::new(Arc::new(FailingEmbedder { info, error: EmbedError::Unreachable })))
    }

    fn ranks_sign_bits(&self) -> bool {
        true
    }
}

async fn pgvector() -> PgVector {
    PgVector
}

conformance_tests!(pgvector);

fn worker(db: &TestDb, embedder: Arc<dyn Embedder>) -> IndexWorker {
    IndexWorker::new(db.pool.clone(), embedder, WorkerConfig::default())
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
async fn the_shortlist_ranks_rows_by_the_query_signed_by_their_bits() {
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
        // The query's bits computed here are pgvector's binary_quantize, bit for bit, so the bits
        // the projection stores are read with the same positions.
        let quantized: SignBits = sqlx::query_scalar("SELECT binary_quantize($1::text::vector)::varbit")
            .bind(&literal)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(SignBits::of(&vector), quantized, "{query:?}");
        // Each row's score is the query's components, plus where the row's stored bit is set and
        // minus where it is not (the bits read back from SQL as text, one character per
        // component); the shortlist is that order, closest first, ties by revision id, cut.
        let ids: Vec<uuid::Uuid> = eligible.iter().map(|e| e.revision_id.0).collect();
        let bits: Vec<(RevisionId, String)> = sqlx::query_as(
            "SELECT revision_id, embedding_bits::text FROM searchable_revisions
              WHERE revision_id = ANY($1) AND embedding_bits IS NOT NULL",
        )
        .bind(&ids)
        .fetch_all(&db.pool)
        .await
        .unwrap();
        let mut scored: Vec<(f64, RevisionId)> = bits
            .iter()
            .map(|(revision, text)| {
                let signed =
                    text.chars().zip(&vector).map(|(bit, q)| if bit == '1' { f64::from(*q) } else { -f64::from(*q) });
                (signed.sum(), *revision)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for size in [1, 2, eligible.len() - 1, eligible.len() + 5] {
            let expected: Vec<RevisionId> = scored.iter().take(size).map(|(_, r)| *r).collect();
            assert_eq!(shortlist(&eligible, &vector, size), expected, "{query:?} cut at {size}");
        }
        // The best row shares the query's strongest signs: its score is no lower than any other's.
        let scorer = SignedQuery::of(&vector);
        let best = shortlist(&eligible, &vector, 1)[0];
        let score = |id: RevisionId| scorer.score(eligible.iter().find(|e| e.revision_id == id)?.sign_bits.as_ref()?);
        assert!(eligible.iter().all(|e| score(e.revision_id) <= score(best)), "{query:?}");
    }
}

/// The type of `revision_embeddings.embedding` (`halfvec` or `vector`).
async fn embedding_column_type(db: &TestDb) -> String {
    sqlx::query_scalar(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute
          WHERE attrelid = 'revision_embeddings'::regclass AND attname = 'embedding'",
    )
    .fetch_one(&db.pool)
    .await
    .unwrap()
}

/// One stored embedding beside what the embedder returns for its revision's document.
struct StoredEmbedding {
    revision: RevisionId,
    document: String,
    /// The embedder's normalised vector, unrounded.
    exact: Vec<f32>,
    /// The stored vector, read back in single precision.
    stored: Vec<f32>,
    /// The stored vector's `binary_quantize`, as text.
    bits: String,
}

/// One row of [`stored_embeddings`]' statement.
#[derive(sqlx::FromRow)]
struct EmbeddingRow {
    revision: RevisionId,
    body: String,
    subject: Option<String>,
    stored: Vec<f32>,
    bits: String,
}

async fn stored_embeddings(db: &TestDb, embedder: &HashEmbedder) -> Vec<StoredEmbedding> {
    let rows: Vec<EmbeddingRow> = sqlx::query_as(concat!(
        "SELECT r.id AS revision, r.body, ",
        mesh_memory::subject_name_sql!(),
        " AS subject, x.embedding::vector::real[] AS stored, binary_quantize(x.embedding)::text AS bits
           FROM revision_embeddings x JOIN memory_entry_revisions r ON r.id = x.revision_id ORDER BY r.id"
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    let dimension = embedder.info().dimension;
    rows.into_iter()
        .map(|row| {
            let document = mesh_memory::semantic::document_text(row.subject.as_deref(), &row.body);
            let exact =
                mesh_memory::semantic::embedder::validate_vectors(vec![embedder.vector(&document)], 1, dimension)
                    .unwrap()
                    .remove(0);
            StoredEmbedding { revision: row.revision, document, exact, stored: row.stored, bits: row.bits }
        })
        .collect()
}

/// Checks that every stored vector is its exact vector rounded to half precision, with the exact
/// vector's sign bits, and that some component was actually rounded.
fn assert_rounded_to_half_precision(embeddings: &[StoredEmbedding]) {
    let mut rounded = 0;
    for e in embeddings {
        assert_eq!(e.stored.len(), e.exact.len());
        for (kept, wanted) in e.stored.iter().zip(&e.exact) {
            // Half precision keeps 11 significant bits (relative error at most 2^-11); below 2^-14
            // it is subnormal, with an absolute error of at most 2^-25.
            assert!((kept - wanted).abs() <= wanted.abs() / 2048.0 + 3e-8, "{kept} stored for {wanted}");
            rounded += usize::from(kept != wanted);
        }
        // The sign bits the shortlist ranks by are those of the embedder's own vector.
        let signs: String = e.exact.iter().map(|x| if *x > 0.0 { '1' } else { '0' }).collect();
        assert_eq!(e.bits, signs, "{:?}", e.document);
    }
    assert!(rounded > 0, "the stored components are rounded to half precision");
}

#[tokio::test]
async fn embeddings_are_stored_in_half_precision_close_to_what_the_embedder_returned() {
    let db = test_db().await;
    let _scene = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    worker(&db, embedder.clone()).drain().await.unwrap();
    assert_eq!(
        embedding_column_type(&db).await,
        "halfvec",
        "the test cluster's pgvector has halfvec: migration 20261218100000 converts the column"
    );
    let embeddings = stored_embeddings(&db, &embedder).await;
    assert!(embeddings.len() >= 4, "every revision of the scene is embedded: {}", embeddings.len());
    assert_rounded_to_half_precision(&embeddings);
}

#[tokio::test]
async fn the_half_precision_migration_converts_a_stores_single_precision_vectors_once() {
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = HashEmbedder::new("hash-64", 64);
    worker(&db, embedder.clone()).drain().await.unwrap();
    // The column as a store written before the migration has it, holding the embedder's exact
    // vectors (the update's trigger keeps the projection's sign bits).
    sqlx::query("ALTER TABLE revision_embeddings ALTER COLUMN embedding TYPE vector USING embedding::vector")
        .execute(&db.pool)
        .await
        .unwrap();
    for e in stored_embeddings(&db, &embedder).await {
        let exact = format!("[{}]", e.exact.iter().map(f32::to_string).collect::<Vec<_>>().join(","));
        sqlx::query("UPDATE revision_embeddings SET embedding = $2::text::vector WHERE revision_id = $1")
            .bind(e.revision)
            .bind(exact)
            .execute(&db.pool)
            .await
            .unwrap();
    }
    let before = stored_embeddings(&db, &embedder).await;
    assert!(before.iter().all(|e| e.stored == e.exact), "single precision keeps the vectors exactly");

    let migration = include_str!("../migrations/20261218100000_embeddings_in_half_precision.sql");
    sqlx::raw_sql(migration).execute(&db.pool).await.unwrap();
    assert_eq!(embedding_column_type(&db).await, "halfvec");
    let converted = stored_embeddings(&db, &embedder).await;
    assert_eq!(converted.len(), before.len(), "no embedding is lost");
    assert_rounded_to_half_precision(&converted);
    common::assert_projection_matches_canonical(&db.pool).await;
    let index = PgVectorIndex::new(embedder.clone()).with_min_similarity(-1.0);
    let ctx = channel_context(&db, &s).await;
    let hits = semantic_hits(&db, &index, &ctx, "prefers tabs over spaces", 10).await.unwrap();
    assert!(!hits.is_empty(), "the converted vectors are searched");

    // A second run finds the column converted and changes nothing.
    sqlx::raw_sql(migration).execute(&db.pool).await.unwrap();
    let again = stored_embeddings(&db, &embedder).await;
    assert!(again.iter().zip(&converted).all(|(a, b)| a.stored == b.stored), "the second run rounds nothing again");
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

    let slow = vec![(200, OK_BODY.into(), Duration::from_secs(2)); 3];
    let (url, seen) = serve(slow).await;
    let started = Instant::now();
    let err = client(&url, 2).embed(&["a".into(), "b".into()]).await.unwrap_err();
    assert_eq!(err, EmbedError::Timeout);
    assert!(started.elapsed() < Duration::from_secs(3), "timeouts are bounded: {:?}", started.elapsed());
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
