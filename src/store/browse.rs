//! Read APIs for the operator console: the memory browser, the evidence-review queue and the
//! small lookups that fill its pickers (agents, actors, conversations, lineage messages).
//!
//! Browsing must stay fast at millions of revisions, so every list is keyset-paginated on a
//! time-ordered UUIDv7 id (newest first) with a `LIMIT`: the next page starts strictly after the
//! last id of the previous one, which an index range scan answers without counting or skipping
//! rows. Filters are assembled from fixed SQL fragments with bound values (never from user text),
//! so each filter combination gets its own prepared statement and plan. The redundant join
//! predicate `r.entry_id = e.id` lets PostgreSQL order a subject-filtered page by the
//! `(subject_actor_id, entry_id DESC)` index instead of sorting every match.
//!
//! Measured on 1,000,000 revisions (500,000 entries, two revisions each; 2 shared cores): a page of
//! 50 takes about 2 to 10 ms unfiltered or filtered by agent, state, subject or text, page 20 as
//! fast as page 1, and the evidence-review page about 2 ms (`e2e_fixture browse-timing`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{Postgres, QueryBuilder};

use super::conversation::{Direction, Topology};
use super::identity::ActorKind;
use super::lineage::SourceKind;
use super::memory::{EntryState, RestrictionKind};
use super::{Store, StoreError};
use crate::ids::{ActorId, AgentId, ConversationId, EntryId, MessageId, RevisionId, SourceId};

/// The most rows one page may hold; larger requests are clamped, so a caller cannot ask the
/// database for an unbounded scan.
pub const MAX_PAGE_SIZE: u32 = 200;

/// How many characters of a body a list row carries; the detail view shows the whole body.
const PREVIEW_CHARS: i32 = 280;

/// Which entries the memory browser shows. Every field narrows the list; `None` means any.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct BrowseFilter {
    /// Only this runtime agent's memory.
    pub agent: Option<AgentId>,
    /// Only entries whose current revision is about this actor.
    pub subject: Option<ActorId>,
    /// Only live or only forgotten entries.
    pub state: Option<EntryState>,
    /// Full-text words over the current body (PostgreSQL `websearch_to_tsquery`), or an entry or
    /// revision id pasted in whole.
    pub text: Option<String>,
}

/// One row of the memory browser: an entry with its current revision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EntrySummary {
    /// Entry id (also the keyset cursor).
    pub entry_id: EntryId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Its name.
    pub agent_name: String,
    /// Live or forgotten.
    pub state: EntryState,
    /// Always-on flag.
    pub always_on: bool,
    /// Whether it is confined to one conversation.
    pub restriction: RestrictionKind,
    /// Current revision.
    pub current_revision_id: RevisionId,
    /// Its number (1 = never amended).
    pub revision_number: i32,
    /// The start of the current body.
    pub body_preview: String,
    /// Subject of the current revision, `None` = unresolved.
    pub subject: Option<ActorId>,
    /// Rendered subject label.
    pub subject_label: Option<String>,
    /// When the entry last changed.
    pub updated_at: DateTime<Utc>,
    /// Whether any source of the current revision has unknown audience evidence (so retrieval
    /// withholds it until it is reviewed or released).
    pub evidence_unknown: bool,
}

/// A page of entries plus the cursor of the next page (`None` on the last page).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EntryPage {
    /// Newest first.
    pub entries: Vec<EntrySummary>,
    /// Pass as `after` to get the next page.
    pub next_after: Option<EntryId>,
}

/// A revision withheld from retrieval because a source's audience is not proven.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EvidenceReviewItem {
    /// The revision (also the keyset cursor).
    pub revision_id: RevisionId,
    /// Its entry.
    pub entry_id: EntryId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Its name.
    pub agent_name: String,
    /// Revision number.
    pub revision_number: i32,
    /// The start of the body.
    pub body_preview: String,
    /// Rendered subject label.
    pub subject_label: Option<String>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// How many of its sources have unknown evidence.
    #[cfg_attr(feature = "specta", specta(type = u32))] // a count: a plain TypeScript number
    pub unknown_sources: i64,
    /// Which kinds of source they are, deduplicated (in the order of their names).
    pub unknown_source_kinds: Vec<SourceKind>,
    /// Why their evidence is unknown, deduplicated.
    pub evidence_bases: Vec<String>,
}

