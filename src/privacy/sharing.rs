//! Sharing requests and revision-scoped grants (tables `sharing_requests`,
//! `sharing_request_audience`, `sharing_grants`, `sharing_grant_audience`, `operator_actions`).
//!
//! The model can only create a *pending* request (tool `request_memory_sharing`, in an
//! authenticated direct conversation). A grant comes into existence only through SQL functions
//! (first defined in migration `20261202002100_sharing_roles_and_grants.sql`; today's definitions
//! are in `schema/current.sql`):
//! - [`confirm_by_source_actor`]: connector-authenticated inbound messages, in direct
//!   conversations, after the request, from every voice of the revision whose evidence does not
//!   already cover the target audience (the senders of its lineage's messages, followed through
//!   parent and retrieved revisions; the source actor alone when no voice is uncovered). Each
//!   confirmation is recorded; the last one missing creates the grant. An amender is the source
//!   actor of the amendment but not the voice of the words it kept, so they cannot release those
//!   alone;
//! - [`approve_as_operator`]: an operator's own login role (member of `mesh_operator`) calls a
//!   SECURITY DEFINER function that records `session_user`.
//!
//! The runtime's role (`mesh_runtime`) has no privilege to write grants, so even a compromised
//! runtime process cannot widen an audience by SQL.
//!
//! Operators decide from [`list_requests`] (through `operator::sharing_queue`): each request with
//! its revision, proposed audience and, while pending, the voices it still waits for.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use super::eligibility::{revision_verdicts, EligibilityContext, PrivacyError};
use crate::ids::{ActorId, AgentId, ConversationId, EntryId, MessageId, RevisionId};
use crate::sqlstate::ProjectSqlState;
use crate::store::{Store, StoreError, MAX_PAGE_SIZE};

/// How long a pending request stays decidable.
pub const REQUEST_LIFETIME_DAYS: i64 = 7;

/// A sharing request row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct SharingRequestId(pub Uuid);

/// A sharing grant row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct SharingGrantId(pub Uuid);

impl std::fmt::Display for SharingRequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Display for SharingGrantId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for SharingRequestId {
    type Err = crate::ids::MalformedId;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(text.trim())
            .map(Self)
            .map_err(|_| crate::ids::MalformedId { kind: "sharing request", text: text.chars().take(80).collect() })
    }
}

impl std::str::FromStr for SharingGrantId {
    type Err = crate::ids::MalformedId;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(text.trim())
            .map(Self)
            .map_err(|_| crate::ids::MalformedId { kind: "sharing grant", text: text.chars().take(80).collect() })
    }
}

/// Why a sharing operation did not happen. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum SharingError {
    /// Requests may only be made in a connector-authenticated direct conversation.
    #[error("sharing can only be requested in an authenticated direct conversation")]
    NotAuthenticatedDirect,
    /// The revision is not this agent's, or is no longer current (amended or forgotten).
    #[error("revision {0} is not a current memory revision of this runtime agent; recall it again")]
    RevisionNotCurrent(RevisionId),
    /// No such request.
    #[error("sharing request {0} does not exist")]
    UnknownRequest(SharingRequestId),
    /// No such grant.
    #[error("sharing grant {0} does not exist")]
    UnknownGrant(SharingGrantId),
    /// Already approved, denied or revoked (by another operator, or by the voices' confirmation):
    /// what was decided and by whom, when known.
    #[error("already decided ({0}); nothing was written")]
    AlreadyDecided(String),
    /// The grant was revoked already (by another operator); nothing was written.
    #[error("sharing grant {0} was revoked already; nothing was written")]
    AlreadyRevoked(SharingGrantId),
    /// The request's revision was amended or forgotten since; it can no longer be approved.
    #[error(
        "the memory was amended or forgotten since this request, so the requested revision is no longer current \
         and cannot be released; nothing was written (the agent may ask again for the current revision)"
    )]
    StaleRequest,
    /// Past its expiry.
    #[error("the sharing request has expired; nothing was written; ask for a new one")]
    Expired,
    /// The confirming message is not an authenticated inbound direct message after the request.
    #[error("the confirmation is not a connector-authenticated direct message received after the request")]
    ConfirmationNotAuthenticated,
    /// The confirming actor is not a voice of the revision whose confirmation is still missing.
    #[error("only a person whose words this memory holds, and who has not confirmed yet, can confirm its release")]
    NotSourceActor,
    /// A decision needs a reason.
    #[error("a reason of 1 to 2000 characters is required")]
    ReasonRequired,
    /// The database role of this connection may not do this (e.g. the runtime role approving, or
    /// writing grants directly). Use an operator login role.
    #[error("this database role is not permitted to do that (an operator login role is required)")]
    PermissionDenied,
    /// A store lookup failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// PostgreSQL failed.
    #[error("database error: {0}")]
    Database(sqlx::Error),
}

