//! Data crossing the IPC boundary, with `specta::Type` so the TypeScript bindings are generated
//! from them. The core crate stays free of tauri/specta: these mirror its types. Ids travel as
//! strings and timestamps as RFC 3339 strings (specta refuses 64-bit integers).

use mesh_memory::store::{self, EvidenceView};
use serde::{Deserialize, Serialize};
use specta::Type;

fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn ids<T: ToString>(items: &[T]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

/// Where the console is connected, and who is signed in.
#[derive(Clone, Debug, Serialize, Type)]
pub struct ConsoleStatus {
    /// The database could not be opened: why (the UI shows it instead of the sign-in form).
    pub database_error: Option<String>,
    /// Running on the embedded default cluster (no DATABASE_URL).
    pub embedded: bool,
    /// Host and database name, without credentials.
    pub database_label: String,
    /// No operator role exists yet on the embedded cluster: the first run asks for one.
    pub needs_first_operator: bool,
    /// The current session, if signed in.
    pub session: Option<Session>,
}

/// A signed-in operator and what the role may do.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Session {
    /// PostgreSQL role name (`session_user`), recorded with every decision.
    pub role: String,
    /// May read memory and audit rows.
    pub can_browse: bool,
    /// May approve or deny sharing requests.
    pub can_approve: bool,
    /// Why a right is missing, in words.
    pub limitation: Option<String>,
}

impl From<store::OperatorRights> for Session {
    fn from(r: store::OperatorRights) -> Self {
        Self { role: r.role, can_browse: r.can_browse, can_approve: r.can_approve, limitation: r.limitation }
    }
}

/// A runtime agent for pickers.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Agent {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Live entries.
    pub live_entries: u32,
}

impl From<store::AgentSummary> for Agent {
    fn from(a: store::AgentSummary) -> Self {
        Self { id: a.id.to_string(), name: a.name, live_entries: count(a.live_entries) }
    }
}

/// An actor for pickers.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Actor {
    /// Id.
    pub id: String,
    /// `Name (id U123)`.
    pub label: String,
}

impl From<store::ActorChoice> for Actor {
    fn from(a: store::ActorChoice) -> Self {
        Self { id: a.id.to_string(), label: a.label }
    }
}

/// A conversation for pickers.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Conversation {
    /// Id.
    pub id: String,
    /// Runtime agent.
    pub agent_id: String,
    /// Title.
    pub title: String,
    /// Topology.
    pub topology: String,
}

impl From<store::ConversationChoice> for Conversation {
    fn from(c: store::ConversationChoice) -> Self {
        Self { id: c.id.to_string(), agent_id: c.runtime_agent_id.to_string(), title: c.title, topology: c.topology }
    }
}

/// Memory browser filter; empty strings mean "any".
#[derive(Clone, Debug, Default, Deserialize, Type)]
pub struct BrowseFilter {
    /// Runtime agent id.
    pub agent: Option<String>,
    /// Subject actor id.
    pub subject: Option<String>,
    /// `live` or `forgotten`.
    pub state: Option<String>,
    /// Words or a pasted entry/revision id.
    pub text: Option<String>,
}