/// An evidence-review row as read, before its subject is labelled.
#[derive(sqlx::FromRow)]
struct ReviewRow {
    #[sqlx(flatten)]
    item: EvidenceReviewItem,
    subject_actor_id: Option<ActorId>,
}

/// A page of the evidence-review queue.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EvidenceReviewPage {
    /// Newest first.
    pub items: Vec<EvidenceReviewItem>,
    /// Pass as `after` to get the next page.
    pub next_after: Option<RevisionId>,
}

/// A revision in the evidence-review queue, with each of its sources of unknown evidence: what
/// an operator needs to decide who could read them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RevisionUnderReview {
    /// The revision.
    pub revision_id: RevisionId,
    /// Its entry.
    pub entry_id: EntryId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Revision number.
    pub revision_number: i32,
    /// The whole body: the operator judges what it would reveal.
    pub body: String,
    /// Its sources whose audience evidence is unknown, oldest first (empty once all are known).
    pub sources: Vec<UnknownSource>,
}

/// One source of unknown audience evidence, with the transcript facts an operator weighs (who
/// said it, where, who was recorded in that conversation then) and the last "left unknown" note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct UnknownSource {
    /// The source row (what a review names).
    pub source_id: SourceId,
    /// What it points at.
    pub kind: SourceKind,
    /// Why its evidence is unknown.
    pub evidence_basis: String,
    /// The message, for message sources.
    pub message_id: Option<MessageId>,
    /// Where the message was said.
    pub conversation_title: Option<String>,
    /// That conversation's recorded topology (`unknown` is the usual reason for review).
    pub conversation_topology: Option<Topology>,
    /// Who sent the message.
    pub sender: Option<ActorId>,
    /// Whether a connector authenticated the sender.
    pub sender_authenticated: Option<bool>,
    /// When it was sent.
    pub sent_at: Option<DateTime<Utc>>,
    /// The start of the message, or of the referenced revision for revision sources.
    pub excerpt: Option<String>,
    /// The referenced revision, for revision sources.
    pub parent_revision_id: Option<RevisionId>,
    /// Actors recorded as members of the conversation when the message was sent (never the agent
    /// itself): a hint, not proof, since the topology is what is unknown.
    pub members_when_sent: Vec<ActorId>,
    /// The last operator note that left this source unknown: who, when and why.
    pub kept_unknown_by: Option<String>,
    /// When.
    pub kept_unknown_at: Option<DateTime<Utc>>,
    /// The note.
    pub kept_unknown_note: Option<String>,
}

/// A runtime agent for pickers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct AgentSummary {
    /// Agent id.
    pub id: AgentId,
    /// Unique name.
    pub name: String,
    /// Live entries it holds.
    #[cfg_attr(feature = "specta", specta(type = u32))] // a count: a plain TypeScript number
    pub live_entries: i64,
}

/// An actor for pickers, with the label prompts render for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ActorChoice {
    /// Actor id.
    pub id: ActorId,
    /// Person, agent or service.
    pub kind: ActorKind,
    /// `Name (id U123)`: distinct even when display names collide.
    pub label: String,
}

/// A conversation for pickers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ConversationChoice {
    /// Conversation id.
    pub id: ConversationId,
    /// Owning runtime agent.
    pub runtime_agent_id: AgentId,
    /// Title (e.g. `#engineering`).
    pub title: String,
    /// Who can read it, structurally.
    pub topology: Topology,
    /// Connector name.
    pub connector: String,
}

