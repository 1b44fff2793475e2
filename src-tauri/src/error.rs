//! The one error type every console command returns: a category the UI can branch on and a
//! message written for the operator (never a password, query text or provider body).

use serde::Serialize;
use specta::Type;

/// What went wrong, coarsely, so the UI can choose how to react (e.g. back to sign-in).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Type)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The database could not be opened or reached.
    Database,
    /// Nobody is signed in (or the session ended).
    NotSignedIn,
    /// The signed-in role may not do this.
    Forbidden,
    /// The input was rejected; nothing was written.
    Invalid,
    /// The thing asked for does not exist.
    NotFound,
    /// The request conflicts with the current state (already decided, no longer current...).
    Conflict,
}

/// A failed command. Nothing was written when a command fails.
#[derive(Clone, Debug, Serialize, Type, thiserror::Error)]
#[error("{message}")]
pub struct ConsoleError {
    /// Category.
    pub kind: ErrorKind,
    /// What happened and what to do, for the operator.
    pub message: String,
}

impl ConsoleError {
    /// A new error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

impl From<mesh_memory::store::StoreError> for ConsoleError {
    fn from(err: mesh_memory::store::StoreError) -> Self {
        use mesh_memory::store::StoreError as E;
        #[allow(unreachable_patterns)] // StoreError may grow; unknown variants read as database errors
        let kind = match &err {
            E::InvalidInput { .. } | E::MalformedId(_) => ErrorKind::Invalid,
            E::UnknownReference { .. } | E::ForeignOrMissingSource { .. } => ErrorKind::NotFound,
            E::RevisionConflict { .. } | E::AlreadyExists { .. } => ErrorKind::Conflict,
            E::Database(db) => return database_error(db),
            _ => ErrorKind::Database,
        };
        Self::new(kind, err.to_string())
    }
}

impl From<mesh_memory::ids::MalformedId> for ConsoleError {
    fn from(err: mesh_memory::ids::MalformedId) -> Self {
        Self::new(ErrorKind::Invalid, err.to_string())
    }
}

impl From<mesh_memory::privacy::PrivacyError> for ConsoleError {
    fn from(err: mesh_memory::privacy::PrivacyError) -> Self {
        use mesh_memory::privacy::PrivacyError as E;
        match err {
            E::Store(store) => store.into(),
            E::UnknownEntry(_) => Self::new(ErrorKind::NotFound, err.to_string()),
            E::Database(db) => database_error(&db),
            other => Self::new(ErrorKind::Database, other.to_string()),
        }
    }
}

impl From<mesh_memory::retrieval::RetrievalError> for ConsoleError {
    fn from(err: mesh_memory::retrieval::RetrievalError) -> Self {
        use mesh_memory::retrieval::RetrievalError as E;
        match err {
            E::Store(store) => store.into(),
            E::Privacy(privacy) => privacy.into(),
            E::Database(db) => database_error(&db),
            other => Self::new(ErrorKind::Invalid, other.to_string()),
        }
    }
}

impl From<mesh_memory::privacy::sharing::SharingError> for ConsoleError {
    fn from(err: mesh_memory::privacy::sharing::SharingError) -> Self {
        use mesh_memory::privacy::sharing::SharingError as E;
        let kind = match &err {
            E::UnknownRequest(_) | E::UnknownGrant(_) => ErrorKind::NotFound,
            E::AlreadyDecided(_) | E::AlreadyRevoked(_) | E::StaleRequest | E::Expired => ErrorKind::Conflict,
            E::ReasonRequired => ErrorKind::Invalid,
            E::PermissionDenied => ErrorKind::Forbidden,
            E::Database(db) => return database_error(db),
            _ => ErrorKind::Conflict,
        };
        Self::new(kind, err.to_string())
    }
}

impl From<mesh_memory::privacy::repair::RepairError> for ConsoleError {
    fn from(err: mesh_memory::privacy::repair::RepairError) -> Self {
        use mesh_memory::privacy::repair::RepairError as E;
        let kind = match &err {
            E::MissingReason | E::ReasonTooLong | E::EmptyAudience | E::UnknownActor => ErrorKind::Invalid,
            E::NotAnOperator(_) => ErrorKind::Forbidden,
            E::NotReviewable(_) => ErrorKind::Conflict,
            E::Database(db) => return database_error(db),
            #[allow(unreachable_patterns)] // RepairError may grow; unknown variants read as database errors
            _ => ErrorKind::Database,
        };
        Self::new(kind, err.to_string())
    }
}

impl From<mesh_memory::operator::OperatorError> for ConsoleError {
    fn from(err: mesh_memory::operator::OperatorError) -> Self {
        use mesh_memory::operator::OperatorError as E;
        match err {
            E::Forbidden(why) => Self::new(ErrorKind::Forbidden, why),
            E::Input(refused) => Self::new(ErrorKind::Invalid, refused.to_string()),
            E::Store(e) => e.into(),
            E::Sharing(e) => e.into(),
            E::Repair(e) => e.into(),
            E::Privacy(e) => e.into(),
            E::Erasure(e) => e.into(),
        }
    }
}

impl From<mesh_memory::erasure::ErasureError> for ConsoleError {
    fn from(err: mesh_memory::erasure::ErasureError) -> Self {
        use mesh_memory::erasure::ErasureError as E;
        let kind = match &err {
            E::ReasonRequired | E::ReasonQuotesErasedText | E::WeakKey(_) => ErrorKind::Invalid,
            E::ScopeChanged | E::NothingToErase(_) => ErrorKind::Conflict,
            E::UnknownErasure(_) => ErrorKind::NotFound,
            E::NotAnEraser | E::LoginNoLongerValid(_) => ErrorKind::Forbidden,
            E::VectorIndex(_) => ErrorKind::Database,
            E::Database(db) => return database_error(db),
        };
        Self::new(kind, err.to_string())
    }
}

/// Maps a PostgreSQL failure to a console error: a refused privilege is `Forbidden`, a failed
/// login is reported as such (without echoing credentials), anything else as a database error.
pub fn database_error(err: &sqlx::Error) -> ConsoleError {
    if let Some(db) = err.as_database_error() {
        match db.code().as_deref() {
            Some("42501") => {
                return ConsoleError::new(ErrorKind::Forbidden, format!("permission denied: {}", db.message()))
            }
            Some("28P01") | Some("28000") => {
                return ConsoleError::new(ErrorKind::NotSignedIn, "sign-in failed: wrong role name or password")
            }
            _ => {}
        }
    }
    ConsoleError::new(ErrorKind::Database, format!("database error: {err}"))
}
