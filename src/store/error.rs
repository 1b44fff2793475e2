//! The store's typed errors. Each says what was wrong and what to do; none carries a body text.

use uuid::Uuid;

use crate::ids::MalformedId;

/// Why a store call did not commit. A returned error means nothing of the call was written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The caller's input breaks a documented rule (empty body, too long, no sources...).
    #[error("invalid {field}: {reason}")]
    InvalidInput {
        /// The offending field.
        field: &'static str,
        /// What rule it breaks, in words.
        reason: String,
    },
    /// An id did not parse.
    #[error(transparent)]
    MalformedId(#[from] MalformedId),
    /// A referenced row does not exist for this runtime agent.
    #[error("{kind} {id} does not exist for this runtime agent")]
    UnknownReference {
        /// What kind of row was referenced.
        kind: &'static str,
        /// The id that was not found.
        id: Uuid,
    },
    /// A lineage source names a message or revision of another runtime agent, or none at all.
    /// The whole write is rejected: provenance is never silently dropped.
    #[error("lineage source {kind} {id} is missing or belongs to another runtime agent; the whole write was rejected")]
    ForeignOrMissingSource {
        /// "message" or "revision".
        kind: &'static str,
        /// The offending id.
        id: Uuid,
    },
    /// The entry moved on since the caller read it.
    #[error(
        "entry {entry} is at revision {actual}, not the expected revision {expected}; read it again before amending"
    )]
    RevisionConflict {
        /// The entry being amended.
        entry: Uuid,
        /// The revision the caller based its change on.
        expected: Uuid,
        /// The revision that is current now.
        actual: Uuid,
    },
    /// A uniqueness rule of the schema (e.g. a duplicate connector identity or agent name).
    #[error("{what} already exists")]
    AlreadyExists {
        /// What would have been duplicated.
        what: String,
    },
    /// The task writing a group-committed create stopped before reporting (the runtime is
    /// shutting down). The create may or may not have committed: read it back before retrying.
    #[error("the memory writer stopped before reporting whether the write committed; check before retrying")]
    WriteAbandoned,
    /// PostgreSQL failed or refused; the transaction was rolled back.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

impl StoreError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidInput { field, reason: reason.into() }
    }

    /// Maps a unique-violation into [`StoreError::AlreadyExists`], anything else into `Database`.
    pub(crate) fn from_unique(err: sqlx::Error, what: impl FnOnce() -> String) -> Self {
        match &err {
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::AlreadyExists { what: what() },
            _ => Self::Database(err),
        }
    }
}