/// A transcript message as the lineage graph shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct LineageMessage {
    /// Message id.
    pub id: MessageId,
    /// Where it was said.
    pub conversation_id: ConversationId,
    /// That conversation's title.
    pub conversation_title: String,
    /// Received or sent by the agent.
    pub direction: Direction,
    /// Sender actor.
    pub sender: ActorId,
    /// Sender display name (current).
    pub sender_name: String,
    /// Whether a connector authenticated the sender.
    pub authenticated: bool,
    /// When it was sent.
    pub sent_at: DateTime<Utc>,
    /// The start of the message.
    pub excerpt: String,
}

/// A revision that another revision names as a source, for the lineage graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct LineageRevision {
    /// Revision id.
    pub id: RevisionId,
    /// Its entry.
    pub entry_id: EntryId,
    /// Revision number.
    pub revision_number: i32,
    /// When it was learned (`memory_learned_times`).
    pub learned_at: DateTime<Utc>,
    /// The start of its body.
    pub body_preview: String,
}

fn page_size(limit: u32) -> i64 {
    i64::from(limit.clamp(1, MAX_PAGE_SIZE))
}

/// A filter's text as a whole id, when the operator pasted one.
fn pasted_id(text: &str) -> Option<uuid::Uuid> {
    uuid::Uuid::parse_str(text.trim()).ok()
}

