//! The bounded turn loop. See the module documentation of [`crate::turn`].

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sqlx::PgConnection;

use super::context::{load_context, load_history, HistoryMessage, TurnContext};
use super::guard::{unbacked_claims, UnbackedClaim};
use super::ledger::{CommittedSharingRequest, Ledger};
use super::model::{ChatMessage, ChatModel, ChatRequest};
use super::record::{persist, NewTurnRecord};
use super::{TurnError, TurnId};
use crate::erasure::ERASURE_LOCK_KEY;
use crate::ids::{ActorId, ConversationId, EntryId, EntryReference, MessageId, RetrievalEventId, RevisionId};
use crate::privacy::eligibility::recheck_delivery_on;
use crate::privacy::sharing::{self, NewSharingRequest};
use crate::privacy::{revision_verdicts, DeliveryRecheck, EligibilityContext};
use crate::retrieval::{RetrievalMode, Retriever, SearchOutcome, SearchRequest, MAX_QUERY_CHARS};
use crate::store::{
    record_message_on, Amendment, CurrentRevision, Direction, NewMemory, NewMessage, NothingChangedReason, Restriction,
    SourceRef, Store, StoreError, SubjectUpdate, Topology, WriteOutcome,
};
use crate::tools::{tool_definitions, validate_call, SubjectArg, ToolCall, ToolError, ToolInvocation, ToolStatus};

/// The structural maximum of model requests in one turn (the last one carries no tools).
pub const MAX_ROUNDS: u32 = 3;

/// Default bound on tool calls in one round.
pub const DEFAULT_MAX_CALLS_PER_ROUND: usize = 8;

/// The default standing instructions.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a helpful assistant with durable memory. Use remember to store a \
new fact (it only ever creates a new entry), recall to look memories up (each line starts with the entry id and \
revision number that amend and forget need), amend to correct an existing memory, forget to retire one, and \
request_memory_sharing to propose releasing a private memory (only in a direct conversation; it never shares \
by itself). Describe only what the committed ledger says happened.";

/// Tunables of the engine.
#[derive(Clone, Debug)]
pub struct TurnConfig {
    /// Model requests per turn, 1 to [`MAX_ROUNDS`] (values outside are clamped). The last
    /// request carries no tools.
    pub max_rounds: u32,
    /// Tool calls allowed in one round; a round with more is rejected whole.
    pub max_calls_per_round: usize,
    /// Transcript messages loaded before the inbound one.
    pub history_limit: u32,
    /// Memories in the automatic prompt section.
    pub prompt_max_count: u32,
    /// Token allowance of the automatic prompt section.
    pub prompt_token_budget: u32,
    /// Standing instructions (the system message, before the memory section).
    pub system_prompt: String,
}

impl Default for TurnConfig {
    fn default() -> Self {
        TurnConfig {
            max_rounds: MAX_ROUNDS,
            max_calls_per_round: DEFAULT_MAX_CALLS_PER_ROUND,
            history_limit: 20,
            prompt_max_count: crate::retrieval::DEFAULT_MAX_COUNT,
            prompt_token_budget: crate::retrieval::DEFAULT_TOKEN_BUDGET,
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_owned(),
        }
    }
}

/// What happened to one tool call (persisted by name and status only, never its arguments).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallLog {
    /// 1-based round.
    pub round: u32,
    /// Tool name as the model sent it (cut to 64 characters).
    pub name: String,
    /// What became of it (stored as `committed`, `nothing_changed`, `ok`, `pending`, `rejected`
    /// or `error`).
    pub status: ToolStatus,
    /// The error, for rejected and failed calls.
    pub error: Option<String>,
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The reply passed the claim guard and the delivery recheck, and was recorded as sent.
    Delivered {
        /// The outbound message.
        outbound_message: MessageId,
    },
    /// The reply claimed a durable mutation that did not commit; it was not delivered.
    ClaimGuardFailed {
        /// The unbacked claims.
        claims: Vec<UnbackedClaim>,
    },
    /// The audience or a used revision changed before delivery; the reply was withheld.
    Withheld {
        /// What the recheck found.
        recheck: DeliveryRecheck,
    },
    /// The model failed or produced no reply.
    Failed {
        /// Why (never provider bodies or prompt text).
        reason: String,
    },
}

impl TurnOutcome {
    /// The stored outcome name.
    pub fn name(&self) -> &'static str {
        match self {
            TurnOutcome::Delivered { .. } => "delivered",
            TurnOutcome::ClaimGuardFailed { .. } => "claim_guard_failed",
            TurnOutcome::Withheld { .. } => "withheld",
            TurnOutcome::Failed { .. } => "failed",
        }
    }
}