fn nonblank(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl TryFrom<BrowseFilter> for store::BrowseFilter {
    type Error = crate::error::ConsoleError;

    fn try_from(f: BrowseFilter) -> Result<Self, Self::Error> {
        let state = match nonblank(&f.state) {
            None => None,
            Some("live") => Some(store::EntryState::Live),
            Some("forgotten") => Some(store::EntryState::Forgotten),
            Some(_) => {
                return Err(crate::error::ConsoleError::new(
                    crate::error::ErrorKind::Invalid,
                    "state must be live or forgotten",
                ))
            }
        };
        Ok(Self {
            agent: nonblank(&f.agent).map(str::parse).transpose()?,
            subject: nonblank(&f.subject).map(str::parse).transpose()?,
            state,
            text: nonblank(&f.text).map(str::to_owned),
        })
    }
}

/// One memory browser row.
#[derive(Clone, Debug, Serialize, Type)]
pub struct EntryRow {
    /// Entry id.
    pub entry_id: String,
    /// Agent name.
    pub agent_name: String,
    /// `live` or `forgotten`.
    pub state: String,
    /// Always-on.
    pub always_on: bool,
    /// Restriction.
    pub restriction: String,
    /// Current revision.
    pub current_revision_id: String,
    /// Its number.
    pub revision_number: i32,
    /// Body preview.
    pub body_preview: String,
    /// Subject label.
    pub subject_label: Option<String>,
    /// Last change.
    pub updated_at: String,
    /// Withheld for unknown evidence.
    pub evidence_unknown: bool,
}

fn state_name(s: store::EntryState) -> String {
    match s {
        store::EntryState::Live => "live".into(),
        store::EntryState::Forgotten => "forgotten".into(),
    }
}

/// A page of the memory browser.
#[derive(Clone, Debug, Serialize, Type)]
pub struct EntryPage {
    /// Rows, newest first.
    pub entries: Vec<EntryRow>,
    /// Cursor of the next page.
    pub next_after: Option<String>,
}

impl From<store::EntryPage> for EntryPage {
    fn from(p: store::EntryPage) -> Self {
        Self {
            entries: p
                .entries
                .into_iter()
                .map(|e| EntryRow {
                    entry_id: e.entry_id.to_string(),
                    agent_name: e.agent_name,
                    state: state_name(e.state),
                    always_on: e.always_on,
                    restriction: e.restriction,
                    current_revision_id: e.current_revision_id.to_string(),
                    revision_number: e.revision_number,
                    body_preview: e.body_preview,
                    subject_label: e.subject_label,
                    updated_at: time(e.updated_at),
                    evidence_unknown: e.evidence_unknown,
                })
                .collect(),
            next_after: p.next_after.map(|id| id.to_string()),
        }
    }
}

/// Audience evidence of a source.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Evidence {
    /// `known` or `unknown`.
    pub state: String,
    /// Actor ids of a known audience.
    pub actors: Vec<String>,
    /// Their labels.
    pub labels: Vec<String>,
}

/// One lineage source.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Source {
    /// Source row id.
    pub id: String,
    /// `message`, `history_message`, `parent_revision`, `retrieved_revision`.
    pub kind: String,
    /// Message id.
    pub message_id: Option<String>,
    /// Referenced revision id.
    pub parent_revision_id: Option<String>,
    /// Audience evidence.
    pub evidence: Evidence,
    /// How it was established.
    pub evidence_basis: String,
}

/// One revision.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Revision {
    /// Id.
    pub id: String,
    /// Number.
    pub revision_number: i32,
    /// `create` or `amend`.
    pub operation: String,
    /// Body.
    pub body: String,
    /// Subject label.
    pub subject_label: Option<String>,
    /// Source actor label.
    pub source_label: Option<String>,
    /// Written at.
    pub created_at: String,
    /// Lineage.
    pub sources: Vec<Source>,
}

/// A transcript message named by a lineage.
#[derive(Clone, Debug, Serialize, Type)]
pub struct LineageMessage {
    /// Id.
    pub id: String,
    /// Conversation title.
    pub conversation_title: String,
    /// Direction.
    pub direction: String,
    /// Sender name.
    pub sender_name: String,
    /// Connector-authenticated sender.
    pub authenticated: bool,
    /// Sent at.
    pub sent_at: String,
    /// Excerpt.
    pub excerpt: String,
}

/// A revision named by a lineage.
#[derive(Clone, Debug, Serialize, Type)]
pub struct LineageRevision {
    /// Id.
    pub id: String,
    /// Its entry.
    pub entry_id: String,
    /// Number.
    pub revision_number: i32,
    /// Body preview.
    pub body_preview: String,
}

