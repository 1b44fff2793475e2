//! The speed benchmark (`mesh-memory bench`): synthetic stores of growing size, recall latency
//! percentiles, write throughput with the outbox, and how each grows with N. Figures are printed,
//! never asserted on time: targets are read from the report, not from a timed unit test.

pub mod footprint;
pub mod hashing;
pub mod synthetic;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::ids::ActorId;
use crate::retrieval::{RetrievalMode, Retriever, SearchRequest};
use crate::store::{Direction, GroupCommit, NewMemory, NewMessage, Restriction, SourceRef, Store};
use synthetic::{sentence, SplitMix, SyntheticWorkspace};

/// Why a benchmark stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// PostgreSQL failed.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// A search failed.
    #[error("retrieval: {0}")]
    Retrieval(#[from] crate::retrieval::RetrievalError),
    /// A write failed.
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// The scratch database could not be created.
    #[error("creating the benchmark database: {0}")]
    Setup(String),
    /// The options ask for something that cannot be measured (checked before any database work).
    #[error("invalid benchmark options: {0}")]
    InvalidOptions(String),
}

/// Latency percentiles of one measured operation, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Latency {
    /// Operations measured.
    pub samples: usize,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

impl Latency {
    /// Percentiles of the given durations.
    pub fn from_samples(mut samples: Vec<Duration>) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let at = |q: f64| ms(samples[((samples.len() as f64 * q).ceil() as usize).clamp(1, samples.len()) - 1]);
        Latency {
            samples: samples.len(),
            p50_ms: at(0.50),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            mean_ms: samples.iter().map(|d| ms(*d)).sum::<f64>() / samples.len() as f64,
        }
    }
}

/// A random destination (conversation + one of its members as the speaker) and a 2–4 word query.
pub fn random_query(
    rng: &mut SplitMix,
    workspace: &SyntheticWorkspace,
) -> (crate::ids::ConversationId, ActorId, String) {
    let conversation = &workspace.conversations[rng.range(0, workspace.conversations.len())];
    let actor = conversation.members[rng.range(0, conversation.members.len())];
    (conversation.id, actor, sentence(rng, &workspace.vocabulary, 2, 4))
}

/// Recall latency over `queries` random searches through `retriever` (each writes its audit row,
/// as in production). Returns the latency and the number of selections returned.
pub async fn measure_recall(
    retriever: &Retriever,
    workspace: &SyntheticWorkspace,
    queries: usize,
    seed: u64,
) -> Result<(Latency, usize), BenchError> {
    let mut rng = SplitMix::new(seed);
    let mut samples = Vec::with_capacity(queries);
    let mut returned = 0;
    for _ in 0..queries {
        let (conversation, actor, query) = random_query(&mut rng, workspace);
        let request = SearchRequest::new(workspace.agent, conversation, Some(actor), query, RetrievalMode::Prompt);
        let timer = Instant::now();
        let outcome = retriever.search(&request).await?;
        samples.push(timer.elapsed());
        returned += outcome.selections.len();
    }
    Ok((Latency::from_samples(samples), returned))
}

/// One benchmark writer: its own random stream, a speaker in a conversation, and one source
/// message that every memory it writes cites (as a turn's inbound message would).
struct Writer {
    rng: SplitMix,
    workspace: Arc<SyntheticWorkspace>,
    conversation: crate::ids::ConversationId,
    speaker: ActorId,
    message: crate::ids::MessageId,
}

impl Writer {
    async fn prepare(store: &Store, workspace: Arc<SyntheticWorkspace>, seed: u64) -> Result<Writer, BenchError> {
        let mut rng = SplitMix::new(seed);
        let conversation = &workspace.conversations[rng.range(0, workspace.conversations.len())];
        let (conversation, speaker) = (conversation.id, conversation.members[0]);
        let message = store
            .record_message(NewMessage {
                agent: workspace.agent,
                conversation,
                direction: Direction::Inbound,
                sender: speaker,
                sender_identity: None,
                body: "benchmark source message",
                sent_at: chrono::Utc::now(),
            })
            .await?;
        Ok(Writer { rng, workspace, conversation, speaker, message })
    }

    fn body(&mut self) -> String {
        sentence(&mut self.rng, &self.workspace.vocabulary, 8, 16)
    }

