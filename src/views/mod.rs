//! Operator views: what the console and the CLI show an operator, assembled once here so that
//! neither shell collects ids or looks up labels itself. Each function reads through the store,
//! retrieval, privacy or semantic APIs (the SQL stays with the module that owns each table) and renders
//! actor ids as the labels prompts use (`Name (id U123)`, the id itself when the actor is gone).
//!
//! With the `specta` feature every view derives `specta::Type`, so the console's TypeScript
//! bindings come from these types; the core knows nothing of the console itself.

use std::collections::HashMap;

use serde::Serialize;

use crate::ids::{ActorId, AgentId, ConversationId, EntryId, RetrievalEventId, RevisionId, SourceId};
use crate::privacy::repair::{self, RevisionUnderReview};
use crate::privacy::{explain_entry, PrivacyError, RuleName};
use crate::retrieval::audit::{list_events, RetrievalEventSummary};
use crate::retrieval::{explain_event, EventExplanation, RetrievalError};
use crate::semantic;
use crate::store::{
    AccessTokenView, ActorChoice, EntryHistory, LineageMessage, LineageRevision, SourceKind, Store, StoreError,
};

/// An entry with its whole history and the lineage nodes its sources name, for the entry page
/// and its lineage graph.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EntryDetail {
    /// The entry, every revision and every source, labels rendered.
    #[serde(flatten)]
    pub history: EntryHistory,
    /// Transcript messages named by any revision's lineage.
    pub messages: Vec<LineageMessage>,
    /// Revisions (parents or retrieved memories) named by any revision's lineage.
    pub linked_revisions: Vec<LineageRevision>,
}

/// A revision of the evidence-review queue opened for review: its sources of unknown evidence
/// and the actors the operator may name as their proven audience.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EvidenceReviewDetail {
    /// The revision and its unknown sources.
    #[serde(flatten)]
    pub revision: RevisionUnderReview,
    /// Everyone recorded in one of the agent's conversations or who sent it a message, sorted by
    /// label: the choices of a proven audience, and the labels of senders and members.
    pub audience_choices: Vec<ActorChoice>,
}

/// One retrieval event of the events list, with its destination audience labelled.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RetrievalEventRow {
    /// The audited search.
    #[serde(flatten)]
    pub event: RetrievalEventSummary,
    /// Labels of `destination_audience`, same order.
    pub audience_labels: Vec<String>,
}

/// A page of the retrieval-events list.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RetrievalEventList {
    /// Newest first.
    pub events: Vec<RetrievalEventRow>,
    /// Pass as `after` to get the next page.
    pub next_after: Option<RetrievalEventId>,
}

/// One audited search in full (selections, score components, skipped and withheld counts),
/// with its destination audience labelled.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RetrievalEventDetail {
    /// The audit row as recorded.
    #[serde(flatten)]
    pub event: EventExplanation,
    /// Labels of `destination_audience`, same order.
    pub audience_labels: Vec<String>,
}

/// Whether an entry may be used in a conversation and which rule decides, with every actor
/// labelled (the eligibility context itself stays in the core: it cannot be serialised back).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct Explanation {
    /// The entry asked about.
    pub entry_id: EntryId,
    /// Its current revision, the one retrieval would use.
    pub revision_id: RevisionId,
    /// The verdict.
    pub eligible: bool,
    /// The deciding rule.
    pub rule: RuleName,
    /// The verdict in words.
    pub explanation: String,
    /// Labels of the destination audience the entry was judged against.
    pub audience: Vec<String>,
    /// The source that failed, when a source rule decided.
    pub failing_source: Option<FailingSource>,
}

/// The explanation as the CLI prints it (the console renders the same fields): the verdict in
/// words, then the failing source and the readers it lacks, when a source rule decided.
impl std::fmt::Display for Explanation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "entry {} revision {}", self.entry_id, self.revision_id)?;
        writeln!(f, "audience: {}", if self.audience.is_empty() { "nobody".into() } else { self.audience.join(", ") })?;
        write!(f, "verdict: {}", self.explanation)?;
        if let Some(source) = &self.failing_source {
            write!(f, "\nfailing source: {} ({}; {})", source.source_id, source.kind, source.evidence_basis)?;
            if !source.missing_actors.is_empty() {
                write!(f, "\nreaders here who could not read that source: {}", source.missing_actors.join(", "))?;
            }
        }
        Ok(())
    }
}

