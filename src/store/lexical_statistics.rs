//! Folding the BM25 statistics off the writers' path (tables `lexical_statistics_pending`,
//! `lexical_term_statistics`, `lexical_corpus_statistics`; migrations `20261204100000`,
//! `20261205180000` and `20261205190000`).
//!
//! Every write that changes the searchable projection appends its net change to the pending
//! layer in its own transaction, and the ranking reads folded totals plus pending rows, so the
//! statistics are exact at every moment whenever the fold runs. The fold only keeps the pending
//! layer short (searches scan it for their query's lexemes). It used to run inside every 64th
//! writer's transaction, where its ~1,500 upserts held that group-commit batch, and every writer
//! queued behind it, for several milliseconds; now the store runs it in a transaction of its own
//! on a spawned task, after every [`super::maintenance::FOLD_EVERY`] committed writes of this
//! process, at most one at a time ([`super::maintenance`]). A bulk change (64 rows or more in one
//! call: a COPY load, a migration's refresh) still folds in its own transaction, and the fold's
//! advisory lock keeps two processes from folding at once (the second skips; the rows wait for
//! the next fold).

use sqlx::PgPool;

use super::StoreError;

/// Folds every pending statistics change into the totals now, in a transaction of its own
/// (nothing, if another transaction is folding). The figures the ranking reads do not change:
/// only where they are kept. Exposed for operators and tests that want the pending layer empty.
pub async fn fold_lexical_statistics(pool: &PgPool) -> Result<(), StoreError> {
    sqlx::query("SELECT memory_lexical_statistics_fold()").execute(pool).await?;
    Ok(())
}
