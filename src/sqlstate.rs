//! The catalogue of the SQLSTATE codes the schema's own functions raise: one code, one meaning.
//!
//! PostgreSQL reserves no class starting with `M`, so `MM001`... cannot collide with a server
//! error. A SQL function raises a code (`RAISE ... USING ERRCODE = 'MM004'`) when a refusal must
//! reach the caller as a typed error rather than a message to parse; the Rust error types map
//! them through [`ProjectSqlState::of`], never by matching the raw string. The unit tests below
//! check that `schema/current.sql` raises exactly these codes, each from exactly the functions
//! listed here, so a code cannot quietly gain a second meaning (as `MM002` once had; migration
//! `20261207200000` gave "already revoked" its own `MM010`).
//!
//! | Code    | [`ProjectSqlState`]            | Meaning                                                        | Raised by |
//! |---------|--------------------------------|----------------------------------------------------------------|-----------|
//! | `MM001` | `UnknownSharingRequest`        | the sharing request does not exist                             | `mesh_sharing_request_decidable`, `mesh_operator_deny_sharing` |
//! | `MM002` | `AlreadyDecided`               | the sharing request is no longer pending (approved, denied, expired) | `mesh_sharing_request_decidable`, `mesh_operator_deny_sharing` |
//! | `MM003` | `RequestExpired`               | the sharing request is past its expiry                         | `mesh_sharing_request_decidable` |
//! | `MM004` | `StaleRequest`                 | the requested revision is no longer its entry's current one    | `mesh_sharing_request_decidable` |
//! | `MM005` | `ConfirmationNotAuthenticated` | the confirming message is not an authenticated direct message received after the request | `mesh_confirm_sharing_by_source_actor` |
//! | `MM006` | `NotSourceActor`               | the confirming person is not a voice of the revision still to confirm | `mesh_confirm_sharing_by_source_actor` |
//! | `MM007` | `ReasonRequired`               | an operator action needs a reason of 1 to 2000 characters      | `mesh_operator_approve_sharing`, `mesh_operator_deny_sharing`, `mesh_operator_erase`, `mesh_operator_issue_access_token`, `mesh_operator_revoke_grant`, `mesh_operator_revoke_access_token` |
//! | `MM008` | `UnknownGrant`                 | the sharing grant does not exist                               | `mesh_operator_revoke_grant` |
//! | `MM009` | `UnknownAccessToken`           | the MCP access token does not exist                            | `mesh_operator_revoke_access_token` |
//! | `MM010` | `AlreadyRevoked`               | the sharing grant or access token was revoked already          | `mesh_operator_revoke_grant`, `mesh_operator_revoke_access_token` |
//! | `MM011` | `ErasureScopeChanged`          | what an erasure reaches changed since the operator previewed it | `mesh_operator_erase` |
//! | `MM012` | `NothingToErase`               | the erasure's target does not exist or holds nothing not erased already | `mesh_operator_erase` |
//! | `MM013` | `ReasonQuotesErasedText`       | an erasure's reason quotes the text it erases                  | `mesh_operator_erase` |
//! | `MM014` | `LoginNoLongerValid`           | the operator's login expired or lost LOGIN since it signed in  | `mesh_require_operator_login` |
//!
//! Adding a code: a new variant here (with its row above and in [`ProjectSqlState::ALL`]), raised
//! by a new migration; never reuse a code for a second meaning.

/// A refusal raised by one of the schema's functions, decoded from its SQLSTATE. See the module
/// table for each code's meaning and the functions that raise it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProjectSqlState {
    /// `MM001`: the sharing request does not exist.
    UnknownSharingRequest,
    /// `MM002`: the sharing request is no longer pending (approved, denied or expired).
    AlreadyDecided,
    /// `MM003`: the sharing request is past its expiry.
    RequestExpired,
    /// `MM004`: the requested revision is no longer its entry's current one.
    StaleRequest,
    /// `MM005`: the confirming message is not a connector-authenticated direct message received
    /// after the request.
    ConfirmationNotAuthenticated,
    /// `MM006`: the confirming person is not a voice of the revision whose confirmation is missing.
    NotSourceActor,
    /// `MM007`: an operator action needs a reason of 1 to 2000 characters.
    ReasonRequired,
    /// `MM008`: the sharing grant does not exist.
    UnknownGrant,
    /// `MM009`: the MCP access token does not exist.
    UnknownAccessToken,
    /// `MM010`: the sharing grant or access token was revoked already.
    AlreadyRevoked,
    /// `MM011`: what an erasure reaches changed since the operator previewed it.
    ErasureScopeChanged,
    /// `MM012`: the erasure's target does not exist or holds nothing not erased already.
    NothingToErase,
    /// `MM013`: an erasure's reason quotes the text it erases (the reason stays in the audit).
    ReasonQuotesErasedText,
    /// `MM014`: the operator's login role expired or lost LOGIN since its session signed in.
    LoginNoLongerValid,
}

impl ProjectSqlState {
    /// Every code, in code order.
    pub const ALL: [ProjectSqlState; 14] = [
        Self::UnknownSharingRequest,
        Self::AlreadyDecided,
        Self::RequestExpired,
        Self::StaleRequest,
        Self::ConfirmationNotAuthenticated,
        Self::NotSourceActor,
        Self::ReasonRequired,
        Self::UnknownGrant,
        Self::UnknownAccessToken,
        Self::AlreadyRevoked,
        Self::ErasureScopeChanged,
        Self::NothingToErase,
        Self::ReasonQuotesErasedText,
        Self::LoginNoLongerValid,
    ];