    fn memory(&mut self) -> NewMemory {
        NewMemory {
            agent: self.workspace.agent,
            body: self.body(),
            subject: Some(self.speaker),
            source_actor: Some(self.speaker),
            origin_conversation: Some(self.conversation),
            always_on: false,
            restriction: Restriction::None,
            sources: vec![SourceRef::Message(self.message)],
        }
    }
}

/// How fast one kind of write went: committed writes per second over all writers, and how long
/// each write took from its caller's point of view (queueing for a batch included).
#[derive(Clone, Debug, Default, Serialize)]
pub struct WriteRate {
    /// Concurrent writers.
    pub writers: usize,
    /// Committed writes per second, all writers together.
    pub per_second: f64,
    /// Latency of one write as its caller saw it.
    pub latency: Latency,
}

/// Runs `concurrency` writers (each stops at its own deadline) and returns the committed writes per
/// second with each write's latency. `write` performs durable writes until the deadline and returns
/// how long each committed one took.
async fn write_rate<F, Fut>(
    store: &Store,
    workspace: &SyntheticWorkspace,
    concurrency: usize,
    seed: u64,
    write: F,
) -> Result<WriteRate, BenchError>
where
    F: Fn(Store, Writer) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<Vec<Duration>, BenchError>> + Send,
{
    let workspace = Arc::new(workspace.clone());
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (store, workspace, write) = (store.clone(), workspace.clone(), write.clone());
        tasks.push(tokio::spawn(async move {
            let writer = Writer::prepare(&store, workspace, seed + worker as u64).await?;
            write(store, writer).await
        }));
    }
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.expect("writer task panicked")?);
    }
    let per_second = samples.len() as f64 / started.elapsed().as_secs_f64();
    Ok(WriteRate { writers: concurrency, per_second, latency: Latency::from_samples(samples) })
}

/// Remembers per second: `concurrency` writers each creating entries (with a message source and
/// the outbox row) for `duration`, through `store`'s write path (group-committed or not).
pub async fn measure_remember_throughput(
    store: &Store,
    workspace: &SyntheticWorkspace,
    concurrency: usize,
    duration: Duration,
) -> Result<WriteRate, BenchError> {
    let deadline = Instant::now() + duration;
    write_rate(store, workspace, concurrency, 1000, move |store, mut writer| async move {
        let mut took = Vec::new();
        while Instant::now() < deadline {
            let memory = writer.memory();
            let started = Instant::now();
            store.create_entry(memory).await?;
            took.push(started.elapsed());
        }
        Ok(took)
    })
    .await
}

/// Amends per second: `concurrency` writers, each amending its own entry in a loop (a new
/// revision, copied evidence, parent source and outbox row per amend, one transaction each).
pub async fn measure_amend_throughput(
    store: &Store,
    workspace: &SyntheticWorkspace,
    concurrency: usize,
    duration: Duration,
) -> Result<WriteRate, BenchError> {
    let deadline = Instant::now() + duration;
    write_rate(store, workspace, concurrency, 2000, move |store, mut writer| async move {
        let created = store.create_entry(writer.memory()).await?;
        let mut expected = created.revision_id();
        let mut took = Vec::new();
        while Instant::now() < deadline {
            let amendment = crate::store::Amendment {
                agent: writer.workspace.agent,
                entry: created.entry_id(),
                expected_revision: expected,
                body: Some(writer.body()),
                subject: crate::store::SubjectUpdate::Keep,
                source_actor: Some(writer.speaker),
                sources: vec![],
            };
            let started = Instant::now();
            if let crate::store::WriteOutcome::Committed(c) = store.amend_entry(amendment).await? {
                took.push(started.elapsed());
                expected = c.revision_id();
            }
        }
        Ok(took)
    })
    .await
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Store sizes in revisions, e.g. 10k, 100k, 1M.
    pub sizes: Vec<usize>,
    /// Searches per size and variant.
    pub queries: usize,
    /// How long each write-throughput measurement runs.
    pub write_duration: Duration,
    /// Concurrent writers.
    pub writers: usize,
    /// Further writer counts at which group-committed remembers are measured again (a batch
    /// fills with the remembers that arrive while the previous one commits, so throughput and
    /// latency depend on how many callers write at once). Empty: only `writers`.
    pub remember_writers: Vec<usize>,
    /// Keep the benchmark databases afterwards.
    pub keep_databases: bool,
    /// Measure the newest kept database of each size instead of loading a new one (its load
    /// time is then reported as 0; earlier runs' throughput writes are part of it).
    pub reuse_databases: bool,
    /// Measure hybrid recall only up to this many revisions: embedding and copying a million
    /// vectors adds minutes to the run.
    pub hybrid_max_revisions: usize,
    /// The vector indexes hybrid recall and the outbox drain are measured with, side by side
    /// (each size: hybrid latency, then the drain rate of a fresh backlog of remembers).
    pub vector_indexes: Vec<BenchIndex>,
    /// A real embedding model that each hybrid query is embedded with, timed in the loop as
    /// production pays it (see [`hashing::ModelTimedEmbedder`]); `None`: the hashing embedder
    /// alone, which costs microseconds.
    pub query_model: Option<QueryModel>,
}

