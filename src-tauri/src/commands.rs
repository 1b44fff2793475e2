//! The IPC commands: each is a thin call into the core crate plus a DTO conversion.

use mesh_memory::privacy::sharing::{self, SharingRequestId};
use mesh_memory::store::Store;
use mesh_memory::{ActorId, ConversationId, EntryId, RetrievalEventId, RevisionId};
use tauri::State;

use crate::dto;
use crate::error::{ConsoleError, ErrorKind};
use crate::state::Console;

type Res<T> = Result<T, ConsoleError>;

/// Rows per page in the browser lists.
const PAGE: u32 = 50;

fn parse_opt<T: std::str::FromStr<Err = mesh_memory::ids::MalformedId>>(v: Option<String>) -> Res<Option<T>> {
    Ok(v.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::parse).transpose()?)
}

async fn labeller(store: &Store, actors: &[ActorId]) -> Res<impl Fn(&ActorId) -> String> {
    let map: std::collections::HashMap<ActorId, String> =
        store.actor_summaries(actors).await?.into_iter().map(|a| (a.id, a.label())).collect();
    Ok(move |a: &ActorId| map.get(a).cloned().unwrap_or_else(|| a.to_string()))
}

/// Database, first-run and session state.
#[tauri::command]
#[specta::specta]
pub async fn console_status(console: State<'_, Console>) -> Res<dto::ConsoleStatus> {
    Ok(console.status().await)
}

/// First run on the embedded database: create the operator role and sign in.
#[tauri::command]
#[specta::specta]
pub async fn create_first_operator(console: State<'_, Console>, role: String, password: String) -> Res<dto::Session> {
    console.create_first_operator(&role, &password).await
}

