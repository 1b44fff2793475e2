//! Group commit for new memories.
//!
//! Each remember used to be its own transaction, and on a small machine the per-transaction and
//! per-statement work (begin, commit, statement-level trigger runs, round trips) was as large as
//! the per-row work. Creates that arrive while another batch is being written now wait and are
//! written together, in one transaction of set-based statements ([`write_creates`]). Under no load
//! a create is written at once, alone; under load, batches grow by themselves.
//!
//! What callers keep:
//! - each gets its own [`CommittedWrite`] (built, as before, from what it asked to write once the
//!   transaction that wrote it committed) or its own error;
//! - a batch that fails is written again one create at a time, so one caller's missing reference
//!   or foreign source never fails another caller's remember, and the typed errors are the same
//!   as without batching;
//! - the writes run on a spawned task: a caller that stops waiting does not abandon the other
//!   creates of its batch half-way.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use sqlx::PgPool;
use tokio::sync::oneshot;

use super::memory::{write_creates, CommittedWrite, PreparedCreate};
use super::StoreError;

/// How creates are grouped. `max_batch = 1` writes every create in its own transaction (the
/// benchmark's baseline).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupCommit {
    /// The most creates one transaction writes.
    pub max_batch: usize,
    /// The most batches written at the same time (each holds one pooled connection).
    pub max_in_flight: usize,
}

impl Default for GroupCommit {
    /// Two batches in flight keep a two-core server busy (one is committing while the next is
    /// being written); 64 creates bound one transaction's size and latency.
    fn default() -> Self {
        GroupCommit { max_batch: 64, max_in_flight: 2 }
    }
}

/// One caller's create and where its result goes.
#[derive(Debug)]
struct Waiting {
    create: PreparedCreate,
    reply: oneshot::Sender<Result<CommittedWrite, StoreError>>,
}

#[derive(Debug, Default)]
struct QueueState {
    waiting: VecDeque<Waiting>,
    in_flight: usize,
}

/// The creates waiting to be written, shared by every clone of one [`super::Store`].
#[derive(Debug)]
pub(crate) struct CreateQueue {
    limits: GroupCommit,
    state: Mutex<QueueState>,
}

impl CreateQueue {
    /// An empty queue with these limits (both at least 1).
    pub(crate) fn new(limits: GroupCommit) -> Self {
        let limits = GroupCommit { max_batch: limits.max_batch.max(1), max_in_flight: limits.max_in_flight.max(1) };
        CreateQueue { limits, state: Mutex::new(QueueState::default()) }
    }

    fn state(&self) -> MutexGuard<'_, QueueState> {
        // The state is a queue and a counter, consistent after every statement; a panic elsewhere
        // while holding the lock cannot leave it half-updated.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `create`, starts a writer when fewer than `max_in_flight` run, and waits for the
    /// create's own result.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        pool: &PgPool,
        create: PreparedCreate,
    ) -> Result<CommittedWrite, StoreError> {
        let (reply, answer) = oneshot::channel();
        let start_writer = {
            let mut state = self.state();
            state.waiting.push_back(Waiting { create, reply });
            let start = state.in_flight < self.limits.max_in_flight;
            if start {
                state.in_flight += 1;
            }
            start
        };
        if start_writer {
            tokio::spawn(Arc::clone(self).write_until_empty(pool.clone()));
        }
        answer.await.map_err(|_| StoreError::WriteAbandoned)?
    }

    /// Writes batches until the queue is empty, then gives its slot back (under the same lock
    /// that submitters check, so a create queued just after is never left without a writer).
    async fn write_until_empty(self: Arc<Self>, pool: PgPool) {
        let mut slot = WriterSlot { queue: &self, held: true };
        loop {
            // Let the callers woken by the previous batch (or by the batch that finished just
            // before this writer started) queue their next creates first: without this a writer
            // took the one create that started it and its siblings waited for the next batch.
            // Eight closed-loop writers: 2.5 -> 3.5 creates per batch, remembers +20-37%
            // (docs/benchmarks-history.md, "one round trip per batch"). Costs nothing when idle.
            tokio::task::yield_now().await;
            let batch: Vec<Waiting> = {
                let mut state = self.state();
                if state.waiting.is_empty() {
                    state.in_flight -= 1;
                    slot.held = false;
                    return;
                }
                let take = state.waiting.len().min(self.limits.max_batch);
                state.waiting.drain(..take).collect()
            };
            write_batch(&pool, batch).await;
        }
    }
}

/// Gives a writer's slot back if it stops without emptying the queue (a panic), so that the
/// next submitter starts a new one.
struct WriterSlot<'a> {
    queue: &'a CreateQueue,
    held: bool,
}

impl Drop for WriterSlot<'_> {
    fn drop(&mut self) {
        if self.held {
            self.queue.state().in_flight -= 1;
        }
    }
}

/// Writes a batch in one transaction; if that fails, writes each create alone so that each
/// caller gets the result of its own create.
async fn write_batch(pool: &PgPool, batch: Vec<Waiting>) {
    if batch.len() > 1 {
        let creates: Vec<&PreparedCreate> = batch.iter().map(|w| &w.create).collect();
        if write_creates(pool, &creates).await.is_ok() {
            for waiting in batch {
                let committed = waiting.create.committed();
                let _ = waiting.reply.send(Ok(committed));
            }
            return;
        }
        // Which create failed, and why, is what the one-at-a-time writes below report to their
        // own callers; the batch's error (which may quote another caller's ids) is not logged.
        tracing::debug!(creates = batch.len(), "group commit failed; writing each create alone");
    }
    for waiting in batch {
        let result = write_creates(pool, &[&waiting.create]).await.map(|()| waiting.create.committed());
        // A caller that stopped waiting has dropped its receiver; its create is written anyway.
        let _ = waiting.reply.send(result);
    }
}