/// The model `--query-model` times in front of each hybrid query.
#[derive(Clone)]
pub struct QueryModel(pub Arc<dyn crate::semantic::Embedder>);

impl std::fmt::Debug for QueryModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("QueryModel").field(self.0.info()).finish()
    }
}

/// A vector index the bench measures.
#[derive(Clone, Debug)]
pub enum BenchIndex {
    /// pgvector in the bench's own database.
    PgVector,
    /// A Qdrant server or cluster (`label` names it in the report: `qdrant`, `qdrant-cluster`).
    #[cfg(feature = "qdrant")]
    Qdrant {
        /// The name in the report.
        label: String,
        /// Where it is and how its collections are laid out.
        config: crate::semantic::qdrant::QdrantConfig,
    },
}

impl BenchIndex {
    /// The name in the report.
    pub fn label(&self) -> &str {
        match self {
            BenchIndex::PgVector => "pgvector",
            #[cfg(feature = "qdrant")]
            BenchIndex::Qdrant { label, .. } => label,
        }
    }
}

/// Hybrid recall and the outbox drain with one vector index, at one size.
#[derive(Clone, Debug, Serialize)]
pub struct IndexReport {
    /// Which index ([`BenchIndex::label`]).
    pub index: String,
    /// Seconds to put the store's vectors into it (pgvector: embed and COPY; Qdrant: upsert the
    /// same vectors).
    pub load_seconds: f64,
    /// Hybrid recall latency.
    pub hybrid: Latency,
    /// Outbox rows a worker drained into it per second (a fresh backlog of remembers: embed with
    /// the hashing embedder, write the index, mark done).
    pub drain: DrainRate,
}

/// How fast the outbox worker drained a backlog.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DrainRate {
    /// Rows drained.
    pub rows: usize,
    /// Seconds it took.
    pub seconds: f64,
    /// Rows per second.
    pub per_second: f64,
}

impl BenchOptions {
    /// Refuses options that would measure nothing (or divide by nothing) before a database is
    /// created: a run of many minutes should not end with a figure of zero writers.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.sizes.contains(&0) {
            return Err(BenchError::InvalidOptions("every store size must be at least one revision".into()));
        }
        if self.writers == 0 || self.remember_writers.contains(&0) {
            return Err(BenchError::InvalidOptions("writer counts must be at least 1".into()));
        }
        Ok(())
    }
}

/// Figures for one store size.
#[derive(Clone, Debug, Serialize)]
pub struct SizeReport {
    /// Revisions loaded.
    pub revisions: usize,
    /// Entries loaded.
    pub entries: usize,
    /// Seconds to bulk-load the store (COPY + VACUUM ANALYZE; with its vectors where hybrid search
    /// is measured at this size).
    pub load_seconds: f64,
    /// The store's disk footprint right after its load (a reused store: before this run's writes).
    pub disk: footprint::DiskFootprint,
    /// Resident memory of the bench process and of the server at the end of this size.
    pub memory: footprint::ResidentMemory,
    /// Lexical recall latency (no vector index).
    pub lexical: Latency,
    /// Mean selections returned per lexical query (a sanity figure: searches do find things).
    pub lexical_selections_per_query: f64,
    /// Hybrid recall latency, when a vector index was built for this size.
    pub hybrid: Option<Latency>,
    /// Seconds to embed (feature hashing) and COPY the vectors of a kept store that had none;
    /// `None` when they were loaded with the store (part of `load_seconds`) or not measured.
    pub vector_index_seconds: Option<f64>,
    /// Hybrid recall and drain rate per measured vector index, in the order asked.
    pub indexes: Vec<IndexReport>,
    /// Group-committed remembers (the store's default) at `writers` and then at each of
    /// `remember_writers`, with the latency each caller saw; never empty.
    pub remembers_by_writers: Vec<WriteRate>,
    /// One remember per transaction at `writers`, with its latency: the same run's baseline for
    /// the group-commit figure.
    pub remembers_one_per_transaction: WriteRate,
    /// Amends with the outbox at `writers`, with their latency.
    pub amends: WriteRate,
}