impl From<sqlx::Error> for SharingError {
    fn from(error: sqlx::Error) -> Self {
        let Some(db) = error.as_database_error() else { return SharingError::Database(error) };
        if db.code().as_deref() == Some(PERMISSION_DENIED) {
            return SharingError::PermissionDenied;
        }
        let message = db.message().to_owned();
        match ProjectSqlState::of(&error) {
            Some(ProjectSqlState::AlreadyDecided) => SharingError::AlreadyDecided(message),
            Some(ProjectSqlState::RequestExpired) => SharingError::Expired,
            Some(ProjectSqlState::StaleRequest) => SharingError::StaleRequest,
            Some(ProjectSqlState::ConfirmationNotAuthenticated) => SharingError::ConfirmationNotAuthenticated,
            Some(ProjectSqlState::NotSourceActor) => SharingError::NotSourceActor,
            Some(ProjectSqlState::ReasonRequired) => SharingError::ReasonRequired,
            _ => SharingError::Database(error),
        }
    }
}

/// PostgreSQL's `insufficient_privilege`.
const PERMISSION_DENIED: &str = "42501";

fn map_request_error(error: sqlx::Error, request: SharingRequestId) -> SharingError {
    match ProjectSqlState::of(&error) {
        Some(ProjectSqlState::UnknownSharingRequest) => SharingError::UnknownRequest(request),
        _ => SharingError::from(error),
    }
}

/// Input of [`create_request`]. The requester and the conversation come from the turn's
/// authenticated inbound message, never from a model argument.
#[derive(Clone, Debug)]
pub struct NewSharingRequest {
    /// Runtime agent.
    pub agent: AgentId,
    /// The authenticated inbound message the request is made under (its sender is the requester,
    /// its conversation must be direct).
    pub via_message: MessageId,
    /// The one revision to release.
    pub revision: RevisionId,
    /// The conversation whose current members would receive it.
    pub target_conversation: ConversationId,
    /// Why.
    pub rationale: String,
}

/// Creates a pending request (and its proposed audience, the target conversation's current
/// members) in one transaction. Never creates a grant.
pub async fn create_request(store: &Store, new: NewSharingRequest) -> Result<SharingRequestId, SharingError> {
    let rationale = new.rationale.trim();
    if rationale.is_empty() || rationale.chars().count() > 2000 {
        return Err(SharingError::ReasonRequired);
    }
    let origin: Option<(ActorId, ConversationId)> = sqlx::query_as(
        "SELECT m.sender_actor_id, m.conversation_id
           FROM messages m
           JOIN conversations c ON c.id = m.conversation_id
           JOIN connector_identities ci ON ci.id = m.sender_identity_id AND ci.actor_id = m.sender_actor_id
          WHERE m.id = $1 AND m.runtime_agent_id = $2 AND m.direction = 'inbound' AND c.topology = 'direct'",
    )
    .bind(new.via_message)
    .bind(new.agent)
    .fetch_optional(store.pool())
    .await?;
    let Some((requester, requested_in)) = origin else { return Err(SharingError::NotAuthenticatedDirect) };
    // A revision the requester may not see here is answered exactly like one that does not exist.
    let here = EligibilityContext::resolve_for_speaker(store, new.agent, requested_in, Some(requester)).await.map_err(
        |e| match e {
            PrivacyError::Store(e) => SharingError::Store(e),
            PrivacyError::Database(e) => SharingError::Database(e),
            _ => SharingError::RevisionNotCurrent(new.revision),
        },
    )?;
    let visible = revision_verdicts(store.pool(), &here, &[new.revision]).await.map_err(|e| match e {
        PrivacyError::Database(e) => SharingError::Database(e),
        PrivacyError::Store(e) => SharingError::Store(e),
        _ => SharingError::RevisionNotCurrent(new.revision),
    })?;
    if !visible.first().is_some_and(|v| v.rule.is_eligible()) {
        return Err(SharingError::RevisionNotCurrent(new.revision));
    }
    let audience = store.current_audience(new.agent, new.target_conversation).await?;
    let id = SharingRequestId(Uuid::now_v7());
    let mut tx = store.pool().begin().await?;
    let current: Option<(i32,)> = sqlx::query_as(
        "SELECT 1 FROM memory_entries WHERE current_revision_id = $1 AND runtime_agent_id = $2 AND state = 'live'",
    )
    .bind(new.revision)
    .bind(new.agent)
    .fetch_optional(&mut *tx)
    .await?;
    if current.is_none() {
        return Err(SharingError::RevisionNotCurrent(new.revision));
    }
    let now = Utc::now();
    sqlx::query(
        "INSERT INTO sharing_requests (id, runtime_agent_id, revision_id, requested_in_conversation_id,
                                       requested_by_actor_id, target_conversation_id, rationale, created_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(id)
    .bind(new.agent)
    .bind(new.revision)
    .bind(requested_in)
    .bind(requester)
    .bind(new.target_conversation)
    .bind(rationale)
    .bind(now)
    .bind(now + Duration::days(REQUEST_LIFETIME_DAYS))
    .execute(&mut *tx)
    .await?;
    sqlx::query("INSERT INTO sharing_request_audience (request_id, actor_id) SELECT $1, unnest($2::uuid[])")
        .bind(id)
        .bind(audience.iter().map(|a| a.0).collect::<Vec<Uuid>>())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(id)
}

/// What a voice's confirmation did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Confirmation {
    /// Every voice has confirmed: the grant exists now.
    Granted {
        /// The grant created.
        grant: SharingGrantId,
    },
    /// Recorded; the request stays pending until these voices confirm too (or an operator
    /// approves).
    Recorded {
        /// Voices still missing.
        missing: Vec<ActorId>,
    },
}

