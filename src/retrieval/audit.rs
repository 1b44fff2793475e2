//! The retrieval audit: exactly one `memory_retrieval_events` row per search, and the explain
//! API that reads it back. The row holds a keyed digest of the query (or none), never its text;
//! selections are stored as ids, scores, components and reasons, never bodies; withheld matches
//! as categories and counts only.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use sqlx::PgPool;
use uuid::Uuid;

use super::packing::SkippedEntry;
use super::{Components, RetrievalError, RetrievalMode, Selection};
use crate::ids::{ActorId, AgentId, ConversationId, EntryId, RetrievalEventId, RevisionId};

/// Why a search returned less than it might have. Declared in precedence order: the first
/// category of a search (by this order) is its `degradation_category`. A semantic failure
/// precedes `eligibility_withheld_unknown` (the spec: "an earlier semantic failure category
/// retains precedence").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum DegradationCategory {
    /// No vector index: semantic candidates missing, lexical still ran.
    SemanticUnavailable,
    /// Semantic work passed its deadline.
    SemanticTimeout,
    /// The vector index is being rebuilt.
    IndexRebuilding,
    /// The eligible set exceeded the semantic cap.
    SemanticOversized,
    /// The semantic provider failed.
    SemanticFailed,
    /// Full-text matches were withheld because a source's audience evidence is unknown.
    EligibilityWithheldUnknown,
    /// The query had no searchable term; it was ranked like an empty query.
    QueryWithoutTerms,
    /// The destination conversation has no recorded reader: nothing was eligible (fails closed).
    AudienceWithoutReaders,
    /// The speaker is not a member of the destination now: nothing was eligible (fails closed).
    SpeakerNotMember,
}

impl DegradationCategory {
    /// The category recording why a destination audience was refused.
    pub fn of_closed_audience(closed: crate::store::ClosedAudience) -> Self {
        match closed {
            crate::store::ClosedAudience::NoReaders => Self::AudienceWithoutReaders,
            crate::store::ClosedAudience::SpeakerNotMember => Self::SpeakerNotMember,
        }
    }

    /// The stored name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::SemanticUnavailable => "semantic_unavailable",
            Self::SemanticTimeout => "semantic_timeout",
            Self::IndexRebuilding => "index_rebuilding",
            Self::SemanticOversized => "semantic_oversized",
            Self::SemanticFailed => "semantic_failed",
            Self::EligibilityWithheldUnknown => "eligibility_withheld_unknown",
            Self::QueryWithoutTerms => "query_without_terms",
            Self::AudienceWithoutReaders => "audience_without_readers",
            Self::SpeakerNotMember => "speaker_not_member",
        }
    }

    /// The category a recorded name stands for (an old name included), `None` for a name this
    /// build does not know.
    pub fn from_stored(name: &str) -> Option<Self> {
        use serde::de::IntoDeserializer;
        // The oldest recorded events name the rebuilding index by its first name.
        let name = if name == "semantic_rebuilding" { Self::IndexRebuilding.as_str() } else { name };
        Self::deserialize(IntoDeserializer::<serde::de::value::Error>::into_deserializer(name)).ok()
    }
}

/// Stored as `text` (`memory_retrieval_events.degradation_category`, `degradation_categories`)
/// and read back typed, so a reader of the audit gets the closed set of categories; a name this
/// build does not know fails the read (the schema is newer than the binary) rather than passing
/// through as an unknown string.
impl sqlx::Type<sqlx::Postgres> for DegradationCategory {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <String as sqlx::Type<sqlx::Postgres>>::type_info()
    }

    fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
        <String as sqlx::Type<sqlx::Postgres>>::compatible(ty)
    }
}

impl sqlx::postgres::PgHasArrayType for DegradationCategory {
    fn array_type_info() -> sqlx::postgres::PgTypeInfo {
        <String as sqlx::postgres::PgHasArrayType>::array_type_info()
    }

    fn array_compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
        <String as sqlx::postgres::PgHasArrayType>::array_compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, sqlx::Postgres> for DegradationCategory {
    fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        let name = <&str as sqlx::Decode<sqlx::Postgres>>::decode(value)?;
        Self::from_stored(name).ok_or_else(|| format!("unknown degradation category {name:?}").into())
    }
}