/// The result of a turn (no `Deserialize`: its ledger holds [`crate::store::CommittedWrite`]s).
#[derive(Clone, Debug, Serialize)]
pub struct TurnReport {
    /// The persisted turn row.
    pub turn_id: TurnId,
    /// How it ended.
    pub outcome: TurnOutcome,
    /// The reply text, only when delivered.
    pub reply: Option<String>,
    /// What committed.
    pub ledger: Ledger,
    /// Model requests made.
    pub rounds: u32,
    /// Tool calls and their fate.
    pub tool_calls: Vec<ToolCallLog>,
    /// Retrieval audit rows written by the turn (prompt assembly and recalls).
    pub retrieval_event_ids: Vec<RetrievalEventId>,
}

/// What the model produced, before the delivery recheck.
#[derive(Clone, Debug)]
enum Draft {
    Reply(String),
    ClaimGuardFailed(Vec<UnbackedClaim>),
    Failed(String),
}

/// A turn that has run its model rounds and claim guard but is not yet delivered. Delivery
/// ([`TurnEngine::deliver`]) rechecks the audience and the used revisions first; a connector
/// may await other work between the two.
#[derive(Clone, Debug)]
pub struct PreparedTurn {
    id: TurnId,
    ctx: TurnContext,
    started_at: DateTime<Utc>,
    rounds: u32,
    ledger: Ledger,
    tool_calls: Vec<ToolCallLog>,
    retrieval_events: Vec<RetrievalEventId>,
    audience_snapshot: Vec<ActorId>,
    used: Vec<(EntryId, RevisionId)>,
    draft: Draft,
}

impl PreparedTurn {
    /// The turn's id.
    pub fn id(&self) -> TurnId {
        self.id
    }

    /// What committed so far.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The revisions whose text reached the model (entry, revision).
    pub fn used_revisions(&self) -> &[(EntryId, RevisionId)] {
        &self.used
    }
}

/// Mutable state of a turn in progress.
struct TurnState {
    ledger: Ledger,
    tool_calls: Vec<ToolCallLog>,
    retrieval_events: Vec<RetrievalEventId>,
    /// Every revision retrieved in the turn, in order, deduplicated: lineage of later writes.
    retrieved: Vec<RevisionId>,
    used: Vec<(EntryId, RevisionId)>,
    audience_snapshot: Option<Vec<ActorId>>,
}

impl TurnState {
    fn absorb(&mut self, outcome: &SearchOutcome) {
        self.retrieval_events.push(outcome.event_id);
        if self.audience_snapshot.is_none() {
            self.audience_snapshot = Some(outcome.context.audience.clone());
        }
        keep_lineage(&mut self.retrieved, &mut self.used, outcome);
    }
}

/// Adds a search's selections to what later writes cite (`retrieved`, deduplicated, in order)
/// and to what the delivery recheck looks at (`used`): one rule for turns and hosted sessions.
fn keep_lineage(retrieved: &mut Vec<RevisionId>, used: &mut Vec<(EntryId, RevisionId)>, outcome: &SearchOutcome) {
    for s in &outcome.selections {
        if !retrieved.contains(&s.revision_id) {
            retrieved.push(s.revision_id);
        }
        if !used.contains(&(s.entry_id, s.revision_id)) {
            used.push((s.entry_id, s.revision_id));
        }
    }
}

/// A session of tool calls from a host outside the turn loop (the MCP server), bound to one
/// conversation and speaker: what earlier calls retrieved stays lineage of later writes, exactly
/// as within one turn, so a memory written after a recall inherits that recall's evidence.
#[derive(Clone, Debug, Default)]
pub struct HostedSession {
    retrieved: Vec<RevisionId>,
    used: Vec<(EntryId, RevisionId)>,
}

/// What one hosted tool call did ([`TurnEngine::run_hosted_call`]).
#[derive(Clone, Debug)]
pub struct HostedCall {
    /// `Committed`, `NothingChanged`, `Ok` (recall), `Pending` (sharing), `Error` (the store or
    /// the sharing rules refused it; nothing was written) or `Invalid` (the arguments failed
    /// validation; nothing ran).
    pub status: ToolStatus,
    /// The result, the same JSON a model receives in a turn (for `invalid`: the error).
    pub result: Value,
    /// The validation error of an `invalid` call, naming the field where there is one.
    pub invalid: Option<ToolError>,
    /// The writes that committed, from the store's return values.
    pub ledger: Ledger,
}

/// A tool call resolved against the database, ready to execute.
enum Resolved {
    Remember { body: String, subject: Option<ActorId>, always_on: bool },
    Recall { query: String, limit: u32 },
    Amend { entry: EntryReference, expected: i32, body: Option<String>, subject: SubjectUpdate },
    Forget { entry: EntryReference },
    Share { entry: EntryId, revision: RevisionId, number: i32, rationale: String, target: ConversationId },
}

