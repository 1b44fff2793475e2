//! The indexing worker: drains `index_outbox` into the embedding generations.
//!
//! Every memory write enqueues its outbox row in the write's own transaction (src/store), so no
//! committed revision can miss its index work. The worker claims due rows with
//! `FOR UPDATE SKIP LOCKED` inside one transaction per batch, embeds, writes the embeddings and
//! marks the rows done in that same transaction. A crash anywhere rolls the whole batch back and
//! releases the row locks, so the work is neither lost nor done twice (embedding writes are
//! idempotent anyway); concurrent workers never claim the same row. A failing batch is retried
//! with exponential backoff and parked after `max_attempts`, recording only an error category.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sqlx::{PgConnection, PgPool};

use super::document::document_text;
use super::embedder::Embedder;
use super::embeddings::{missing_in, store_embeddings};
use super::generations::{pgvector_available, worker_targets, Generation};
use super::vector_index::VectorMirror;
use super::SemanticError;
use crate::ids::{AgentId, EntryId, RevisionId};
use crate::subject_name_sql;

/// Tuning of the worker.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Outbox rows claimed per transaction. Default 32.
    pub batch_size: i64,
    /// Attempts before a row is parked (`gave_up_at`). Default 8.
    pub max_attempts: i32,
    /// Delay before the first retry; doubles per attempt. Default 2 s.
    pub initial_backoff: Duration,
    /// Longest delay between retries. Default 10 min.
    pub max_backoff: Duration,
    /// Sleep of the background loop when nothing is due. Default 1 s.
    pub idle_poll: Duration,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            batch_size: 32,
            max_attempts: 8,
            initial_backoff: Duration::from_secs(2),
            max_backoff: Duration::from_secs(600),
            idle_poll: Duration::from_secs(1),
        }
    }
}

/// What one batch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchReport {
    /// Outbox rows claimed.
    pub claimed: usize,
    /// Embedding rows written (over all target generations).
    pub embedded: u64,
    /// `retire_entry` rows handled.
    pub retired: usize,
    /// Rows rescheduled after a failure.
    pub retried: usize,
    /// Rows parked after `max_attempts`.
    pub gave_up: usize,
}

impl std::ops::AddAssign for BatchReport {
    fn add_assign(&mut self, other: Self) {
        self.claimed += other.claimed;
        self.embedded += other.embedded;
        self.retired += other.retired;
        self.retried += other.retried;
        self.gave_up += other.gave_up;
    }
}

#[derive(sqlx::FromRow)]
struct ClaimedRow {
    id: i64,
    work: String,
    revision_id: RevisionId,
    entry_id: EntryId,
    runtime_agent_id: AgentId,
    attempts: i32,
    body: String,
    subject_name: Option<String>,
}

/// Drains the outbox with one embedder into every generation of its model.
#[derive(Clone)]
pub struct IndexWorker {
    pool: PgPool,
    embedder: Arc<dyn Embedder>,
    mirror: Option<Arc<dyn VectorMirror>>,
    config: WorkerConfig,
}

impl std::fmt::Debug for IndexWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexWorker").field("embedder", self.embedder.info()).field("config", &self.config).finish()
    }
}

impl IndexWorker {
    /// A worker writing into PostgreSQL (`revision_embeddings`, with pgvector where installed).
    pub fn new(pool: PgPool, embedder: Arc<dyn Embedder>, config: WorkerConfig) -> Self {
        Self { pool, embedder, mirror: None, config }
    }

    /// Also writes vectors into an external index (Qdrant) and retires entries there.
    pub fn with_mirror(mut self, mirror: Arc<dyn VectorMirror>) -> Self {
        self.mirror = Some(mirror);
        self
    }

