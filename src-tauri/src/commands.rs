//! The IPC commands: each is one call into the core crate under the signed-in operator's own
//! login role: the operator layer (`mesh_memory::operator`) for every action and the queues the
//! CLI shares, `mesh_memory::views` and the store's read side for the browser's views.

use mesh_memory::erasure::{ErasureOptions, ErasurePreview, ErasureReport, ErasureScope, ErasureVerification};
use mesh_memory::operator;
use mesh_memory::privacy::repair::{self, EvidenceReviewDecision, EvidenceReviewPage, ReviewedSource};
use mesh_memory::privacy::sharing::{SharingRequestId, SharingRequestView, SharingState};
use mesh_memory::store::{ActorChoice, AgentSummary, BrowseFilter, ConversationChoice, EntryPage, OperatorRights};
use mesh_memory::views::{
    self, AccessTokenRow, EntryDetail, EvidenceReviewDetail, Explanation, RetrievalEventDetail, RetrievalEventList,
};
use mesh_memory::{AgentId, ConversationId, EntryId, RetrievalEventId, RevisionId, SourceId};
use tauri::State;

use crate::connections::ServerConnection;
use crate::dto;
use crate::error::{ConsoleError, ErrorKind};
use crate::state::Console;

type Res<T> = Result<T, ConsoleError>;

/// Rows per page in the browser lists.
const PAGE: u32 = 50;

/// `NotFound` for an id that names nothing (the UI shows the message).
fn not_found(what: &str, id: impl std::fmt::Display) -> ConsoleError {
    ConsoleError::new(ErrorKind::NotFound, format!("no {what} {id}"))
}

/// Database, first-run and session state.
#[tauri::command]
#[specta::specta]
pub async fn console_status(console: State<'_, Console>) -> Res<dto::ConsoleStatus> {
    Ok(console.status().await)
}

/// The server connections remembered from earlier runs (no passwords).
#[tauri::command]
#[specta::specta]
pub async fn saved_connections(console: State<'_, Console>) -> Res<Vec<ServerConnection>> {
    Ok(console.saved_connections())
}

/// Forget a remembered server connection.
#[tauri::command]
#[specta::specta]
pub async fn forget_connection(console: State<'_, Console>, connection: ServerConnection) -> Res<()> {
    console.forget_connection(&connection)
}

/// Open the local demo (the embedded cluster, seeded on first use).
#[tauri::command]
#[specta::specta]
pub async fn connect_demo(console: State<'_, Console>) -> Res<()> {
    console.connect_demo().await
}

/// Connect to a PostgreSQL server as one's own login role and sign in.
#[tauri::command]
#[specta::specta]
pub async fn connect_server(
    console: State<'_, Console>,
    connection: ServerConnection,
    password: String,
    remember: bool,
) -> Res<OperatorRights> {
    console.connect_server(connection, &password, remember).await
}

/// Sign out and close the connection; the connection screen shows again.
#[tauri::command]
#[specta::specta]
pub async fn disconnect(console: State<'_, Console>) -> Res<()> {
    console.disconnect().await
}

/// First run on the embedded database: create the operator role and sign in.
#[tauri::command]
#[specta::specta]
pub async fn create_first_operator(console: State<'_, Console>, role: String, password: String) -> Res<OperatorRights> {
    console.create_first_operator(&role, &password).await
}

/// Sign in with an own PostgreSQL login role.
#[tauri::command]
#[specta::specta]
pub async fn sign_in(console: State<'_, Console>, role: String, password: String) -> Res<OperatorRights> {
    console.sign_in(&role, &password).await
}

/// End the session.
#[tauri::command]
#[specta::specta]
pub async fn sign_out(console: State<'_, Console>) -> Res<()> {
    console.sign_out().await;
    Ok(())
}

/// Runtime agents.
#[tauri::command]
#[specta::specta]
pub async fn list_agents(console: State<'_, Console>) -> Res<Vec<AgentSummary>> {
    Ok(console.store().await?.list_runtime_agents().await?)
}

/// Subjects for the filter.
#[tauri::command]
#[specta::specta]
pub async fn list_subjects(console: State<'_, Console>, agent: Option<AgentId>) -> Res<Vec<ActorChoice>> {
    Ok(console.store().await?.list_subjects(agent).await?)
}

/// Conversations for the explain picker.
#[tauri::command]
#[specta::specta]
pub async fn list_conversations(console: State<'_, Console>, agent: Option<AgentId>) -> Res<Vec<ConversationChoice>> {
    Ok(console.store().await?.list_conversations(agent).await?)
}

/// One page of the memory browser.
#[tauri::command]
#[specta::specta]
pub async fn browse_entries(
    console: State<'_, Console>,
    filter: BrowseFilter,
    after: Option<EntryId>,
) -> Res<EntryPage> {
    Ok(console.store().await?.browse_entries(&filter, after, PAGE).await?)
}

/// An entry's revision history and lineage.
#[tauri::command]
#[specta::specta]
pub async fn entry_detail(console: State<'_, Console>, entry_id: EntryId) -> Res<EntryDetail> {
    views::entry_detail(&console.store().await?, entry_id).await?.ok_or_else(|| not_found("entry", entry_id))
}

/// Revisions withheld for unknown audience evidence.
#[tauri::command]
#[specta::specta]
pub async fn evidence_review(console: State<'_, Console>, after: Option<RevisionId>) -> Res<EvidenceReviewPage> {
    Ok(repair::evidence_review(&console.store().await?, None, after, PAGE).await?)
}

