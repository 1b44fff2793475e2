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
use super::mirror::{drop_retired_generations, lock_entries, mirror_batch, VectorMirror};
use super::SemanticError;
use crate::ids::{EntryId, RevisionId};
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

    /// Also keeps an external index (Qdrant) in line: each batch makes the collections of its
    /// target generations hold exactly the current revisions of the live entries it touches
    /// ([`super::mirror`]).
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
        if let Some(mirror) = &self.mirror {
            drop_retired_generations(&self.pool, mirror.as_ref()).await?;
        }
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

    /// Embeds the claimed revisions missing from each target generation (once, whatever the
    /// number of generations: they all serve this embedder's model), brings the external index in
    /// line with the canonical state of every entry the batch touches ([`super::mirror`]), then
    /// writes the embedding rows: the mirror first, so a failed mirror write leaves no row behind
    /// that would mark its revision as indexed.
    async fn process(
        &self,
        conn: &mut PgConnection,
        claimed: &[ClaimedRow],
        targets: &[Generation],
        with_pgvector: bool,
    ) -> Result<(u64, usize), ProcessError> {
        let index_rows: Vec<&ClaimedRow> = claimed.iter().filter(|r| r.work == "index_revision").collect();
        let by_id: HashMap<RevisionId, &ClaimedRow> = index_rows.iter().map(|r| (r.revision_id, *r)).collect();
        let wanted: Vec<RevisionId> = by_id.keys().copied().collect();
        let mut missing = Vec::with_capacity(targets.len());
        for generation in targets {
            missing.push(missing_in(conn, generation.id, &wanted).await?);
        }
        let mut to_embed: Vec<RevisionId> = missing.iter().flatten().copied().collect();
        to_embed.sort_unstable();
        to_embed.dedup();
        let mut vectors =
            self.embed(&to_embed, |id| (by_id[id].subject_name.as_deref(), by_id[id].body.as_str())).await?;
        if let Some(mirror) = &self.mirror {
            let touched: Vec<EntryId> = claimed.iter().map(|r| r.entry_id).collect();
            let states = lock_entries(conn, &touched).await?;
            // A replayed row of a current revision already embedded in PostgreSQL: embed it again
            // for the mirror, which may have missed it.
            let current: Vec<RevisionId> = states
                .iter()
                .filter(|s| s.live && by_id.contains_key(&s.current_revision_id))
                .map(|s| s.current_revision_id)
                .filter(|id| !vectors.contains_key(id))
                .collect();
            let again = self.embed(&current, |id| (by_id[id].subject_name.as_deref(), by_id[id].body.as_str())).await?;
            vectors.extend(again);
            let batch = mirror_batch(&states, &vectors);
            for generation in targets {
                mirror.apply(generation, batch.as_ref()).await.map_err(|e| ProcessError::Transient(e.category()))?;
            }
        }
        let mut embedded = 0;
        for (generation, missing) in targets.iter().zip(&missing) {
            let rows: Vec<Vec<f32>> = missing.iter().map(|id| vectors[id].clone()).collect();
            embedded += store_embeddings(conn, generation, missing, &rows, with_pgvector).await?;
        }
        let retired = claimed.iter().filter(|r| r.work == "retire_entry").count();
        Ok((embedded, retired))
    }

    /// Embeds the documents of `revisions` (text from `document`), keyed by revision.
    async fn embed<'r>(
        &self,
        revisions: &[RevisionId],
        document: impl Fn(&RevisionId) -> (Option<&'r str>, &'r str),
    ) -> Result<HashMap<RevisionId, Vec<f32>>, ProcessError> {
        if revisions.is_empty() {
            return Ok(HashMap::new());
        }
        let texts: Vec<String> = revisions
            .iter()
            .map(|id| {
                let (subject, body) = document(id);
                document_text(subject, body)
            })
            .collect();
        let vectors = self.embedder.embed(&texts).await.map_err(|e| ProcessError::Transient(e.category()))?;
        Ok(revisions.iter().copied().zip(vectors).collect())
    }

    async fn reschedule(
        &self,
        conn: &mut PgConnection,
        claimed: &[ClaimedRow],
        category: &str,
    ) -> Result<(usize, usize), SemanticError> {
        let (mut retried, mut gave_up) = (0, 0);
        // A server that cannot be reached is an outage, not a bad row: those rows keep being
        // retried at the longest backoff until it is back, so an outage longer than the retry
        // budget loses nothing. Rows a provider refuses or fails are parked after `max_attempts`.
        let outage = OUTAGE_CATEGORIES.contains(&category);
        for row in claimed {
            let attempts = row.attempts + 1;
            let park = attempts >= self.config.max_attempts && !outage;
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

/// Failure categories that mean "not reachable now" ([`super::MirrorError::Unreachable`], an
/// embedding provider that cannot be reached): never parked, retried until it is back.
pub const OUTAGE_CATEGORIES: [&str; 2] = ["index_unreachable", "provider_unreachable"];

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
        "SELECT o.id, o.work::text AS work, o.revision_id, r.entry_id, o.attempts, r.body, ",
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