/// A connector-authenticated confirmation by a voice of the revision: `message` must be an
/// inbound, identity-authenticated message from one of the voices still missing
/// ([`missing_confirmations`]), in a direct conversation, recorded after
/// the request. Runs as the runtime role (the SQL function is SECURITY DEFINER).
pub async fn confirm_by_source_actor(
    pool: &PgPool,
    request: SharingRequestId,
    message: MessageId,
) -> Result<Confirmation, SharingError> {
    let grant: Option<Uuid> = sqlx::query_scalar("SELECT mesh_confirm_sharing_by_source_actor($1, $2)")
        .bind(request)
        .bind(message)
        .fetch_one(pool)
        .await
        .map_err(|e| map_request_error(e, request))?;
    Ok(match grant {
        Some(grant) => Confirmation::Granted { grant: SharingGrantId(grant) },
        None => Confirmation::Recorded { missing: missing_confirmations(pool, request).await? },
    })
}

/// The voices a request still waits for (empty once decided or when nobody's is needed).
pub async fn missing_confirmations(pool: &PgPool, request: SharingRequestId) -> Result<Vec<ActorId>, SharingError> {
    let missing: Vec<Uuid> =
        sqlx::query_scalar("SELECT memory_sharing_missing_voices($1)").bind(request).fetch_one(pool).await?;
    Ok(missing.into_iter().map(ActorId).collect())
}

/// An operator's approval. `operator_pool` must be connected as the operator's own login role
/// (a member of `mesh_operator`); that role name is recorded on the grant and in
/// `operator_actions`. A request whose revision is no longer current is refused.
pub async fn approve_as_operator(
    operator_pool: &PgPool,
    request: SharingRequestId,
    reason: &str,
) -> Result<SharingGrantId, SharingError> {
    let approved = sqlx::query_scalar("SELECT mesh_operator_approve_sharing($1, $2)")
        .bind(request)
        .bind(reason)
        .fetch_one(operator_pool)
        .await;
    match approved {
        Ok(grant) => Ok(SharingGrantId(grant)),
        Err(error) => Err(operator_refusal(operator_pool, request, error).await),
    }
}

/// An operator's denial (recorded with `session_user`).
pub async fn deny_as_operator(
    operator_pool: &PgPool,
    request: SharingRequestId,
    reason: &str,
) -> Result<(), SharingError> {
    let denied = sqlx::query("SELECT mesh_operator_deny_sharing($1, $2)")
        .bind(request)
        .bind(reason)
        .execute(operator_pool)
        .await;
    match denied {
        Ok(_) => Ok(()),
        Err(error) => Err(operator_refusal(operator_pool, request, error).await),
    }
}

