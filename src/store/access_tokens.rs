//! Access tokens of the MCP server's HTTP transport (table `mcp_access_tokens`).
//!
//! A token binds one runtime agent, one conversation and one connector identity (the speaker),
//! as a stdio server is bound by its launch arguments: whoever holds it speaks as that identity in
//! that conversation, and nothing in a request can change that. Tokens are 256 random bits shown
//! once at issue; only their SHA-256 is stored, revocation and expiry are immediate (every request
//! looks its token up), and the last use is recorded. Issuing and revoking are operator actions,
//! each through a SECURITY DEFINER function that records the operator's role and reason.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{Store, StoreError};
use crate::ids::{ActorId, AgentId, ConversationId, IdentityId};
use crate::sqlstate::ProjectSqlState;

/// What a valid token stands for: who speaks, where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBinding {
    /// The token's id (never its secret).
    pub token_id: Uuid,
    /// The runtime agent whose memory is used.
    pub agent: AgentId,
    /// The conversation every call is made in.
    pub conversation: ConversationId,
    /// The connector of the speaker's identity (the conversation's).
    pub connector: String,
    /// The speaker's id on that connector.
    pub external_id: String,
}

/// A token as operators see it: everything but the secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct AccessTokenView {
    /// Token id (what `revoke` takes).
    pub id: Uuid,
    /// Runtime agent.
    pub runtime_agent_id: AgentId,
    /// Its name.
    pub agent_name: String,
    /// The bound conversation.
    pub conversation_id: ConversationId,
    /// Its external channel id.
    pub conversation: String,
    /// Its title (`#engineering`; may be empty), what operators recognise it by.
    pub conversation_title: String,
    /// The bound speaker.
    pub actor_id: ActorId,
    /// Their connector id (`U456`).
    pub speaker: String,
    /// What the operator called it.
    pub label: String,
    /// Issued.
    pub created_at: DateTime<Utc>,
    /// Last authenticated request.
    pub last_used_at: Option<DateTime<Utc>>,
    /// Revoked, if so.
    pub revoked_at: Option<DateTime<Utc>>,
    /// When it stops authenticating, if it was issued with an expiry.
    pub expires_at: Option<DateTime<Utc>>,
}

impl AccessTokenView {
    /// Whether the token has expired by `now` (it then authenticates nothing, as if revoked).
    pub fn expired_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|at| at <= now)
    }
}

/// One line of `mesh-memory mcp token list`: id, binding, issue time, last use or revocation,
/// expiry, label (the console's token table shows the same fields).
impl std::fmt::Display for AccessTokenView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let minute = |at: DateTime<Utc>| at.format("%Y-%m-%d %H:%M").to_string();
        let state = match (self.revoked_at, self.last_used_at) {
            (Some(at), _) => format!("revoked {}", minute(at)),
            (None, Some(at)) => format!("last used {}", minute(at)),
            (None, None) => "never used".to_owned(),
        };
        let expiry = match self.expires_at {
            None => "no expiry".to_owned(),
            Some(at) if self.expired_at(Utc::now()) => format!("expired {}", minute(at)),
            Some(at) => format!("expires {}", minute(at)),
        };
        write!(
            f,
            "{}  {} in {} as {}  created {}  {}  {}  {}",
            self.id,
            self.agent_name,
            self.conversation,
            self.speaker,
            minute(self.created_at),
            state,
            expiry,
            self.label
        )
    }
}

/// A checked binding of an MCP session: the agent, the conversation every call is made in, and
/// the authenticated speaker (a member of it when checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpeakerBinding {
    /// The runtime agent whose memory is used.
    pub agent: AgentId,
    /// The conversation.
    pub conversation: ConversationId,
    /// Its connector (`slack`, ...).
    pub connector: String,
    /// The speaker's id on that connector.
    pub external_id: String,
    /// Their connector identity.
    pub identity: IdentityId,
    /// Their actor.
    pub actor: ActorId,
}

/// A token just issued: its id and the secret, which is shown this once and never stored.
#[derive(Clone, Debug)]
pub struct IssuedToken {
    /// Token id.
    pub id: Uuid,
    /// The bearer secret (`mmt_` and 64 hex digits).
    pub secret: String,
    /// When it stops authenticating, if ever.
    pub expires_at: Option<DateTime<Utc>>,
}

/// What an operator asks for when issuing a token: the checked binding, a label, an optional
/// expiry and the reason recorded with the action.
#[derive(Clone, Debug)]
pub struct TokenRequest<'a> {
    /// Who the token speaks as, where ([`Store::speaker_binding`]).
    pub binding: &'a SpeakerBinding,
    /// What the token is for (shown in listings; may be empty).
    pub label: &'a str,
    /// When it stops authenticating (`None`: until revoked).
    pub expires_at: Option<DateTime<Utc>>,
    /// Why it is issued (recorded in `operator_actions`).
    pub reason: &'a str,
}

/// The stored form of a secret.
fn token_hash(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.trim().as_bytes()).to_vec()
}

