//! The operator application layer: every operator action and the read models operators decide
//! from, in one place, for every shell. The console, the CLI and the MCP server call this module
//! and not the store's write functions (`tests/architecture.rs` checks it), so an action leaves
//! the same audit row whichever shell an operator used:
//!
//! - actions run under the operator's own PostgreSQL login role ([`OperatorSession`]), never a
//!   superuser's, with a required reason, through the `SECURITY DEFINER` functions that record
//!   that role and the reason in `operator_actions`; the session knows what the role may do and
//!   refuses the rest with the reason the shell shows (the database refuses it again on its own);
//! - every text an operator sends (reasons, notes, labels, role names, passwords) passes one
//!   check ([`input`]) before anything reaches the database: bad text is a typed error naming the
//!   field ([`OperatorError::Input`]) and nothing is written;
//! - the read models ([`sharing_queue`], [`access_tokens`], [`explain`]) are the views the shells
//!   render, and [`mcp_binding`] is the one check of who an MCP session speaks as.

pub mod input;

use chrono::{DateTime, Utc};
use sqlx::postgres::PgConnectOptions;
use uuid::Uuid;

pub use input::{InputProblem, InputRefused};

use crate::erasure::{
    self, ErasureError, ErasureOptions, ErasurePreview, ErasureReport, ErasureScope, ErasureVerification,
};
use crate::ids::{AgentId, ConversationId, EntryId, SourceId};
use crate::privacy::repair::{self, EvidenceReviewDecision, RepairError, ReviewedSource};
use crate::privacy::sharing::{self, SharingError, SharingGrantId, SharingRequestId, SharingRequestView, SharingState};
use crate::privacy::PrivacyError;
use crate::sqlstate::ProjectSqlState;
use crate::store::{self, OperatorRights, Store, StoreError};
use crate::views::{self, AccessTokenRow, Explanation};