/// The typed refusal of an operator decision. A request someone else decided first names that
/// decision (`approved by ops_bob`), read after the refused call rolled back, so the operator
/// learns who acted instead of a bare state.
async fn operator_refusal(operator_pool: &PgPool, request: SharingRequestId, error: sqlx::Error) -> SharingError {
    let refusal = map_request_error(error, request);
    if !matches!(refusal, SharingError::AlreadyDecided(_)) {
        return refusal;
    }
    let decided: Result<Option<(String, Option<String>)>, _> =
        sqlx::query_as("SELECT state::text, decided_by FROM sharing_requests WHERE id = $1")
            .bind(request)
            .fetch_optional(operator_pool)
            .await;
    match decided {
        Ok(Some((state, Some(by)))) if by.starts_with("source_actor:") => {
            SharingError::AlreadyDecided(format!("{state} by the confirmation of the people it quotes"))
        }
        Ok(Some((state, Some(by)))) => SharingError::AlreadyDecided(format!("{state} by {by}")),
        Ok(Some((state, None))) => SharingError::AlreadyDecided(state),
        _ => refusal,
    }
}

/// An operator's decision on a pending request: an approval (returning the grant it created)
/// or a denial (`None`), as [`approve_as_operator`] / [`deny_as_operator`], so that a console has
/// one call for its approve and deny buttons.
pub async fn decide_as_operator(
    operator_pool: &PgPool,
    request: SharingRequestId,
    approve: bool,
    reason: &str,
) -> Result<Option<SharingGrantId>, SharingError> {
    if approve {
        approve_as_operator(operator_pool, request, reason).await.map(Some)
    } else {
        deny_as_operator(operator_pool, request, reason).await.map(|()| None)
    }
}

/// An operator's revocation of a live grant (recorded with `session_user`). Replies that used
/// the revision under this grant and are not yet delivered are withheld by the delivery recheck.
pub async fn revoke_grant(operator_pool: &PgPool, grant: SharingGrantId, reason: &str) -> Result<(), SharingError> {
    sqlx::query("SELECT mesh_operator_revoke_grant($1, $2)")
        .bind(grant)
        .bind(reason)
        .execute(operator_pool)
        .await
        .map(|_| ())
        .map_err(|e| match ProjectSqlState::of(&e) {
            Some(ProjectSqlState::UnknownGrant) => SharingError::UnknownGrant(grant),
            Some(ProjectSqlState::AlreadyRevoked) => SharingError::AlreadyRevoked(grant),
            _ => SharingError::from(e),
        })
}

/// A grant as listings show it.
#[derive(Clone, Debug, Serialize, Deserialize, sqlx::FromRow)]
pub struct GrantView {
    /// Grant id.
    pub id: SharingGrantId,
    /// The released revision.
    pub revision_id: RevisionId,
    /// The request it answered.
    pub request_id: Option<SharingRequestId>,
    /// `source_actor_confirmation` or `operator_approval`.
    pub authority: String,
    /// The confirming source actor.
    pub confirmed_by_actor_id: Option<ActorId>,
    /// The approving operator's role name.
    pub approved_by_role: Option<String>,
    /// Audience released to.
    pub audience: Vec<ActorId>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Revoked, if so.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Every grant (live and revoked) of one runtime agent, newest first.
pub async fn list_grants(pool: &PgPool, agent: AgentId) -> Result<Vec<GrantView>, SharingError> {
    Ok(sqlx::query_as(
        "SELECT g.id, g.revision_id, g.request_id, g.authority::text AS authority, g.confirmed_by_actor_id,
                g.approved_by_role,
                coalesce((SELECT array_agg(a.actor_id ORDER BY a.actor_id) FROM sharing_grant_audience a
                           WHERE a.grant_id = g.id), '{}') AS audience,
                g.created_at, g.revoked_at
           FROM sharing_grants g WHERE g.runtime_agent_id = $1
          ORDER BY g.created_at DESC, g.id",
    )
    .bind(agent)
    .fetch_all(pool)
    .await?)
}

/// Where a sharing request stands (the `sharing_request_state` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "sharing_request_state", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum SharingState {
    /// Waiting for its voices' confirmations or an operator's decision.
    Pending,
    /// Released: a grant exists.
    Approved,
    /// Refused by an operator.
    Denied,
    /// Lapsed undecided.
    Expired,
}

