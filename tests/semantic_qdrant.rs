//! The Qdrant adapter against a real Qdrant server (feature `qdrant`; built only with it).
//!
//! Where the server comes from: `QDRANT_URL` (and `QDRANT_API_KEY`) when set, as `scripts/test.sh`
//! sets it after `mesh-memory qdrant start`; otherwise each test starts its own throwaway server
//! from `../shared/tools/qdrant/` (or `MESH_QDRANT_BIN`). There is no skipped path: without a
//! server and without the binary every test fails, saying how to get one. The tests that stop,
//! freeze or kill servers (and the three-node cluster) always start their own.
//!
//! What runs here: the conformance suite every vector index passes (`tests/semantic_conformance`,
//! the same tests `tests/semantic.rs` runs against pgvector), then Qdrant's own: nothing
//! resurrects (amend and forget remove points, even when the outbox retries out of order; a
//! hostile race of searches while the outbox drains), a server stopped mid-search, a server that
//! requires an API key, and a three-node cluster losing a node under a stream of searches and
//! writes.

mod common;
mod semantic_conformance;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{test_db, TestDb, World};
use mesh_memory::privacy::EligibilityContext;
use mesh_memory::retrieval::{
    DegradationCategory, EligibleRows, RetrievalConfig, Retriever, SemanticIndex, SemanticRequest,
};
use mesh_memory::semantic::qdrant::{points_left, QdrantConfig, QdrantIndex};
use mesh_memory::semantic::qdrant_server::QdrantCluster;
use mesh_memory::semantic::{
    list_generations, outbox_status, rebuild_mirrored, Embedder, Generation, GenerationState, IndexWorker,
    RebuildProgress, SemanticError, WorkerConfig,
};
use mesh_memory::store::Topology;
use mesh_memory::{EntryId, RevisionId};
use semantic_conformance::{amend, recall, scene, Adapter, HashEmbedder, IndexOptions};

// ------------------------------------------------------------------------------------------------
// The server and the adapter
// ------------------------------------------------------------------------------------------------

/// The Qdrant a test talks to: the one `QDRANT_URL` names, or its own throwaway server.
enum Server {
    External(String),
    Owned(QdrantCluster),
}

impl Server {
    fn url(&self) -> String {
        match self {
            Server::External(url) => url.clone(),
            Server::Owned(cluster) => cluster.url(),
        }
    }
}

/// Starts `nodes` throwaway nodes, or fails the test loudly saying why.
async fn own_server(nodes: usize) -> QdrantCluster {
    QdrantCluster::start(nodes, None).await.unwrap_or_else(|err| {
        panic!(
            "\nNO QDRANT SERVER: {err}\nThese tests run against a real Qdrant: set QDRANT_URL (and QDRANT_API_KEY) \
             to your server's gRPC URL, or provide ../shared/tools/qdrant/ (or MESH_QDRANT_BIN) so the tests start \
             their own. `scripts/test.sh` does the latter.\n"
        )
    })
}

async fn server() -> Server {
    match std::env::var("QDRANT_URL").ok().filter(|u| !u.is_empty()) {
        Some(url) => Server::External(url),
        None => Server::Owned(own_server(1).await),
    }
}

/// The adapter under test: a server and a collection prefix of this test's own.
struct Qdrant {
    /// Kept for its lifetime: an owned server stops when the adapter is dropped.
    _server: Server,
    config: QdrantConfig,
}

impl Qdrant {
    fn new(server: Server, shards: Option<(u32, u32)>) -> Self {
        let config = QdrantConfig {
            api_key: std::env::var("QDRANT_API_KEY").ok().filter(|k| !k.is_empty()),
            collection_prefix: format!("mm_test_{}", uuid::Uuid::new_v4().simple()),
            shards: shards.map(|s| s.0),
            replication_factor: shards.map(|s| s.1),
            ..QdrantConfig::new(server.url())
        };
        Qdrant { _server: server, config }
    }

    fn qdrant_index(&self, embedder: Arc<dyn Embedder>) -> Arc<QdrantIndex> {
        Arc::new(QdrantIndex::new(self.config.clone(), embedder).unwrap())
    }
}

