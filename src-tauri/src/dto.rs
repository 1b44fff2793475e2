//! The few transfer types that exist only in the console. Everything else crosses the IPC
//! boundary as the core's own types (`specta::Type` behind the core's `specta` feature; ids as
//! strings, enums as literal unions), so there is no second copy of them to keep in step.

use mesh_memory::privacy::sharing::{SharingGrantId, SharingRequestId};
use mesh_memory::store::OperatorRights;
use serde::Serialize;
use specta::Type;

/// Where the console is connected, and who is signed in.
#[derive(Clone, Debug, Serialize, Type)]
pub struct ConsoleStatus {
    /// A database is open; when false (and no `database_error`), the UI shows the connection
    /// screen.
    pub connected: bool,
    /// Started with `DATABASE_URL`: the connection is fixed (no connection screen, no
    /// disconnect).
    pub scripted: bool,
    /// `DATABASE_URL` could not be opened: why (the UI shows it instead of the sign-in form).
    pub database_error: Option<String>,
    /// Running on the embedded demo cluster.
    pub embedded: bool,
    /// Where: role, host, port, database and TLS mode, without credentials.
    pub database_label: String,
    /// No operator role exists yet on the embedded cluster: the first run asks for one.
    pub needs_first_operator: bool,
    /// The database's schema is older than this console's: the session is read-only, and this
    /// says why and what the administrator must run (the UI shows it as a banner).
    pub schema_notice: Option<String>,
    /// The current session, if signed in: the role and what it may do.
    pub session: Option<OperatorRights>,
    /// Why the last session ended without a sign-out (the database stopped accepting its role:
    /// password changed or expired, login revoked), for the sign-in prompt that returns the
    /// operator to where they were.
    pub session_ended: Option<String>,
}

/// What an operator decided about a sharing request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Type)]
#[serde(rename_all = "snake_case")]
pub enum DecisionState {
    /// Released: a revision-scoped grant was created.
    Approved,
    /// Refused; nothing was released.
    Denied,
}

/// The outcome of an operator decision, as the queue confirms it.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Decision {
    /// The request decided.
    pub request_id: SharingRequestId,
    /// Approved or denied.
    pub state: DecisionState,
    /// The grant created by an approval.
    pub grant_id: Option<SharingGrantId>,
    /// The role recorded as the decider.
    pub decided_by: String,
}

impl Decision {
    /// The decision on `request_id` by `decided_by`: approved when it created `grant_id`.
    pub fn new(request_id: SharingRequestId, grant_id: Option<SharingGrantId>, decided_by: String) -> Self {
        let state = if grant_id.is_some() { DecisionState::Approved } else { DecisionState::Denied };
        Self { request_id, state, grant_id, decided_by }
    }
}

/// An operator's revocation of an MCP access token, as the tokens view confirms it.
#[derive(Clone, Debug, Serialize, Type)]
pub struct TokenRevocation {
    /// The token revoked; its next request gets 401.
    pub token_id: uuid::Uuid,
    /// The role recorded in `operator_actions` as the revoker.
    pub revoked_by: String,
}
