//! The one retrieval service: automatic prompt assembly and the recall tool both call
//! [`Retriever::search`] (or [`search`]); they may differ in budgets and query text, never in
//! eligibility or ranking.
//!
//! Pipeline of a search, each step in its own module:
//! 1. resolve the destination audience ([`crate::privacy::EligibilityContext`]);
//! 2. candidates ([`candidates`]): subject, conversation, lexical, semantic ([`semantic`]) and
//!    always-on, each one SQL statement with the eligibility predicate inside, at most
//!    `per_source_limit` each, union deduplicated by (entry, revision);
//! 3. fusion ([`fusion`]): reciprocal-rank fusion of lexical and semantic ranks plus subject,
//!    conversation, recency and always-on components; a non-empty query requires lexical or
//!    semantic relevance (always-on entries excepted);
//! 4. rendering ([`render`]) with current identity labels and visibility-safe provenance;
//! 5. packing ([`packing`]) of whole entries into the count and token allowances;
//! 6. exactly one audit row ([`audit`]) with a keyed query digest, never the query text.

pub mod audit;
mod candidates;
pub mod config;
mod fusion;
pub mod packing;
pub mod render;
pub mod semantic_source;
pub mod sign_bits;
mod subjects;
pub mod tokens;
pub mod when;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use audit::{explain_event, DegradationCategory, EventExplanation, StoredSelection};
pub use candidates::CandidateSource;
pub use config::{
    DigestKey, InvalidRetrievalConfig, RetrievalConfig, WeakMasterKey, DEFAULT_MAX_COUNT, DEFAULT_SEMANTIC_WEIGHT,
    DEFAULT_TOKEN_BUDGET,
};
pub use fusion::{Components, RankContribution, SubjectMatch};
pub use packing::{SkipReason, SkippedEntry};
pub use semantic_source::{
    EligibleRevision, EligibleRows, SemanticFailure, SemanticFuture, SemanticHit, SemanticIndex, SemanticRequest,
    UnavailableSemanticIndex, MAX_ELIGIBLE_REVISIONS,
};
pub use sign_bits::{SignBits, SignedQuery};

use crate::ids::{ActorId, AgentId, ConversationId, EntryId, RetrievalEventId, RevisionId};
use crate::privacy::{EligibilityContext, PrivacyError};
use crate::store::{ActorSummary, Store, StoreError};
use candidates::{Candidate, CandidateRow, CandidateSet};
use fusion::{ScoringContext, SubjectFocus};

/// The longest query accepted, in characters (a prompt-mode query is the current message).
pub const MAX_QUERY_CHARS: usize = 8000;

/// The largest count budget accepted.
pub const MAX_COUNT_BUDGET: u32 = 200;

/// The largest token budget accepted (far beyond any model window; guards against typos).
pub const MAX_TOKEN_BUDGET: u32 = 1_000_000;

/// Who asked: automatic prompt assembly or the agent's recall tool (the `retrieval_mode` enum).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "retrieval_mode", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum RetrievalMode {
    /// Automatic context assembly for a turn.
    Prompt,
    /// The agent-facing recall tool.
    Recall,
}

/// One search request.
#[derive(Clone, Debug)]
pub struct SearchRequest {
    /// The runtime agent whose memory is searched.
    pub agent: AgentId,
    /// The destination conversation (its current audience decides eligibility).
    pub conversation: ConversationId,
    /// The current speaker, for the subject boost (never an authorization input).
    pub current_actor: Option<ActorId>,
    /// Query text; empty ranks by subject, conversation and recency.
    pub query: String,
    /// At most this many memories (default 8).
    pub max_count: u32,
    /// Memory allowance in upper-bound tokens (default 4096).
    pub token_budget: u32,
    /// Prompt or recall.
    pub mode: RetrievalMode,
    /// When the question was asked: the asking message's `sent_at` (a turn's inbound message, a
    /// hosted call's recorded message). Recency and the periods a query names ("last week") are
    /// counted from it. `None`: now.
    pub asked_at: Option<DateTime<Utc>>,
}

impl SearchRequest {
    /// A request with the default budgets.
    pub fn new(
        agent: AgentId,
        conversation: ConversationId,
        current_actor: Option<ActorId>,
        query: impl Into<String>,
        mode: RetrievalMode,
    ) -> Self {
        SearchRequest {
            agent,
            conversation,
            current_actor,
            query: query.into(),
            max_count: DEFAULT_MAX_COUNT,
            token_budget: DEFAULT_TOKEN_BUDGET,
            mode,
            asked_at: None,
        }
    }
}