/// A sharing request as the operator queue shows it: the revision, who asked, where, and the
/// proposed audience. Bodies are shown to operators, whose job is to judge them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct SharingRequestView {
    /// Request id.
    pub id: uuid::Uuid,
    /// Where it stands.
    pub state: SharingState,
    /// Runtime agent.
    pub runtime_agent_id: AgentId,
    /// Its name.
    pub agent_name: String,
    /// The revision the request would release.
    pub revision_id: RevisionId,
    /// Its entry.
    pub entry_id: EntryId,
    /// Revision number.
    pub revision_number: i32,
    /// The revision's body.
    pub body: String,
    /// Whether the revision is still its live entry's current one (otherwise it cannot be approved).
    pub revision_is_current: bool,
    /// Who (which actor) asked.
    pub requested_by: String,
    /// Conversation the request was made in.
    pub requested_in: String,
    /// Conversation the memory would be shared into, if named.
    pub target_conversation: Option<String>,
    /// The model's stated reason.
    pub rationale: String,
    /// The proposed audience.
    pub proposed_audience: Vec<ActorId>,
    /// Their labels (`Name (id U123)`), same order.
    pub proposed_audience_names: Vec<String>,
    /// For a pending request, the voices (people whose words the revision holds and whose
    /// evidence does not cover the proposed audience) who have not confirmed yet: the request
    /// waits for them, or for an operator. Empty once decided.
    pub missing_voices: Vec<ActorId>,
    /// Their labels (`Name (id U123)`), same order.
    pub missing_voice_names: Vec<String>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it lapses.
    pub expires_at: DateTime<Utc>,
    /// When it was decided.
    pub decided_at: Option<DateTime<Utc>>,
    /// Who decided (an operator's role name or the source actor).
    pub decided_by: Option<String>,
    /// The recorded reason.
    pub decision_reason: Option<String>,
}

/// Sharing requests in `state` (all states with `None`), oldest pending first so the queue
/// is worked in order; at most [`MAX_PAGE_SIZE`].
pub async fn list_requests(store: &Store, state: Option<SharingState>) -> Result<Vec<SharingRequestView>, StoreError> {
    let requests: Vec<SharingRequestView> = sqlx::query_as(
        "SELECT q.id, q.state, q.runtime_agent_id, ra.name AS agent_name, q.revision_id,
                r.entry_id, r.revision_number, r.body,
                EXISTS (SELECT 1 FROM memory_entries e WHERE e.current_revision_id = q.revision_id
                           AND e.state = 'live') AS revision_is_current,
                ra_by.display_name AS requested_by, rc.title AS requested_in, tc.title AS target_conversation,
                q.rationale,
                coalesce(array_agg(qa.actor_id ORDER BY aa.display_name, qa.actor_id)
                         FILTER (WHERE qa.actor_id IS NOT NULL), '{}') AS proposed_audience,
                '{}'::text[] AS proposed_audience_names,
                missing.ids AS missing_voices, '{}'::text[] AS missing_voice_names,
                q.created_at, q.expires_at, q.decided_at, q.decided_by, q.decision_reason
           FROM sharing_requests q
          CROSS JOIN LATERAL (SELECT CASE WHEN q.state = 'pending' THEN memory_sharing_missing_voices(q.id)
                                          ELSE '{}'::uuid[] END AS ids) AS missing
           JOIN runtime_agents ra ON ra.id = q.runtime_agent_id
           JOIN memory_entry_revisions r ON r.id = q.revision_id
           JOIN actors ra_by ON ra_by.id = q.requested_by_actor_id
           JOIN conversations rc ON rc.id = q.requested_in_conversation_id
           LEFT JOIN conversations tc ON tc.id = q.target_conversation_id
           LEFT JOIN sharing_request_audience qa ON qa.request_id = q.id
           LEFT JOIN actors aa ON aa.id = qa.actor_id
          WHERE $1::sharing_request_state IS NULL OR q.state = $1
          GROUP BY q.id, ra.name, r.entry_id, r.revision_number, r.body, ra_by.display_name, rc.title, tc.title,
                   missing.ids
          ORDER BY (q.state = 'pending') DESC, q.created_at, q.id
          LIMIT $2",
    )
    .bind(state)
    .bind(i64::from(MAX_PAGE_SIZE))
    .fetch_all(store.pool())
    .await?;
    label_requests(store, requests).await
}

/// Fills each request's audience and missing-voice labels.
async fn label_requests(
    store: &Store,
    mut requests: Vec<SharingRequestView>,
) -> Result<Vec<SharingRequestView>, StoreError> {
    let actors = requests.iter().flat_map(|r| r.proposed_audience.iter().chain(&r.missing_voices).copied()).collect();
    let labels = store.actor_labels(actors).await?;
    let label = |actor: &ActorId| labels.get(actor).cloned().unwrap_or_else(|| actor.to_string());
    for request in &mut requests {
        request.proposed_audience_names = request.proposed_audience.iter().map(label).collect();
        request.missing_voice_names = request.missing_voices.iter().map(label).collect();
    }
    Ok(requests)
}