    /// Claims and processes one batch of due rows in one transaction.
    pub async fn run_once(&self) -> Result<BatchReport, SemanticError> {
        let targets = worker_targets(&self.pool, self.embedder.info()).await?;
        let with_pgvector = pgvector_available(&self.pool).await?;
        let mut tx = self.pool.begin().await?;
        let claimed = claim_due(&mut tx, self.config.batch_size).await?;
        if claimed.is_empty() {
            return Ok(BatchReport::default());
        }
        let mut report = BatchReport { claimed: claimed.len(), ..BatchReport::default() };
        match self.process(&mut tx, &claimed, &targets, with_pgvector).await {
            Ok((embedded, retired)) => {
                report.embedded = embedded;
                report.retired = retired;
                mark_done(&mut tx, &claimed).await?;
            }
            Err(ProcessError::Transient(category)) => {
                let (retried, gave_up) = self.reschedule(&mut tx, &claimed, category).await?;
                report.retried = retried;
                report.gave_up = gave_up;
                tracing::warn!(category, rows = claimed.len(), "index batch failed; rescheduled");
            }
            Err(ProcessError::Semantic(err)) => return Err(err),
        }
        tx.commit().await?;
        Ok(report)
    }

    /// Processes batches until nothing is due (rows waiting for their backoff stay queued).
    pub async fn drain(&self) -> Result<BatchReport, SemanticError> {
        let mut total = BatchReport::default();
        loop {
            let batch = self.run_once().await?;
            if batch.claimed == 0 {
                return Ok(total);
            }
            total += batch;
        }
    }

    /// The background loop: drains, sleeps `idle_poll`, repeats until `shutdown` resolves.
    /// Database and configuration errors are logged (category only) and retried after a pause.
    pub async fn run_until(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let pause = match self.drain().await {
                Ok(_) => self.config.idle_poll,
                Err(err) => {
                    tracing::warn!(error = %err, "index worker pass failed; retrying");
                    self.config.initial_backoff
                }
            };
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Spawns [`run_until`](Self::run_until) as a tokio task.
    pub fn spawn(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move { self.run_until(shutdown).await })
    }

    async fn process(
        &self,
        conn: &mut PgConnection,
        claimed: &[ClaimedRow],
        targets: &[Generation],
        with_pgvector: bool,
    ) -> Result<(u64, usize), ProcessError> {
        let index_rows: Vec<&ClaimedRow> = claimed.iter().filter(|r| r.work == "index_revision").collect();
        let mut embedded = 0;
        for generation in targets {
            embedded += self.index_into(conn, generation, &index_rows, with_pgvector).await?;
        }
        let retire_rows: Vec<&ClaimedRow> = claimed.iter().filter(|r| r.work == "retire_entry").collect();
        if let Some(mirror) = &self.mirror {
            for row in &retire_rows {
                mirror
                    .retire_entry(row.runtime_agent_id, row.entry_id)
                    .await
                    .map_err(|e| ProcessError::Transient(e.category()))?;
            }
        }
        Ok((embedded, retire_rows.len()))
    }

    async fn index_into(
        &self,
        conn: &mut PgConnection,
        generation: &Generation,
        rows: &[&ClaimedRow],
        with_pgvector: bool,
    ) -> Result<u64, ProcessError> {
        let wanted: Vec<RevisionId> = rows.iter().map(|r| r.revision_id).collect();
        let missing = missing_in(conn, generation.id, &wanted).await?;
        if missing.is_empty() {
            return Ok(0);
        }
        let by_id: HashMap<RevisionId, &ClaimedRow> = rows.iter().map(|r| (r.revision_id, *r)).collect();
        let texts: Vec<String> =
            missing.iter().map(|id| document_text(by_id[id].subject_name.as_deref(), &by_id[id].body)).collect();
        let vectors = self.embedder.embed(&texts).await.map_err(|e| ProcessError::Transient(e.category()))?;
        if let Some(mirror) = &self.mirror {
            let points: Vec<_> =
                missing.iter().map(|id| (by_id[id].runtime_agent_id, by_id[id].entry_id, *id)).collect();
            mirror.upsert(generation, &points, &vectors).await.map_err(|e| ProcessError::Transient(e.category()))?;
        }
        Ok(store_embeddings(conn, generation, &missing, &vectors, with_pgvector).await?)
    }