/// An entry with its history and the lineage nodes the graph draws.
#[derive(Clone, Debug, Serialize, Type)]
pub struct EntryDetail {
    /// Entry id.
    pub entry_id: String,
    /// Agent id.
    pub agent_id: String,
    /// State.
    pub state: String,
    /// Always-on.
    pub always_on: bool,
    /// Restriction.
    pub restriction: String,
    /// Current revision.
    pub current_revision_id: String,
    /// Revisions, oldest first.
    pub revisions: Vec<Revision>,
    /// Messages named by any revision's lineage.
    pub messages: Vec<LineageMessage>,
    /// Revisions of other entries (or parents) named by the lineage.
    pub linked_revisions: Vec<LineageRevision>,
}

impl EntryDetail {
    /// Assembles the DTO from the core's history and lineage lookups.
    pub fn new(
        h: store::EntryHistory,
        messages: Vec<store::LineageMessage>,
        linked: Vec<store::LineageRevision>,
    ) -> Self {
        Self {
            entry_id: h.entry_id.to_string(),
            agent_id: h.runtime_agent_id.to_string(),
            state: state_name(h.state),
            always_on: h.always_on,
            restriction: h.restriction,
            current_revision_id: h.current_revision_id.to_string(),
            revisions: h
                .revisions
                .into_iter()
                .map(|r| Revision {
                    id: r.id.to_string(),
                    revision_number: r.revision_number,
                    operation: r.operation,
                    body: r.body,
                    subject_label: r.subject_label,
                    source_label: r.source_label,
                    created_at: time(r.created_at),
                    sources: r
                        .sources
                        .into_iter()
                        .map(|s| Source {
                            id: s.id.to_string(),
                            kind: s.kind,
                            message_id: s.message_id.map(|m| m.to_string()),
                            parent_revision_id: s.parent_revision_id.map(|p| p.to_string()),
                            evidence: match s.evidence {
                                EvidenceView::Known { actors, labels } => {
                                    Evidence { state: "known".into(), actors: ids(&actors), labels }
                                }
                                EvidenceView::Unknown => {
                                    Evidence { state: "unknown".into(), actors: vec![], labels: vec![] }
                                }
                            },
                            evidence_basis: s.evidence_basis,
                        })
                        .collect(),
                })
                .collect(),
            messages: messages
                .into_iter()
                .map(|m| LineageMessage {
                    id: m.id.to_string(),
                    conversation_title: m.conversation_title,
                    direction: m.direction,
                    sender_name: m.sender_name,
                    authenticated: m.authenticated,
                    sent_at: time(m.sent_at),
                    excerpt: m.excerpt,
                })
                .collect(),
            linked_revisions: linked
                .into_iter()
                .map(|r| LineageRevision {
                    id: r.id.to_string(),
                    entry_id: r.entry_id.to_string(),
                    revision_number: r.revision_number,
                    body_preview: r.body_preview,
                })
                .collect(),
        }
    }
}

/// One evidence-review row.
#[derive(Clone, Debug, Serialize, Type)]
pub struct ReviewItem {
    /// Revision id.
    pub revision_id: String,
    /// Entry id.
    pub entry_id: String,
    /// Agent name.
    pub agent_name: String,
    /// Revision number.
    pub revision_number: i32,
    /// Body preview.
    pub body_preview: String,
    /// Subject.
    pub subject_label: Option<String>,
    /// Written at.
    pub created_at: String,
    /// Unknown sources.
    pub unknown_sources: u32,
    /// Their kinds.
    pub unknown_source_kinds: Vec<String>,
    /// Why unknown.
    pub evidence_bases: Vec<String>,
}

/// A page of the evidence review.
#[derive(Clone, Debug, Serialize, Type)]
pub struct ReviewPage {
    /// Rows.
    pub items: Vec<ReviewItem>,
    /// Next cursor.
    pub next_after: Option<String>,
}

