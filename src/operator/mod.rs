//! The operator application layer: every operator action and the read models operators decide
//! from, in one place, for every shell. The console, the CLI and the MCP server call this module
//! and not the store's write functions (`tests/architecture.rs` checks it), so an action leaves
//! the same audit row whichever shell an operator used:
//!
//! - actions run under the operator's own PostgreSQL login role ([`OperatorSession`]), with a
//!   required reason, through the `SECURITY DEFINER` functions that record that role and the
//!   reason in `operator_actions`; the session knows what the role may do and refuses the rest
//!   with the reason the shell shows (the database refuses it again on its own);
//! - the read models ([`sharing_queue`], [`access_tokens`], [`explain`]) are the views the shells
//!   render, and [`mcp_binding`] is the one check of who an MCP session speaks as.

use sqlx::postgres::PgConnectOptions;
use uuid::Uuid;

use crate::erasure::{
    self, ErasureError, ErasureOptions, ErasurePreview, ErasureReport, ErasureScope, ErasureVerification,
};
use crate::ids::{AgentId, ConversationId, EntryId, SourceId};
use crate::privacy::repair::{self, EvidenceReviewDecision, RepairError, ReviewedSource};
use crate::privacy::sharing::{self, SharingError, SharingGrantId, SharingRequestId, SharingRequestView, SharingState};
use crate::privacy::PrivacyError;
use crate::store::{self, OperatorRights, Store, StoreError};
use crate::views::{self, AccessTokenRow, Explanation};

/// Why an operator action or read did not happen. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// The signed-in role may not do this; the text says why and how to get the right.
    #[error("{0}")]
    Forbidden(String),
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
    /// server's authentication error.
    pub async fn sign_in(server: &PgConnectOptions, role: &str, password: &str) -> Result<Self, OperatorError> {
        let role = role.trim();
        if role.is_empty() || password.is_empty() {
            return Err(StoreError::invalid("role", "enter the role name and its password").into());
        }
        let pool = store::connect_as(server, role, password).await?;
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
        self.require(|r| r.can_approve, "this role may not approve or deny sharing requests")?;
        let grant = sharing::decide_as_operator(self.store.pool(), request, approve, reason).await?;
        Ok(SharingDecision { request_id: request, grant, decided_by: self.role().to_owned() })
    }

    /// Revokes an MCP access token at once, with a reason, through
    /// `mesh_operator_revoke_access_token` (its next request gets 401). Returns the role recorded.
    pub async fn revoke_access_token(&self, token: Uuid, reason: &str) -> Result<String, OperatorError> {
        self.require(|r| r.can_revoke_tokens, "this role may not revoke access tokens")?;
        Store::revoke_access_token_as_operator(self.store.pool(), token, reason).await?;
        Ok(self.role().to_owned())
    }

    /// Reviews one source of unknown audience evidence: its proven audience, or left unknown with
    /// a note, through `memory_review_source_evidence` / `memory_keep_source_evidence_unknown`.
    pub async fn review_evidence(
        &self,
        source: SourceId,
        decision: &EvidenceReviewDecision,
        note: &str,
    ) -> Result<ReviewedSource, OperatorError> {
        self.require(|r| r.can_review_evidence, "this role may not review audience evidence")?;
        Ok(repair::review_evidence(self.store.pool(), source, decision, note).await?)
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

/// Issues an MCP access token bound to `agent`, `conversation` and the speaker with connector
/// id `external_id` ([`mcp_binding`] checks them); the secret is returned this once, only its hash
/// is stored.
pub async fn issue_access_token(
    store: &Store,
    agent: AgentId,
    conversation: ConversationId,
    external_id: &str,
    label: &str,
) -> Result<store::IssuedToken, OperatorError> {
    Ok(store.issue_access_token(agent, conversation, external_id, label).await?)
}

/// Who an MCP session speaks as: the speaker with connector id `external_id` on the
/// conversation's connector, who must be a member of it now (a token or a stdio session for
/// anyone else would only ever get closed audiences). The one check behind `mcp --as`, `mcp token
/// create` and [`Store::issue_access_token`].
pub async fn mcp_binding(
    store: &Store,
    agent: AgentId,
    conversation: ConversationId,
    external_id: &str,
) -> Result<store::SpeakerBinding, OperatorError> {
    Ok(store.speaker_binding(agent, conversation, external_id).await?)
}
