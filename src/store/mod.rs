//! The canonical store: identities, conversations, transcript evidence and append-only memory.
//!
//! Every write commits whole or not at all and returns what committed ([`CommittedWrite`]);
//! callers such as the turn engine build their ledger from those values alone, never from what
//! was asked. Concurrent creates may share one transaction (group commit); each still gets its
//! own result.
//! SQL for a table lives in the submodule that owns it.

mod access_tokens;
mod conversation;
mod error;
mod group_commit;
mod history;
mod identity;
pub mod lexical_statistics;
mod lineage;
pub mod maintenance;
mod memory;
mod memory_browser;
mod operators;

use std::sync::Arc;

use sqlx::PgPool;

pub use access_tokens::{AccessTokenView, IssuedToken, SpeakerBinding, TokenBinding, TokenRequest};
pub(crate) use conversation::{destination_audience_on, record_message_on};
pub use conversation::{
    ClosedAudience, ConversationChoice, ConversationSummary, DestinationAudience, Direction, LineageMessage,
    Membership, NewConversation, NewMessage, Topology,
};
pub use error::StoreError;
pub use group_commit::GroupCommit;
pub use history::{EntryHistory, EvidenceView, RevisionView, SourceView};
pub use identity::{ActorChoice, ActorKind, ActorSummary, AgentSummary};
pub use lexical_statistics::fold_lexical_statistics;
pub use lineage::{LineageRevision, SourceKind, SourceRef};
pub use maintenance::merge_text_pending_lists;
pub use memory::{
    Amendment, CommittedWrite, CurrentRevision, EntryState, NewMemory, NothingChanged, NothingChangedReason,
    Restriction, RestrictionKind, RevisionOperation, SubjectUpdate, WriteOperation, WriteOutcome, MAX_BODY_CHARS,
    MAX_REFERENCE_MATCHES,
};
pub use memory_browser::{BrowseFilter, EntryPage, EntrySummary};
pub use operators::{
    connect_as, create_console_role, login_is_superuser, operator_login_roles, operator_rights, scram_verifier,
    validate_role_name, ConsoleRoleKind, OperatorRights, MIN_OPERATOR_PASSWORD_CHARS,
};

/// The most rows one page of a console list may hold; larger requests are clamped, so a caller
/// cannot ask the database for an unbounded scan.
pub const MAX_PAGE_SIZE: u32 = 200;

/// How many characters of a body or message a list row carries; detail views show the whole.
pub(crate) const PREVIEW_CHARS: i32 = 280;

/// A requested page size as a `LIMIT`, clamped to 1..=[`MAX_PAGE_SIZE`].
pub(crate) fn page_size(limit: u32) -> i64 {
    i64::from(limit.clamp(1, MAX_PAGE_SIZE))
}

/// Handle on the canonical PostgreSQL store. Cheap to clone (a pool and the queue of creates
/// waiting for their group commit, both shared by the clones).
#[derive(Clone, Debug)]
pub struct Store {
    pool: PgPool,
    creates: Arc<group_commit::CreateQueue>,
    maintenance: Arc<maintenance::WriteMaintenance>,
}

impl Store {
    /// Wraps an open pool whose database has been migrated; remembers are group-committed with
    /// the default limits.
    pub fn new(pool: PgPool) -> Self {
        Self::with_group_commit(pool, GroupCommit::default())
    }

    /// Like [`Store::new`], with the given group-commit limits (`max_batch = 1`: one transaction
    /// per create, as the benchmark's baseline).
    pub fn with_group_commit(pool: PgPool, limits: GroupCommit) -> Self {
        Self {
            pool,
            creates: Arc::new(group_commit::CreateQueue::new(limits)),
            maintenance: Arc::new(maintenance::WriteMaintenance::default()),
        }
    }

    /// Notes committed writes that may have changed the searchable projection, so that the
    /// pending BM25 statistics and the full-text pending lists are folded and merged off the
    /// writers' path ([`maintenance`]).
    pub(crate) fn wrote(&self, count: u64) {
        self.maintenance.after_commit(&self.pool, count);
    }

    /// The underlying pool, for the modules (retrieval, privacy) that query the same rows.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}
