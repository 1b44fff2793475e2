//! Persistence of turns (table `agent_turns`) and the read side that `mesh-memory turns` and
//! `mesh-memory turn ID` print. A turn row is written once, after delivery or withholding.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::context::TurnContext;
use super::engine::{ToolCallLog, TurnOutcome};
use super::ledger::{Ledger, RecordedLedger};
use super::{TurnError, TurnId};
use crate::ids::{AgentId, ConversationId, MessageId, RetrievalEventId, RevisionId};

/// What [`persist`] writes.
pub(crate) struct NewTurnRecord<'a> {
    pub id: TurnId,
    pub ctx: &'a TurnContext,
    pub rounds: u32,
    pub tool_calls: &'a [ToolCallLog],
    pub ledger: &'a Ledger,
    pub outcome: &'a TurnOutcome,
    pub retrieval_events: &'a [RetrievalEventId],
    pub used: &'a [RevisionId],
    pub started_at: DateTime<Utc>,
}

/// Writes the turn row on `executor`: the delivery's transaction, which also rechecked and
/// recorded the reply ([`super::TurnEngine::deliver`]), so an erasure finds the turn or the turn
/// saw the erasure.
pub(crate) async fn persist<'e>(executor: impl PgExecutor<'e>, r: NewTurnRecord<'_>) -> Result<(), TurnError> {
    let (outbound, failure, claims, withheld) = match r.outcome {
        TurnOutcome::Delivered { outbound_message } => (Some(*outbound_message), None, Value::Array(vec![]), None),
        TurnOutcome::ClaimGuardFailed { claims } => (
            None,
            Some("the reply claimed a durable change that did not commit (claim guard)".to_owned()),
            serde_json::to_value(claims)?,
            None,
        ),
        TurnOutcome::Withheld { recheck } => (
            None,
            Some("the audience or a used memory changed before delivery".to_owned()),
            Value::Array(vec![]),
            Some(serde_json::to_value(recheck)?),
        ),
        TurnOutcome::Failed { reason } => (None, Some(reason.chars().take(2000).collect()), Value::Array(vec![]), None),
    };
    sqlx::query(
        "INSERT INTO agent_turns (id, runtime_agent_id, conversation_id, inbound_message_id, outbound_message_id,
                                  rounds, tool_calls, ledger, outcome, failure_reason, unbacked_claims, withheld,
                                  retrieval_event_ids, used_revision_ids, started_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::agent_turn_outcome, $10, $11, $12, $13, $14, $15)",
    )
    .bind(r.id)
    .bind(r.ctx.agent)
    .bind(r.ctx.conversation)
    .bind(r.ctx.inbound)
    .bind(outbound)
    .bind(r.rounds as i32)
    .bind(serde_json::to_value(r.tool_calls)?)
    .bind(serde_json::to_value(r.ledger)?)
    .bind(r.outcome.name())
    .bind(failure)
    .bind(claims)
    .bind(withheld)
    .bind(r.retrieval_events.iter().map(|e| e.0).collect::<Vec<Uuid>>())
    .bind(r.used.iter().map(|e| e.0).collect::<Vec<Uuid>>())
    .bind(r.started_at)
    .execute(executor)
    .await?;
    Ok(())
}

/// A stored turn, as printed by the CLI and shown by the console.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TurnRecord {
    /// Turn id.
    pub id: TurnId,
    /// Runtime agent.
    pub runtime_agent_id: AgentId,
    /// Conversation.
    pub conversation_id: ConversationId,
    /// The inbound message answered.
    pub inbound_message_id: MessageId,
    /// The delivered reply, if any.
    pub outbound_message_id: Option<MessageId>,
    /// Model requests made.
    pub rounds: i32,
    /// Tool calls by name and status.
    pub tool_calls: Vec<ToolCallLog>,
    /// The committed ledger, as recorded.
    pub ledger: RecordedLedger,
    /// `delivered`, `claim_guard_failed`, `withheld` or `failed`.
    pub outcome: String,
    /// Why it was not delivered.
    pub failure_reason: Option<String>,
    /// Claims the guard rejected.
    pub unbacked_claims: Value,
    /// The delivery recheck that withheld the reply.
    pub withheld: Option<Value>,
    /// Retrieval audit rows of the turn.
    pub retrieval_event_ids: Vec<RetrievalEventId>,
    /// Revisions whose text reached the model.
    pub used_revision_ids: Vec<RevisionId>,
    /// When the turn started.
    pub started_at: DateTime<Utc>,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