/// A selection as the audit stores it: ids, score, components and reason (no body, no labels).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct StoredSelection {
    /// The entry.
    pub entry_id: EntryId,
    /// The revision used.
    pub revision_id: RevisionId,
    /// Its number.
    pub revision_number: i32,
    /// When it was learned, as its memory line said and ranking used (absent in events recorded
    /// before learned times existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_at: Option<DateTime<Utc>>,
    /// Final score.
    pub score: f64,
    /// Score components.
    pub components: Components,
    /// Why it was chosen.
    pub reason: String,
    /// Its cost in upper-bound tokens.
    pub cost_tokens: u32,
}

impl From<&Selection> for StoredSelection {
    fn from(s: &Selection) -> Self {
        StoredSelection {
            entry_id: s.entry_id,
            revision_id: s.revision_id,
            revision_number: s.revision_number,
            learned_at: Some(s.learned_at),
            score: s.score,
            components: s.components.clone(),
            reason: s.reason.clone(),
            cost_tokens: s.cost_tokens,
        }
    }
}

/// Everything one audit row records.
pub(crate) struct NewEvent<'a> {
    pub id: RetrievalEventId,
    pub agent: AgentId,
    pub conversation: ConversationId,
    pub current_actor: Option<ActorId>,
    pub mode: RetrievalMode,
    pub query_digest: Option<Vec<u8>>,
    pub query_was_empty: bool,
    pub audience: &'a [ActorId],
    pub selections: &'a [Selection],
    pub skipped: &'a [SkippedEntry],
    pub withheld: &'a BTreeMap<String, i64>,
    pub candidate_count: usize,
    pub cost_tokens: u32,
    pub cost_bound: super::tokens::CostBound,
    pub token_budget: u32,
    pub count_budget: u32,
    pub elapsed_micros: i64,
    pub categories: &'a [DegradationCategory],
}

/// Inserts the one audit row of a search.
pub(crate) async fn record(pool: &PgPool, event: NewEvent<'_>) -> Result<(), RetrievalError> {
    let stored: Vec<StoredSelection> = event.selections.iter().map(StoredSelection::from).collect();
    let revisions: Vec<Uuid> = event.selections.iter().map(|s| s.revision_id.0).collect();
    let audience: Vec<Uuid> = event.audience.iter().map(|a| a.0).collect();
    let categories: Vec<&str> = event.categories.iter().map(|c| c.as_str()).collect();
    let to_i32 = |n: u64| i32::try_from(n).unwrap_or(i32::MAX);
    sqlx::query(
        "INSERT INTO memory_retrieval_events
             (id, runtime_agent_id, conversation_id, current_actor_id, mode, query_digest, query_was_empty,
              destination_audience, selected_revision_ids, components, skipped_oversized, withheld,
              candidate_count, cost_tokens, token_budget, count_budget, elapsed_micros,
              degradation_category, degradation_categories, cost_bound)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)",
    )
    .bind(event.id)
    .bind(event.agent)
    .bind(event.conversation)
    .bind(event.current_actor)
    .bind(event.mode)
    .bind(event.query_digest)
    .bind(event.query_was_empty)
    .bind(audience)
    .bind(revisions)
    .bind(Json(&stored))
    .bind(Json(event.skipped))
    .bind(Json(event.withheld))
    .bind(to_i32(event.candidate_count as u64))
    .bind(to_i32(u64::from(event.cost_tokens)))
    .bind(to_i32(u64::from(event.token_budget)))
    .bind(to_i32(u64::from(event.count_budget)))
    .bind(event.elapsed_micros)
    .bind(categories.first().copied())
    .bind(&categories)
    .bind(event.cost_bound.as_str())
    .execute(pool)
    .await?;
    Ok(())
}