impl Store {
    /// Who an MCP session (a token, or `mcp --as` over stdio) speaks as: the speaker with connector
    /// id `external_id` on the conversation's connector. `UnknownReference` when the conversation is
    /// not the agent's; `InvalidInput` when no such identity exists or the speaker is not a member
    /// of the conversation now (every search would get a closed audience). The one check of a
    /// binding (`operator::mcp_binding`).
    pub async fn speaker_binding(
        &self,
        agent: AgentId,
        conversation: ConversationId,
        external_id: &str,
    ) -> Result<SpeakerBinding, StoreError> {
        let external_id = external_id.trim();
        let connector = self.conversation(agent, conversation).await?.connector;
        let Some((identity, actor)) = self.resolve_identity(&connector, external_id).await? else {
            return Err(StoreError::invalid("speaker", format!("no {connector} identity with this id")));
        };
        if self.destination_audience(agent, conversation, Some(actor)).await?.closed.is_some() {
            return Err(StoreError::invalid("speaker", "is not a member of this conversation now"));
        }
        Ok(SpeakerBinding { agent, conversation, connector, external_id: external_id.to_owned(), identity, actor })
    }

    /// The binding of a live token, recording its use; `None` for a token that is unknown,
    /// revoked or expired (the three are not told apart). One statement.
    pub async fn authenticate_access_token(&self, secret: &str) -> Result<Option<TokenBinding>, StoreError> {
        let row: Option<(Uuid, AgentId, ConversationId, String, String)> = sqlx::query_as(
            "UPDATE mcp_access_tokens t SET last_used_at = now()
               FROM connector_identities ci
              WHERE t.token_hash = $1 AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
                AND ci.id = t.identity_id
             RETURNING t.id, t.runtime_agent_id, t.conversation_id, ci.connector, ci.external_id",
        )
        .bind(token_hash(secret))
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(token_id, agent, conversation, connector, external_id)| TokenBinding {
            token_id,
            agent,
            conversation,
            connector,
            external_id,
        }))
    }

    /// Every token (of `agent`, or of every agent), newest first, revoked ones included.
    pub async fn list_access_tokens(&self, agent: Option<AgentId>) -> Result<Vec<AccessTokenView>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT t.id, t.runtime_agent_id, ra.name AS agent_name, t.conversation_id,
                    c.external_channel_id AS conversation, c.title AS conversation_title, ci.actor_id,
                    ci.external_id AS speaker, t.label,
                    t.created_at, t.last_used_at, t.revoked_at, t.expires_at
               FROM mcp_access_tokens t
               JOIN runtime_agents ra ON ra.id = t.runtime_agent_id
               JOIN conversations c ON c.id = t.conversation_id
               JOIN connector_identities ci ON ci.id = t.identity_id
              WHERE $1::uuid IS NULL OR t.runtime_agent_id = $1
              ORDER BY t.created_at DESC, t.id",
        )
        .bind(agent)
        .fetch_all(&self.pool)
        .await?)
    }

    /// An operator's issue (`operator::OperatorSession::issue_access_token`): through the SECURITY
    /// DEFINER function `mesh_operator_issue_access_token` under the operator's own login role
    /// (`operator_pool`), which checks the binding again, stores the token's hash and records the
    /// role, the reason, the binding and the expiry in `operator_actions`. The secret is made here
    /// and never sent. `InvalidInput` for a missing reason, a label over 200 characters, an expiry
    /// not in the future or a binding the database refuses. Nothing is written on error.
    pub async fn issue_access_token_as_operator(
        operator_pool: &sqlx::PgPool,
        request: &TokenRequest<'_>,
    ) -> Result<IssuedToken, StoreError> {
        let secret = format!("mmt_{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple());
        let id = Uuid::now_v7();
        let binding = request.binding;
        sqlx::query("SELECT mesh_operator_issue_access_token($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(id)
            .bind(token_hash(&secret))
            .bind(binding.agent)
            .bind(binding.conversation)
            .bind(binding.identity)
            .bind(request.label)
            .bind(request.expires_at)
            .bind(request.reason)
            .execute(operator_pool)
            .await
            .map_err(issue_refused)?;
        Ok(IssuedToken { id, secret, expires_at: request.expires_at })
    }

    /// An operator's revocation (`operator::OperatorSession::revoke_access_token`): through the SECURITY DEFINER function
    /// `mesh_operator_revoke_access_token` under the operator's own login role (`operator_pool`),
    /// which records that role and `reason` in `operator_actions`. `InvalidInput` for a missing
    /// reason or a token revoked already, `UnknownReference` for an unknown token. Nothing is
    /// written on error.
    pub async fn revoke_access_token_as_operator(
        operator_pool: &sqlx::PgPool,
        id: Uuid,
        reason: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("SELECT mesh_operator_revoke_access_token($1, $2)")
            .bind(id)
            .bind(reason)
            .execute(operator_pool)
            .await
            .map(|_| ())
            .map_err(|e| match ProjectSqlState::of(&e) {
                Some(ProjectSqlState::ReasonRequired) => {
                    StoreError::invalid("reason", "a revocation needs a reason of 1 to 2000 characters")
                }
                Some(ProjectSqlState::UnknownAccessToken) => StoreError::UnknownReference { kind: "access token", id },
                Some(ProjectSqlState::AlreadyRevoked) => StoreError::invalid("token", "this token was revoked already"),
                _ => StoreError::Database(e),
            })
    }
}

/// The typed error of a refused `mesh_operator_issue_access_token` call: the reason (MM007), a
/// label, expiry or binding the function refused (`invalid_parameter_value`, its message naming
/// what), or the database error.
fn issue_refused(error: sqlx::Error) -> StoreError {
    if ProjectSqlState::of(&error) == Some(ProjectSqlState::ReasonRequired) {
        return StoreError::invalid("reason", "issuing a token needs a reason of 1 to 2000 characters");
    }
    let refused =
        error.as_database_error().filter(|db| db.code().as_deref() == Some("22023")).map(|db| db.message().to_owned());
    match refused {
        Some(message) => StoreError::invalid("token", message),
        None => StoreError::Database(error),
    }
}