    /// The five-character SQLSTATE.
    pub const fn code(self) -> &'static str {
        match self {
            Self::UnknownSharingRequest => "MM001",
            Self::AlreadyDecided => "MM002",
            Self::RequestExpired => "MM003",
            Self::StaleRequest => "MM004",
            Self::ConfirmationNotAuthenticated => "MM005",
            Self::NotSourceActor => "MM006",
            Self::ReasonRequired => "MM007",
            Self::UnknownGrant => "MM008",
            Self::UnknownAccessToken => "MM009",
            Self::AlreadyRevoked => "MM010",
            Self::ErasureScopeChanged => "MM011",
            Self::NothingToErase => "MM012",
            Self::ReasonQuotesErasedText => "MM013",
            Self::LoginNoLongerValid => "MM014",
        }
    }

    /// The schema functions that raise this code (the table's last column).
    pub const fn raised_by(self) -> &'static [&'static str] {
        match self {
            Self::UnknownSharingRequest | Self::AlreadyDecided => {
                &["mesh_operator_deny_sharing", "mesh_sharing_request_decidable"]
            }
            Self::RequestExpired | Self::StaleRequest => &["mesh_sharing_request_decidable"],
            Self::ConfirmationNotAuthenticated | Self::NotSourceActor => &["mesh_confirm_sharing_by_source_actor"],
            Self::ReasonRequired => &[
                "mesh_operator_approve_sharing",
                "mesh_operator_deny_sharing",
                "mesh_operator_erase",
                "mesh_operator_issue_access_token",
                "mesh_operator_revoke_access_token",
                "mesh_operator_revoke_grant",
            ],
            Self::UnknownGrant => &["mesh_operator_revoke_grant"],
            Self::UnknownAccessToken => &["mesh_operator_revoke_access_token"],
            Self::AlreadyRevoked => &["mesh_operator_revoke_access_token", "mesh_operator_revoke_grant"],
            Self::ErasureScopeChanged | Self::NothingToErase | Self::ReasonQuotesErasedText => &["mesh_operator_erase"],
            Self::LoginNoLongerValid => &["mesh_require_operator_login"],
        }
    }

    /// The catalogue entry for a SQLSTATE, `None` for any code not in the catalogue (a server
    /// error, or a code from a newer schema than this build).
    pub fn from_code(code: &str) -> Option<ProjectSqlState> {
        Self::ALL.into_iter().find(|state| state.code() == code)
    }

    /// The catalogue entry of a failed statement, `None` if it failed otherwise.
    pub fn of(error: &sqlx::Error) -> Option<ProjectSqlState> {
        error.as_database_error().and_then(|db| db.code()).and_then(|code| Self::from_code(&code))
    }
}

/// Whether `error` is the server refusing a signed-in login when a pool opens a new connection
/// for it (`28000`: NOLOGIN, `28P01`: the password expired or changed): for an erasure, the same
/// ending as [`ProjectSqlState::LoginNoLongerValid`], found at connect time instead of by
/// `mesh_require_operator_login` inside the action (which of the two depends only on whether the
/// pool had an idle connection).
pub fn login_refused(error: &sqlx::Error) -> bool {
    matches!(error.as_database_error().and_then(|db| db.code()).as_deref(), Some("28000" | "28P01"))
}

impl std::fmt::Display for ProjectSqlState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::ProjectSqlState;

    const SCHEMA: &str = include_str!("../schema/current.sql");

    /// `code -> functions` for every `ERRCODE = 'MM...'` in today's schema.
    fn raised_in_schema() -> BTreeMap<String, BTreeSet<String>> {
        let mut raised: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut function = None;
        for line in SCHEMA.lines() {
            if let Some(rest) = line.strip_prefix("CREATE FUNCTION public.") {
                function = rest.split('(').next().map(str::to_owned);
            }
            let mut rest = line;
            while let Some(at) = rest.find("ERRCODE = 'MM") {
                let code = &rest[at + "ERRCODE = '".len()..][..5];
                let name = function.clone().unwrap_or_else(|| panic!("{code} raised outside a function"));
                raised.entry(code.to_owned()).or_default().insert(name);
                rest = &rest[at + 1..];
            }
        }
        raised
    }

    #[test]
    fn the_schema_raises_exactly_the_catalogued_codes_from_exactly_the_listed_functions() {
        let catalogue: BTreeMap<String, BTreeSet<String>> = ProjectSqlState::ALL
            .into_iter()
            .map(|s| (s.code().to_owned(), s.raised_by().iter().map(|f| (*f).to_owned()).collect()))
            .collect();
        assert_eq!(raised_in_schema(), catalogue, "schema/current.sql and the SQLSTATE catalogue disagree");
    }

    #[test]
    fn codes_are_distinct_and_round_trip() {
        let codes: BTreeSet<&str> = ProjectSqlState::ALL.into_iter().map(ProjectSqlState::code).collect();
        assert_eq!(codes.len(), ProjectSqlState::ALL.len(), "two variants share a code");
        for state in ProjectSqlState::ALL {
            assert_eq!(ProjectSqlState::from_code(state.code()), Some(state));
        }
        assert_eq!(ProjectSqlState::from_code("42501"), None, "a server code is not ours");
        assert_eq!(ProjectSqlState::from_code("MM099"), None);
    }
}