/// What an entry reference names for the speaker of a turn, decided at the moment it is used.
enum VisibleEntry {
    /// Exactly one eligible entry: it, with its current revision.
    One(CurrentRevision),
    /// Nothing this speaker may see here (another audience's entry, a forgotten one, or none at
    /// all: answered alike).
    Unknown,
    /// Several eligible entries share the short id (about one chance in 2^48 per pair).
    Ambiguous,
}

/// The engine: one store, one retrieval service, one model.
#[derive(Clone)]
pub struct TurnEngine {
    store: Store,
    retriever: Retriever,
    model: Arc<dyn ChatModel>,
    config: TurnConfig,
}

impl std::fmt::Debug for TurnEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnEngine").field("config", &self.config).finish_non_exhaustive()
    }
}

impl TurnEngine {
    /// An engine with the default configuration.
    pub fn new(store: Store, retriever: Retriever, model: Arc<dyn ChatModel>) -> Self {
        TurnEngine { store, retriever, model, config: TurnConfig::default() }
    }

    /// Replaces the configuration.
    pub fn with_config(mut self, config: TurnConfig) -> Self {
        self.config = config;
        self
    }

    /// The configuration in use.
    pub fn config(&self) -> &TurnConfig {
        &self.config
    }

    fn max_rounds(&self) -> u32 {
        self.config.max_rounds.clamp(1, MAX_ROUNDS)
    }

    /// Runs a whole turn for an inbound message: [`prepare`](Self::prepare) then
    /// [`deliver`](Self::deliver).
    pub async fn run_turn(&self, inbound: MessageId) -> Result<TurnReport, TurnError> {
        let prepared = self.prepare(inbound).await?;
        self.deliver(prepared).await
    }

    /// Runs retrieval, the bounded model rounds and the claim guard. Durable writes made by tools
    /// are committed here (each in its own transaction, recorded in the ledger).
    pub async fn prepare(&self, inbound: MessageId) -> Result<PreparedTurn, TurnError> {
        let started_at = Utc::now();
        let ctx = load_context(&self.store, inbound).await?;
        let history = load_history(&self.store, &ctx, self.config.history_limit).await?;
        let mut state = TurnState {
            ledger: Ledger::default(),
            tool_calls: Vec::new(),
            retrieval_events: Vec::new(),
            retrieved: Vec::new(),
            used: Vec::new(),
            audience_snapshot: None,
        };
        let prompt = self.assemble_context(&ctx).await?;
        state.absorb(&prompt);

        let mut transcript = vec![ChatMessage::System { content: self.system_message(&ctx, &prompt) }];
        for m in &history {
            transcript.push(match m.direction {
                Direction::Inbound => ChatMessage::User { content: format!("{}: {}", m.speaker, m.body) },
                Direction::Outbound => ChatMessage::Assistant { content: Some(m.body.clone()), tool_calls: vec![] },
            });
        }
        transcript.push(ChatMessage::User { content: format!("{}: {}", ctx.sender_label, ctx.body) });

        let mut rounds = 0;
        let mut draft = Draft::Failed("the model produced no reply".to_owned());
        for round in 1..=self.max_rounds() {
            rounds = round;
            let tools = (round < self.max_rounds()).then(tool_definitions);
            let mut messages = transcript.clone();
            messages.push(ChatMessage::Developer { content: state.ledger.developer_message() });
            let response = match self.model.complete(&ChatRequest { messages, tools: tools.clone() }).await {
                Ok(response) => response,
                Err(error) => {
                    draft = Draft::Failed(error.to_string());
                    break;
                }
            };
            if response.tool_calls.is_empty() || tools.is_none() {
                for call in &response.tool_calls {
                    state.tool_calls.push(log(
                        round,
                        &call.name,
                        ToolStatus::Rejected,
                        Some("no tools on the last round".into()),
                    ));
                }
                draft = match response.content.filter(|c| !c.trim().is_empty()) {
                    Some(reply) => match unbacked_claims(&reply, &state.ledger) {
                        claims if claims.is_empty() => Draft::Reply(reply),
                        claims => Draft::ClaimGuardFailed(claims),
                    },
                    None => Draft::Failed("the model produced no reply text".to_owned()),
                };
                break;
            }
            transcript.push(ChatMessage::Assistant {
                content: response.content.clone(),
                tool_calls: response.tool_calls.clone(),
            });
            let results = self.run_round(&ctx, &history, round, &response.tool_calls, &mut state).await?;
            for (call, result) in response.tool_calls.iter().zip(results) {
                transcript.push(ChatMessage::Tool { tool_call_id: call.id.clone(), content: result.to_string() });
            }
        }
        let audience_snapshot = state.audience_snapshot.clone().unwrap_or_default();
        Ok(PreparedTurn {
            id: TurnId::generate(),
            ctx,
            started_at,
            rounds,
            ledger: state.ledger,
            tool_calls: state.tool_calls,
            retrieval_events: state.retrieval_events,
            audience_snapshot,
            used: state.used,
            draft,
        })
    }