impl Adapter for Qdrant {
    fn index(&self, embedder: Arc<dyn Embedder>, options: IndexOptions) -> Arc<dyn SemanticIndex> {
        let index = QdrantIndex::new(self.config.clone(), embedder).unwrap();
        Arc::new(options.apply(index, QdrantIndex::with_min_similarity, QdrantIndex::with_eligible_cap))
    }

    fn worker(&self, db: &TestDb, embedder: Arc<dyn Embedder>) -> IndexWorker {
        let mirror = self.qdrant_index(embedder.clone());
        IndexWorker::new(db.pool.clone(), embedder, WorkerConfig::default()).with_mirror(mirror)
    }

    async fn rebuild(
        &self,
        db: &TestDb,
        embedder: Arc<dyn Embedder>,
        on_progress: &mut dyn FnMut(RebuildProgress),
    ) -> Result<Generation, SemanticError> {
        let mirror = self.qdrant_index(embedder.clone());
        rebuild_mirrored(&db.pool, embedder, Some(mirror), on_progress).await
    }

    fn unreachable(&self, embedder: Arc<dyn Embedder>) -> Arc<dyn SemanticIndex> {
        // A loopback port nobody listens on: what a stopped server looks like.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let config = QdrantConfig { url, ..self.config.clone() };
        Arc::new(QdrantIndex::new(config, embedder).unwrap())
    }

    fn ranks_sign_bits(&self) -> bool {
        false
    }
}

async fn qdrant() -> Qdrant {
    Qdrant::new(server().await, None)
}

conformance_tests!(qdrant);

// ------------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------------

async fn active_generation(db: &TestDb) -> Generation {
    list_generations(&db.pool).await.unwrap().into_iter().find(|g| g.state == GenerationState::Active).unwrap()
}