/// An actor as rendered: stable id plus its current label (`Victor (id U123)`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorRef {
    /// Stable id.
    pub id: ActorId,
    /// Current label.
    pub label: String,
}

/// Where a memory was learned, as far as the destination audience may be told. A conversation's
/// title is shown only for the current conversation or one whose current members include every
/// destination reader; otherwise only "another conversation".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Provenance {
    /// Learned in the destination conversation.
    ThisConversation,
    /// Learned in a conversation everyone here can read.
    SharedConversation {
        /// Its id.
        conversation_id: ConversationId,
        /// Its title.
        title: String,
    },
    /// Learned somewhere this audience may not be told about.
    OtherConversation,
    /// No origin conversation was recorded.
    Unrecorded,
}

/// One selected memory with everything needed to render, explain and later amend or forget it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// Stable entry id (what amend and forget target).
    pub entry_id: EntryId,
    /// The current revision used.
    pub revision_id: RevisionId,
    /// Its number.
    pub revision_number: i32,
    /// The memory text, from the live canonical row.
    pub body: String,
    /// Who it is about (`None`: not resolved).
    pub subject: Option<ActorRef>,
    /// Who supplied it (`None`: the system).
    pub source: Option<ActorRef>,
    /// Visibility-safe provenance.
    pub provenance: Provenance,
    /// When the revision was learned: the time of the message it was told in, else when it was
    /// written (`memory_learned_times`). The memory line says this date.
    pub learned_at: DateTime<Utc>,
    /// Always-on flag.
    pub always_on: bool,
    /// Final score (sum of the components).
    pub score: f64,
    /// Score components.
    pub components: Components,
    /// Why it was chosen, in words.
    pub reason: String,
    /// Its packing cost in upper-bound tokens.
    pub cost_tokens: u32,
}

/// The result of one search.
#[derive(Clone, Debug, Serialize)]
pub struct SearchOutcome {
    /// The audit row written for this search.
    pub event_id: RetrievalEventId,
    /// Agent, conversation and the audience snapshot (for the delivery recheck).
    pub context: EligibilityContext,
    /// Prompt or recall.
    pub mode: RetrievalMode,
    /// Selected memories, best first.
    pub selections: Vec<Selection>,
    /// Entries skipped by packing (ids and cost only).
    pub skipped: Vec<SkippedEntry>,
    /// Full-text matches withheld by eligibility, by rule: counts only, for operators.
    pub withheld: BTreeMap<String, i64>,
    /// Degradation categories in precedence order.
    pub degradation_categories: Vec<DegradationCategory>,
    /// Distinct eligible candidates before relevance filtering and packing.
    pub candidate_count: usize,
    /// Total cost of the selections.
    /// Which count `cost_tokens` is in (the byte bound unless a model tokenizer is configured).
    pub cost_bound: tokens::CostBound,
    pub cost_tokens: u32,
    /// The token allowance used.
    pub token_budget: u32,
    /// The count allowance used.
    pub count_budget: u32,
}

impl SearchOutcome {
    /// The prompt section for automatic context assembly.
    pub fn prompt_section(&self) -> String {
        render::prompt_section(&self.selections)
    }

    /// The recall tool's JSON result (selected memories only).
    pub fn recall_json(&self) -> serde_json::Value {
        render::recall_json(&self.selections)
    }

    /// The revisions the turn used, for lineage of later writes and the delivery recheck.
    pub fn used_revisions(&self) -> Vec<RevisionId> {
        self.selections.iter().map(|s| s.revision_id).collect()
    }

    /// The first degradation category by precedence, as the audit row records it.
    pub fn degradation_category(&self) -> Option<DegradationCategory> {
        self.degradation_categories.first().copied()
    }
}