    /// Automatic context assembly for a turn: a prompt-mode search for the inbound message,
    /// spoken by its sender, within the turn's count and token allowances (audited like every
    /// search). `prompt_section()` of the outcome is what the model is given.
    async fn assemble_context(&self, ctx: &TurnContext) -> Result<SearchOutcome, TurnError> {
        let query: String = ctx.body.chars().take(MAX_QUERY_CHARS).collect();
        let mut request =
            SearchRequest::new(ctx.agent, ctx.conversation, Some(ctx.sender), query, RetrievalMode::Prompt);
        request.max_count = self.config.prompt_max_count;
        request.token_budget = self.config.prompt_token_budget;
        request.asked_at = Some(ctx.sent_at);
        Ok(self.retriever.search(&request).await?)
    }

    /// The context a turn for `inbound` would be given (the same search and rendering as
    /// [`Self::prepare`]), for hosts that run their own model loop (the MCP server's prompt). The
    /// retrieved revisions join `session`'s lineage.
    pub async fn hosted_context(
        &self,
        inbound: MessageId,
        session: &mut HostedSession,
    ) -> Result<SearchOutcome, TurnError> {
        let ctx = load_context(&self.store, inbound).await?;
        let outcome = self.assemble_context(&ctx).await?;
        keep_lineage(&mut session.retrieved, &mut session.used, &outcome);
        Ok(outcome)
    }

    /// The store the engine writes to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Runs one tool call for a host outside the turn loop (the MCP server). `inbound` is the
    /// call recorded as the bound speaker's connector-authenticated message in the bound
    /// conversation ([`crate::turn::receive`]); the speaker, the conversation and the audience come
    /// from it, never from the arguments. The call goes through the same validation, resolution
    /// and execution as a model's call in a turn: the same schemas, typed errors, store calls
    /// and retrieval service. An invalid call runs nothing.
    pub async fn run_hosted_call(
        &self,
        inbound: MessageId,
        call: &ToolCall,
        session: &mut HostedSession,
    ) -> Result<HostedCall, TurnError> {
        let ctx = load_context(&self.store, inbound).await?;
        let history = load_history(&self.store, &ctx, self.config.history_limit).await?;
        let invalid = |error: ToolError| {
            let (status, result) =
                ToolStatus::Invalid.result(json!({"error": error.to_string(), "note": "Nothing was written."}));
            HostedCall { status, result, invalid: Some(error), ledger: Ledger::default() }
        };
        let invocation = match validate_call(call) {
            Ok(invocation) => invocation,
            Err(error) => return Ok(invalid(error)),
        };
        let resolved = match self.resolve(&ctx, &invocation).await? {
            Ok(resolved) => resolved,
            Err(error) => return Ok(invalid(error)),
        };
        let mut state = TurnState {
            ledger: Ledger::default(),
            tool_calls: Vec::new(),
            retrieval_events: Vec::new(),
            retrieved: std::mem::take(&mut session.retrieved),
            used: std::mem::take(&mut session.used),
            audience_snapshot: None,
        };
        let executed = self.execute(&ctx, &history, resolved, &mut state).await;
        session.retrieved = state.retrieved;
        session.used = state.used;
        let (status, result) = executed?;
        Ok(HostedCall { status, result, invalid: None, ledger: state.ledger })
    }

    /// Rechecks the destination audience and the used revisions, then records the reply as sent
    /// (or withholds it), and persists the turn: all three in one transaction that first takes
    /// the erasure lock shared ([`ERASURE_LOCK_KEY`]). An erasure takes it exclusively before it
    /// reads its scope, so it either committed before this recheck (which then finds the revision
    /// erased and withholds the reply) or reads its scope after this commit and reaches the turn
    /// and its reply: a reply is never stored after the erasure that should have removed it.
    /// Deliveries do not wait for one another; one waits while an erasure runs.
    pub async fn deliver(&self, prepared: PreparedTurn) -> Result<TurnReport, TurnError> {
        let mut tx = self.store.pool().begin().await?;
        // Its own statement: every later one takes its snapshot after the lock was granted, so it
        // sees every erasure that committed before.
        sqlx::query("SELECT pg_advisory_xact_lock_shared($1)").bind(ERASURE_LOCK_KEY).execute(&mut *tx).await?;
        let (outcome, reply) = outcome_of(&mut tx, &prepared).await?;
        persist(
            &mut *tx,
            NewTurnRecord {
                id: prepared.id,
                ctx: &prepared.ctx,
                rounds: prepared.rounds,
                tool_calls: &prepared.tool_calls,
                ledger: &prepared.ledger,
                outcome: &outcome,
                retrieval_events: &prepared.retrieval_events,
                used: &prepared.used.iter().map(|u| u.1).collect::<Vec<_>>(),
                started_at: prepared.started_at,
            },
        )
        .await?;
        tx.commit().await?;
        Ok(TurnReport {
            turn_id: prepared.id,
            outcome,
            reply,
            ledger: prepared.ledger,
            rounds: prepared.rounds,
            tool_calls: prepared.tool_calls,
            retrieval_event_ids: prepared.retrieval_events,
        })
    }