    async fn reschedule(
        &self,
        conn: &mut PgConnection,
        claimed: &[ClaimedRow],
        category: &str,
    ) -> Result<(usize, usize), SemanticError> {
        let (mut retried, mut gave_up) = (0, 0);
        for row in claimed {
            let attempts = row.attempts + 1;
            let park = attempts >= self.config.max_attempts;
            let delay = backoff(&self.config, attempts);
            sqlx::query(
                "UPDATE index_outbox
                    SET attempts = $2, last_error_category = $3,
                        next_attempt_at = now() + make_interval(secs => $4),
                        gave_up_at = CASE WHEN $5 THEN now() END
                  WHERE id = $1",
            )
            .bind(row.id)
            .bind(attempts)
            .bind(category)
            .bind(delay.as_secs_f64())
            .bind(park)
            .execute(&mut *conn)
            .await?;
            if park {
                gave_up += 1;
            } else {
                retried += 1;
            }
        }
        Ok((retried, gave_up))
    }
}

/// Exponential backoff: `initial * 2^(attempts-1)`, capped at `max_backoff`.
fn backoff(config: &WorkerConfig, attempts: i32) -> Duration {
    let exponent = u32::try_from(attempts.saturating_sub(1)).unwrap_or(0).min(20);
    config.initial_backoff.saturating_mul(2u32.saturating_pow(exponent)).min(config.max_backoff)
}

/// A batch failure: a retryable provider category, or a database/configuration error.
enum ProcessError {
    Transient(&'static str),
    Semantic(SemanticError),
}

impl From<SemanticError> for ProcessError {
    fn from(err: SemanticError) -> Self {
        Self::Semantic(err)
    }
}

async fn claim_due(conn: &mut PgConnection, limit: i64) -> Result<Vec<ClaimedRow>, SemanticError> {
    Ok(sqlx::query_as(concat!(
        "SELECT o.id, o.work::text AS work, o.revision_id, r.entry_id, o.runtime_agent_id, o.attempts, r.body, ",
        subject_name_sql!(),
        " AS subject_name
           FROM index_outbox o
           JOIN memory_entry_revisions r ON r.id = o.revision_id
          WHERE o.completed_at IS NULL AND o.gave_up_at IS NULL AND o.next_attempt_at <= now()
          ORDER BY o.next_attempt_at, o.id
          LIMIT $1
            FOR UPDATE OF o SKIP LOCKED"
    ))
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?)
}

async fn mark_done(conn: &mut PgConnection, claimed: &[ClaimedRow]) -> Result<(), SemanticError> {
    let ids: Vec<i64> = claimed.iter().map(|r| r.id).collect();
    sqlx::query("UPDATE index_outbox SET completed_at = now(), last_error_category = NULL WHERE id = ANY($1)")
        .bind(ids)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Outbox counts for status displays: due, waiting for a retry, parked, done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OutboxStatus {
    /// Rows due now.
    pub due: i64,
    /// Rows waiting for their backoff.
    pub waiting: i64,
    /// Rows parked after `max_attempts`.
    pub parked: i64,
    /// Rows done.
    pub done: i64,
}

/// Counts the outbox rows by state.
pub async fn outbox_status(pool: &PgPool) -> Result<OutboxStatus, SemanticError> {
    let (due, waiting, parked, done): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE completed_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= now()),
                count(*) FILTER (WHERE completed_at IS NULL AND gave_up_at IS NULL AND next_attempt_at > now()),
                count(*) FILTER (WHERE completed_at IS NULL AND gave_up_at IS NOT NULL),
                count(*) FILTER (WHERE completed_at IS NOT NULL)
           FROM index_outbox",
    )
    .fetch_one(pool)
    .await?;
    Ok(OutboxStatus { due, waiting, parked, done })
}