impl Store {
    /// One page of the memory browser, newest entry first. `after` is the `next_after` of the
    /// previous page. Keyset pagination on the entry id keeps every page an index range scan.
    pub async fn browse_entries(
        &self,
        filter: &BrowseFilter,
        after: Option<EntryId>,
        limit: u32,
    ) -> Result<EntryPage, StoreError> {
        let text = filter.text.as_deref().map(str::trim).filter(|t| !t.is_empty());
        if let Some(text) = text {
            if text.chars().count() > 500 {
                return Err(StoreError::invalid("text", "must be at most 500 characters"));
            }
        }
        let size = page_size(limit);
        let mut query = QueryBuilder::<Postgres>::new(
            "SELECT e.id AS entry_id, e.runtime_agent_id, ra.name AS agent_name, e.state, e.always_on,
                    e.restriction, e.current_revision_id, r.revision_number,
                    left(r.body, ",
        );
        query.push_bind(PREVIEW_CHARS);
        query.push(
            ") AS body_preview, r.subject_actor_id AS subject, NULL::text AS subject_label,
                    e.updated_at,
                    EXISTS (SELECT 1 FROM revision_sources s
                             WHERE s.revision_id = r.id AND s.evidence = 'unknown') AS evidence_unknown
               FROM memory_entries e
               JOIN memory_entry_revisions r ON r.id = e.current_revision_id AND r.entry_id = e.id
               JOIN runtime_agents ra ON ra.id = e.runtime_agent_id
              WHERE true",
        );
        if let Some(agent) = filter.agent {
            query.push(" AND e.runtime_agent_id = ").push_bind(agent);
        }
        if let Some(subject) = filter.subject {
            query.push(" AND r.subject_actor_id = ").push_bind(subject);
        }
        if let Some(state) = filter.state {
            query.push(" AND e.state = ").push_bind(state);
        }
        match text.map(|t| (t, pasted_id(t))) {
            Some((_, Some(id))) => {
                query.push(" AND (e.id = ").push_bind(id);
                query.push(" OR e.id = (SELECT entry_id FROM memory_entry_revisions WHERE id = ").push_bind(id);
                query.push("))");
            }
            Some((words, None)) => {
                query.push(" AND r.body_tsv @@ websearch_to_tsquery('english', ").push_bind(words.to_owned());
                query.push(")");
            }
            None => {}
        }
        if let Some(after) = after {
            query.push(" AND e.id < ").push_bind(after);
        }
        query.push(" ORDER BY e.id DESC LIMIT ").push_bind(size);
        let mut entries: Vec<EntrySummary> = query.build_query_as().fetch_all(&self.pool).await?;
        let labels = self.actor_labels(entries.iter().filter_map(|e| e.subject).collect()).await?;
        for entry in &mut entries {
            entry.subject_label = entry.subject.and_then(|s| labels.get(&s).cloned());
        }
        let next_after = if entries.len() as i64 == size { entries.last().map(|e| e.entry_id) } else { None };
        Ok(EntryPage { entries, next_after })
    }

    /// The evidence-review queue: current revisions of live entries with at least one source of
    /// unknown audience evidence (retrieval withholds them), newest first, keyset on revision id.
    pub async fn evidence_review(
        &self,
        agent: Option<AgentId>,
        after: Option<RevisionId>,
        limit: u32,
    ) -> Result<EvidenceReviewPage, StoreError> {
        let size = page_size(limit);
        let mut query = QueryBuilder::<Postgres>::new(
            "SELECT r.id AS revision_id, r.entry_id, r.runtime_agent_id, ra.name AS agent_name, r.revision_number,
                    left(r.body, ",
        );
        query.push_bind(PREVIEW_CHARS);
        query.push(
            ") AS body_preview,
                    r.subject_actor_id, NULL::text AS subject_label,
                    r.created_at,
                    count(*) AS unknown_sources,
                    array_agg(DISTINCT s.kind::text)::revision_source_kind[] AS unknown_source_kinds,
                    array_agg(DISTINCT s.evidence_basis) AS evidence_bases
               FROM revision_sources s
               JOIN memory_entry_revisions r ON r.id = s.revision_id
               JOIN memory_entries e ON e.current_revision_id = r.id AND e.state = 'live'
               JOIN runtime_agents ra ON ra.id = r.runtime_agent_id
              WHERE s.evidence = 'unknown'",
        );
        if let Some(agent) = agent {
            query.push(" AND r.runtime_agent_id = ").push_bind(agent);
        }
        if let Some(after) = after {
            query.push(" AND r.id < ").push_bind(after);
        }
        query.push(" GROUP BY r.id, ra.name ORDER BY r.id DESC LIMIT ").push_bind(size);
        let rows: Vec<ReviewRow> = query.build_query_as().fetch_all(&self.pool).await?;
        let labels = self.actor_labels(rows.iter().filter_map(|r| r.subject_actor_id).collect()).await?;
        let items: Vec<EvidenceReviewItem> = rows
            .into_iter()
            .map(|row| {
                let mut item = row.item;
                item.subject_label = row.subject_actor_id.and_then(|s| labels.get(&s).cloned());
                item
            })
            .collect();
        let next_after = if items.len() as i64 == size { items.last().map(|i| i.revision_id) } else { None };
        Ok(EvidenceReviewPage { items, next_after })
    }

    /// One revision with its sources of unknown evidence, for the review form; `None` when there
    /// is no such revision.
    pub async fn revision_under_review(&self, revision: RevisionId) -> Result<Option<RevisionUnderReview>, StoreError> {
        let row: Option<(EntryId, AgentId, i32, String)> = sqlx::query_as(
            "SELECT entry_id, runtime_agent_id, revision_number, body FROM memory_entry_revisions WHERE id = $1",
        )
        .bind(revision)
        .fetch_optional(&self.pool)
        .await?;
        let Some((entry_id, runtime_agent_id, revision_number, body)) = row else { return Ok(None) };
        let sources: Vec<UnknownSource> = sqlx::query_as(
            "SELECT s.id AS source_id, s.kind, s.evidence_basis, s.message_id,
                    c.title AS conversation_title, c.topology AS conversation_topology,
                    m.sender_actor_id AS sender, m.sender_identity_id IS NOT NULL AS sender_authenticated,
                    m.sent_at, left(coalesce(m.body, p.body), $2) AS excerpt, s.parent_revision_id,
                    coalesce((SELECT array_agg(DISTINCT cm.actor_id) FROM conversation_memberships cm
                               WHERE cm.conversation_id = m.conversation_id AND cm.joined_at <= m.sent_at
                                 AND (cm.left_at IS NULL OR cm.left_at > m.sent_at)
                                 AND cm.actor_id <> (SELECT ra.actor_id FROM runtime_agents ra
                                                      WHERE ra.id = s.runtime_agent_id)), '{}') AS members_when_sent,
                    k.role_name AS kept_unknown_by, k.acted_at AS kept_unknown_at, k.reason AS kept_unknown_note
               FROM revision_sources s
               LEFT JOIN messages m ON m.id = s.message_id
               LEFT JOIN conversations c ON c.id = m.conversation_id
               LEFT JOIN memory_entry_revisions p ON p.id = s.parent_revision_id
               LEFT JOIN LATERAL (SELECT o.role_name, o.acted_at, o.reason FROM operator_actions o
                                   WHERE o.target_id = s.id AND o.action = 'keep_source_evidence_unknown'
                                   ORDER BY o.id DESC LIMIT 1) k ON true
              WHERE s.revision_id = $1 AND s.evidence = 'unknown'
              ORDER BY s.created_at, s.id",
        )
        .bind(revision)
        .bind(PREVIEW_CHARS)
        .fetch_all(&self.pool)
        .await?;
        Ok(Some(RevisionUnderReview {
            revision_id: revision,
            entry_id,
            runtime_agent_id,
            revision_number,
            body,
            sources,
        }))
    }

    /// Actors an operator may name as a proven audience of `agent`'s sources: everyone recorded
    /// in one of its conversations or who sent it a message (never the agent itself).
    pub async fn audience_candidates(&self, agent: AgentId) -> Result<Vec<ActorChoice>, StoreError> {
        let ids: Vec<ActorId> = sqlx::query_scalar(
            "SELECT cm.actor_id FROM conversation_memberships cm
               JOIN conversations c ON c.id = cm.conversation_id WHERE c.runtime_agent_id = $1
             UNION
             SELECT m.sender_actor_id FROM messages m WHERE m.runtime_agent_id = $1 AND m.direction = 'inbound'
             EXCEPT
             SELECT ra.actor_id FROM runtime_agents ra WHERE ra.id = $1",
        )
        .bind(agent)
        .fetch_all(&self.pool)
        .await?;
        let mut choices: Vec<ActorChoice> = self
            .actor_summaries(&ids)
            .await?
            .into_iter()
            .map(|a| ActorChoice { id: a.id, kind: a.kind, label: a.label() })
            .collect();
        choices.sort_by(|a, b| a.label.cmp(&b.label));
        Ok(choices)
    }

    /// Every runtime agent with its count of live entries, by name.
    pub async fn list_runtime_agents(&self) -> Result<Vec<AgentSummary>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT ra.id, ra.name,
                    (SELECT count(*) FROM memory_entries e WHERE e.runtime_agent_id = ra.id AND e.state = 'live')
                        AS live_entries
               FROM runtime_agents ra ORDER BY ra.name",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    /// Actors that are the subject of at least one revision of `agent` (or of any agent), for the
    /// subject filter, by label.
    pub async fn list_subjects(&self, agent: Option<AgentId>) -> Result<Vec<ActorChoice>, StoreError> {
        let ids: Vec<(ActorId,)> = sqlx::query_as(
            "SELECT DISTINCT r.subject_actor_id FROM memory_entries e
               JOIN memory_entry_revisions r ON r.id = e.current_revision_id
              WHERE r.subject_actor_id IS NOT NULL AND ($1::uuid IS NULL OR e.runtime_agent_id = $1)",
        )
        .bind(agent)
        .fetch_all(&self.pool)
        .await?;
        let ids: Vec<ActorId> = ids.into_iter().map(|r| r.0).collect();
        let mut choices: Vec<ActorChoice> = self
            .actor_summaries(&ids)
            .await?
            .into_iter()
            .map(|a| ActorChoice { id: a.id, kind: a.kind, label: a.label() })
            .collect();
        choices.sort_by(|a, b| a.label.cmp(&b.label));
        Ok(choices)
    }

    /// Conversations of `agent` (or of every agent), by title, for the explain picker.
    pub async fn list_conversations(&self, agent: Option<AgentId>) -> Result<Vec<ConversationChoice>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT id, runtime_agent_id, title, topology, connector FROM conversations
              WHERE $1::uuid IS NULL OR runtime_agent_id = $1
              ORDER BY title, id",
        )
        .bind(agent)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The transcript messages a lineage names, with sender and conversation, for the graph.
    pub async fn lineage_messages(&self, messages: &[MessageId]) -> Result<Vec<LineageMessage>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT m.id, m.conversation_id, c.title AS conversation_title, m.direction,
                    m.sender_actor_id AS sender, a.display_name AS sender_name,
                    m.sender_identity_id IS NOT NULL AS authenticated, m.sent_at, left(m.body, $2) AS excerpt
               FROM messages m
               JOIN conversations c ON c.id = m.conversation_id
               JOIN actors a ON a.id = m.sender_actor_id
              WHERE m.id = ANY($1)
              ORDER BY m.sent_at, m.id",
        )
        .bind(messages)
        .bind(PREVIEW_CHARS)
        .fetch_all(&self.pool)
        .await?)
    }

    /// The revisions a lineage names (parents and retrieved memories), for the graph.
    pub async fn lineage_revisions(&self, revisions: &[RevisionId]) -> Result<Vec<LineageRevision>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT r.id, r.entry_id, r.revision_number, t.learned_at, left(r.body, $2) AS body_preview
               FROM memory_entry_revisions r
              CROSS JOIN LATERAL memory_learned_times(ARRAY[r.id]) AS t
              WHERE r.id = ANY($1) ORDER BY r.id",
        )
        .bind(revisions)
        .bind(PREVIEW_CHARS)
        .fetch_all(&self.pool)
        .await?)
    }
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