/// Sign in with an own PostgreSQL login role.
#[tauri::command]
#[specta::specta]
pub async fn sign_in(console: State<'_, Console>, role: String, password: String) -> Res<dto::Session> {
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
pub async fn list_agents(console: State<'_, Console>) -> Res<Vec<dto::Agent>> {
    Ok(console.store().await?.list_runtime_agents().await?.into_iter().map(Into::into).collect())
}

/// Subjects for the filter.
#[tauri::command]
#[specta::specta]
pub async fn list_subjects(console: State<'_, Console>, agent: Option<String>) -> Res<Vec<dto::Actor>> {
    Ok(console.store().await?.list_subjects(parse_opt(agent)?).await?.into_iter().map(Into::into).collect())
}

/// Conversations for the explain picker.
#[tauri::command]
#[specta::specta]
pub async fn list_conversations(console: State<'_, Console>, agent: Option<String>) -> Res<Vec<dto::Conversation>> {
    Ok(console.store().await?.list_conversations(parse_opt(agent)?).await?.into_iter().map(Into::into).collect())
}

/// One page of the memory browser.
#[tauri::command]
#[specta::specta]
pub async fn browse_entries(
    console: State<'_, Console>,
    filter: dto::BrowseFilter,
    after: Option<String>,
) -> Res<dto::EntryPage> {
    let filter = filter.try_into()?;
    Ok(console.store().await?.browse_entries(&filter, parse_opt::<EntryId>(after)?, PAGE).await?.into())
}

/// An entry's revision history and lineage.
#[tauri::command]
#[specta::specta]
pub async fn entry_detail(console: State<'_, Console>, entry_id: String) -> Res<dto::EntryDetail> {
    let store = console.store().await?;
    let entry: EntryId = entry_id.parse()?;
    let agent = store.entry_owner(entry).await?.ok_or_else(|| not_found("entry", &entry_id))?;
    let history = store.entry_history(agent, entry).await?.ok_or_else(|| not_found("entry", &entry_id))?;
    let sources = history.revisions.iter().flat_map(|r| r.sources.iter());
    let messages: Vec<_> = sources.clone().filter_map(|s| s.message_id).collect();
    let revisions: Vec<RevisionId> = sources.filter_map(|s| s.parent_revision_id).collect();
    let messages = store.lineage_messages(&messages).await?;
    let linked = store.lineage_revisions(&revisions).await?;
    Ok(dto::EntryDetail::new(history, messages, linked))
}

fn not_found(what: &str, id: &str) -> ConsoleError {
    ConsoleError::new(ErrorKind::NotFound, format!("no {what} {id}"))
}

/// Revisions withheld for unknown audience evidence.
#[tauri::command]
#[specta::specta]
pub async fn evidence_review(console: State<'_, Console>, after: Option<String>) -> Res<dto::ReviewPage> {
    Ok(console.store().await?.evidence_review(None, parse_opt::<RevisionId>(after)?, PAGE).await?.into())
}

/// One page of retrieval events.
#[tauri::command]
#[specta::specta]
pub async fn retrieval_events(
    console: State<'_, Console>,
    agent: Option<String>,
    after: Option<String>,
) -> Res<dto::RetrievalEventPage> {
    let store = console.store().await?;
    let page = store.list_retrieval_events(parse_opt(agent)?, parse_opt::<RetrievalEventId>(after)?, PAGE).await?;
    let actors: Vec<ActorId> = page.events.iter().flat_map(|e| e.destination_audience.iter().copied()).collect();
    let label = labeller(&store, &actors).await?;
    Ok(dto::RetrievalEventPage::new(page, &label))
}

/// One retrieval event with its selections' score components.
#[tauri::command]
#[specta::specta]
pub async fn retrieval_event(console: State<'_, Console>, event_id: String) -> Res<dto::RetrievalEventDetail> {
    let store = console.store().await?;
    let id: RetrievalEventId = event_id.parse()?;
    let event = mesh_memory::retrieval::explain_event(store.pool(), id)
        .await?
        .ok_or_else(|| not_found("retrieval event", &event_id))?;
    let label = labeller(&store, &event.destination_audience).await?;
    Ok(dto::RetrievalEventDetail::new(event, &label))
}

/// Is this entry eligible in this conversation, and if not, which rule rejects it?
#[tauri::command]
#[specta::specta]
pub async fn explain(console: State<'_, Console>, entry_id: String, conversation_id: String) -> Res<dto::Explanation> {
    let store = console.store().await?;
    let entry: EntryId = entry_id.parse()?;
    let conversation: ConversationId = conversation_id.parse()?;
    let explanation = mesh_memory::privacy::explain_entry(&store, None, entry, conversation).await?;
    let mut actors = explanation.context.audience().to_vec();
    actors.extend(explanation.failing_source.iter().flat_map(|f| f.missing_actors.iter().copied()));
    let label = labeller(&store, &actors).await?;
    Ok(dto::Explanation::new(explanation, &label))
}

/// Sharing requests (`pending` by default; `all` for every state).
#[tauri::command]
#[specta::specta]
pub async fn sharing_requests(console: State<'_, Console>, state: Option<String>) -> Res<Vec<dto::SharingRequest>> {
    let state = match state.as_deref() {
        None | Some("") => Some("pending"),
        Some("all") => None,
        Some(other) => Some(other),
    };
    Ok(console.store().await?.list_sharing_requests(state).await?.into_iter().map(Into::into).collect())
}

/// Approve (creating a revision-scoped grant) or deny a pending request, with a reason. Runs as
/// the operator's own role, which the database records.
#[tauri::command]
#[specta::specta]
pub async fn decide_sharing_request(
    console: State<'_, Console>,
    request_id: String,
    approve: bool,
    reason: String,
) -> Res<dto::Decision> {
    let (store, role) = console.approver().await?;
    let request: SharingRequestId = request_id.parse()?;
    let grant = if approve {
        Some(sharing::approve_as_operator(store.pool(), request, &reason).await?.to_string())
    } else {
        sharing::deny_as_operator(store.pool(), request, &reason).await?;
        None
    };
    let state = if approve { "approved" } else { "denied" };
    Ok(dto::Decision { request_id, state: state.into(), grant_id: grant, decided_by: role })
}