impl SizeReport {
    /// Group-committed remembers per second at the run's `writers` (the headline figure).
    pub fn remembers_per_second(&self) -> f64 {
        self.remembers_by_writers.first().map_or(0.0, |rate| rate.per_second)
    }
}

/// The server settings that move the figures as much as the code does, recorded with them: a report
/// whose buffer cache, huge pages or durability differ from another's is not comparable with it
/// (the 1M search figures of two sections of docs/benchmarks-history.md were 30% high because the
/// development cluster had PostgreSQL's default 128 MB of `shared_buffers`, which no report said).
#[derive(Clone, Debug, Serialize)]
pub struct ServerSettings {
    /// `server_version`.
    pub version: String,
    /// `shared_buffers`, as the server shows it (e.g. `4GB`).
    pub shared_buffers: String,
    /// Whether the shared memory is mapped with huge pages (`huge_pages_status`: `on` or `off`;
    /// `unknown` before PostgreSQL 17). Off, the buffer cache is mapped in 4 kB pages: hybrid
    /// searches at 1M took a fifth to a quarter longer on the benchmark machine (BENCHMARKS.md).
    pub huge_pages: String,
    /// How many huge pages the shared memory needs (`shared_memory_size_in_huge_pages`), the
    /// `vm.nr_hugepages` to reserve for it; `None` where the platform has none.
    pub huge_pages_needed: Option<u64>,
    /// `fsync`: `off` on an `--ephemeral` cluster, whose commits never wait for the disk.
    pub fsync: String,
    /// `synchronous_commit`.
    pub synchronous_commit: String,
}

impl ServerSettings {
    /// Reads them from the server behind `admin` (one short connection).
    pub async fn read(admin: &sqlx::postgres::PgConnectOptions) -> Result<Self, BenchError> {
        use sqlx::Connection;
        let mut connection = sqlx::PgConnection::connect_with(admin)
            .await
            .map_err(|e| BenchError::Setup(crate::database::explain_connect_error(e, admin).to_string()))?;
        let (version, shared_buffers, huge_pages, needed, fsync, synchronous_commit): (
            String,
            String,
            String,
            Option<String>,
            String,
            String,
        ) = sqlx::query_as(
            "SELECT current_setting('server_version'), current_setting('shared_buffers'),
                    coalesce(current_setting('huge_pages_status', true), 'unknown'),
                    current_setting('shared_memory_size_in_huge_pages', true),
                    current_setting('fsync'), current_setting('synchronous_commit')",
        )
        .fetch_one(&mut connection)
        .await?;
        connection.close().await?;
        // -1: the platform has no huge pages; absent: a server too old to compute it.
        let huge_pages_needed = needed.and_then(|n| n.parse::<i64>().ok()).and_then(|n| u64::try_from(n).ok());
        Ok(ServerSettings { version, shared_buffers, huge_pages, huge_pages_needed, fsync, synchronous_commit })
    }

    /// One line for the report's header.
    pub fn summary(&self) -> String {
        format!(
            "PostgreSQL {}, shared_buffers {}, huge pages {}, fsync {}, synchronous_commit {}",
            self.version, self.shared_buffers, self.huge_pages, self.fsync, self.synchronous_commit
        )
    }

    /// What to do about huge pages, when the server runs without them and could use them.
    pub fn huge_pages_advice(&self) -> Option<String> {
        let needed = self.huge_pages_needed.filter(|n| *n > 0)?;
        (self.huge_pages == "off").then(|| {
            format!(
                "huge pages are off: reserving {needed} (sysctl vm.nr_hugepages={needed}) and restarting the \
                 server maps its shared memory with them (see BENCHMARKS.md, \"huge pages\")"
            )
        })
    }
}

/// A whole run: the server it measured and every size's figures.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The settings the figures were measured under.
    pub server: ServerSettings,
    /// What embeds each hybrid query: `hashing`, or the model timed in front of it.
    pub query_embedder: String,
    /// One report per size, in the order asked.
    pub sizes: Vec<SizeReport>,
}