impl From<store::EvidenceReviewPage> for ReviewPage {
    fn from(p: store::EvidenceReviewPage) -> Self {
        Self {
            items: p
                .items
                .into_iter()
                .map(|i| ReviewItem {
                    revision_id: i.revision_id.to_string(),
                    entry_id: i.entry_id.to_string(),
                    agent_name: i.agent_name,
                    revision_number: i.revision_number,
                    body_preview: i.body_preview,
                    subject_label: i.subject_label,
                    created_at: time(i.created_at),
                    unknown_sources: count(i.unknown_sources),
                    unknown_source_kinds: i.unknown_source_kinds,
                    evidence_bases: i.evidence_bases,
                })
                .collect(),
            next_after: p.next_after.map(|id| id.to_string()),
        }
    }
}

/// One retrieval event row.
#[derive(Clone, Debug, Serialize, Type)]
pub struct RetrievalEventRow {
    /// Id.
    pub id: String,
    /// Agent name.
    pub agent_name: String,
    /// Conversation title.
    pub conversation_title: String,
    /// `prompt` or `recall`.
    pub mode: String,
    /// Destination audience labels.
    pub destination_audience: Vec<String>,
    /// Selected count.
    pub selected_count: i32,
    /// Candidates.
    pub candidate_count: i32,
    /// Tokens used.
    pub cost_tokens: i32,
    /// Token allowance.
    pub token_budget: i32,
    /// Headline degradation.
    pub degradation_category: Option<String>,
    /// All degradations.
    pub degradation_categories: Vec<String>,
    /// When.
    pub created_at: String,
}

/// A page of retrieval events.
#[derive(Clone, Debug, Serialize, Type)]
pub struct RetrievalEventPage {
    /// Rows.
    pub events: Vec<RetrievalEventRow>,
    /// Next cursor.
    pub next_after: Option<String>,
}

impl RetrievalEventPage {
    /// Builds the DTO, rendering audience ids with `label`.
    pub fn new(p: store::RetrievalEventPage, label: &dyn Fn(&mesh_memory::ActorId) -> String) -> Self {
        Self {
            events: p
                .events
                .into_iter()
                .map(|e| RetrievalEventRow {
                    id: e.id.to_string(),
                    agent_name: e.agent_name,
                    conversation_title: e.conversation_title,
                    mode: e.mode,
                    destination_audience: e.destination_audience.iter().map(label).collect(),
                    selected_count: e.selected_count,
                    candidate_count: e.candidate_count,
                    cost_tokens: e.cost_tokens,
                    token_budget: e.token_budget,
                    degradation_category: e.degradation_category,
                    degradation_categories: e.degradation_categories,
                    created_at: time(e.created_at),
                })
                .collect(),
            next_after: p.next_after.map(|id| id.to_string()),
        }
    }
}

/// Score components of one selection (each bar of the chart).
#[derive(Clone, Debug, Serialize, Type)]
pub struct ScoreComponents {
    /// Candidate sources that proposed it.
    pub sources: Vec<String>,
    /// Lexical rank, if matched.
    pub lexical_rank: Option<u32>,
    /// Lexical reciprocal-rank contribution.
    pub lexical: f64,
    /// Semantic rank, if matched.
    pub semantic_rank: Option<u32>,
    /// Semantic contribution.
    pub semantic: f64,
    /// Subject boost.
    pub subject_boost: f64,
    /// Conversation boost.
    pub conversation_boost: f64,
    /// Recency.
    pub recency: f64,
    /// Always-on.
    pub always_on: f64,
}

/// One selected revision of an event.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Selection {
    /// Entry id.
    pub entry_id: String,
    /// Revision id.
    pub revision_id: String,
    /// Revision number.
    pub revision_number: i32,
    /// Final score.
    pub score: f64,
    /// Components.
    pub components: ScoreComponents,
    /// Why it was selected.
    pub reason: String,
    /// Token cost.
    pub cost_tokens: u32,
}

/// An entry skipped because it did not fit.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Skipped {
    /// Entry id.
    pub entry_id: String,
    /// Revision id.
    pub revision_id: String,
    /// Cost.
    pub cost_tokens: u32,
    /// Why.
    pub reason: String,
}

