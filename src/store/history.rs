//! Reading an entry with its full revision history and lineage, for `show`, the console and
//! tests. Labels are rendered from current identity rows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::lineage::SourceKind;
use super::memory::{EntryState, RestrictionKind, RevisionOperation};
use super::{Store, StoreError};
use crate::ids::{ActorId, AgentId, ConversationId, EntryId, MessageId, RevisionId, SourceId};

/// Audience evidence of one source as shown to operators.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EvidenceView {
    /// The actors who could read the source.
    Known {
        /// Actor ids.
        actors: Vec<ActorId>,
        /// Their current labels, same order.
        labels: Vec<String>,
    },
    /// Not proven; the revision is withheld from retrieval until reviewed or released.
    Unknown,
}

/// One lineage source of a revision.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct SourceView {
    /// Source row id.
    pub id: SourceId,
    /// What the source points at.
    pub kind: SourceKind,
    /// The message, for message sources.
    pub message_id: Option<MessageId>,
    /// The conversation the message was said in.
    pub conversation_id: Option<ConversationId>,
    /// The referenced revision, for revision sources.
    pub parent_revision_id: Option<RevisionId>,
    /// Audience evidence.
    pub evidence: EvidenceView,
    /// How the evidence was established.
    pub evidence_basis: String,
}

/// One immutable revision with its lineage.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RevisionView {
    /// Revision id.
    pub id: RevisionId,
    /// 1, 2, ...
    pub revision_number: i32,
    /// How the revision came to be.
    pub operation: RevisionOperation,
    /// The stored body (never contains rendered labels).
    pub body: String,
    /// Subject actor, `None` = not resolved.
    pub subject: Option<ActorId>,
    /// Rendered subject label.
    pub subject_label: Option<String>,
    /// Who supplied the claim.
    pub source_actor: Option<ActorId>,
    /// Rendered source label.
    pub source_label: Option<String>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// When it was learned: the time of the message it was told in (an amendment: the
    /// correction's), else when it was written (`memory_learned_times`). What the memory line says.
    pub learned_at: DateTime<Utc>,
    /// Who erased this revision's text, when and why (`None`: not erased). An erased body reads
    /// [`crate::erasure::ERASURE_MARKER`]; the rest of the revision (its skeleton) stays.
    pub erased: Option<crate::erasure::ErasureNote>,
    /// Lineage.
    pub sources: Vec<SourceView>,
}

/// An entry with everything it ever was.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EntryHistory {
    /// Entry id.
    pub entry_id: EntryId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Live or forgotten.
    pub state: EntryState,
    /// Always-on flag.
    pub always_on: bool,
    /// Whether it is confined to one conversation.
    pub restriction: RestrictionKind,
    /// The conversation a `conversation_only` entry is confined to.
    pub restricted_conversation_id: Option<ConversationId>,
    /// Where the memory was formed.
    pub origin_conversation_id: Option<ConversationId>,
    /// The current revision.
    pub current_revision_id: RevisionId,
    /// Revisions, oldest first.
    pub revisions: Vec<RevisionView>,
}

/// The history as `mesh-memory show` prints it: the entry, then each revision with its lineage
/// and each source's audience evidence (the console's entry page shows the same fields).
impl std::fmt::Display for EntryHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "entry {}  state: {:?}  always-on: {}  restriction: {}",
            self.entry_id, self.state, self.always_on, self.restriction
        )?;
        for r in &self.revisions {
            let current = if r.id == self.current_revision_id { "  [current]" } else { "" };
            write!(
                f,
                "\n\nrevision {} ({}) {}  written {}{}",
                r.revision_number,
                r.operation,
                r.id,
                r.created_at.format("%Y-%m-%d %H:%M"),
                current
            )?;
            write!(f, "\n  learned: {} (UTC; when it was told)", r.learned_at.format("%Y-%m-%d %H:%M"))?;
            write!(f, "\n  subject: {}", r.subject_label.as_deref().unwrap_or("(not resolved)"))?;
            write!(f, "\n  source:  {}", r.source_label.as_deref().unwrap_or("(system)"))?;
            write!(f, "\n  body:    {}", r.body)?;
            if let Some(erased) = &r.erased {
                write!(f, "  ({erased})")?;
            }
            write!(f, "\n  lineage:")?;
            for s in &r.sources {
                let target = match (&s.message_id, &s.parent_revision_id) {
                    (Some(m), _) => format!("message {m}"),
                    (_, Some(p)) => format!("revision {p}"),
                    _ => String::new(),
                };
                let evidence = match &s.evidence {
                    EvidenceView::Known { labels, .. } => format!("audience known: {}", labels.join(", ")),
                    EvidenceView::Unknown => "audience UNKNOWN (withheld from retrieval)".to_owned(),
                };
                write!(f, "\n    - {:<18} {target}\n      {evidence}  [{}]", s.kind, s.evidence_basis)?;
            }
        }
        Ok(())
    }
}

#[derive(sqlx::FromRow)]
struct EntryRow {
    id: EntryId,
    runtime_agent_id: AgentId,
    state: EntryState,
    always_on: bool,
    restriction: RestrictionKind,
    restricted_conversation_id: Option<ConversationId>,
    origin_conversation_id: Option<ConversationId>,
    current_revision_id: RevisionId,
}