/// Runs every size in its own fresh database on the server behind `admin`.
pub async fn run(
    admin: &sqlx::postgres::PgConnectOptions,
    options: &BenchOptions,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport, BenchError> {
    options.validate()?;
    let server = ServerSettings::read(admin).await?;
    progress(&format!("server: {}", server.summary()));
    if let Some(advice) = server.huge_pages_advice() {
        progress(&advice);
    }
    let mut reports = Vec::new();
    for &size in &options.sizes {
        let prefix = format!("mesh_bench_{size}");
        let connections = (options.writers + 2) as u32;
        let reused = if options.reuse_databases {
            crate::database::ScratchDatabase::reopen_latest(admin, &prefix, connections)
                .await
                .map_err(|e| BenchError::Setup(e.to_string()))?
        } else {
            None
        };
        let fresh = reused.is_none();
        let scratch = match reused {
            Some(kept) => {
                progress(&format!("{size}: reusing kept database {}", kept.name));
                kept
            }
            None => crate::database::ScratchDatabase::create(admin, &prefix, connections)
                .await
                .map_err(|e| BenchError::Setup(e.to_string()))?,
        };
        let result = measure_size(&scratch.pool, size, fresh, options, &mut progress).await;
        if !options.keep_databases && !options.reuse_databases {
            scratch.drop_database().await?;
        }
        reports.push(result?);
    }
    let query_embedder = match &options.query_model {
        Some(QueryModel(model)) => hashing::ModelTimedEmbedder::new(model.clone()).label(),
        None => "hashing".to_owned(),
    };
    Ok(BenchReport { server, query_embedder, sizes: reports })
}

async fn measure_size(
    pool: &sqlx::PgPool,
    size: usize,
    fresh: bool,
    options: &BenchOptions,
    progress: &mut impl FnMut(&str),
) -> Result<SizeReport, BenchError> {
    let started = Instant::now();
    let hybrid_wanted = size <= options.hybrid_max_revisions && !options.vector_indexes.is_empty();
    let workspace = if fresh {
        let spec = synthetic::SyntheticSpec { revisions: size, seed: size as u64, vectors: hybrid_wanted };
        synthetic::build(pool, spec, |stage| progress(&format!("{size}: {stage}"))).await?
    } else {
        // The last run's writes left pages that autovacuum would have settled by now; measuring
        // before that measures the previous run, not the store.
        sqlx::query("VACUUM (ANALYZE)").execute(pool).await?;
        synthetic::load(pool).await?
    };
    let load_seconds = if fresh { started.elapsed().as_secs_f64() } else { 0.0 };
    let mut vector_index_seconds = None;
    if hybrid_wanted && !has_active_generation(pool).await? {
        progress(&format!("{size}: embedding vectors into PostgreSQL"));
        let timer = Instant::now();
        load_vectors(pool).await?;
        vector_index_seconds = Some(timer.elapsed().as_secs_f64());
    }
    let disk = footprint::DiskFootprint::read(pool).await?;
    progress(&format!(
        "{size}: on disk {} ({:.0} bytes per revision)",
        footprint::human_bytes(disk.database_bytes),
        disk.database_bytes as f64 / workspace.revisions.max(1) as f64
    ));
    let store = Store::new(pool.clone());
    progress(&format!("{size}: lexical recall x{}", options.queries));
    let configured = |index: Option<Arc<dyn crate::retrieval::SemanticIndex>>| {
        let setup = crate::service::RetrieverSetup::explicit(crate::retrieval::RetrievalConfig::default(), index);
        crate::service::configured_retriever(&store, setup)
            .map(|c| c.retriever)
            .map_err(|e| BenchError::InvalidOptions(e.to_string()))
    };
    let retriever = configured(None)?;
    // Warm the caches the way a running service would be warm.
    measure_recall(&retriever, &workspace, options.queries.min(20), 7).await?;
    let (lexical, returned) = measure_recall(&retriever, &workspace, options.queries, 42).await?;
    let mut indexes = Vec::new();
    if hybrid_wanted {
        for index in &options.vector_indexes {
            let label = index.label();
            progress(&format!("{size}: {label}: loading, hybrid recall x{}, outbox drain", options.queries));
            indexes.push(measure_index(pool, &store, &workspace, index, options, vector_index_seconds).await?);
        }
    }
    let hybrid = indexes.iter().find(|r| r.index == "pgvector").map(|r| r.hybrid.clone());
    progress(&format!("{size}: remember throughput, one transaction per remember (baseline)"));
    let one_per_transaction =
        Store::with_group_commit(pool.clone(), GroupCommit { max_batch: 1, max_in_flight: options.writers });
    let remembers_one_per_transaction =
        measure_remember_throughput(&one_per_transaction, &workspace, options.writers, options.write_duration).await?;
    let mut remembers_by_writers = Vec::new();
    for writers in std::iter::once(options.writers).chain(options.remember_writers.iter().copied()) {
        progress(&format!("{size}: remember throughput, group commit, {writers} writers"));
        remembers_by_writers
            .push(measure_remember_throughput(&store, &workspace, writers, options.write_duration).await?);
    }
    progress(&format!("{size}: amend throughput"));
    let amends = measure_amend_throughput(&store, &workspace, options.writers, options.write_duration).await?;
    let memory = footprint::ResidentMemory::read(pool).await;
    progress(&format!("{size}: {}", memory.summary()));
    Ok(SizeReport {
        revisions: workspace.revisions,
        entries: workspace.entries,
        load_seconds,
        disk,
        memory,
        lexical_selections_per_query: returned as f64 / options.queries.max(1) as f64,
        lexical,
        hybrid,
        vector_index_seconds,
        indexes,
        remembers_by_writers,
        remembers_one_per_transaction,
        amends,
    })
}

/// One vector index at one size: its vectors loaded (pgvector: already, by [`load_vectors`]),
/// hybrid recall measured, then a fresh backlog of remembers (two seconds of `writers`
/// group-committed writers) drained into it by an outbox worker with the hashing embedder.
async fn measure_index(
    pool: &sqlx::PgPool,
    store: &Store,
    workspace: &SyntheticWorkspace,
    index: &BenchIndex,
    options: &BenchOptions,
    pgvector_seconds: Option<f64>,
) -> Result<IndexReport, BenchError> {
    let embedder: Arc<dyn crate::semantic::Embedder> = Arc::new(hashing::HashingEmbedder::default());
    let query_embedder: Arc<dyn crate::semantic::Embedder> = match &options.query_model {
        Some(QueryModel(model)) => Arc::new(hashing::ModelTimedEmbedder::new(model.clone())),
        None => embedder.clone(),
    };
    type Mirror = Option<Arc<dyn crate::semantic::VectorMirror>>;
    let (search, mirror, load_seconds): (Arc<dyn crate::retrieval::SemanticIndex>, Mirror, f64) = match index {
        BenchIndex::PgVector => {
            (Arc::new(crate::semantic::PgVectorIndex::new(query_embedder)), None, pgvector_seconds.unwrap_or(0.0))
        }
        #[cfg(feature = "qdrant")]
        BenchIndex::Qdrant { config, .. } => {
            let timer = Instant::now();
            let qdrant = Arc::new(
                crate::semantic::qdrant::QdrantIndex::new(config.clone(), query_embedder)
                    .map_err(|e| BenchError::Setup(e.to_string()))?,
            );
            upload_vectors(pool, qdrant.as_ref()).await?;
            (qdrant.clone(), Some(qdrant), timer.elapsed().as_secs_f64())
        }
    };
    let setup = crate::service::RetrieverSetup::explicit(crate::retrieval::RetrievalConfig::default(), Some(search));
    let retriever = crate::service::configured_retriever(store, setup)
        .map_err(|e| BenchError::InvalidOptions(e.to_string()))?
        .retriever;
    measure_recall(&retriever, workspace, options.queries.min(20), 7).await?;
    let (hybrid, _) = measure_recall(&retriever, workspace, options.queries, 42).await?;

    measure_remember_throughput(store, workspace, options.writers, Duration::from_secs(2)).await?;
    let mut worker =
        crate::semantic::IndexWorker::new(pool.clone(), embedder, crate::semantic::WorkerConfig::default());
    if let Some(mirror) = mirror {
        worker = worker.with_mirror(mirror);
    }
    let timer = Instant::now();
    let drained = worker.drain().await.map_err(|e| BenchError::Setup(e.to_string()))?;
    let seconds = timer.elapsed().as_secs_f64();
    let drain = DrainRate { rows: drained.claimed, seconds, per_second: drained.claimed as f64 / seconds.max(1e-9) };
    Ok(IndexReport { index: index.label().to_owned(), load_seconds, hybrid, drain })
}

/// Upserts the active generation's vectors of every current revision (the hashing embedder's,
/// as [`load_vectors`] computed them) into a Qdrant collection, 1,000 points per request.
#[cfg(feature = "qdrant")]
async fn upload_vectors(pool: &sqlx::PgPool, qdrant: &crate::semantic::qdrant::QdrantIndex) -> Result<(), BenchError> {
    use crate::semantic::VectorMirror;
    let generation = crate::semantic::generations::generation_in_state(pool, crate::semantic::GenerationState::Active)
        .await
        .map_err(|e| BenchError::Setup(e.to_string()))?
        .ok_or_else(|| BenchError::Setup("no active generation to upload".into()))?;
    let rows: Vec<(crate::ids::AgentId, crate::ids::EntryId, crate::ids::RevisionId, String, Option<String>)> =
        sqlx::query_as(concat!(
            "SELECT e.runtime_agent_id, e.id, r.id, r.body, ",
            crate::subject_name_sql!(),
            " FROM memory_entries e JOIN memory_entry_revisions r ON r.id = e.current_revision_id
              WHERE e.state = 'live'"
        ))
        .fetch_all(pool)
        .await?;
    for chunk in rows.chunks(1_000) {
        let upserts: Vec<(crate::semantic::PointRef, Vec<f32>)> = chunk
            .iter()
            .map(|(agent, entry, revision, body, subject)| {
                let document = crate::semantic::document_text(subject.as_deref(), body);
                ((*agent, *entry, *revision), hashing::hash_vector(&document))
            })
            .collect();
        let batch = crate::semantic::MirrorBatch { prunes: &[], upserts: &upserts };
        qdrant.apply(&generation, batch).await.map_err(|e| BenchError::Setup(e.to_string()))?;
    }
    Ok(())
}

/// Whether a kept store already has an active embedding generation (its vectors were loaded).
async fn has_active_generation(pool: &sqlx::PgPool) -> Result<bool, BenchError> {
    Ok(sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM embedding_generations WHERE state = 'active')")
        .fetch_one(pool)
        .await?)
}