/// The current revisions of live entries: what the collection must hold, exactly.
async fn canonical_current(db: &TestDb) -> HashSet<RevisionId> {
    sqlx::query_scalar("SELECT current_revision_id FROM memory_entries WHERE state = 'live'")
        .fetch_all(&db.pool)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Asserts that the active generation's collection holds one point per current revision of a live
/// entry and nothing else (no point of an amended or forgotten revision).
async fn assert_points_match_canonical(db: &TestDb, index: &QdrantIndex) {
    let generation = active_generation(db).await;
    let points = index.point_revisions(generation.id).await.unwrap();
    let distinct: HashSet<RevisionId> = points.iter().copied().collect();
    assert_eq!(distinct.len(), points.len(), "one point per revision");
    let expected = canonical_current(db).await;
    let stale: Vec<_> = distinct.difference(&expected).collect();
    let missing: Vec<_> = expected.difference(&distinct).collect();
    assert!(stale.is_empty() && missing.is_empty(), "stale points {stale:?}, missing points {missing:?}");
    assert_eq!(index.point_count(generation.id).await.unwrap(), expected.len() as u64, "exact count");
}

fn hash64() -> Arc<HashEmbedder> {
    HashEmbedder::new("hash-64", 64)
}

// ------------------------------------------------------------------------------------------------
// Nothing resurrects
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn amend_and_forget_remove_points_even_when_the_outbox_retries_out_of_order() {
    let adapter = qdrant().await;
    let db = test_db().await;
    let mut s = scene(&db).await;
    let embedder = hash64();
    let index = adapter.qdrant_index(embedder.clone());
    let worker = adapter.worker(&db, embedder.clone());
    worker.drain().await.unwrap();
    assert_points_match_canonical(&db, &index).await;

    let amended = amend(&s.world, s.tabs.0, s.tabs.1, "Victor now insists on four spaces").await;
    worker.drain().await.unwrap();
    assert_points_match_canonical(&db, &index).await;
    let points = index.point_revisions(active_generation(&db).await.id).await.unwrap();
    assert!(points.contains(&amended) && !points.contains(&s.tabs.1), "the amended revision's point is gone");

    // An entry whose first revision's outbox row fails and waits for its retry while its
    // amendment's row is processed first: the late retry must not bring revision 1 back.
    let victor = common::Person { actor: s.victor.actor, identity: s.victor.identity };
    let (entry, first) = s.world.remember(s.channel, &victor, None, "The office moves to Lisbon in May").await;
    sqlx::query("UPDATE index_outbox SET next_attempt_at = now() + interval '1 hour' WHERE revision_id = $1")
        .bind(first)
        .execute(&db.pool)
        .await
        .unwrap();
    let second = amend(&s.world, entry, first, "The office moves to Porto in June").await;
    worker.drain().await.unwrap();
    sqlx::query("UPDATE index_outbox SET next_attempt_at = now() WHERE revision_id = $1")
        .bind(first)
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(worker.drain().await.unwrap().claimed, 1, "the late row is processed");
    assert_points_match_canonical(&db, &index).await;
    let points = index.point_revisions(active_generation(&db).await.id).await.unwrap();
    assert!(points.contains(&second) && !points.contains(&first), "revision 1 did not resurrect");
    assert_eq!(mesh_memory::semantic::embedding_count(&db.pool, first).await.unwrap(), 1, "its history is kept");

    s.world.store.forget_entry(s.world.agent, entry).await.unwrap();
    s.world.store.forget_entry(s.world.agent, s.tabs.0).await.unwrap();
    worker.drain().await.unwrap();
    assert_points_match_canonical(&db, &index).await;
    let ctx = EligibilityContext::resolve(&db.store, s.world.agent, s.channel).await.unwrap();
    let unfloored = adapter.index(embedder, IndexOptions::unfloored());
    let hits =
        semantic_conformance::semantic_hits(&db, unfloored.as_ref(), &ctx, "office moves spaces", 10).await.unwrap();
    assert!(hits.iter().all(|h| ![first, second, amended, s.tabs.1].contains(&h.revision_id)), "{hits:?}");
}

/// An erased entry's points go from the collection once the worker catches up, in every
/// generation the worker writes, and the collection again mirrors the canonical current revisions.
#[tokio::test]
async fn an_erasure_leaves_no_point_of_its_revisions_in_qdrant() {
    let adapter = qdrant().await;
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = hash64();
    let index = adapter.qdrant_index(embedder.clone());
    let worker = adapter.worker(&db, embedder.clone());
    worker.drain().await.unwrap();
    let amended = amend(&s.world, s.tabs.0, s.tabs.1, "Victor now insists on four spaces").await;
    worker.drain().await.unwrap();
    let generation = active_generation(&db).await.id;
    assert!(index.point_revisions(generation).await.unwrap().contains(&amended));

    common::erase_as_owner(&db.pool, "entry", s.tabs.0 .0).await;
    // What `erase verify` reads: the erased revisions' points left in any generation.
    let config = adapter.config.clone();
    let erased = [s.tabs.1, amended];
    assert_eq!(points_left(&config, &[generation], &erased).await.unwrap(), vec![amended], "until the worker runs");
    worker.drain().await.unwrap();
    assert_eq!(points_left(&config, &[generation], &erased).await.unwrap(), vec![]);
    let points = index.point_revisions(generation).await.unwrap();
    assert!(!points.contains(&amended) && !points.contains(&s.tabs.1), "no point of an erased revision");
    assert_points_match_canonical(&db, &index).await;
}

/// What Qdrant returns for `vector` among all of the agent's points, eligibility ignored: the
/// stale points the worker has not pruned yet, as an unfiltered search would see them.
async fn raw_nearest(index: &QdrantIndex, generation: i64, vector: Vec<f32>, limit: u64) -> Vec<RevisionId> {
    use qdrant_client::qdrant::{point_id::PointIdOptions, QueryPointsBuilder};
    let response =
        index.client().query(QueryPointsBuilder::new(index.collection(generation)).query(vector).limit(limit)).await;
    response
        .unwrap()
        .result
        .iter()
        .filter_map(|p| match p.id.as_ref()?.point_id_options.as_ref()? {
            PointIdOptions::Uuid(text) => uuid::Uuid::parse_str(text).ok().map(RevisionId),
            PointIdOptions::Num(_) => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_race_never_returns_a_retired_revision_and_the_worker_leaves_none() {
    let adapter = qdrant().await;
    let db = test_db().await;
    let mut world = World::new(&db.store, "agent").await;
    let victor = world.person("Victor", "U1").await;
    let ana = world.person("Ana", "U2").await;
    let channel = world.conversation("C", Topology::Channel, &[&victor, &ana]).await;
    let mut entries: Vec<(EntryId, RevisionId)> = Vec::new();
    for i in 0..24 {
        entries.push(world.remember(channel, &victor, None, &format!("Victor prefers tabs in project {i}")).await);
    }
    let embedder = hash64();
    let index = adapter.qdrant_index(embedder.clone());
    let worker = adapter.worker(&db, embedder.clone());
    worker.drain().await.unwrap();
    let generation = active_generation(&db).await.id;
    let query = "Victor prefers tabs in project";
    let ctx = EligibilityContext::resolve(&db.store, world.agent, channel).await.unwrap();

    // Amended before the worker ran: Qdrant still holds the old points and an unfiltered search
    // returns them, so the race below is real.
    let retired: Arc<Mutex<HashSet<RevisionId>>> = Arc::default();
    for slot in entries.iter_mut().take(6) {
        let next = amend(&world, slot.0, slot.1, &format!("Victor prefers tabs in project {} again", slot.1)).await;
        retired.lock().unwrap().insert(slot.1);
        slot.1 = next;
    }
    let raw = raw_nearest(&index, generation, embedder.vector(query), 50).await;
    assert!(raw.iter().any(|r| retired.lock().unwrap().contains(r)), "stale points exist before the worker runs");

    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (world, retired, stop, mut entries) = (clone_world(&world), retired.clone(), stop.clone(), entries.clone());
        tokio::spawn(async move {
            let mut round = 0usize;
            while !stop.load(Ordering::Relaxed) && round < 400 {
                let i = round % entries.len();
                let (entry, current) = entries[i];
                if round % 7 == 6 {
                    world.store.forget_entry(world.agent, entry).await.unwrap();
                    retired.lock().unwrap().insert(current);
                    entries.remove(i);
                    if entries.is_empty() {
                        break;
                    }
                } else {
                    let next = amend(&world, entry, current, &format!("Victor prefers tabs in project {round}")).await;
                    retired.lock().unwrap().insert(current);
                    entries[i].1 = next;
                }
                round += 1;
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
    };
    let draining = {
        let (worker, stop) = (worker.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                worker.drain().await.unwrap();
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
        })
    };
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(index.clone());
    let (mut searches, mut stale_raw) = (0, 0);
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        // Everything retired before this search began must be absent from what it returns.
        let before: HashSet<RevisionId> = retired.lock().unwrap().clone();
        let hits = index
            .search(SemanticRequest {
                pool: &db.pool,
                eligibility: &ctx,
                query,
                limit: 50,
                eligible: EligibleRows::Unknown,
            })
            .await
            .unwrap();
        let leaked: Vec<_> = hits.iter().filter(|h| before.contains(&h.revision_id)).collect();
        assert!(leaked.is_empty(), "a retired revision came back from Qdrant as eligible: {leaked:?}");
        let outcome = retriever
            .search(&mesh_memory::retrieval::SearchRequest::new(
                world.agent,
                channel,
                Some(victor.actor),
                query,
                mesh_memory::retrieval::RetrievalMode::Recall,
            ))
            .await
            .unwrap();
        assert!(outcome.used_revisions().iter().all(|r| !before.contains(r)), "retrieval selected a retired revision");
        let raw = raw_nearest(&index, generation, embedder.vector(query), 50).await;
        stale_raw += raw.iter().filter(|r| before.contains(r)).count();
        searches += 1;
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    draining.await.unwrap();
    worker.drain().await.unwrap();
    eprintln!("hostile race: {searches} searches, {stale_raw} stale points seen unfiltered, none returned");
    assert!(searches > 10, "the race ran: {searches} searches");
    assert_points_match_canonical(&db, &index).await;
    assert_eq!(outbox_status(&db.pool).await.unwrap().due, 0);
}

fn clone_world(world: &World) -> World {
    World { store: world.store.clone(), agent: world.agent, agent_actor: world.agent_actor, clock: world.clock }
}

// ------------------------------------------------------------------------------------------------
// A server stopped mid-search
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_stopped_server_degrades_within_the_deadline_and_the_outbox_redelivers_after_restart() {
    let mut cluster = own_server(1).await;
    let adapter = Qdrant::new(Server::External(cluster.url()), None);
    let db = test_db().await;
    let mut s = scene(&db).await;
    let embedder = hash64();
    let index = adapter.qdrant_index(embedder.clone());
    // One attempt before parking: an outage must not park rows all the same.
    let config =
        WorkerConfig { initial_backoff: Duration::from_millis(50), max_attempts: 1, ..WorkerConfig::default() };
    let worker = IndexWorker::new(db.pool.clone(), embedder.clone(), config).with_mirror(index.clone());
    worker.drain().await.unwrap();
    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(index.clone());
    let healthy = retriever.search(&recall(&s, "prefers tabs over spaces")).await.unwrap();
    assert!(healthy.degradation_categories.is_empty());

    // Frozen: it accepts connections and never answers. The search gives up at its deadline.
    cluster.node_mut(0).freeze(true).unwrap();
    let started = Instant::now();
    let frozen = retriever.search(&recall(&s, "prefers tabs over spaces")).await.unwrap();
    let elapsed = started.elapsed();
    cluster.node_mut(0).freeze(false).unwrap();
    assert!(elapsed < Duration::from_millis(4500), "within the deadline: {elapsed:?}");
    assert!(
        matches!(
            frozen.degradation_categories.as_slice(),
            [DegradationCategory::SemanticTimeout | DegradationCategory::SemanticUnavailable]
        ),
        "{:?}",
        frozen.degradation_categories
    );
    assert_eq!(frozen.used_revisions(), vec![s.tabs.1], "lexical results still come back");

    // Killed: the search degrades at once; writes meanwhile wait in the outbox.
    cluster.node_mut(0).kill();
    let started = Instant::now();
    let down = retriever.search(&recall(&s, "prefers tabs over spaces")).await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(3500), "{:?}", started.elapsed());
    assert_eq!(down.degradation_categories, vec![DegradationCategory::SemanticUnavailable]);
    assert_eq!(down.used_revisions(), vec![s.tabs.1]);
    let victor = common::Person { actor: s.victor.actor, identity: s.victor.identity };
    let (_, written) = s.world.remember(s.channel, &victor, None, "The standup moves to ten").await;
    let amended = amend(&s.world, s.tabs.0, s.tabs.1, "Victor prefers tabs, width four").await;
    let report = worker.run_once().await.unwrap();
    assert_eq!((report.claimed, report.retried, report.embedded), (2, 2, 0), "rescheduled, nothing marked done");
    assert_eq!(report.gave_up, 0, "an unreachable index is an outage: its rows are never parked");
    let category: Vec<Option<String>> =
        sqlx::query_scalar("SELECT last_error_category FROM index_outbox WHERE completed_at IS NULL")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    assert_eq!(category, vec![Some("index_unreachable".to_owned()); 2]);

    cluster.restart(0).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    worker.drain().await.unwrap();
    let status = outbox_status(&db.pool).await.unwrap();
    assert_eq!((status.due, status.waiting, status.parked), (0, 0, 0), "every row re-delivered: {status:?}");
    assert_points_match_canonical(&db, &index).await;
    let back = retriever.search(&recall(&s, "Victor prefers tabs, width four")).await.unwrap();
    assert!(back.degradation_categories.is_empty(), "{:?}", back.degradation_categories);
    let semantic: Vec<RevisionId> =
        back.selections.iter().filter(|x| x.components.semantic.is_some()).map(|x| x.revision_id).collect();
    assert!(semantic.contains(&amended), "the amendment written while it was down is found: {semantic:?}");
    let _ = written;
}

// ------------------------------------------------------------------------------------------------
// A server that requires an API key
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_api_key_reaches_a_server_that_requires_one_and_a_wrong_one_is_refused() {
    let key = uuid::Uuid::new_v4().simple().to_string();
    let cluster = QdrantCluster::start_with_api_key(1, &key).await.expect("a throwaway server with a key");
    let db = test_db().await;
    let s = scene(&db).await;
    let embedder = hash64();
    let prefix = format!("mm_test_{}", uuid::Uuid::new_v4().simple());
    let with = |api_key: Option<String>| {
        let config = QdrantConfig { api_key, collection_prefix: prefix.clone(), ..QdrantConfig::new(cluster.url()) };
        Arc::new(QdrantIndex::new(config, embedder.clone()).unwrap())
    };
    let wrong = with(Some("not-the-key".into()));
    let refused =
        IndexWorker::new(db.pool.clone(), embedder.clone(), WorkerConfig::default()).with_mirror(wrong.clone());
    let report = refused.run_once().await.unwrap();
    assert_eq!((report.retried, report.embedded), (4, 0), "a refused key writes nothing");
    let category: Vec<Option<String>> =
        sqlx::query_scalar("SELECT DISTINCT last_error_category FROM index_outbox").fetch_all(&db.pool).await.unwrap();
    assert_eq!(category, vec![Some("index_failed".to_owned())], "refused, not unreachable");

    let right = with(Some(key.clone()));
    sqlx::query("UPDATE index_outbox SET next_attempt_at = now()").execute(&db.pool).await.unwrap();
    let worker =
        IndexWorker::new(db.pool.clone(), embedder.clone(), WorkerConfig::default()).with_mirror(right.clone());
    assert_eq!(worker.drain().await.unwrap().embedded, 4);
    assert_points_match_canonical(&db, &right).await;
    let ctx = EligibilityContext::resolve(&db.store, s.world.agent, s.channel).await.unwrap();
    let hits = semantic_conformance::semantic_hits(&db, right.as_ref(), &ctx, "prefers tabs over spaces", 10).await;
    assert_eq!(hits.unwrap().first().map(|h| h.revision_id), Some(s.tabs.1));
    let refused = semantic_conformance::semantic_hits(&db, wrong.as_ref(), &ctx, "prefers tabs over spaces", 10).await;
    assert_eq!(refused, Err(mesh_memory::retrieval::SemanticFailure::Failed), "a wrong key finds nothing");
}

// ------------------------------------------------------------------------------------------------
// A three-node cluster losing a node
// ------------------------------------------------------------------------------------------------

/// Waits until every replica of `collection` is active again (the returned node caught up).
async fn wait_for_active_replicas(cluster: &QdrantCluster, collection: &str) {
    let http = reqwest::Client::new();
    let started = Instant::now();
    loop {
        let mut all_active = true;
        for node in cluster.nodes() {
            let url = format!("{}/collections/{collection}/cluster", node.http_url());
            let body: serde_json::Value = match http.get(&url).send().await {
                Ok(r) => r.json().await.unwrap_or_default(),
                Err(_) => serde_json::Value::Null,
            };
            let result = &body["result"];
            let shards = result["local_shards"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(result["remote_shards"].as_array().into_iter().flatten());
            let states: Vec<&str> = shards.filter_map(|s| s["state"].as_str()).collect();
            all_active &= !states.is_empty() && states.iter().all(|s| *s == "Active");
            all_active &= result["shard_transfers"].as_array().is_none_or(|t| t.is_empty());
        }
        if all_active {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "replicas did not recover");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_cluster_keeps_answering_with_a_node_killed_and_loses_nothing() {
    let mut cluster = own_server(3).await;
    let adapter = Qdrant::new(Server::External(cluster.url()), Some((3, 2)));
    let db = test_db().await;
    let mut world = World::new(&db.store, "agent").await;
    let victor = world.person("Victor", "U1").await;
    let ana = world.person("Ana", "U2").await;
    let channel = world.conversation("C", Topology::Channel, &[&victor, &ana]).await;
    let dm = world.conversation("D", Topology::Direct, &[&ana]).await;
    let (_, private) = world.remember(dm, &ana, None, "Ana prefers tabs in every project, privately").await;
    let mut entries = Vec::new();
    for i in 0..30 {
        entries.push(world.remember(channel, &victor, None, &format!("Victor prefers tabs in project {i}")).await);
    }
    let embedder = hash64();
    let index = adapter.qdrant_index(embedder.clone());
    let config = WorkerConfig {
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
        max_attempts: 1000,
        idle_poll: Duration::from_millis(50),
        ..WorkerConfig::default()
    };
    let worker = IndexWorker::new(db.pool.clone(), embedder.clone(), config).with_mirror(index.clone());
    worker.drain().await.unwrap();
    let collection = index.collection(active_generation(&db).await.id);
    let info = index.client().collection_info(&collection).await.unwrap().result.unwrap();
    let params = info.config.unwrap().params.unwrap();
    assert_eq!((params.shard_number, params.replication_factor), (3, Some(2)), "3 shards, each on 2 nodes");

    let stop = Arc::new(AtomicBool::new(false));
    let (stop_worker, worker_stopped) = tokio::sync::oneshot::channel::<()>();
    let background = worker.clone().spawn(async move {
        let _ = worker_stopped.await;
    });
    let writes = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (mut world, stop, writes) = (clone_world(&world), stop.clone(), writes.clone());
        let victor = common::Person { actor: victor.actor, identity: victor.identity };
        tokio::spawn(async move {
            let mut round = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let i = round % entries.len();
                match round % 3 {
                    0 => {
                        let fresh = world.remember(channel, &victor, None, &format!("Victor likes tabs {round}")).await;
                        entries.push(fresh);
                    }
                    1 => {
                        let (entry, current) = entries[i];
                        entries[i].1 =
                            amend(&world, entry, current, &format!("Victor prefers tabs, take {round}")).await;
                    }
                    _ => {
                        let (entry, _) = entries.remove(i);
                        world.store.forget_entry(world.agent, entry).await.unwrap();
                    }
                }
                writes.fetch_add(1, Ordering::Relaxed);
                round += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    let retriever = Retriever::new(db.store.clone(), RetrievalConfig::default()).with_semantic_index(index.clone());
    let request = mesh_memory::retrieval::SearchRequest::new(
        world.agent,
        channel,
        Some(victor.actor),
        "Victor prefers tabs in project",
        mesh_memory::retrieval::RetrievalMode::Recall,
    );
    // (phase, answered with semantic candidates, degraded)
    let mut tally = [(0usize, 0usize); 3];
    let started = Instant::now();
    let mut phase = 0;
    while started.elapsed() < Duration::from_secs(9) {
        let elapsed = started.elapsed();
        if phase == 0 && elapsed > Duration::from_secs(2) {
            cluster.node_mut(2).kill();
            phase = 1;
        } else if phase == 1 && elapsed > Duration::from_secs(5) {
            cluster.restart(2).await.unwrap();
            phase = 2;
        }
        let outcome = retriever.search(&request).await.unwrap();
        assert!(!outcome.used_revisions().contains(&private), "a private memory leaked into the channel");
        if outcome.degradation_categories.is_empty() {
            tally[phase].0 += 1;
        } else {
            tally[phase].1 += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.await.unwrap();
    eprintln!(
        "cluster: {} writes; searches (semantic, degraded) before/while/after the kill: {tally:?}",
        writes.load(Ordering::Relaxed)
    );
    assert!(tally[1].0 > 0, "searches kept answering semantically with a node down: {tally:?}");

    // The outbox loses nothing: every row completes once the node is back.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = outbox_status(&db.pool).await.unwrap();
        assert_eq!(status.parked, 0);
        if status.due == 0 && status.waiting == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the outbox did not drain: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = stop_worker.send(());
    background.await.unwrap();
    wait_for_active_replicas(&cluster, &collection).await;
    assert_points_match_canonical(&db, &index).await;
}