/// An audited search as the console shows it: why each memory was selected, from durable state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct EventExplanation {
    /// The event.
    pub event_id: RetrievalEventId,
    /// Runtime agent.
    pub agent: AgentId,
    /// Destination conversation.
    pub conversation: ConversationId,
    /// Current actor of the turn.
    pub current_actor: Option<ActorId>,
    /// Prompt or recall.
    pub mode: RetrievalMode,
    /// Whether a keyed query digest was recorded (the digest itself is not shown).
    pub has_query_digest: bool,
    /// Whether the query was empty.
    pub query_was_empty: bool,
    /// Audience snapshot.
    pub destination_audience: Vec<ActorId>,
    /// Selections with components, in rank order.
    pub selections: Vec<StoredSelection>,
    /// Entries skipped by packing.
    pub skipped: Vec<SkippedEntry>,
    /// Withheld full-text matches by rule (counts only).
    #[cfg_attr(feature = "specta", specta(type = BTreeMap<String, u32>))] // counts: plain numbers
    pub withheld: BTreeMap<String, i64>,
    /// Candidates after the union.
    pub candidate_count: i32,
    /// Cost of the selection.
    pub cost_tokens: i32,
    /// Which count `cost_tokens` is in.
    pub cost_bound: super::tokens::CostBound,
    /// Token allowance.
    pub token_budget: i32,
    /// Count allowance.
    pub count_budget: i32,
    /// Duration of the search.
    #[cfg_attr(feature = "specta", specta(type = u32))] // microseconds: a plain number
    pub elapsed_micros: i64,
    /// First degradation category by precedence.
    pub degradation_category: Option<DegradationCategory>,
    /// All degradation categories.
    pub degradation_categories: Vec<DegradationCategory>,
    /// When it happened.
    pub created_at: DateTime<Utc>,
}

/// The event as `mesh-memory explain ID --event` prints it: mode, time and degradation, then each
/// selection in rank order with its score and reason (the console's event page shows the same).
impl std::fmt::Display for EventExplanation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "retrieval event {} ({:?}) at {}  degraded: {}",
            self.event_id,
            self.mode,
            self.created_at.format("%Y-%m-%d %H:%M:%S"),
            self.degradation_category.map_or("none", |c| c.as_str())
        )?;
        for (rank, s) in self.selections.iter().enumerate() {
            let learned = s.learned_at.map(|t| format!("  learned {}", t.format("%Y-%m-%d %H:%M"))).unwrap_or_default();
            write!(
                f,
                "\n{}. score {:.4}  entry {}  revision {}{}\n   why: {}",
                rank + 1,
                s.score,
                s.entry_id,
                s.revision_id,
                learned,
                s.reason
            )?;
        }
        Ok(())
    }
}

#[derive(sqlx::FromRow)]
struct EventRow {
    id: RetrievalEventId,
    runtime_agent_id: AgentId,
    conversation_id: ConversationId,
    current_actor_id: Option<ActorId>,
    mode: RetrievalMode,
    has_query_digest: bool,
    query_was_empty: bool,
    destination_audience: Vec<Uuid>,
    components: Json<Vec<StoredSelection>>,
    skipped_oversized: Json<Vec<SkippedEntry>>,
    withheld: Json<BTreeMap<String, i64>>,
    candidate_count: i32,
    cost_tokens: i32,
    cost_bound: String,
    token_budget: i32,
    count_budget: i32,
    elapsed_micros: i64,
    degradation_category: Option<DegradationCategory>,
    degradation_categories: Vec<DegradationCategory>,
    created_at: DateTime<Utc>,
}

/// Reads an audited search back, or `None` if there is no such event.
pub async fn explain_event(pool: &PgPool, event: RetrievalEventId) -> Result<Option<EventExplanation>, RetrievalError> {
    let row: Option<EventRow> = sqlx::query_as(
        "SELECT id, runtime_agent_id, conversation_id, current_actor_id, mode, query_digest IS NOT NULL AS has_query_digest,
                query_was_empty, destination_audience, components, skipped_oversized, withheld, candidate_count,
                cost_tokens, cost_bound, token_budget, count_budget, elapsed_micros, degradation_category,
                degradation_categories, created_at
           FROM memory_retrieval_events WHERE id = $1",
    )
    .bind(event)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| EventExplanation {
        event_id: r.id,
        agent: r.runtime_agent_id,
        conversation: r.conversation_id,
        current_actor: r.current_actor_id,
        mode: r.mode,
        has_query_digest: r.has_query_digest,
        query_was_empty: r.query_was_empty,
        destination_audience: r.destination_audience.into_iter().map(ActorId).collect(),
        selections: r.components.0,
        skipped: r.skipped_oversized.0,
        withheld: r.withheld.0,
        candidate_count: r.candidate_count,
        cost_tokens: r.cost_tokens,
        cost_bound: super::tokens::CostBound::from_stored(&r.cost_bound),
        token_budget: r.token_budget,
        count_budget: r.count_budget,
        elapsed_micros: r.elapsed_micros,
        degradation_category: r.degradation_category,
        degradation_categories: r.degradation_categories,
        created_at: r.created_at,
    }))
}