/// Embeds every current revision of a kept store that has no vectors with the hashing embedder
/// into an active generation (COPY, in chunks), as `index run` would leave a store. A fresh store
/// gets its vectors while it loads ([`synthetic::build`]), which writes each projection row once.
async fn load_vectors(pool: &sqlx::PgPool) -> Result<(), BenchError> {
    let mut conn = pool.acquire().await?;
    let generation = synthetic::create_active_generation(&mut conn).await?;
    // The same text the index worker embeds (the subject's name with the body).
    let rows: Vec<(uuid::Uuid, String, Option<String>)> = sqlx::query_as(concat!(
        "SELECT r.id, r.body, ",
        crate::subject_name_sql!(),
        " FROM memory_entries e JOIN memory_entry_revisions r ON r.id = e.current_revision_id
          WHERE e.state = 'live'"
    ))
    .fetch_all(&mut *conn)
    .await?;
    for chunk in rows.chunks(5_000) {
        let text: String = chunk
            .iter()
            .map(|(id, body, subject)| synthetic::embedding_row(generation, id, subject.as_deref(), body))
            .collect();
        let mut copy = conn
            .copy_in_raw(
                "COPY revision_embeddings (generation_id, revision_id, model, dimension, embedding) FROM STDIN",
            )
            .await?;
        copy.send(text.as_bytes()).await?;
        copy.finish().await?;
    }
    drop(conn);
    // The triggers wrote each row's embedding bits into the projection; VACUUM sets the visibility
    // map again (as autovacuum does on a settled store) so that the eligible set stays an
    // index-only scan.
    sqlx::query("VACUUM (ANALYZE) revision_embeddings, searchable_revisions").execute(pool).await?;
    Ok(())
}