    fn system_message(&self, ctx: &TurnContext, prompt: &SearchOutcome) -> String {
        let place = match ctx.topology {
            Topology::Direct => "a private direct conversation",
            Topology::Group => "a private group conversation",
            Topology::Channel => "a channel",
            Topology::Unknown => "a conversation",
        };
        let mut text = format!(
            "{}\n\nThis is {place} ({}). The current speaker is {}.",
            self.config.system_prompt, ctx.conversation_title, ctx.sender_label
        );
        let section = prompt.prompt_section();
        if !section.is_empty() {
            text.push_str("\n\n");
            text.push_str(&section);
        }
        text
    }

    /// Validates and resolves every call of the round, then executes them in order. A round over
    /// the fan-out bound, or with any invalid call, is rejected whole: nothing executes.
    async fn run_round(
        &self,
        ctx: &TurnContext,
        history: &[HistoryMessage],
        round: u32,
        calls: &[ToolCall],
        state: &mut TurnState,
    ) -> Result<Vec<Value>, TurnError> {
        if calls.len() > self.config.max_calls_per_round {
            let reason = format!(
                "round rejected: {} tool calls exceed the limit of {} per round; nothing was executed",
                calls.len(),
                self.config.max_calls_per_round
            );
            return Ok(reject_round(round, calls, state, |_| reason.clone()));
        }
        let validated: Vec<Result<ToolInvocation, ToolError>> = calls.iter().map(validate_call).collect();
        let mut resolved = Vec::with_capacity(calls.len());
        for v in &validated {
            resolved.push(match v {
                Ok(invocation) => self.resolve(ctx, invocation).await?,
                Err(e) => Err(e.clone()),
            });
        }
        if resolved.iter().any(Result::is_err) {
            let errors: Vec<Option<String>> =
                resolved.iter().map(|r| r.as_ref().err().map(ToString::to_string)).collect();
            return Ok(reject_round(round, calls, state, |i| {
                errors[i].clone().map_or_else(
                    || {
                        "not executed: another call in this round was invalid, so the whole round was rejected"
                            .to_owned()
                    },
                    |e| format!("round rejected, nothing was executed: {e}"),
                )
            }));
        }
        let mut results = Vec::with_capacity(calls.len());
        for (call, r) in calls.iter().zip(resolved) {
            let Ok(r) = r else { unreachable!("checked above") };
            let (status, result) = self.execute(ctx, history, r, state).await?;
            let error = (status == ToolStatus::Error).then(|| result["error"].as_str().unwrap_or_default().to_owned());
            state.tool_calls.push(log(round, &call.name, status, error));
            results.push(result);
        }
        Ok(results)
    }

    /// Database-side checks that need no write: actor and conversation references, and the
    /// sharing preconditions.
    async fn resolve(
        &self,
        ctx: &TurnContext,
        invocation: &ToolInvocation,
    ) -> Result<Result<Resolved, ToolError>, TurnError> {
        Ok(match invocation {
            ToolInvocation::Remember(a) => {
                let subject = match &a.subject {
                    Some(reference) => match self.resolve_actor(ctx, "remember", reference).await? {
                        Ok(actor) => Some(actor),
                        Err(e) => return Ok(Err(e)),
                    },
                    None => None,
                };
                Ok(Resolved::Remember { body: a.body.clone(), subject, always_on: a.always_on })
            }
            ToolInvocation::Recall(a) => Ok(Resolved::Recall { query: a.query.clone(), limit: a.limit }),
            ToolInvocation::Amend(a) => {
                let subject = match &a.subject {
                    SubjectArg::Keep => SubjectUpdate::Keep,
                    SubjectArg::Clear => SubjectUpdate::Clear,
                    SubjectArg::Set(reference) => match self.resolve_actor(ctx, "amend", reference).await? {
                        Ok(actor) => SubjectUpdate::Set(actor),
                        Err(e) => return Ok(Err(e)),
                    },
                };
                Ok(Resolved::Amend {
                    entry: a.entry.clone(),
                    expected: a.expected_revision,
                    body: a.body.clone(),
                    subject,
                })
            }
            ToolInvocation::Forget(a) => Ok(Resolved::Forget { entry: a.entry.clone() }),
            ToolInvocation::RequestMemorySharing(a) => self.resolve_sharing(ctx, a).await?,
        })
    }