#[derive(sqlx::FromRow)]
struct RevisionRow {
    id: RevisionId,
    revision_number: i32,
    operation: RevisionOperation,
    body: String,
    subject_actor_id: Option<ActorId>,
    source_actor_id: Option<ActorId>,
    created_at: DateTime<Utc>,
    learned_at: DateTime<Utc>,
}

#[derive(sqlx::FromRow)]
struct SourceRow {
    id: SourceId,
    revision_id: RevisionId,
    kind: SourceKind,
    message_id: Option<MessageId>,
    conversation_id: Option<ConversationId>,
    parent_revision_id: Option<RevisionId>,
    evidence: String,
    evidence_basis: String,
    audience: Vec<uuid::Uuid>,
}

impl Store {
    /// The entry with every revision and source, or `None` if this agent has no such entry.
    pub async fn entry_history(&self, agent: AgentId, entry: EntryId) -> Result<Option<EntryHistory>, StoreError> {
        let Some(row) = sqlx::query_as::<_, EntryRow>(
            "SELECT id, runtime_agent_id, state, always_on, restriction,
                    restricted_conversation_id, origin_conversation_id, current_revision_id
               FROM memory_entries WHERE id = $1 AND runtime_agent_id = $2",
        )
        .bind(entry)
        .bind(agent)
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let revisions: Vec<RevisionRow> = sqlx::query_as(
            "SELECT r.id, r.revision_number, r.operation, r.body, r.subject_actor_id, r.source_actor_id,
                    r.created_at, t.learned_at
               FROM memory_entry_revisions r
              CROSS JOIN LATERAL memory_learned_times(ARRAY[r.id]) AS t
              WHERE r.entry_id = $1 ORDER BY r.revision_number",
        )
        .bind(entry)
        .fetch_all(&self.pool)
        .await?;
        let sources: Vec<SourceRow> = sqlx::query_as(
            "SELECT s.id, s.revision_id, s.kind, s.message_id, m.conversation_id, s.parent_revision_id,
                    s.evidence::text AS evidence, s.evidence_basis,
                    coalesce(s.audience, '{}') AS audience
               FROM revision_sources s
               JOIN memory_entry_revisions r ON r.id = s.revision_id
               LEFT JOIN messages m ON m.id = s.message_id
              WHERE r.entry_id = $1
              ORDER BY s.created_at, s.kind, s.id",
        )
        .bind(entry)
        .fetch_all(&self.pool)
        .await?;

        let mut actors: Vec<ActorId> = revisions
            .iter()
            .flat_map(|r| [r.subject_actor_id, r.source_actor_id])
            .flatten()
            .chain(sources.iter().flat_map(|s| s.audience.iter().map(|u| ActorId(*u))))
            .collect();
        actors.sort();
        actors.dedup();
        let labels: std::collections::HashMap<ActorId, String> =
            self.actor_summaries(&actors).await?.into_iter().map(|a| (a.id, a.label())).collect();
        let label = |a: &ActorId| labels.get(a).cloned().unwrap_or_else(|| a.to_string());
        let revision_ids: Vec<RevisionId> = revisions.iter().map(|r| r.id).collect();
        let mut erased = crate::erasure::notes_for_revisions(&self.pool, &revision_ids).await?;

        let revisions = revisions
            .into_iter()
            .map(|r| RevisionView {
                sources: sources
                    .iter()
                    .filter(|s| s.revision_id == r.id)
                    .map(|s| SourceView {
                        id: s.id,
                        kind: s.kind,
                        message_id: s.message_id,
                        conversation_id: s.conversation_id,
                        parent_revision_id: s.parent_revision_id,
                        evidence: if s.evidence == "known" {
                            let actors: Vec<ActorId> = s.audience.iter().map(|u| ActorId(*u)).collect();
                            EvidenceView::Known { labels: actors.iter().map(label).collect(), actors }
                        } else {
                            EvidenceView::Unknown
                        },
                        evidence_basis: s.evidence_basis.clone(),
                    })
                    .collect(),
                subject_label: r.subject_actor_id.as_ref().map(label),
                source_label: r.source_actor_id.as_ref().map(label),
                id: r.id,
                revision_number: r.revision_number,
                operation: r.operation,
                body: r.body,
                subject: r.subject_actor_id,
                source_actor: r.source_actor_id,
                created_at: r.created_at,
                learned_at: r.learned_at,
                erased: erased.remove(&r.id),
            })
            .collect();
        Ok(Some(EntryHistory {
            entry_id: row.id,
            runtime_agent_id: row.runtime_agent_id,
            state: row.state,
            always_on: row.always_on,
            restriction: row.restriction,
            restricted_conversation_id: row.restricted_conversation_id,
            origin_conversation_id: row.origin_conversation_id,
            current_revision_id: row.current_revision_id,
            revisions,
        }))
    }

    /// The runtime agent owning an entry (CLI `show` takes a bare entry id).
    pub async fn entry_owner(&self, entry: EntryId) -> Result<Option<AgentId>, StoreError> {
        let row: Option<(AgentId,)> = sqlx::query_as("SELECT runtime_agent_id FROM memory_entries WHERE id = $1")
            .bind(entry)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.0))
    }
}