/// The run as text: the server's settings, then the sizes as a table with growth ratios against
/// the smallest size, then every write rate with its latency.
pub fn render_table(report: &BenchReport) -> String {
    let reports = &report.sizes;
    let mut out = format!("server: {}\nquery embedding: {}\n\n", report.server.summary(), report.query_embedder);
    out.push_str(&format!(
        "{:>9} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9}\n",
        "revisions",
        "load s",
        "lex p50",
        "lex p95",
        "lex p99",
        "hyb p95",
        "p95 x",
        "remember/s",
        "1 tx each",
        "amend/s"
    ));
    let base = reports.first().map(|r| r.lexical.p95_ms).unwrap_or(1.0).max(1e-9);
    for r in reports {
        out.push_str(&format!(
            "{:>9} {:>8.1} {:>9.2} {:>9.2} {:>9.2} {:>9} {:>9.2} {:>10.0} {:>10.0} {:>9.0}\n",
            r.revisions,
            r.load_seconds,
            r.lexical.p50_ms,
            r.lexical.p95_ms,
            r.lexical.p99_ms,
            r.hybrid.as_ref().map_or("-".to_string(), |h| format!("{:.2}", h.p95_ms)),
            r.lexical.p95_ms / base,
            r.remembers_per_second(),
            r.remembers_one_per_transaction.per_second,
            r.amends.per_second
        ));
    }
    if reports.iter().any(|r| !r.indexes.is_empty()) {
        out.push_str(&format!(
            "\n{:>9} {:>15} {:>8} {:>9} {:>9} {:>9} {:>11} {:>8}\n",
            "revisions", "vector index", "load s", "hyb p50", "hyb p95", "hyb p99", "drain rows", "rows/s"
        ));
        for r in reports {
            for i in &r.indexes {
                out.push_str(&format!(
                    "{:>9} {:>15} {:>8.1} {:>9.2} {:>9.2} {:>9.2} {:>11} {:>8.0}\n",
                    r.revisions,
                    i.index,
                    i.load_seconds,
                    i.hybrid.p50_ms,
                    i.hybrid.p95_ms,
                    i.hybrid.p99_ms,
                    i.drain.rows,
                    i.drain.per_second
                ));
            }
        }
    }
    out.push_str(&format!(
        "\n{:>9} {:>8} {:>10} {:>12} {:>12} {:>12}\n",
        "revisions", "writers", "writes/s", "latency p50", "latency p95", "latency p99"
    ));
    for r in reports {
        let rows = r
            .remembers_by_writers
            .iter()
            .map(|rate| (rate, " remembers"))
            .chain([(&r.remembers_one_per_transaction, " remembers, 1 tx each"), (&r.amends, " amends")]);
        for (rate, note) in rows {
            out.push_str(&format!(
                "{:>9} {:>8} {:>10.0} {:>12.2} {:>12.2} {:>12.2}{note}\n",
                r.revisions,
                rate.writers,
                rate.per_second,
                rate.latency.p50_ms,
                rate.latency.p95_ms,
                rate.latency.p99_ms
            ));
        }
    }
    for r in reports {
        out.push_str(&render_footprint(r));
    }
    out
}