impl Store {
    /// Sharing requests in `state` (all states with `None`), oldest pending first so the queue
    /// is worked in order; at most [`MAX_PAGE_SIZE`].
    pub async fn list_sharing_requests(
        &self,
        state: Option<SharingState>,
    ) -> Result<Vec<SharingRequestView>, StoreError> {
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
        .fetch_all(&self.pool)
        .await?;
        self.label_requests(requests).await
    }

    /// Fills each request's audience and missing-voice labels.
    async fn label_requests(
        &self,
        mut requests: Vec<SharingRequestView>,
    ) -> Result<Vec<SharingRequestView>, StoreError> {
        let actors =
            requests.iter().flat_map(|r| r.proposed_audience.iter().chain(&r.missing_voices).copied()).collect();
        let labels = self.actor_labels(actors).await?;
        let label = |actor: &ActorId| labels.get(actor).cloned().unwrap_or_else(|| actor.to_string());
        for request in &mut requests {
            request.proposed_audience_names = request.proposed_audience.iter().map(label).collect();
            request.missing_voice_names = request.missing_voices.iter().map(label).collect();
        }
        Ok(requests)
    }

    /// The labels of `actors` (`Victor (id U123)`) by [`super::ActorSummary::label`], the one
    /// renderer prompts, tool results, the CLI and the console all show.
    /// (A collected list, not an iterator: a borrowing iterator held across the await would make
    /// the console's command futures not `Send`.)
    async fn actor_labels(
        &self,
        actors: Vec<ActorId>,
    ) -> Result<std::collections::HashMap<ActorId, String>, StoreError> {
        let ids: Vec<ActorId> = actors.into_iter().collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        if ids.is_empty() {
            return Ok(std::collections::HashMap::new());
        }
        Ok(self.actor_summaries(&ids).await?.into_iter().map(|a| (a.id, a.label())).collect())
    }
}