    async fn resolve_sharing(
        &self,
        ctx: &TurnContext,
        a: &crate::tools::SharingArgs,
    ) -> Result<Result<Resolved, ToolError>, TurnError> {
        let not_allowed = |reason: &str| {
            Ok(Err(ToolError::NotAllowedHere { tool: "request_memory_sharing".into(), reason: reason.to_owned() }))
        };
        if ctx.topology != Topology::Direct {
            return not_allowed("sharing can only be requested in a private direct conversation");
        }
        let target = match self.store.find_conversation(ctx.agent, &a.target_conversation).await {
            Ok(target) => target,
            Err(StoreError::InvalidInput { .. }) => {
                return Ok(Err(ToolError::UnresolvedReference {
                    tool: "request_memory_sharing".into(),
                    field: "target_conversation".into(),
                    reason: "no such conversation".into(),
                }))
            }
            Err(e) => return Err(e.into()),
        };
        // Only the current revision of an entry the speaker may see here can be proposed for release.
        match self.visible_entry(ctx, &a.entry).await? {
            VisibleEntry::One(current) if current.number == a.revision => Ok(Ok(Resolved::Share {
                entry: current.entry,
                revision: current.revision,
                number: current.number,
                rationale: a.rationale.clone(),
                target,
            })),
            _ => not_allowed("that revision is not a current memory available in this conversation"),
        }
    }

    async fn resolve_actor(
        &self,
        ctx: &TurnContext,
        tool: &str,
        reference: &str,
    ) -> Result<Result<ActorId, ToolError>, TurnError> {
        if let Ok(id) = reference.parse::<ActorId>() {
            if !self.store.actor_summaries(&[id]).await?.is_empty() {
                return Ok(Ok(id));
            }
        }
        if let Some((_, actor)) = self.store.resolve_identity(&ctx.connector, reference).await? {
            return Ok(Ok(actor));
        }
        Ok(Err(ToolError::UnresolvedReference {
            tool: tool.to_owned(),
            field: "subject".to_owned(),
            reason: format!("no {} user id or actor id matches", ctx.connector),
        }))
    }

    /// What `reference` names for this turn's speaker: the live entries it matches
    /// ([`Store::current_revisions_by_reference`]) whose current revision is eligible in this
    /// conversation. Everything else (an entry of another audience, a forgotten one, one that never
    /// existed) is answered alike, as unknown, so no tool result reveals that a memory this
    /// audience may not see exists; and a short id is ambiguous only among eligible entries.
    async fn visible_entry(&self, ctx: &TurnContext, reference: &EntryReference) -> Result<VisibleEntry, TurnError> {
        // The speaker's context first, whatever the reference: a made-up id and a hidden one take
        // the same steps (and fail alike if the speaker cannot be resolved).
        let context =
            EligibilityContext::resolve_for_speaker(&self.store, ctx.agent, ctx.conversation, Some(ctx.sender)).await?;
        let matches = self.store.current_revisions_by_reference(ctx.agent, reference).await?;
        let revisions: Vec<RevisionId> = matches.iter().map(|m| m.revision).collect();
        let verdicts = revision_verdicts(self.store.pool(), &context, &revisions).await?;
        let eligible: Vec<CurrentRevision> = matches
            .into_iter()
            .filter(|m| verdicts.iter().any(|v| v.revision_id == m.revision && v.rule.is_eligible()))
            .collect();
        Ok(match eligible.as_slice() {
            [] => VisibleEntry::Unknown,
            [one] => VisibleEntry::One(*one),
            _ => VisibleEntry::Ambiguous,
        })
    }

    /// Lineage of a write in this turn: the inbound message, every loaded history message and
    /// every revision retrieved so far, including ones the turn later amended or forgot. A
    /// forgotten revision stays a source on purpose: a source can only narrow a revision's
    /// audience (it is the intersection of its sources' audiences), so citing it never widens
    /// anything, and dropping it could (ARCHITECTURE.md, "Invariants").
    fn lineage(ctx: &TurnContext, history: &[HistoryMessage], state: &TurnState) -> Vec<SourceRef> {
        std::iter::once(SourceRef::Message(ctx.inbound))
            .chain(history.iter().map(|m| SourceRef::HistoryMessage(m.id)))
            .chain(state.retrieved.iter().map(|r| SourceRef::RetrievedRevision(*r)))
            .collect()
    }