/// The source a rejection names, with the readers it lacks labelled.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct FailingSource {
    /// The source row.
    pub source_id: SourceId,
    /// What it points at.
    pub kind: SourceKind,
    /// How its evidence was established.
    pub evidence_basis: String,
    /// Labels of the destination readers missing from its known audience.
    pub missing_actors: Vec<String>,
}

/// An MCP access token as the console lists it: the token (never its secret) with the bound
/// speaker labelled as prompts label them, so the operator sees who a token speaks as, not only a
/// connector id.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct AccessTokenRow {
    /// The token as stored: binding, label, issue, last use and revocation times.
    #[serde(flatten)]
    pub token: AccessTokenView,
    /// The bound speaker's current label (`Priya (id U456)`; the actor id when the actor is gone).
    pub speaker_label: String,
}

/// One line of `mesh-memory mcp token list`: the token's line, then whom it speaks as.
impl std::fmt::Display for AccessTokenRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}  (speaks as {})", self.token, self.speaker_label)
    }
}

/// An entry with its history and lineage nodes, or `None` when there is no such entry.
pub async fn entry_detail(store: &Store, entry: EntryId) -> Result<Option<EntryDetail>, StoreError> {
    let Some(agent) = store.entry_owner(entry).await? else { return Ok(None) };
    let Some(history) = store.entry_history(agent, entry).await? else { return Ok(None) };
    let sources = history.revisions.iter().flat_map(|r| r.sources.iter());
    let messages: Vec<_> = sources.clone().filter_map(|s| s.message_id).collect();
    let revisions: Vec<_> = sources.filter_map(|s| s.parent_revision_id).collect();
    let messages = store.lineage_messages(&messages).await?;
    let linked_revisions = store.lineage_revisions(&revisions).await?;
    Ok(Some(EntryDetail { history, messages, linked_revisions }))
}

/// A revision's sources of unknown evidence with the audience choices, or `None` when there is
/// no such revision.
pub async fn evidence_review_detail(
    store: &Store,
    revision: RevisionId,
) -> Result<Option<EvidenceReviewDetail>, StoreError> {
    let Some(revision) = repair::revision_under_review(store, revision).await? else { return Ok(None) };
    let audience_choices = store.audience_candidates(revision.runtime_agent_id).await?;
    Ok(Some(EvidenceReviewDetail { revision, audience_choices }))
}

/// One page of retrieval events (of `agent`, or of every agent), newest first, after the
/// `next_after` cursor of the previous page.
pub async fn retrieval_events(
    store: &Store,
    agent: Option<AgentId>,
    after: Option<RetrievalEventId>,
    limit: u32,
) -> Result<RetrievalEventList, RetrievalError> {
    let page = list_events(store.pool(), agent, after, limit).await?;
    let labels = Labels::of(store, page.events.iter().flat_map(|e| e.destination_audience.iter())).await?;
    let events = page
        .events
        .into_iter()
        .map(|event| RetrievalEventRow { audience_labels: labels.all(&event.destination_audience), event })
        .collect();
    Ok(RetrievalEventList { events, next_after: page.next_after })
}

/// One audited search, or `None` when there is no such event.
pub async fn retrieval_event(
    store: &Store,
    event: RetrievalEventId,
) -> Result<Option<RetrievalEventDetail>, RetrievalError> {
    let Some(event) = explain_event(store.pool(), event).await? else { return Ok(None) };
    let labels = Labels::of(store, event.destination_audience.iter()).await?;
    Ok(Some(RetrievalEventDetail { audience_labels: labels.all(&event.destination_audience), event }))
}