/// Why a search failed. A failed search writes no audit row and returns no memory.
#[derive(Debug, thiserror::Error)]
pub enum RetrievalError {
    /// The request breaks a documented limit.
    #[error("invalid retrieval request: {field} {reason}")]
    InvalidRequest {
        /// The offending field.
        field: &'static str,
        /// What rule it breaks.
        reason: String,
    },
    /// A store lookup failed (e.g. the conversation is not this agent's).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The eligibility context could not be resolved.
    #[error(transparent)]
    Privacy(#[from] PrivacyError),
    /// PostgreSQL failed.
    #[error("database error during retrieval: {0}")]
    Database(#[from] sqlx::Error),
}

fn invalid(field: &'static str, reason: impl Into<String>) -> RetrievalError {
    RetrievalError::InvalidRequest { field, reason: reason.into() }
}

fn validate(request: &SearchRequest) -> Result<(), RetrievalError> {
    if request.query.chars().count() > MAX_QUERY_CHARS {
        return Err(invalid("query", format!("is longer than {MAX_QUERY_CHARS} characters")));
    }
    if request.query.contains('\0') {
        return Err(invalid("query", "must not contain NUL characters"));
    }
    if request.max_count > MAX_COUNT_BUDGET {
        return Err(invalid("max_count", format!("must be at most {MAX_COUNT_BUDGET}")));
    }
    if request.token_budget > MAX_TOKEN_BUDGET {
        return Err(invalid("token_budget", format!("must be at most {MAX_TOKEN_BUDGET}")));
    }
    Ok(())
}

/// The retrieval service: store, weights and the semantic index.
#[derive(Clone)]
pub struct Retriever {
    store: Store,
    config: RetrievalConfig,
    semantic: Arc<dyn SemanticIndex>,
    tokens: Arc<dyn tokens::TokenCounter>,
}

impl std::fmt::Debug for Retriever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retriever").field("config", &self.config).finish_non_exhaustive()
    }
}

/// What the eligible-set side of a search found.
struct Structural {
    sources: Vec<(CandidateSource, Vec<CandidateRow>)>,
    semantic_ok: bool,
    categories: Vec<DegradationCategory>,
}

/// What a search read of its destination's eligible set ([`Retriever::read_eligible`]).
enum EligibleRead {
    /// The whole set, for a semantic index that searches within it.
    Whole(candidates::EligibleSet),
    /// Only the structural sources' candidates, read newest first from their own indexes.
    Picks(candidates::StructuralPicks),
    /// Nothing: the set has more rows than the eligible-set limit.
    TooLarge,
}

impl EligibleRead {
    /// The subject (when the speaker is known), conversation and always-on candidates, at most
    /// `limit` each, newest first, where what was read answers them.
    fn structural(
        &mut self,
        actor: Option<ActorId>,
        conversation: ConversationId,
        limit: u32,
    ) -> Option<Vec<(CandidateSource, Vec<CandidateRow>)>> {
        match self {
            EligibleRead::Whole(set) => {
                let rows = &set.rows;
                let mut sources = Vec::new();
                if let Some(actor) = actor {
                    let about = candidates::newest_matching(rows, limit, |r| r.subject_actor_id == Some(actor));
                    sources.push((CandidateSource::Subject, about));
                }
                let here = candidates::newest_matching(rows, limit, |r| r.origin_conversation_id == Some(conversation));
                sources.push((CandidateSource::Conversation, here));
                sources.push((CandidateSource::AlwaysOn, candidates::newest_matching(rows, limit, |r| r.always_on)));
                Some(sources)
            }
            EligibleRead::Picks(picks) => Some(std::mem::take(picks).into_sources()),
            EligibleRead::TooLarge => None,
        }
    }
}

/// Candidates gathered from every source, with what the gathering learned.
struct Gathered {
    set: CandidateSet,
    named_members: Vec<ActorSummary>,
    relevance_required: bool,
    categories: Vec<DegradationCategory>,
}

impl Retriever {
    /// A service without a vector index (semantic candidates report unavailable).
    pub fn new(store: Store, config: RetrievalConfig) -> Self {
        Retriever { store, config, semantic: Arc::new(UnavailableSemanticIndex), tokens: Arc::new(tokens::ByteBound) }
    }

    /// Counts entry costs with `counter` (a model tokenizer) instead of the byte bound.
    pub fn with_token_counter(mut self, counter: Arc<dyn tokens::TokenCounter>) -> Self {
        self.tokens = counter;
        self
    }

    /// Uses `index` for semantic candidates.
    pub fn with_semantic_index(mut self, index: Arc<dyn SemanticIndex>) -> Self {
        self.semantic = index;
        self
    }

    /// The configuration in use.
    pub fn config(&self) -> &RetrievalConfig {
        &self.config
    }