    async fn execute(
        &self,
        ctx: &TurnContext,
        history: &[HistoryMessage],
        call: Resolved,
        state: &mut TurnState,
    ) -> Result<(ToolStatus, Value), TurnError> {
        Ok(match call {
            Resolved::Remember { body, subject, always_on } => {
                let new = NewMemory {
                    agent: ctx.agent,
                    body,
                    subject,
                    source_actor: Some(ctx.sender),
                    origin_conversation: Some(ctx.conversation),
                    always_on,
                    restriction: Restriction::None,
                    sources: Self::lineage(ctx, history, state),
                };
                match self.store.create_entry(new).await {
                    Ok(write) => {
                        state.ledger.record_write(write.clone());
                        committed_json(&write)
                    }
                    Err(e) => store_failure(e)?,
                }
            }
            Resolved::Recall { query, limit } => {
                let mut request =
                    SearchRequest::new(ctx.agent, ctx.conversation, Some(ctx.sender), query, RetrievalMode::Recall);
                request.max_count = limit;
                request.asked_at = Some(ctx.sent_at);
                let outcome = self.retriever.search(&request).await?;
                state.absorb(&outcome);
                ToolStatus::Ok.result(outcome.recall_json())
            }
            Resolved::Amend { entry, expected, body, subject } => match self.visible_entry(ctx, &entry).await? {
                VisibleEntry::Unknown => nothing_changed_json(&entry.shown(), NothingChangedReason::UnknownEntry),
                VisibleEntry::Ambiguous => ambiguous_reference_json(&entry),
                VisibleEntry::One(current) if current.number != expected => stale_revision_json(current, expected),
                VisibleEntry::One(current) => {
                    let amendment = Amendment {
                        agent: ctx.agent,
                        entry: current.entry,
                        expected_revision: current.revision,
                        body,
                        subject,
                        source_actor: Some(ctx.sender),
                        sources: Self::lineage(ctx, history, state),
                    };
                    match self.store.amend_entry(amendment).await {
                        Ok(outcome) => write_outcome(outcome, state),
                        // Another writer moved the entry on between the check above and the lock.
                        Err(StoreError::RevisionConflict { .. }) => stale_revision_json(current, expected),
                        Err(e) => store_failure(e)?,
                    }
                }
            },
            Resolved::Forget { entry } => match self.visible_entry(ctx, &entry).await? {
                VisibleEntry::Unknown => nothing_changed_json(&entry.shown(), NothingChangedReason::UnknownEntry),
                VisibleEntry::Ambiguous => ambiguous_reference_json(&entry),
                VisibleEntry::One(current) => match self.store.forget_entry(ctx.agent, current.entry).await {
                    Ok(outcome) => write_outcome(outcome, state),
                    Err(e) => store_failure(e)?,
                },
            },
            Resolved::Share { entry, revision, number, rationale, target } => {
                let new = NewSharingRequest {
                    agent: ctx.agent,
                    via_message: ctx.inbound,
                    revision,
                    target_conversation: target,
                    rationale,
                };
                match sharing::create_request(&self.store, new).await {
                    Ok(request_id) => {
                        state.ledger.record_sharing_request(CommittedSharingRequest {
                            request_id,
                            revision_id: revision,
                            entry_id: Some(entry),
                            revision_number: Some(number),
                        });
                        ToolStatus::Pending.result(json!({
                            "request_id": request_id,
                            "entry_id": entry.short(),
                            "revision": number,
                            "note": "A PENDING request was created. Nothing has been shared: only the person who supplied this memory (through their own authenticated confirmation) or an operator can approve it.",
                        }))
                    }
                    Err(sharing::SharingError::Database(e)) => return Err(e.into()),
                    Err(e) => error_json(e.to_string()),
                }
            }
        })
    }
}

fn log(round: u32, name: &str, status: ToolStatus, error: Option<String>) -> ToolCallLog {
    ToolCallLog { round, name: name.chars().take(64).collect(), status, error }
}

fn reject_round(round: u32, calls: &[ToolCall], state: &mut TurnState, reason: impl Fn(usize) -> String) -> Vec<Value> {
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let error = reason(i);
            state.tool_calls.push(log(round, &call.name, ToolStatus::Rejected, Some(error.clone())));
            ToolStatus::Rejected.result(json!({"error": error, "note": "Nothing was written in this round."})).1
        })
        .collect()
}

/// What the model is told of a committed write: the entry as recall shows it (short id) and
/// the resulting revision number, the two things a later amend or forget takes.
fn committed_json(write: &crate::store::CommittedWrite) -> (ToolStatus, Value) {
    ToolStatus::Committed.result(json!({
        "operation": write.operation(),
        "entry_id": write.entry_id().short(),
        "revision": write.revision_number(),
        "subject_changed": write.subject_changed(),
    }))
}