/// One size's disk footprint (the dozen largest relations, with bytes per revision) and resident
/// memory.
fn render_footprint(r: &SizeReport) -> String {
    let per_revision = |bytes: i64| bytes as f64 / r.revisions.max(1) as f64;
    let mut out = format!(
        "\n{} revisions: on disk {} ({:.0} bytes per revision); {}\n",
        r.revisions,
        footprint::human_bytes(r.disk.database_bytes),
        per_revision(r.disk.database_bytes),
        r.memory.summary()
    );
    out.push_str(&format!("{:>60} {:>6} {:>10} {:>12}\n", "largest relations", "kind", "size", "bytes/rev"));
    for relation in r.disk.relations.iter().take(12) {
        out.push_str(&format!(
            "{:>60} {:>6} {:>10} {:>12.0}\n",
            relation.name,
            relation.kind,
            footprint::human_bytes(relation.bytes),
            per_revision(relation.bytes)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(huge_pages: &str, needed: Option<u64>) -> ServerSettings {
        ServerSettings {
            version: "18.6".into(),
            shared_buffers: "4GB".into(),
            huge_pages: huge_pages.into(),
            huge_pages_needed: needed,
            fsync: "off".into(),
            synchronous_commit: "off".into(),
        }
    }

    #[test]
    fn huge_pages_advice_names_the_pages_to_reserve_only_when_they_are_off_and_possible() {
        let advice = settings("off", Some(2130)).huge_pages_advice().expect("advice when off");
        assert!(advice.contains("vm.nr_hugepages=2130"), "{advice}");
        assert_eq!(settings("on", Some(2130)).huge_pages_advice(), None, "already on");
        assert_eq!(settings("off", None).huge_pages_advice(), None, "the platform has none");
        assert_eq!(settings("off", Some(0)).huge_pages_advice(), None);
        assert_eq!(settings("unknown", Some(2130)).huge_pages_advice(), None, "an old server says nothing");
    }
}