    /// Searches, packs, renders and audits. Writes exactly one `memory_retrieval_events` row.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchOutcome, RetrievalError> {
        let started = Instant::now();
        validate(request)?;
        let context = EligibilityContext::resolve_for_speaker(
            &self.store,
            request.agent,
            request.conversation,
            request.current_actor,
        )
        .await?;
        let names = subjects::QueryNames::new(&self.store, request.query.trim(), &context.audience);
        let (withheld, (mut categories, candidate_count, packed)) = tokio::try_join!(
            self.withheld(&context, request.query.trim(), &names),
            self.select(request, &context, &names)
        )?;
        if withheld.get("unknown_evidence").is_some_and(|n| *n > 0) {
            categories.push(DegradationCategory::EligibilityWithheldUnknown);
        }
        if let Some(closed) = context.closed() {
            categories.push(DegradationCategory::of_closed_audience(closed));
        }
        categories.sort();
        categories.dedup();
        let event_id = RetrievalEventId::generate();
        audit::record(
            self.store.pool(),
            audit::NewEvent {
                id: event_id,
                agent: request.agent,
                conversation: request.conversation,
                current_actor: request.current_actor,
                mode: request.mode,
                query_digest: self.config.digest_key.as_ref().map(|k| k.digest(&request.query)),
                query_was_empty: request.query.trim().is_empty(),
                audience: &context.audience,
                selections: &packed.selected,
                skipped: &packed.skipped,
                withheld: &withheld,
                candidate_count,
                cost_tokens: packed.cost_tokens,
                cost_bound: self.tokens.bound(),
                token_budget: request.token_budget,
                count_budget: request.max_count,
                elapsed_micros: i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX),
                categories: &categories,
            },
        )
        .await?;
        Ok(SearchOutcome {
            event_id,
            context,
            mode: request.mode,
            selections: packed.selected,
            skipped: packed.skipped,
            withheld,
            degradation_categories: categories,
            candidate_count,
            cost_tokens: packed.cost_tokens,
            cost_bound: self.tokens.bound(),
            token_budget: request.token_budget,
            count_budget: request.max_count,
        })
    }

    /// Gathers, ranks and packs: everything a search selects, before its audit row. Returns the
    /// degradation categories the gathering found (the caller adds the withheld diagnostics' and
    /// the closed audience's), the number of distinct eligible candidates and the packed
    /// selections.
    async fn select(
        &self,
        request: &SearchRequest,
        context: &EligibilityContext,
        names: &subjects::QueryNames<'_>,
    ) -> Result<(Vec<DegradationCategory>, usize, packing::Packed), RetrievalError> {
        let gathered = self.gather(request, context, names).await?;
        let candidate_count = gathered.set.len();
        let now = request.asked_at.unwrap_or_else(Utc::now);
        let turn = ScoringContext {
            focus: self.subject_focus(request, context, &gathered.set, gathered.named_members).await?,
            conversation: request.conversation,
            now,
            periods: when::QueryPeriod::find(request.query.trim(), now),
        };
        let ranked = self.rank(gathered.set.into_candidates(), &turn, gathered.relevance_required);
        let (ranked, prefetched) = self.rerank_by_learned_time(ranked, &turn, context, request).await?;
        let packed = self.decorate_and_pack(ranked, context, request, prefetched).await?;
        Ok((gathered.categories, candidate_count, packed))
    }

    /// Who the query is about: the people it names among those the destination audience may know
    /// of (`named_members`, resolved among its members by the full-text side, and the subjects of
    /// eligible candidates), else the current speaker.
    async fn subject_focus(
        &self,
        request: &SearchRequest,
        ctx: &EligibilityContext,
        candidates: &CandidateSet,
        named_members: Vec<ActorSummary>,
    ) -> Result<SubjectFocus, RetrievalError> {
        let others = candidates.subjects().filter(|s| ctx.audience.binary_search(s).is_err());
        let named_others = subjects::named_in_query(&self.store, request.query.trim(), others).await?;
        let mut named: Vec<ActorId> = named_members.iter().chain(&named_others).map(|a| a.id).collect();
        named.sort();
        named.dedup();
        Ok(match (named.is_empty(), request.current_actor) {
            (false, _) => SubjectFocus::Named(named),
            (true, Some(speaker)) => SubjectFocus::Speaker(speaker),
            (true, None) => SubjectFocus::Nobody,
        })
    }

    /// Runs every candidate source (eligibility inside each SQL statement). The lexical candidates
    /// and the eligible-set side (subject, conversation, always-on and semantic candidates) are
    /// independent, so they run at the same time on separate pooled connections.
    async fn gather(
        &self,
        request: &SearchRequest,
        ctx: &EligibilityContext,
        names: &subjects::QueryNames<'_>,
    ) -> Result<Gathered, RetrievalError> {
        let query = request.query.trim();
        let (lexical, structural) = tokio::try_join!(
            self.lexical_candidates(ctx, query, names),
            self.eligible_side(request, ctx, query, names)
        )?;
        let mut set = CandidateSet::default();
        let mut categories = structural.categories;
        let has_terms = lexical.is_some();
        if let Some(lexical) = lexical {
            set.add(CandidateSource::Lexical, lexical);
        }
        for (source, rows) in structural.sources {
            set.add(source, rows);
        }
        let relevance_required = has_terms || structural.semantic_ok;
        if !query.is_empty() && !relevance_required {
            categories.push(DegradationCategory::QueryWithoutTerms);
        }
        Ok(Gathered { set, named_members: names.resolved_members(), relevance_required, categories })
    }

    /// The lexical candidates of the text the full-text side searches: the query without the names
    /// of the destination's members it names ([`subjects::QueryNames::searched_text`]; memories
    /// about them are found by the subject match instead), after the statement that reads the
    /// query's BM25 weights. `None` when lexical search is off, the query is empty or it has no
    /// full-text term.
    async fn lexical_candidates(
        &self,
        ctx: &EligibilityContext,
        query: &str,
        names: &subjects::QueryNames<'_>,
    ) -> Result<Option<Vec<CandidateRow>>, RetrievalError> {
        let Some(searched) = self.full_text_searched(query, names).await? else {
            return Ok(None);
        };
        let pool = self.store.pool();
        let Some(lexical_query) = candidates::lexical_query(pool, ctx.agent, &searched).await? else {
            return Ok(None);
        };
        let limit = self.config.per_source_limit;
        Ok(Some(candidates::lexical(pool, ctx, &lexical_query, self.config.bm25(), limit).await?))
    }

    /// The withheld diagnostics of the full-text side: full-text matches of the searched text that
    /// the policy withheld, counted by rule ([`candidates::withheld_lexical`]). Nothing selected
    /// depends on them (they go to the audit row and the outcome), so a search awaits them only
    /// before its audit row: they run beside the whole selection, not on its critical path.
    async fn withheld(
        &self,
        ctx: &EligibilityContext,
        query: &str,
        names: &subjects::QueryNames<'_>,
    ) -> Result<BTreeMap<String, i64>, RetrievalError> {
        let Some(searched) = self.full_text_searched(query, names).await? else {
            return Ok(BTreeMap::new());
        };
        let limit = self.config.withheld_count_limit;
        Ok(candidates::withheld_lexical(self.store.pool(), ctx, &searched, limit).await?)
    }

    /// The text both full-text statements (lexical candidates, withheld diagnostics) search, or
    /// `None` when the full-text side does not run (lexical search off, or an empty query).
    async fn full_text_searched(
        &self,
        query: &str,
        names: &subjects::QueryNames<'_>,
    ) -> Result<Option<String>, RetrievalError> {
        if !self.config.lexical_enabled || query.is_empty() {
            return Ok(None);
        }
        Ok(Some(names.searched_text().await?))
    }

    /// Subject, conversation, always-on and semantic candidates. When the semantic index searches
    /// within the eligible set and the set fits the configured limit, the whole set is read once and
    /// the three structural sources are taken from it (the same rows and order their own statement
    /// would return); otherwise one statement reads only the rows those sources take
    /// ([`candidates::structural_picks`]). Semantic search embeds the query without the names of
    /// the members it names, as the full-text side searches it
    /// ([`subjects::QueryNames::searched_text`]).
    async fn eligible_side(
        &self,
        request: &SearchRequest,
        ctx: &EligibilityContext,
        query: &str,
        names: &subjects::QueryNames<'_>,
    ) -> Result<Structural, RetrievalError> {
        let searched = async {
            match query.is_empty() {
                true => Ok(String::new()),
                false => names.searched_text().await.map_err(RetrievalError::from),
            }
        };
        let (mut eligible, searched) = tokio::try_join!(self.read_eligible(request, ctx, query), searched)?;
        let limit = self.config.per_source_limit;
        let mut sources = match eligible.structural(request.current_actor, ctx.conversation, limit) {
            Some(picks) => picks,
            None => {
                let pool = self.store.pool();
                candidates::structural_picks(pool, ctx, request.current_actor, limit).await?.into_sources()
            }
        };
        let mut categories = Vec::new();
        let mut semantic_ok = false;
        if !query.is_empty() {
            match self.semantic_candidates(ctx, &searched, &eligible).await? {
                Ok(rows) => {
                    semantic_ok = true;
                    sources.push((CandidateSource::Semantic, rows));
                }
                Err(category) => categories.push(category),
            }
        }
        Ok(Structural { sources, semantic_ok, categories })
    }

    /// What this search reads of the destination's eligible set: all of it (with sign bits when
    /// the index ranks them) when a semantic search will look within it, nothing when it then has
    /// more rows than the eligible-set limit, else only the structural sources' picks.
    async fn read_eligible(
        &self,
        request: &SearchRequest,
        ctx: &EligibilityContext,
        query: &str,
    ) -> Result<EligibleRead, RetrievalError> {
        let pool = self.store.pool();
        if !query.is_empty() && self.semantic.searches_eligible_set() {
            let with_sign_bits = self.semantic.ranks_sign_bits();
            let set = candidates::eligible_set(pool, ctx, self.config.eligible_set_limit, with_sign_bits).await?;
            return Ok(set.map_or(EligibleRead::TooLarge, EligibleRead::Whole));
        }
        let picks =
            candidates::structural_picks(pool, ctx, request.current_actor, self.config.per_source_limit).await?;
        Ok(EligibleRead::Picks(picks))
    }

    /// Semantic hits under the deadline, capped and deduplicated, kept only where the eligible
    /// set admits them (the set read in this search, or the eligible rows re-read by one
    /// statement when this search did not read it whole). The inner `Err` is a degradation, not a
    /// failure.
    async fn semantic_candidates(
        &self,
        ctx: &EligibilityContext,
        query: &str,
        eligible: &EligibleRead,
    ) -> Result<Result<Vec<CandidateRow>, DegradationCategory>, RetrievalError> {
        let limit = self.config.per_source_limit as usize;
        let request = semantic_source::SemanticRequest {
            pool: self.store.pool(),
            eligibility: ctx,
            query,
            limit,
            eligible: match eligible {
                EligibleRead::Whole(set) => EligibleRows::Read(&set.revisions),
                EligibleRead::Picks(_) => EligibleRows::Unknown,
                EligibleRead::TooLarge => EligibleRows::MoreThan(self.config.eligible_set_limit),
            },
        };
        let hits = match tokio::time::timeout(self.config.semantic_deadline, self.semantic.search(request)).await {
            Err(_) => return Ok(Err(DegradationCategory::SemanticTimeout)),
            Ok(Err(failure)) => return Ok(Err(semantic_category(failure))),
            Ok(Ok(hits)) => hits,
        };
        let mut seen = std::collections::HashSet::new();
        let distinct = hits.iter().map(|h| h.revision_id).filter(|r| seen.insert(*r)).take(limit);
        Ok(Ok(match eligible {
            EligibleRead::Whole(set) => {
                let by_revision: HashMap<RevisionId, &CandidateRow> =
                    set.rows.iter().map(|r| (r.revision_id, r)).collect();
                distinct.filter_map(|id| by_revision.get(&id).map(|row| (*row).clone())).collect()
            }
            EligibleRead::Picks(_) | EligibleRead::TooLarge => {
                let ids: Vec<RevisionId> = distinct.collect();
                candidates::eligible_rows_of(self.store.pool(), ctx, &ids).await?
            }
        }))
    }

    /// Scores every candidate by every component but the learned-time ones and orders them best
    /// first; drops irrelevant ones when relevance is required (always-on entries stay).
    fn rank(
        &self,
        candidates: Vec<Candidate>,
        turn: &ScoringContext,
        relevance_required: bool,
    ) -> Vec<(Candidate, Components)> {
        let mut scored: Vec<(Candidate, Components)> = candidates
            .into_iter()
            .map(|c| {
                let components = fusion::components(&c, turn, &self.config);
                (c, components)
            })
            .filter(|(c, components)| !relevance_required || components.is_relevant() || c.row.always_on)
            .collect();
        sort_ranked(&mut scored);
        scored
    }

    /// Adds recency and the period boost to the best `time_rerank_window` candidates, from when
    /// each was learned (one bounded statement), and reorders them among themselves. The rest
    /// stay below, in their order: the added components are never negative, so no candidate of
    /// the window can fall below one outside it. The statement runs beside the hydration of the
    /// first batch packing will read (by the order before the learned-time components, which
    /// rarely differs at the top), so it adds no round trip; the hydrated rows are returned for
    /// [`Self::decorate_and_pack`].
    async fn rerank_by_learned_time(
        &self,
        mut ranked: Vec<(Candidate, Components)>,
        turn: &ScoringContext,
        ctx: &EligibilityContext,
        request: &SearchRequest,
    ) -> Result<(Vec<(Candidate, Components)>, Hydrated), RetrievalError> {
        let window = ranked.len().min(self.config.time_rerank_window as usize);
        let ids = |n: usize| -> Vec<RevisionId> { ranked[..n].iter().map(|(c, _)| c.row.revision_id).collect() };
        let (window_ids, first_batch) = (ids(window), ids(ranked.len().min(batch_size(request))));
        let pool = self.store.pool();
        let (learned, rows) = tokio::try_join!(
            async {
                match window_ids.is_empty() {
                    true => Ok(HashMap::new()),
                    false => candidates::learned_times(pool, ctx.agent, &window_ids).await,
                }
            },
            async {
                match first_batch.is_empty() {
                    true => Ok(Vec::new()),
                    false => candidates::hydrate(pool, ctx, &first_batch).await,
                }
            }
        )?;
        let mut prefetched: Hydrated = first_batch.into_iter().map(|id| (id, None)).collect();
        prefetched.extend(rows.into_iter().map(|r| (r.revision_id, Some(r))));
        for (candidate, components) in &mut ranked[..window] {
            let learned_at = learned.get(&candidate.row.revision_id).copied().unwrap_or(candidate.row.created_at);
            fusion::add_learned_time(components, learned_at, turn, &self.config);
        }
        sort_ranked(&mut ranked[..window]);
        Ok((ranked, prefetched))
    }

    /// Hydrates candidates from canonical rows in rank order, a batch at a time, renders labels
    /// and provenance, computes each entry's cost and packs, stopping as soon as the count budget
    /// is full (later candidates are never read). A candidate whose cost floor exceeds what is
    /// left of the allowance is passed over unread ([`packing::Packer::worth_reading`]): once the
    /// allowance is nearly spent, packing stops instead of reading every remaining candidate to
    /// report it as not fitting. A candidate whose canonical row no longer passes the predicate is
    /// dropped, never selected. `hydrated` holds rows already read (the first batch, read beside
    /// the learned times); they are not read again.
    async fn decorate_and_pack(
        &self,
        ranked: Vec<(Candidate, Components)>,
        ctx: &EligibilityContext,
        request: &SearchRequest,
        mut hydrated: Hydrated,
    ) -> Result<packing::Packed, RetrievalError> {
        let mut packer = packing::Packer::new(request.max_count, request.token_budget);
        let batch_size = batch_size(request);
        let mut labels: HashMap<ActorId, String> = HashMap::new();
        let mut places: HashMap<ConversationId, Provenance> = HashMap::new();
        let overhead = self.config.attribution_overhead_tokens;
        let mut remaining = ranked.into_iter();
        while !packer.is_full() {
            let batch: Vec<(Candidate, Components)> = remaining
                .by_ref()
                .filter(|(c, _)| {
                    let floor = packing::entry_cost_floor(c.row.entry_id, overhead, &*self.tokens);
                    packer.worth_reading(floor)
                })
                .take(batch_size)
                .collect();
            if batch.is_empty() {
                break;
            }
            let ids: Vec<RevisionId> = batch.iter().map(|(c, _)| c.row.revision_id).collect();
            let unread: Vec<RevisionId> = ids.iter().filter(|id| !hydrated.contains_key(id)).copied().collect();
            if !unread.is_empty() {
                let read = candidates::hydrate(self.store.pool(), ctx, &unread).await?;
                hydrated.extend(unread.into_iter().map(|id| (id, None)));
                hydrated.extend(read.into_iter().map(|r| (r.revision_id, Some(r))));
            }
            let mut rows: HashMap<RevisionId, candidates::HydratedRow> =
                ids.iter().filter_map(|id| hydrated.remove(id).flatten().map(|r| (*id, r))).collect();
            tokio::try_join!(
                self.load_labels(&mut labels, rows.values()),
                self.load_provenance(&mut places, ctx, rows.values())
            )?;
            for (candidate, components) in batch {
                if packer.is_full() {
                    break;
                }
                let Some(row) = rows.remove(&candidate.row.revision_id) else { continue };
                let provenance = match row.origin_conversation_id {
                    None => Provenance::Unrecorded,
                    Some(origin) => places.get(&origin).cloned().unwrap_or(Provenance::OtherConversation),
                };
                let actor_ref = |id: ActorId| ActorRef {
                    id,
                    label: labels.get(&id).cloned().unwrap_or_else(|| format!("actor {id}")),
                };
                let mut selection = Selection {
                    entry_id: candidate.row.entry_id,
                    revision_id: row.revision_id,
                    revision_number: row.revision_number,
                    body: row.body,
                    subject: row.subject_actor_id.map(actor_ref),
                    source: row.source_actor_id.map(actor_ref),
                    provenance,
                    learned_at: row.learned_at,
                    always_on: row.always_on,
                    score: components.total(),
                    reason: components.reason(),
                    components,
                    cost_tokens: 0,
                };
                selection.cost_tokens =
                    packing::entry_cost(&selection, self.config.attribution_overhead_tokens, &*self.tokens);
                packer.offer(selection);
            }
        }
        Ok(packer.finish())
    }

    /// Adds the current labels of the rows' subjects and sources that are not loaded yet.
    async fn load_labels<'a>(
        &self,
        labels: &mut HashMap<ActorId, String>,
        rows: impl Iterator<Item = &'a candidates::HydratedRow>,
    ) -> Result<(), StoreError> {
        let mut missing: Vec<ActorId> = rows
            .flat_map(|r| [r.subject_actor_id, r.source_actor_id])
            .flatten()
            .filter(|a| !labels.contains_key(a))
            .collect();
        missing.sort();
        missing.dedup();
        if !missing.is_empty() {
            labels.extend(self.store.actor_summaries(&missing).await?.into_iter().map(|a| (a.id, a.label())));
        }
        Ok(())
    }

    /// Adds the provenance of the rows' origin conversations that are not known yet, in one
    /// statement: an origin is named only where every destination reader can read it now.
    async fn load_provenance<'a>(
        &self,
        places: &mut HashMap<ConversationId, Provenance>,
        ctx: &EligibilityContext,
        rows: impl Iterator<Item = &'a candidates::HydratedRow>,
    ) -> Result<(), StoreError> {
        let mut missing: Vec<ConversationId> =
            rows.filter_map(|r| r.origin_conversation_id).filter(|c| !places.contains_key(c)).collect();
        missing.sort();
        missing.dedup();
        if let Some(index) = missing.iter().position(|c| *c == ctx.conversation) {
            places.insert(missing.swap_remove(index), Provenance::ThisConversation);
        }
        if missing.is_empty() {
            return Ok(());
        }
        let mut readable = self.store.titles_readable_by(ctx.agent, &missing, &ctx.audience).await?;
        for origin in missing {
            let place = match readable.remove(&origin) {
                Some(title) => Provenance::SharedConversation { conversation_id: origin, title },
                None => Provenance::OtherConversation,
            };
            places.insert(origin, place);
        }
        Ok(())
    }
}