/// Why an operator action or read did not happen. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The signed-in role may not do this; the text says why and how to get the right.
    #[error("{0}")]
    Forbidden(String),
    /// A text the operator sent is not acceptable (NUL, control characters, empty, too long);
    /// nothing was sent to the database.
    #[error(transparent)]
    Input(#[from] InputRefused),
    /// A store read or write failed (unknown id, bad input, database error...).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sharing decision was refused (decided already, stale, expired...).
    #[error(transparent)]
    Sharing(#[from] SharingError),
    /// An evidence review was refused.
    #[error(transparent)]
    Repair(#[from] RepairError),
    /// An eligibility explanation could not be computed.
    #[error(transparent)]
    Privacy(#[from] PrivacyError),
    /// An erasure was refused or failed; nothing was erased.
    #[error(transparent)]
    Erasure(#[from] ErasureError),
}

/// What an issued token binds: the agent, the conversation every call is made in, the speaker's
/// connector id on that conversation's connector; and its label and expiry.
#[derive(Clone, Debug)]
pub struct TokenBindingRequest<'a> {
    /// The runtime agent whose memory is used.
    pub agent: AgentId,
    /// The conversation.
    pub conversation: ConversationId,
    /// The speaker's connector id (`U456`).
    pub external_id: &'a str,
    /// What the token is for (shown in listings; may be empty, at most 200 characters).
    pub label: &'a str,
    /// When it stops authenticating (`None`: until revoked).
    pub expires_at: Option<DateTime<Utc>>,
}

/// Creates a console login role (`kind`'s groups) on a connection with CREATEROLE (the embedded
/// cluster's first run, or `mesh-memory role create` as a server's administrator), after the one
/// check of its name and password ([`input`]). A connection that may not create the role, or a
/// server without the product's group roles, is refused with what to do.
pub async fn create_console_role(
    admin: &sqlx::PgPool,
    name: &str,
    password: &str,
    kind: store::ConsoleRoleKind,
) -> Result<(), OperatorError> {
    input::check(input::ROLE, name)?;
    input::check(input::PASSWORD, password)?;
    store::create_console_role(admin, name, password, kind).await.map_err(|err| role_creation_refused(err, kind))
}

/// The `CREATE ROLE` statement [`create_console_role`] would run (SCRAM verifier computed here,
/// never the password), for an administrator to run in psql; needs no database.
pub fn console_role_statement(
    name: &str,
    password: &str,
    kind: store::ConsoleRoleKind,
) -> Result<String, OperatorError> {
    input::check(input::ROLE, name)?;
    input::check(input::PASSWORD, password)?;
    Ok(kind.create_role_statement(name, password)?)
}

/// The server's refusal of a `CREATE ROLE` in words: no right to create roles or to grant the
/// groups (42501), or a group that does not exist because the schema was never migrated (42704).
fn role_creation_refused(err: StoreError, kind: store::ConsoleRoleKind) -> OperatorError {
    let groups = kind.groups().join(", ");
    let refusal = match &err {
        StoreError::Database(e) => e.as_database_error().and_then(|db| match db.code().as_deref() {
            Some("42501") => Some(format!(
                "not allowed to create this role ({}): connect as an administrator with CREATEROLE who may grant \
                 {groups} (PostgreSQL 16 and later: WITH ADMIN OPTION), or print the statement with --print-sql for \
                 one to run",
                db.message()
            )),
            Some("42704") => Some(format!(
                "{}: the group roles ({groups}) are created by the schema's migrations; run `mesh-memory db migrate` \
                 first",
                db.message()
            )),
            _ => None,
        }),
        _ => None,
    };
    match refusal {
        Some(text) => OperatorError::Forbidden(text),
        None => OperatorError::Store(err),
    }
}

impl OperatorError {
    /// The database's own refusal of an action whose login ended since sign-in (`MM014` from
    /// `mesh_require_operator_login`: NOLOGIN, an expired password) as `Forbidden` with the
    /// server's words, whichever layer carried it up; any other error unchanged.
    fn login_ended(self) -> Self {
        let database = match &self {
            Self::Store(StoreError::Database(e))
            | Self::Sharing(SharingError::Database(e))
            | Self::Repair(RepairError::Database(e))
            | Self::Privacy(PrivacyError::Database(e)) => e.as_database_error(),
            _ => None,
        };
        match database {
            Some(db) if db.code().as_deref() == Some(ProjectSqlState::LoginNoLongerValid.code()) => {
                Self::Forbidden(db.message().to_owned())
            }
            _ => self,
        }
    }
}

/// A signed-in operator: a pool authenticated as their own login role, and what it may do.
/// Reads through [`OperatorSession::store`] use the role's own privileges, never the
/// application's; every action the database records names this role.
#[derive(Clone)]
pub struct OperatorSession {
    store: Store,
    rights: OperatorRights,
}

/// An operator's decision on a sharing request, as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharingDecision {
    /// The request decided.
    pub request_id: SharingRequestId,
    /// The grant an approval created (`None` for a denial).
    pub grant: Option<SharingGrantId>,
    /// The role the database recorded.
    pub decided_by: String,
}

impl OperatorSession {
    /// Signs in to the server of `server` as `role` with `password` and reads what the role may
    /// do from the server's own privilege checks. A wrong password or unknown role is the
    /// server's authentication error. A superuser is refused (`Forbidden`): it bypasses every
    /// privilege check the operator layer and the console rely on, so what the session shows it
    /// may do would not be what it can do.
    pub async fn sign_in(server: &PgConnectOptions, role: &str, password: &str) -> Result<Self, OperatorError> {
        let role = role.trim();
        input::check(input::ROLE, role)?;
        input::check(input::PASSWORD, password)?;
        let pool = store::connect_as(server, role, password).await?;
        match store::login_is_superuser(&pool).await {
            Ok(false) => {}
            Ok(true) => {
                pool.close().await;
                return Err(OperatorError::Forbidden(format!(
                    "role {role} is a superuser: sign in with your own operator role (a member of mesh_operator) \
                     instead; a superuser bypasses every privilege the console and the operator commands rely on"
                )));
            }
            Err(err) => {
                pool.close().await;
                return Err(err.into());
            }
        }
        let rights = store::operator_rights(&pool).await?;
        Ok(Self { store: Store::new(pool), rights })
    }

    /// What the role may do, with the reason for what it may not.
    pub fn rights(&self) -> &OperatorRights {
        &self.rights
    }

    /// The role's name (`session_user`, as the database records it).
    pub fn role(&self) -> &str {
        &self.rights.role
    }

    /// The store as this role: reads go through its own privileges.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Closes the role's connections.
    pub async fn close(&self) {
        self.store.pool().close().await;
    }

    /// `Forbidden` with the role's limitation (or `otherwise`) unless `allowed` holds.
    fn require(&self, allowed: impl Fn(&OperatorRights) -> bool, otherwise: &str) -> Result<(), OperatorError> {
        if allowed(&self.rights) {
            return Ok(());
        }
        Err(OperatorError::Forbidden(self.rights.limitation.clone().unwrap_or_else(|| otherwise.to_owned())))
    }

    /// Approves (creating a revision-scoped grant) or denies a pending sharing request, with a
    /// reason, through `mesh_operator_approve_sharing` / `mesh_operator_deny_sharing`.
    pub async fn decide_sharing(
        &self,
        request: SharingRequestId,
        approve: bool,
        reason: &str,
    ) -> Result<SharingDecision, OperatorError> {
        input::check(input::REASON, reason)?;
        self.require(|r| r.can_approve, "this role may not approve or deny sharing requests")?;
        let grant = sharing::decide_as_operator(self.store.pool(), request, approve, reason)
            .await
            .map_err(|e| OperatorError::from(e).login_ended())?;
        Ok(SharingDecision { request_id: request, grant, decided_by: self.role().to_owned() })
    }

    /// Revokes an MCP access token at once, with a reason, through
    /// `mesh_operator_revoke_access_token` (its next request gets 401). Returns the role recorded.
    pub async fn revoke_access_token(&self, token: Uuid, reason: &str) -> Result<String, OperatorError> {
        input::check(input::REASON, reason)?;
        self.require(|r| r.can_revoke_tokens, "this role may not revoke access tokens")?;
        Store::revoke_access_token_as_operator(self.store.pool(), token, reason)
            .await
            .map_err(|e| OperatorError::from(e).login_ended())?;
        Ok(self.role().to_owned())
    }

    /// Issues an MCP access token bound to `agent`, `conversation` and the speaker with connector
    /// id `external_id` (a member of it now: [`mcp_binding`], read with this role's privileges),
    /// with a label, an optional expiry and a reason, through `mesh_operator_issue_access_token`,
    /// which records the role, the reason, the binding and the expiry in `operator_actions`. The
    /// secret is returned this once; only its hash is stored. Nothing is written on error.
    pub async fn issue_access_token(
        &self,
        binding: &TokenBindingRequest<'_>,
        reason: &str,
    ) -> Result<store::IssuedToken, OperatorError> {
        input::check(input::REASON, reason)?;
        input::check(input::LABEL, binding.label)?;
        input::check(input::SPEAKER, binding.external_id)?;
        if binding.expires_at.is_some_and(|at| at <= Utc::now()) {
            return Err(InputRefused { field: "expires_at", problem: InputProblem::Past }.into());
        }
        self.require(|r| r.can_revoke_tokens, "this role may not issue access tokens")?;
        let speaker = mcp_binding(&self.store, binding.agent, binding.conversation, binding.external_id).await?;
        let request = store::TokenRequest {
            binding: &speaker,
            label: binding.label.trim(),
            expires_at: binding.expires_at,
            reason,
        };
        Store::issue_access_token_as_operator(self.store.pool(), &request)
            .await
            .map_err(|e| OperatorError::from(e).login_ended())
    }

    /// Checks a binding this operator vouches for (`mcp --agent --conversation --as` on stdio, an
    /// operator's own scripted use): the role must be one that may issue tokens, since the binding
    /// is what a token would carry; the speaker must be a member of the conversation now
    /// ([`mcp_binding`], read with this role's privileges).
    pub async fn vouch_for_binding(
        &self,
        agent: AgentId,
        conversation: ConversationId,
        external_id: &str,
    ) -> Result<store::SpeakerBinding, OperatorError> {
        input::check(input::SPEAKER, external_id)?;
        self.require(|r| r.can_revoke_tokens, "this role may not bind MCP sessions (it may not issue tokens)")?;
        mcp_binding(&self.store, agent, conversation, external_id).await
    }

    /// Reviews one source of unknown audience evidence: its proven audience, or left unknown with
    /// a note, through `memory_review_source_evidence` / `memory_keep_source_evidence_unknown`.
    pub async fn review_evidence(
        &self,
        source: SourceId,
        decision: &EvidenceReviewDecision,
        note: &str,
    ) -> Result<ReviewedSource, OperatorError> {
        input::check(input::NOTE, note)?;
        self.require(|r| r.can_review_evidence, "this role may not review audience evidence")?;
        repair::review_evidence(self.store.pool(), source, decision, note)
            .await
            .map_err(|e| OperatorError::from(e).login_ended())
    }
}

impl OperatorSession {
    /// Erases what the operator confirmed of `scope` (the `object_ids` of its [`erasure_preview`]),
    /// with a reason, through `mesh_operator_erase` (members of `mesh_eraser` only), then vacuums
    /// the rewritten tables. Refused, and nothing erased, when the scope no longer is what was
    /// confirmed, or on any failure.
    pub async fn erase(
        &self,
        scope: &ErasureScope,
        confirmed: &[Uuid],
        reason: &str,
        options: &ErasureOptions,
    ) -> Result<ErasureReport, OperatorError> {
        input::check(input::REASON, reason)?;
        self.require_erase()?;
        Ok(erasure::execute(self.store.pool(), scope, confirmed, reason, options).await?)
    }

    fn require_erase(&self) -> Result<(), OperatorError> {
        if self.rights.can_erase {
            return Ok(());
        }
        Err(OperatorError::Forbidden(
            self.rights.erase_limitation.clone().unwrap_or_else(|| "this role may not erase".to_owned()),
        ))
    }
}

/// What erasing `scope` would remove now (counts per kind, the revisions), read with the store's
/// own privileges (an [`OperatorSession::store`] reads as the operator's role): `erase --dry-run`
/// and the preview an eraser confirms.
pub async fn erasure_preview(store: &Store, scope: &ErasureScope) -> Result<ErasurePreview, OperatorError> {
    Ok(erasure::preview(store.pool(), scope).await?)
}

/// Checks an erasure ([`erasure::verify`]) with the fingerprint key from `MESH_AGENT_MASTER_KEY`
/// (without it, the text scan is reported as not run). Anyone who may read the tables may run it.
pub async fn verify_erasure(store: &Store, erasure_id: Uuid) -> Result<ErasureVerification, OperatorError> {
    let key = crate::service::fingerprint_key_from_environment().map_err(ErasureError::from)?;
    let mut verified = erasure::verify(store.pool(), erasure_id, key.as_ref()).await?;
    check_external_index(store, &mut verified).await?;
    verified.clean = verified.is_clean();
    Ok(verified)
}

/// With a Qdrant configured (`QDRANT_URL`, feature `qdrant`): the erased revisions' points left
/// in any generation's collection (the worker prunes them on its next run).
#[cfg(feature = "qdrant")]
async fn check_external_index(store: &Store, verified: &mut ErasureVerification) -> Result<(), OperatorError> {
    use crate::semantic::{list_generations, VectorIndexChoice};
    let config = match VectorIndexChoice::from_env() {
        Ok(VectorIndexChoice::Qdrant(config)) => config,
        Ok(_) => return Ok(()),
        Err(err) => return Err(ErasureError::VectorIndex(err.to_string()).into()),
    };
    let revisions = erasure::erased_revisions(store.pool(), verified.erasure_id).await.map_err(ErasureError::from)?;
    let generations: Vec<i64> = list_generations(store.pool())
        .await
        .map_err(|e| ErasureError::VectorIndex(e.to_string()))?
        .into_iter()
        .map(|g| g.id)
        .collect();
    let left = crate::semantic::qdrant::points_left(&config, &generations, &revisions)
        .await
        .map_err(|e| ErasureError::VectorIndex(format!("Qdrant: {e}")))?;
    verified.external_index = Some("qdrant".to_owned());
    verified.external_points_left = left.len() as u32;
    Ok(())
}

#[cfg(not(feature = "qdrant"))]
async fn check_external_index(_: &Store, _: &mut ErasureVerification) -> Result<(), OperatorError> {
    Ok(())
}

/// The sharing queue: requests in `state` (every state with `None`), oldest pending first, each
/// pending one with the voices whose confirmation it still waits for.
pub async fn sharing_queue(
    store: &Store,
    state: Option<SharingState>,
) -> Result<Vec<SharingRequestView>, OperatorError> {
    Ok(sharing::list_requests(store, state).await?)
}

/// MCP access tokens of `agent` (every agent with `None`), newest first, revoked ones included,
/// with each bound speaker labelled. Never a secret: only hashes are stored.
pub async fn access_tokens(store: &Store, agent: Option<AgentId>) -> Result<Vec<AccessTokenRow>, OperatorError> {
    Ok(views::access_tokens(store, agent).await?)
}

/// Whether an entry is eligible in a conversation, and if not, which rule rejects it and why.
pub async fn explain(
    store: &Store,
    agent: Option<AgentId>,
    entry: EntryId,
    conversation: ConversationId,
) -> Result<Explanation, OperatorError> {
    Ok(views::explanation(store, agent, entry, conversation).await?)
}

/// Who an MCP session speaks as: the speaker with connector id `external_id` on the
/// conversation's connector, who must be a member of it now (a token or a stdio session for
/// anyone else would only ever get closed audiences). The one check behind `mcp --as` and
/// [`OperatorSession::issue_access_token`] (`mcp token create`).
pub async fn mcp_binding(
    store: &Store,
    agent: AgentId,
    conversation: ConversationId,
    external_id: &str,
) -> Result<store::SpeakerBinding, OperatorError> {
    Ok(store.speaker_binding(agent, conversation, external_id).await?)
}