/// A withheld-eligibility category and how many candidates it withheld (never their text).
#[derive(Clone, Debug, Serialize, Type)]
pub struct WithheldCount {
    /// Rule / category.
    pub category: String,
    /// How many.
    pub count: u32,
}

/// A retrieval event in full.
#[derive(Clone, Debug, Serialize, Type)]
pub struct RetrievalEventDetail {
    /// Id.
    pub id: String,
    /// Agent id.
    pub agent_id: String,
    /// Conversation id.
    pub conversation_id: String,
    /// `prompt` or `recall`.
    pub mode: String,
    /// Whether a query digest was kept.
    pub has_query_digest: bool,
    /// Whether the query was empty.
    pub query_was_empty: bool,
    /// Destination audience labels.
    pub destination_audience: Vec<String>,
    /// Selections in rank order.
    pub selections: Vec<Selection>,
    /// Skipped as oversized.
    pub skipped: Vec<Skipped>,
    /// Withheld categories and counts.
    pub withheld: Vec<WithheldCount>,
    /// Candidates.
    pub candidate_count: i32,
    /// Tokens used.
    pub cost_tokens: i32,
    /// Token allowance.
    pub token_budget: i32,
    /// Count allowance.
    pub count_budget: i32,
    /// Duration in milliseconds.
    pub elapsed_ms: f64,
    /// Headline degradation.
    pub degradation_category: Option<String>,
    /// All degradations.
    pub degradation_categories: Vec<String>,
    /// When.
    pub created_at: String,
}

fn serde_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "unknown".into(),
    }
}

impl RetrievalEventDetail {
    /// Builds the DTO, rendering audience ids with `label`.
    pub fn new(e: mesh_memory::retrieval::EventExplanation, label: &dyn Fn(&mesh_memory::ActorId) -> String) -> Self {
        Self {
            id: e.event_id.to_string(),
            agent_id: e.agent.to_string(),
            conversation_id: e.conversation.to_string(),
            mode: serde_name(&e.mode),
            has_query_digest: e.has_query_digest,
            query_was_empty: e.query_was_empty,
            destination_audience: e.destination_audience.iter().map(label).collect(),
            selections: e
                .selections
                .into_iter()
                .map(|s| Selection {
                    entry_id: s.entry_id.to_string(),
                    revision_id: s.revision_id.to_string(),
                    revision_number: s.revision_number,
                    score: s.score,
                    components: ScoreComponents {
                        sources: s.components.sources.iter().map(serde_name).collect(),
                        lexical_rank: s.components.lexical.map(|c| c.rank),
                        lexical: s.components.lexical.map_or(0.0, |c| c.rrf),
                        semantic_rank: s.components.semantic.map(|c| c.rank),
                        semantic: s.components.semantic.map_or(0.0, |c| c.rrf),
                        subject_boost: s.components.subject_boost,
                        conversation_boost: s.components.conversation_boost,
                        recency: s.components.recency,
                        always_on: s.components.always_on,
                    },
                    reason: s.reason,
                    cost_tokens: s.cost_tokens,
                })
                .collect(),
            skipped: e
                .skipped
                .into_iter()
                .map(|s| Skipped {
                    entry_id: s.entry_id.to_string(),
                    revision_id: s.revision_id.to_string(),
                    cost_tokens: s.cost_tokens,
                    reason: serde_name(&s.reason),
                })
                .collect(),
            withheld: e.withheld.into_iter().map(|(category, n)| WithheldCount { category, count: count(n) }).collect(),
            candidate_count: e.candidate_count,
            cost_tokens: e.cost_tokens,
            token_budget: e.token_budget,
            count_budget: e.count_budget,
            elapsed_ms: e.elapsed_micros as f64 / 1000.0,
            degradation_category: e.degradation_category,
            degradation_categories: e.degradation_categories,
            created_at: time(e.created_at),
        }
    }
}