fn nothing_changed_json(shown: &str, reason: NothingChangedReason) -> (ToolStatus, Value) {
    ToolStatus::NothingChanged.result(json!({
        "entry_id": shown,
        "reason": reason,
        "note": "Nothing was written. Do not say this operation happened.",
    }))
}

/// A refusal: nothing was written.
fn error_json(error: String) -> (ToolStatus, Value) {
    ToolStatus::Error.result(json!({"error": error, "note": "Nothing was written."}))
}

fn stale_revision_json(current: CurrentRevision, expected: i32) -> (ToolStatus, Value) {
    error_json(format!(
        "entry {} is at revision {}, not {expected}: recall it again to read the current text",
        current.entry.short(),
        current.number
    ))
}

fn ambiguous_reference_json(entry: &EntryReference) -> (ToolStatus, Value) {
    error_json(format!("more than one memory here has the id {}: recall it again and use the id shown", entry.shown()))
}

fn write_outcome(outcome: WriteOutcome, state: &mut TurnState) -> (ToolStatus, Value) {
    match outcome {
        WriteOutcome::Committed(write) => {
            state.ledger.record_write(write.clone());
            committed_json(&write)
        }
        WriteOutcome::NothingChanged(n) => nothing_changed_json(n.entry_id.short().as_str(), n.reason),
    }
}

/// A store refusal becomes a tool error result (nothing was written); a database failure, or a
/// write whose outcome is unknown, ends the turn (the model must not be told nothing was written).
fn store_failure(error: StoreError) -> Result<(ToolStatus, Value), TurnError> {
    match error {
        StoreError::Database(e) => Err(TurnError::Database(e)),
        StoreError::WriteAbandoned => Err(TurnError::Store(StoreError::WriteAbandoned)),
        other => Ok(error_json(other.to_string())),
    }
}

/// How the turn ends, decided in the delivery's transaction `conn`: a reply that passes the
/// recheck is recorded there as sent.
async fn outcome_of(
    conn: &mut PgConnection,
    prepared: &PreparedTurn,
) -> Result<(TurnOutcome, Option<String>), TurnError> {
    let ctx = &prepared.ctx;
    let text = match &prepared.draft {
        Draft::Failed(reason) => return Ok((TurnOutcome::Failed { reason: reason.clone() }, None)),
        Draft::ClaimGuardFailed(claims) => return Ok((TurnOutcome::ClaimGuardFailed { claims: claims.clone() }, None)),
        Draft::Reply(text) => text,
    };
    let recheck = recheck_delivery_on(
        &mut *conn,
        ctx.agent,
        ctx.conversation,
        &prepared.audience_snapshot,
        &revisions_to_recheck(prepared),
    )
    .await?;
    if !recheck.is_clear() {
        return Ok((TurnOutcome::Withheld { recheck }, None));
    }
    let outbound = record_message_on(
        &mut *conn,
        NewMessage {
            agent: ctx.agent,
            conversation: ctx.conversation,
            direction: Direction::Outbound,
            sender: ctx.agent_actor,
            sender_identity: None,
            body: text,
            sent_at: Utc::now(),
        },
    )
    .await?;
    Ok((TurnOutcome::Delivered { outbound_message: outbound }, Some(text.clone())))
}

/// The revisions the delivery recheck must find unchanged: every used revision, except those of
/// entries the turn itself amended or forgot (the reply may acknowledge its own committed write),
/// plus the revisions those amendments produced.
fn revisions_to_recheck(prepared: &PreparedTurn) -> Vec<RevisionId> {
    let changed: BTreeSet<EntryId> = prepared.ledger.entries_changed().into_iter().collect();
    let mut revisions: Vec<RevisionId> =
        prepared.used.iter().filter(|(entry, _)| !changed.contains(entry)).map(|(_, r)| *r).collect();
    let forgotten: BTreeSet<EntryId> = prepared
        .ledger
        .writes
        .iter()
        .filter(|w| w.operation() == crate::store::WriteOperation::Forget)
        .map(crate::store::CommittedWrite::entry_id)
        .collect();
    // The latest amendment of each entry not forgotten later in the turn.
    let mut latest: Vec<(EntryId, RevisionId)> = Vec::new();
    for w in prepared.ledger.writes.iter().filter(|w| w.operation() == crate::store::WriteOperation::Amend) {
        latest.retain(|(e, _)| *e != w.entry_id());
        latest.push((w.entry_id(), w.revision_id()));
    }
    revisions.extend(latest.into_iter().filter(|(e, _)| !forgotten.contains(e)).map(|(_, r)| r));
    revisions
}