/// The turn as `mesh-memory turn ID` prints it: outcome, the committed ledger, tool calls,
/// claim-guard findings, the delivery recheck and the retrieval events to explain.
impl std::fmt::Display for TurnRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "turn {}  outcome: {}  rounds: {}", self.id, self.outcome, self.rounds)?;
        write!(f, "\n  conversation {}  inbound message {}", self.conversation_id, self.inbound_message_id)?;
        if let Some(outbound) = self.outbound_message_id {
            write!(f, "\n  delivered as message {outbound}")?;
        }
        if let Some(reason) = &self.failure_reason {
            write!(f, "\n  not delivered: {reason}")?;
        }
        write!(f, "\ncommitted ledger (from the store's return values):")?;
        if self.ledger.is_empty() {
            write!(f, "\n  (nothing committed)")?;
        }
        for w in &self.ledger.writes {
            let subject = if w.subject_changed { "  subject changed" } else { "" };
            write!(
                f,
                "\n  {:<7} entry {} -> revision {} (#{}){subject}",
                format!("{:?}", w.operation).to_lowercase(),
                w.entry_id,
                w.revision_id,
                w.revision_number
            )?;
        }
        for q in &self.ledger.sharing_requests {
            write!(f, "\n  pending sharing request {} for revision {}", q.request_id, q.revision_id)?;
        }
        write!(f, "\ntool calls:")?;
        if self.tool_calls.is_empty() {
            write!(f, "\n  (none)")?;
        }
        for c in &self.tool_calls {
            let error = c.error.as_deref().map(|e| format!("  {e}")).unwrap_or_default();
            write!(f, "\n  round {} {:<24} {}{error}", c.round, c.name, c.status)?;
        }
        if let Some(claims) = self.unbacked_claims.as_array().filter(|c| !c.is_empty()) {
            write!(f, "\nclaim guard: unbacked claims")?;
            for c in claims {
                write!(f, "\n  {} ({})", c["kind"].as_str().unwrap_or("?"), c["phrase"].as_str().unwrap_or(""))?;
            }
        }
        if let Some(withheld) = &self.withheld {
            write!(f, "\ndelivery recheck withheld the reply: {withheld}")?;
        }
        write!(f, "\nretrieval events (try `mesh-memory explain ID --event`):")?;
        for e in &self.retrieval_event_ids {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl TurnRecord {
    /// The turn in one line, as `mesh-memory turns` lists it: id, time, outcome, rounds and what
    /// it committed.
    pub fn summary(&self) -> TurnSummary<'_> {
        TurnSummary(self)
    }
}

/// A turn in one line ([`TurnRecord::summary`]).
pub struct TurnSummary<'a>(&'a TurnRecord);

impl std::fmt::Display for TurnSummary<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.0;
        let writes: Vec<String> = r
            .ledger
            .writes
            .iter()
            .map(|w| format!("{:?} {}", w.operation, w.entry_id).to_lowercase())
            .chain(r.ledger.sharing_requests.iter().map(|q| format!("sharing request {}", q.request_id)))
            .collect();
        write!(
            f,
            "{}  {}  {:<18} rounds {}  {}",
            r.id,
            r.created_at.format("%Y-%m-%d %H:%M:%S"),
            r.outcome,
            r.rounds,
            if writes.is_empty() { "no writes".to_owned() } else { writes.join(", ") }
        )
    }
}

#[derive(sqlx::FromRow)]
struct TurnRow {
    id: TurnId,
    runtime_agent_id: AgentId,
    conversation_id: ConversationId,
    inbound_message_id: MessageId,
    outbound_message_id: Option<MessageId>,
    rounds: i32,
    tool_calls: Value,
    ledger: Value,
    outcome: String,
    failure_reason: Option<String>,
    unbacked_claims: Value,
    withheld: Option<Value>,
    retrieval_event_ids: Vec<Uuid>,
    used_revision_ids: Vec<Uuid>,
    started_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
}

impl TryFrom<TurnRow> for TurnRecord {
    type Error = TurnError;
    fn try_from(r: TurnRow) -> Result<Self, TurnError> {
        Ok(TurnRecord {
            id: r.id,
            runtime_agent_id: r.runtime_agent_id,
            conversation_id: r.conversation_id,
            inbound_message_id: r.inbound_message_id,
            outbound_message_id: r.outbound_message_id,
            rounds: r.rounds,
            tool_calls: serde_json::from_value(r.tool_calls)?,
            ledger: serde_json::from_value(r.ledger)?,
            outcome: r.outcome,
            failure_reason: r.failure_reason,
            unbacked_claims: r.unbacked_claims,
            withheld: r.withheld,
            retrieval_event_ids: r.retrieval_event_ids.into_iter().map(RetrievalEventId).collect(),
            used_revision_ids: r.used_revision_ids.into_iter().map(RevisionId).collect(),
            started_at: r.started_at,
            created_at: r.created_at,
        })
    }
}

macro_rules! select_turn {
    () => {
        "SELECT id, runtime_agent_id, conversation_id, inbound_message_id, outbound_message_id, rounds,
        tool_calls, ledger, outcome::text AS outcome, failure_reason, unbacked_claims, withheld,
        retrieval_event_ids, used_revision_ids, started_at, created_at
   FROM agent_turns"
    };
}

/// The most recent turns, newest first; all agents when `agent` is `None`.
pub async fn list_turns(pool: &PgPool, agent: Option<AgentId>, limit: u32) -> Result<Vec<TurnRecord>, TurnError> {
    let rows: Vec<TurnRow> = sqlx::query_as(concat!(
        select_turn!(),
        " WHERE ($1::uuid IS NULL OR runtime_agent_id = $1) ORDER BY created_at DESC, id DESC LIMIT $2"
    ))
    .bind(agent)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    rows.into_iter().map(TurnRecord::try_from).collect()
}

/// One turn by id.
pub async fn get_turn(pool: &PgPool, id: TurnId) -> Result<Option<TurnRecord>, TurnError> {
    let row: Option<TurnRow> =
        sqlx::query_as(concat!(select_turn!(), " WHERE id = $1")).bind(id).fetch_optional(pool).await?;
    row.map(TurnRecord::try_from).transpose()
}