/// Whether an entry may be used in a conversation, and which rule decides.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Explanation {
    /// Entry id.
    pub entry_id: String,
    /// Current revision checked.
    pub revision_id: String,
    /// Eligible or not.
    pub eligible: bool,
    /// Rule name (`eligible`, `unknown_evidence`, ...).
    pub rule: String,
    /// Sentence.
    pub explanation: String,
    /// Destination audience labels.
    pub audience: Vec<String>,
    /// The source that failed, if a source rule decided.
    pub failing_source: Option<FailingSource>,
}

/// The source a rejection names.
#[derive(Clone, Debug, Serialize, Type)]
pub struct FailingSource {
    /// Source id.
    pub source_id: String,
    /// Kind.
    pub kind: String,
    /// Evidence basis.
    pub evidence_basis: String,
    /// Audience members who could not read the source.
    pub missing_actors: Vec<String>,
}

impl Explanation {
    /// Builds the DTO, rendering ids with `label`.
    pub fn new(x: mesh_memory::privacy::EntryExplanation, label: &dyn Fn(&mesh_memory::ActorId) -> String) -> Self {
        Self {
            entry_id: x.entry_id.to_string(),
            revision_id: x.revision_id.to_string(),
            eligible: x.eligible,
            rule: x.rule.name().to_owned(),
            explanation: x.explanation,
            audience: x.context.audience().iter().map(label).collect(),
            failing_source: x.failing_source.map(|f| FailingSource {
                source_id: f.source_id.to_string(),
                kind: f.kind,
                evidence_basis: f.evidence_basis,
                missing_actors: f.missing_actors.iter().map(label).collect(),
            }),
        }
    }
}

/// A sharing request for the queue.
#[derive(Clone, Debug, Serialize, Type)]
pub struct SharingRequest {
    /// Id.
    pub id: String,
    /// State.
    pub state: String,
    /// Agent name.
    pub agent_name: String,
    /// Revision id.
    pub revision_id: String,
    /// Entry id.
    pub entry_id: String,
    /// Revision number.
    pub revision_number: i32,
    /// Body that would be released.
    pub body: String,
    /// Still current.
    pub revision_is_current: bool,
    /// Requested by.
    pub requested_by: String,
    /// Requested in.
    pub requested_in: String,
    /// Target conversation.
    pub target_conversation: Option<String>,
    /// Rationale.
    pub rationale: String,
    /// Proposed audience names.
    pub proposed_audience: Vec<String>,
    /// Created.
    pub created_at: String,
    /// Expires.
    pub expires_at: String,
    /// Decided.
    pub decided_at: Option<String>,
    /// Decided by.
    pub decided_by: Option<String>,
    /// Decision reason.
    pub decision_reason: Option<String>,
}

impl From<store::SharingRequestView> for SharingRequest {
    fn from(q: store::SharingRequestView) -> Self {
        Self {
            id: q.id.to_string(),
            state: q.state,
            agent_name: q.agent_name,
            revision_id: q.revision_id.to_string(),
            entry_id: q.entry_id.to_string(),
            revision_number: q.revision_number,
            body: q.body,
            revision_is_current: q.revision_is_current,
            requested_by: q.requested_by,
            requested_in: q.requested_in,
            target_conversation: q.target_conversation,
            rationale: q.rationale,
            proposed_audience: q.proposed_audience_names,
            created_at: time(q.created_at),
            expires_at: time(q.expires_at),
            decided_at: q.decided_at.map(time),
            decided_by: q.decided_by,
            decision_reason: q.decision_reason,
        }
    }
}

/// The outcome of an operator decision.
#[derive(Clone, Debug, Serialize, Type)]
pub struct Decision {
    /// Request id.
    pub request_id: String,
    /// `approved` or `denied`.
    pub state: String,
    /// The grant created by an approval.
    pub grant_id: Option<String>,
    /// The role recorded as the decider.
    pub decided_by: String,
}