/// Explains an entry's eligibility in a conversation (`agent` defaults to the entry's owner; see
/// [`explain_entry`]), with the audience and the failing source's missing readers labelled.
pub async fn explanation(
    store: &Store,
    agent: Option<AgentId>,
    entry: EntryId,
    conversation: ConversationId,
) -> Result<Explanation, PrivacyError> {
    let explained = explain_entry(store, agent, entry, conversation).await?;
    let audience = explained.context.audience();
    let missing = explained.failing_source.iter().flat_map(|f| f.missing_actors.iter());
    let labels = Labels::of(store, audience.iter().chain(missing)).await?;
    Ok(Explanation {
        entry_id: explained.entry_id,
        revision_id: explained.revision_id,
        eligible: explained.eligible,
        rule: explained.rule.kind(),
        audience: labels.all(audience),
        failing_source: explained.failing_source.map(|f| FailingSource {
            source_id: f.source_id,
            kind: f.kind,
            evidence_basis: f.evidence_basis,
            missing_actors: labels.all(&f.missing_actors),
        }),
        explanation: explained.explanation,
    })
}

/// Every MCP access token (of `agent`, or of every agent), newest first, revoked ones included,
/// with each bound speaker labelled. Two queries whatever the number of tokens.
pub async fn access_tokens(store: &Store, agent: Option<AgentId>) -> Result<Vec<AccessTokenRow>, StoreError> {
    let tokens = store.list_access_tokens(agent).await?;
    let labels = Labels::of(store, tokens.iter().map(|t| &t.actor_id)).await?;
    Ok(tokens.into_iter().map(|token| AccessTokenRow { speaker_label: labels.one(token.actor_id), token }).collect())
}

/// Current labels of a set of actors, read in one query.
struct Labels(HashMap<ActorId, String>);

impl Labels {
    async fn of(store: &Store, actors: impl Iterator<Item = &ActorId>) -> Result<Self, StoreError> {
        Ok(Self(store.actor_labels(actors.copied().collect()).await?))
    }

    /// Each actor's label, or its id when the actor row is gone.
    fn all(&self, actors: &[ActorId]) -> Vec<String> {
        actors.iter().map(|a| self.one(*a)).collect()
    }

    /// One actor's label, or its id when the actor row is gone.
    fn one(&self, actor: ActorId) -> String {
        self.0.get(&actor).cloned().unwrap_or_else(|| actor.to_string())
    }
}

/// The semantic index as `mesh-memory index status` reports it: whether pgvector is installed,
/// every embedding generation, the rebuild in progress and the outbox counts.
#[derive(Clone, Debug, Serialize)]
pub struct IndexStatus {
    /// Every generation, oldest first.
    pub generations: Vec<semantic::Generation>,
    /// The outbox's counts.
    pub outbox: semantic::OutboxStatus,
    /// Whether the pgvector extension is installed (semantic search needs it).
    pub pgvector: bool,
    /// The rebuild in progress, if any.
    pub rebuild: Option<semantic::RebuildProgress>,
}

/// The semantic index's generations, rebuild progress and outbox counts.
pub async fn index_status(store: &Store) -> Result<IndexStatus, semantic::SemanticError> {
    let pool = store.pool();
    Ok(IndexStatus {
        generations: semantic::list_generations(pool).await?,
        rebuild: semantic::rebuild_progress(pool).await?,
        outbox: semantic::outbox_status(pool).await?,
        pgvector: semantic::pgvector_available(pool).await?,
    })
}

/// One line per fact; a generation that embeds another document form than this version writes
/// says that semantic search waits for a rebuild.
impl std::fmt::Display for IndexStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pgvector: {}", if self.pgvector { "installed" } else { "missing (semantic search unavailable)" })?;
        for g in &self.generations {
            write!(
                f,
                "\ngeneration {}  {:?}  {}/{} ({} dimensions, embeds {})  created {}",
                g.id, g.state, g.provider, g.model, g.dimension, g.document_form, g.created_at
            )?;
            if g.state == semantic::GenerationState::Active && g.document_form != semantic::DOCUMENT_FORM {
                write!(
                    f,
                    "\n  its vectors embed another text ({}) than this version writes ({}): semantic search is \
                     unavailable until `mesh-memory index rebuild`",
                    g.document_form,
                    semantic::DOCUMENT_FORM
                )?;
            }
        }
        if let Some(p) = &self.rebuild {
            write!(
                f,
                "\nrebuild of generation {}: {}/{} current revisions embedded",
                p.generation, p.embedded, p.total
            )?;
        }
        let o = &self.outbox;
        write!(f, "\noutbox: {} due, {} waiting to retry, {} parked, {} done", o.due, o.waiting, o.parked, o.done)
    }
}