/// One revision of the review queue: its unknown sources and the actors a review may name.
#[tauri::command]
#[specta::specta]
pub async fn evidence_review_detail(console: State<'_, Console>, revision_id: RevisionId) -> Res<EvidenceReviewDetail> {
    let detail = views::evidence_review_detail(&console.store().await?, revision_id).await?;
    detail.ok_or_else(|| not_found("revision", revision_id))
}

/// Review one source of unknown evidence: mark its proven audience or leave it unknown, with a
/// note. Runs the `SECURITY DEFINER` review function as the operator's own role, which the
/// database records; read-only roles are refused.
#[tauri::command]
#[specta::specta]
pub async fn review_source_evidence(
    console: State<'_, Console>,
    source_id: SourceId,
    decision: EvidenceReviewDecision,
    note: String,
) -> Res<ReviewedSource> {
    Ok(console.session().await?.review_evidence(source_id, &decision, &note).await?)
}

/// One page of retrieval events.
#[tauri::command]
#[specta::specta]
pub async fn retrieval_events(
    console: State<'_, Console>,
    agent: Option<AgentId>,
    after: Option<RetrievalEventId>,
) -> Res<RetrievalEventList> {
    Ok(views::retrieval_events(&console.store().await?, agent, after, PAGE).await?)
}

/// One retrieval event with its selections' score components.
#[tauri::command]
#[specta::specta]
pub async fn retrieval_event(console: State<'_, Console>, event_id: RetrievalEventId) -> Res<RetrievalEventDetail> {
    let event = views::retrieval_event(&console.store().await?, event_id).await?;
    event.ok_or_else(|| not_found("retrieval event", event_id))
}

/// Is this entry eligible in this conversation, and if not, which rule rejects it?
#[tauri::command]
#[specta::specta]
pub async fn explain(
    console: State<'_, Console>,
    entry_id: EntryId,
    conversation_id: ConversationId,
) -> Res<Explanation> {
    Ok(operator::explain(&console.store().await?, None, entry_id, conversation_id).await?)
}

/// Sharing requests in `state`, or in every state with `null` (a state the UI cannot misspell:
/// the bindings type it as the literal union of the four), each pending one with the voices it
/// still waits for.
#[tauri::command]
#[specta::specta]
pub async fn sharing_requests(
    console: State<'_, Console>,
    state: Option<SharingState>,
) -> Res<Vec<SharingRequestView>> {
    Ok(operator::sharing_queue(&console.store().await?, state).await?)
}

/// Approve (creating a revision-scoped grant) or deny a pending request, with a reason. Runs as
/// the operator's own role, which the database records.
#[tauri::command]
#[specta::specta]
pub async fn decide_sharing_request(
    console: State<'_, Console>,
    request_id: SharingRequestId,
    approve: bool,
    reason: String,
) -> Res<dto::Decision> {
    let decision = console.session().await?.decide_sharing(request_id, approve, &reason).await?;
    Ok(dto::Decision::new(request_id, decision.grant, decision.decided_by))
}

/// MCP access tokens (of `agent`, or of every agent), newest first, revoked ones included, with
/// each bound speaker labelled. Never a secret: only hashes are stored.
#[tauri::command]
#[specta::specta]
pub async fn access_tokens(console: State<'_, Console>, agent: Option<AgentId>) -> Res<Vec<AccessTokenRow>> {
    Ok(operator::access_tokens(&console.store().await?, agent).await?)
}

/// Revoke an MCP access token at once, with a required reason. Runs the `SECURITY DEFINER`
/// revocation function as the operator's own role, which the database records with the reason in
/// `operator_actions`; read-only roles are refused.
#[tauri::command]
#[specta::specta]
pub async fn revoke_access_token(
    console: State<'_, Console>,
    token_id: uuid::Uuid,
    reason: String,
) -> Res<dto::TokenRevocation> {
    let revoked_by = console.session().await?.revoke_access_token(token_id, &reason).await?;
    Ok(dto::TokenRevocation { token_id, revoked_by })
}

/// What erasing `scope` would remove now: counts per kind, the revisions' excerpts and the exact
/// object ids the confirmation passes back. Read as the operator's own role.
#[tauri::command]
#[specta::specta]
pub async fn preview_erasure(console: State<'_, Console>, scope: ErasureScope) -> Res<ErasurePreview> {
    Ok(operator::erasure_preview(console.session().await?.store(), &scope).await?)
}

/// Erase what the operator previewed (`object_ids`, from [`preview_erasure`]) of `scope`, with a
/// required reason, as the operator's own role (a member of `mesh_eraser`); refused with
/// `Conflict` when the scope changed since the preview, and nothing is erased. Fingerprints are
/// recorded when `MESH_AGENT_MASTER_KEY` is set, so `verify_erasure` can scan for the text.
#[tauri::command]
#[specta::specta]
pub async fn erase(
    console: State<'_, Console>,
    scope: ErasureScope,
    object_ids: Vec<uuid::Uuid>,
    reason: String,
) -> Res<ErasureReport> {
    let options = ErasureOptions::from_environment()?;
    Ok(console.session().await?.erase(&scope, &object_ids, &reason, &options).await?)
}

/// Check an erasure: erased bodies are markers, no embedding or search row is left, and (with the
/// master key) no column holds a fingerprint of the erased text.
#[tauri::command]
#[specta::specta]
pub async fn verify_erasure(console: State<'_, Console>, erasure_id: uuid::Uuid) -> Res<ErasureVerification> {
    Ok(operator::verify_erasure(&console.store().await?, erasure_id).await?)
}