/// Candidates read from canonical rows by [`candidates::hydrate`], by revision: `None` for one
/// that was read and is no longer eligible (never selected, never read again).
type Hydrated = HashMap<RevisionId, Option<candidates::HydratedRow>>;

/// How many candidates packing reads from canonical rows at a time.
fn batch_size(request: &SearchRequest) -> usize {
    (request.max_count as usize * 2).clamp(8, 64)
}

/// Best total first; ties by the newer revision, then by id (a stable order).
fn sort_ranked(scored: &mut [(Candidate, Components)]) {
    scored.sort_by(|(a, ca), (b, cb)| {
        cb.total()
            .total_cmp(&ca.total())
            .then(b.row.created_at.cmp(&a.row.created_at))
            .then(a.row.revision_id.cmp(&b.row.revision_id))
    });
}

fn semantic_category(failure: SemanticFailure) -> DegradationCategory {
    match failure {
        SemanticFailure::Unavailable => DegradationCategory::SemanticUnavailable,
        SemanticFailure::Rebuilding => DegradationCategory::IndexRebuilding,
        SemanticFailure::Oversized => DegradationCategory::SemanticOversized,
        SemanticFailure::Failed => DegradationCategory::SemanticFailed,
    }
}

/// Convenience for callers without a vector index: one search with `config`.
pub async fn search(
    store: &Store,
    config: &RetrievalConfig,
    request: &SearchRequest,
) -> Result<SearchOutcome, RetrievalError> {
    Retriever::new(store.clone(), config.clone()).search(request).await
}