/// One row of the retrieval-events list (the audit table, newest first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RetrievalEventSummary {
    /// Event id (also the keyset cursor).
    pub id: RetrievalEventId,
    /// Runtime agent.
    pub runtime_agent_id: AgentId,
    /// Its name.
    pub agent_name: String,
    /// Destination conversation.
    pub conversation_id: ConversationId,
    /// Its title.
    pub conversation_title: String,
    /// Prompt assembly or the recall tool.
    pub mode: RetrievalMode,
    /// The destination audience the eligibility predicate ran against.
    pub destination_audience: Vec<ActorId>,
    /// How many revisions were selected.
    pub selected_count: i32,
    /// How many candidates were considered.
    pub candidate_count: i32,
    /// Tokens used, of `token_budget`.
    pub cost_tokens: i32,
    /// The token allowance.
    pub token_budget: i32,
    /// The headline degradation category, if retrieval degraded.
    pub degradation_category: Option<DegradationCategory>,
    /// Every degradation category recorded.
    pub degradation_categories: Vec<DegradationCategory>,
    /// When it happened.
    pub created_at: DateTime<Utc>,
}

/// A page of retrieval events.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RetrievalEventPage {
    /// Newest first.
    pub events: Vec<RetrievalEventSummary>,
    /// Pass as `after` to get the next page.
    pub next_after: Option<RetrievalEventId>,
}

/// One page of retrieval events (of `agent`, or of every agent), newest first (keyset on the
/// time-ordered event id), at most [`crate::store::MAX_PAGE_SIZE`].
pub async fn list_events(
    pool: &PgPool,
    agent: Option<AgentId>,
    after: Option<RetrievalEventId>,
    limit: u32,
) -> Result<RetrievalEventPage, RetrievalError> {
    let size = i64::from(limit.clamp(1, crate::store::MAX_PAGE_SIZE));
    let events: Vec<RetrievalEventSummary> = sqlx::query_as(
        "SELECT ev.id, ev.runtime_agent_id, ra.name AS agent_name, ev.conversation_id,
                c.title AS conversation_title, ev.mode, ev.destination_audience,
                cardinality(ev.selected_revision_ids) AS selected_count, ev.candidate_count, ev.cost_tokens,
                ev.token_budget, ev.degradation_category, ev.degradation_categories, ev.created_at
           FROM memory_retrieval_events ev
           JOIN runtime_agents ra ON ra.id = ev.runtime_agent_id
           JOIN conversations c ON c.id = ev.conversation_id
          WHERE ($1::uuid IS NULL OR ev.runtime_agent_id = $1) AND ($2::uuid IS NULL OR ev.id < $2)
          ORDER BY ev.id DESC LIMIT $3",
    )
    .bind(agent)
    .bind(after)
    .bind(size)
    .fetch_all(pool)
    .await?;
    let next_after = if events.len() as i64 == size { events.last().map(|e| e.id) } else { None };
    Ok(RetrievalEventPage { events, next_after })
}

#[cfg(test)]
mod tests {
    use super::DegradationCategory as D;

    #[test]
    fn every_category_reads_back_from_its_stored_name_and_the_old_rebuilding_name_too() {
        let all = [
            D::SemanticUnavailable,
            D::SemanticTimeout,
            D::IndexRebuilding,
            D::SemanticOversized,
            D::SemanticFailed,
            D::EligibilityWithheldUnknown,
            D::QueryWithoutTerms,
            D::AudienceWithoutReaders,
            D::SpeakerNotMember,
        ];
        for category in all {
            assert_eq!(D::from_stored(category.as_str()), Some(category));
            assert_eq!(serde_json::to_value(category).unwrap(), category.as_str(), "the wire name is the stored one");
        }
        assert_eq!(D::from_stored("semantic_rebuilding"), Some(D::IndexRebuilding));
        assert_eq!(D::from_stored("semantic_gone"), None);
    }
}
