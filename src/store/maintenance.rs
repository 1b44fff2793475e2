//! Upkeep that writes make necessary, done off the writers' path: folding the pending BM25
//! statistics ([`super::lexical_statistics`]) and merging the full-text indexes' pending lists
//! (migration `20261210100000`).
//!
//! Both are work a write defers so that it commits sooner: a pending statistics row instead of
//! the totals' upserts, a GIN pending-list entry instead of a posting-tree insert. Left alone,
//! the deferred work lands in some later writer's transaction (the statistics fold in every 64th
//! writer, the pending-list merge in the insert that finds the list full: 50-100 ms for a 256 kB
//! list at a million revisions, about 250 ms (190 measured for 2.7 MB) for the 4 MB the lists
//! may hold since migration `20261216100000`), and every create of that writer's group-commit
//! batch waits with it. The store counts its committed writes and, every [`FOLD_EVERY`] of them,
//! runs the fold (and every [`MERGE_EVERY`] the merge) in transactions of its own on a spawned
//! task, at most one task at a time. Nothing is lost if a round fails or is skipped: the pending
//! rows stay counted by every search, and a writer that finds a pending list full still merges it
//! itself.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use sqlx::PgPool;

use super::lexical_statistics::fold_lexical_statistics;
use super::StoreError;

/// Committed writes of one process between two statistics folds.
pub const FOLD_EVERY: u64 = 64;

/// Committed writes of one process between two merges of the projection's full-text pending
/// lists. A merge descends once into the posting tree of each distinct key of the list (lexemes
/// and audience members), so its cost grows much more slowly than the list: 50-65 ms for 256
/// writes of the benchmark's rows, 190 ms for 3,700. Merging every 2,048 writes instead of every
/// 256 took the merges' CPU per durable write from 0.28 to 0.16 ms (migration `20261216100000`).
/// The lists' limit (4 MB) leaves room for about 5,000 writes of those rows, so a burst between
/// two merges does not make a writer merge; a search reads the list whole, about 0.75 MB on
/// average.
pub const MERGE_EVERY: u64 = 2048;

/// Committed writes of one process between two merges of the canonical revisions' full-text
/// pending list (PostgreSQL's default 4 MB, lexemes only: about 15,000 writes of the benchmark's
/// rows). Only the console's memory browser searches that index.
pub const MERGE_REVISION_TEXT_EVERY: u64 = 4096;

/// Counts one process's committed writes and starts the deferred upkeep on a spawned task.
#[derive(Debug, Default)]
pub(crate) struct WriteMaintenance {
    writes: AtomicU64,
    running: AtomicBool,
    merge_due: AtomicBool,
    revision_text_due: AtomicBool,
}

impl WriteMaintenance {
    /// Notes `count` committed writes; when they complete a round of [`FOLD_EVERY`] and no round
    /// of this process is running, starts one on a spawned task. A merge falls due when the writes
    /// complete a round of [`MERGE_EVERY`] (of [`MERGE_REVISION_TEXT_EVERY`] for the canonical
    /// revisions' list) and is done by the next round that starts, so a round skipped because the
    /// previous one was still running does not skip the merge. Never waits.
    pub(crate) fn after_commit(self: &Arc<Self>, pool: &PgPool, count: u64) {
        let before = self.writes.fetch_add(count, Ordering::Relaxed);
        let crossed = |every: u64| before / every != (before + count) / every;
        if crossed(MERGE_EVERY) {
            self.merge_due.store(true, Ordering::Release);
        }
        if crossed(MERGE_REVISION_TEXT_EVERY) {
            self.revision_text_due.store(true, Ordering::Release);
        }
        if !crossed(FOLD_EVERY) || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let maintenance = Arc::clone(self);
        let pool = pool.clone();
        tokio::spawn(async move {
            maintenance.run(&pool).await;
            maintenance.running.store(false, Ordering::Release);
        });
    }

    /// One round: the statistics fold, then the merge if one is due.
    async fn run(&self, pool: &PgPool) {
        if let Err(error) = fold_lexical_statistics(pool).await {
            // Nothing is lost: the pending rows stay counted by every search and fold later.
            tracing::warn!(%error, "folding the pending lexical statistics failed; they fold later");
        }
        if self.merge_due.swap(false, Ordering::AcqRel) {
            let revision_text = self.revision_text_due.swap(false, Ordering::AcqRel);
            if let Err(error) = merge_text_pending_lists(pool, revision_text).await {
                // Nothing is lost: the entries stay in the pending lists, which searches read and
                // the next merge (or a writer that finds a list full) moves.
                tracing::warn!(%error, "merging the full-text pending lists failed; they merge later");
            }
        }
    }
}

/// Merges the pending lists of the projection's full-text indexes (and of the canonical revisions'
/// when `revision_text`) into the indexes now (`memory_merge_text_pending_lists`, migration
/// `20261210100000`), in a statement of its own, and returns the pending pages merged. Searches
/// give the same results before and after: only where the index keeps its entries changes.
/// Exposed for operators and benchmarks that want the lists empty. Only the tables' owner can
/// merge (PostgreSQL wants the index's owner, which no least-privilege role may be): for any other
/// role it merges nothing and returns 0, and the lists are merged by the insert that finds one full
/// or by autovacuum (migration `20261219100000`).
pub async fn merge_text_pending_lists(pool: &PgPool, revision_text: bool) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT memory_merge_text_pending_lists($1)").bind(revision_text).fetch_one(pool).await?)
}
