//! Eligibility: the Rust face of the privacy policy, which lives in SQL in two forms (migration
//! `20261207100000_one_privacy_policy.sql`; `docs/policy.md` reads it in words):
//! - the set form `memory_eligible_revisions($1 agent, $2 conversation, $3 audience, reading)`,
//!   which every candidate query selects *from*, so an ineligible row is never even read into
//!   Rust and no score can restore it;
//! - the per-revision verdict `memory_eligibility_verdict`, which names the first failing rule and
//!   source; the explain API ([`explain_entry`]), the delivery recheck ([`recheck_delivery`]) and
//!   hydration use it.
//!
//! Both are built on `memory_released_revisions` (grant coverage) and `memory_first_failing_rule`
//! (the rule order), each written once.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgExecutor, PgPool};
use uuid::Uuid;

use crate::ids::{ActorId, AgentId, ConversationId, EntryId, RevisionId, SourceId};
use crate::store::{destination_audience_on, ClosedAudience, DestinationAudience, Store, StoreError};

/// Why retrieval-side privacy checks could not answer.
#[derive(Debug, thiserror::Error)]
pub enum PrivacyError {
    /// A store lookup failed (unknown conversation, database error...).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// PostgreSQL failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// No runtime agent has this entry.
    #[error("entry {0} does not exist; check the id (see `mesh-memory show`)")]
    UnknownEntry(EntryId),
    /// The SQL predicate returned a rule this build does not know: the schema is newer than the
    /// binary. Upgrade the binary; nothing is treated as eligible meanwhile.
    #[error("unknown eligibility rule {0:?} from the database; upgrade mesh-memory to match the schema")]
    UnexpectedRule(String),
}

/// Who is asking, where: the input of the predicate. The audience is a snapshot taken when the
/// context was resolved; the delivery recheck compares it with the audience at delivery time.
///
/// Built only by resolving a conversation ([`Self::resolve`], [`Self::resolve_for_speaker`]), so
/// no caller can hand the predicate an audience of its choosing; the fields are read through
/// accessors. An implausible destination ([`ClosedAudience`]) resolves to an empty audience, for
/// which SQL admits nothing.
///
/// A context cannot be made up with an audience of the caller's choosing:
///
/// ```compile_fail
/// use mesh_memory::privacy::EligibilityContext;
/// use mesh_memory::{ActorId, AgentId, ConversationId};
///
/// fn forged(agent: AgentId, conversation: ConversationId, reader: ActorId) -> EligibilityContext {
///     EligibilityContext { agent, conversation, audience: vec![reader] }
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EligibilityContext {
    pub(crate) agent: AgentId,
    pub(crate) conversation: ConversationId,
    pub(crate) audience: Vec<ActorId>,
    pub(crate) closed: Option<ClosedAudience>,
}

impl EligibilityContext {
    /// Resolves the destination audience now (`Store::current_audience`), with no speaker to
    /// check (operator tools, delivery rechecks). Fails with `UnknownReference` if the
    /// conversation is not the agent's.
    pub async fn resolve(
        store: &Store,
        agent: AgentId,
        conversation: ConversationId,
    ) -> Result<EligibilityContext, PrivacyError> {
        Self::resolve_for_speaker(store, agent, conversation, None).await
    }

    /// Resolves the destination audience of a turn or search in which `speaker` speaks
    /// (`Store::destination_audience`): closed (empty, nothing eligible) when the conversation
    /// has no reader or the speaker is not a member now. `UnknownReference` for an unknown
    /// conversation or speaker, before anything is searched.
    pub async fn resolve_for_speaker(
        store: &Store,
        agent: AgentId,
        conversation: ConversationId,
        speaker: Option<ActorId>,
    ) -> Result<EligibilityContext, PrivacyError> {
        let destination = store.destination_audience(agent, conversation, speaker).await?;
        Ok(Self::for_destination(agent, conversation, destination))
    }

    /// [`Self::resolve`] on `executor`: the delivery recheck reads the audience in the
    /// transaction that records the reply ([`recheck_delivery_on`]).
    pub(crate) async fn resolve_on<'e>(
        executor: impl PgExecutor<'e>,
        agent: AgentId,
        conversation: ConversationId,
    ) -> Result<EligibilityContext, PrivacyError> {
        let destination = destination_audience_on(executor, agent, conversation, None).await?;
        Ok(Self::for_destination(agent, conversation, destination))
    }

    fn for_destination(agent: AgentId, conversation: ConversationId, destination: DestinationAudience) -> Self {
        EligibilityContext { agent, conversation, audience: destination.readers, closed: destination.closed }
    }

    /// The runtime agent whose memory is searched.
    pub fn agent(&self) -> AgentId {
        self.agent
    }

    /// The destination conversation.
    pub fn conversation(&self) -> ConversationId {
        self.conversation
    }

    /// Who reads the destination, sorted, except the agent's own actor (empty when closed).
    pub fn audience(&self) -> &[ActorId] {
        &self.audience
    }

    /// Why the audience was refused, if it was.
    pub fn closed(&self) -> Option<ClosedAudience> {
        self.closed
    }

    /// The audience as raw UUIDs, for binding as `uuid[]`.
    pub fn audience_uuids(&self) -> Vec<Uuid> {
        self.audience.iter().map(|a| a.0).collect()
    }
}

/// The verdict of the predicate: eligible, or the first rule that rejects the revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Rule {
    /// Every rule holds.
    Eligible,
    /// The revision does not exist for this runtime agent.
    ForeignAgent,
    /// An operator erased the revision's text (`mesh-memory erase`): never eligible again.
    Erased,
    /// The entry was forgotten.
    Forgotten,
    /// A later revision replaced this one.
    NotCurrent,
    /// An explicit restriction (conversation-only) confines it elsewhere.
    Restriction,
    /// The revision has no lineage source, so its audience cannot be established.
    NoLineage,
    /// A source's audience evidence is unknown (withheld until reviewed or released by a grant).
    UnknownEvidence {
        /// The first such source.
        source_id: SourceId,
    },
    /// A source's known audience does not include every destination reader.
    AudienceNotCovered {
        /// The first such source.
        source_id: SourceId,
    },
    /// The destination audience is unknown or empty (a conversation with no reader, or a speaker
    /// outside its membership): nothing is eligible (fails closed).
    AudienceUnknown,
}

impl Rule {
    /// Maps the SQL function's `(rule, source_id)` pair.
    fn from_sql(rule: &str, source: Option<Uuid>) -> Result<Rule, PrivacyError> {
        let unexpected = || PrivacyError::UnexpectedRule(rule.to_owned());
        let with_source = |make: fn(SourceId) -> Rule| source.map(|s| make(SourceId(s))).ok_or_else(unexpected);
        Ok(match RuleName::from_sql(rule).ok_or_else(unexpected)? {
            RuleName::Eligible => Rule::Eligible,
            RuleName::ForeignAgent => Rule::ForeignAgent,
            RuleName::Erased => Rule::Erased,
            RuleName::Forgotten => Rule::Forgotten,
            RuleName::NotCurrent => Rule::NotCurrent,
            RuleName::Restriction => Rule::Restriction,
            RuleName::NoLineage => Rule::NoLineage,
            RuleName::UnknownEvidence => with_source(|source_id| Rule::UnknownEvidence { source_id })?,
            RuleName::AudienceNotCovered => with_source(|source_id| Rule::AudienceNotCovered { source_id })?,
            RuleName::AudienceUnknown => Rule::AudienceUnknown,
        })
    }

    /// Whether the revision may be used.
    pub fn is_eligible(&self) -> bool {
        matches!(self, Rule::Eligible)
    }

    /// Which rule, without the source it names.
    pub fn kind(&self) -> RuleName {
        match self {
            Rule::Eligible => RuleName::Eligible,
            Rule::ForeignAgent => RuleName::ForeignAgent,
            Rule::Erased => RuleName::Erased,
            Rule::Forgotten => RuleName::Forgotten,
            Rule::NotCurrent => RuleName::NotCurrent,
            Rule::Restriction => RuleName::Restriction,
            Rule::NoLineage => RuleName::NoLineage,
            Rule::UnknownEvidence { .. } => RuleName::UnknownEvidence,
            Rule::AudienceNotCovered { .. } => RuleName::AudienceNotCovered,
            Rule::AudienceUnknown => RuleName::AudienceUnknown,
        }
    }

    /// The rule's stable snake_case name (as stored by SQL and shown in diagnostics).
    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }

    /// One sentence for operators.
    pub fn describe(&self) -> String {
        match self {
            Rule::Eligible => "eligible: every source's audience covers this conversation (or a live grant does)".into(),
            Rule::ForeignAgent => "rejected: the memory belongs to another runtime agent".into(),
            Rule::Erased => "rejected: an operator erased this revision's text".into(),
            Rule::Forgotten => "rejected: the entry was forgotten".into(),
            Rule::NotCurrent => "rejected: the revision is no longer the entry's current revision".into(),
            Rule::Restriction => "rejected: the entry is restricted to another conversation".into(),
            Rule::NoLineage => "rejected: the revision has no lineage source, so its audience is unknown".into(),
            Rule::UnknownEvidence { source_id } => format!(
                "withheld: source {source_id} has unknown audience evidence (needs review or a sharing grant)"
            ),
            Rule::AudienceNotCovered { source_id } => format!(
                "rejected: source {source_id} was not visible to everyone in this conversation, and no live grant covers them"
            ),
            Rule::AudienceUnknown => {
                "rejected: the destination audience is unknown or empty (no reader, or a speaker who is not a member)".into()
            }
        }
    }
}

/// The name of a [`Rule`] without the source it names, in the rule order (each variant means the
/// [`Rule`] of the same name): what SQL returns as `rule` and what the console shows, so the UI
/// gets a closed set of names rather than a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)] // documented on `Rule`
pub enum RuleName {
    Eligible,
    ForeignAgent,
    Erased,
    Forgotten,
    NotCurrent,
    Restriction,
    NoLineage,
    UnknownEvidence,
    AudienceNotCovered,
    AudienceUnknown,
}

impl RuleName {
    /// Every rule name, in the rule order.
    pub const ALL: [RuleName; 10] = [
        Self::Eligible,
        Self::ForeignAgent,
        Self::Erased,
        Self::Forgotten,
        Self::NotCurrent,
        Self::Restriction,
        Self::NoLineage,
        Self::UnknownEvidence,
        Self::AudienceNotCovered,
        Self::AudienceUnknown,
    ];

    /// The snake_case name SQL uses.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Eligible => "eligible",
            Self::ForeignAgent => "foreign_agent",
            Self::Erased => "erased",
            Self::Forgotten => "forgotten",
            Self::NotCurrent => "not_current",
            Self::Restriction => "restriction",
            Self::NoLineage => "no_lineage",
            Self::UnknownEvidence => "unknown_evidence",
            Self::AudienceNotCovered => "audience_not_covered",
            Self::AudienceUnknown => "audience_unknown",
        }
    }

    /// The rule SQL named, `None` for a name this build does not know (a newer schema).
    pub fn from_sql(name: &str) -> Option<RuleName> {
        Self::ALL.into_iter().find(|rule| rule.as_str() == name)
    }
}

impl std::fmt::Display for RuleName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict for one revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The revision judged.
    pub revision_id: RevisionId,
    /// Eligible or the first failing rule.
    pub rule: Rule,
}

/// Judges each revision for the context, with the one SQL predicate. Order follows `revisions`.
/// `executor` is a pool, or a transaction's connection (the delivery recheck).
pub async fn revision_verdicts<'e>(
    executor: impl PgExecutor<'e>,
    context: &EligibilityContext,
    revisions: &[RevisionId],
) -> Result<Vec<Verdict>, PrivacyError> {
    let ids: Vec<Uuid> = revisions.iter().map(|r| r.0).collect();
    let rows: Vec<(Uuid, Option<String>, Option<Uuid>)> = sqlx::query_as(
        "SELECT r.id, (v).rule, (v).source_id
           FROM unnest($4::uuid[]) WITH ORDINALITY AS r(id, position)
           CROSS JOIN LATERAL (SELECT memory_eligibility_verdict($1, r.id, $2, $3) AS v) verdict
          ORDER BY r.position",
    )
    .bind(context.agent)
    .bind(context.conversation)
    .bind(context.audience_uuids())
    .bind(ids)
    .fetch_all(executor)
    .await?;
    rows.into_iter()
        .map(|(id, rule, source)| {
            let rule = rule.ok_or_else(|| PrivacyError::UnexpectedRule("NULL".into()))?;
            Ok(Verdict { revision_id: RevisionId(id), rule: Rule::from_sql(&rule, source)? })
        })
        .collect()
}

/// Details of the source named by a rejecting rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingSource {
    /// The source row.
    pub source_id: SourceId,
    /// What the source points at.
    pub kind: crate::store::SourceKind,
    /// How its evidence was established.
    pub evidence_basis: String,
    /// Destination readers missing from its known audience (empty for unknown evidence).
    pub missing_actors: Vec<ActorId>,
}

/// The answer to "why is (or isn't) this entry eligible in that conversation?".
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EntryExplanation {
    /// The entry asked about.
    pub entry_id: EntryId,
    /// Its current revision (the one retrieval would use).
    pub revision_id: RevisionId,
    /// The context it was judged in.
    pub context: EligibilityContext,
    /// The verdict.
    pub rule: Rule,
    /// Whether it is eligible.
    pub eligible: bool,
    /// The verdict in words.
    pub explanation: String,
    /// The source that failed, for the two source rules.
    pub failing_source: Option<FailingSource>,
}

/// Explains an entry's eligibility in a conversation. `agent` defaults to the entry's owner; the
/// conversation must belong to `agent`. A different owner yields `foreign_agent`.
pub async fn explain_entry(
    store: &Store,
    agent: Option<AgentId>,
    entry: EntryId,
    conversation: ConversationId,
) -> Result<EntryExplanation, PrivacyError> {
    let owner = store.entry_owner(entry).await?.ok_or(PrivacyError::UnknownEntry(entry))?;
    let agent = agent.unwrap_or(owner);
    let context = EligibilityContext::resolve(store, agent, conversation).await?;
    let (revision,): (RevisionId,) = sqlx::query_as("SELECT current_revision_id FROM memory_entries WHERE id = $1")
        .bind(entry)
        .fetch_one(store.pool())
        .await?;
    let verdict = revision_verdicts(store.pool(), &context, &[revision]).await?.remove(0);
    let failing_source = match verdict.rule {
        Rule::UnknownEvidence { source_id } | Rule::AudienceNotCovered { source_id } => {
            Some(failing_source(store.pool(), &context, source_id).await?)
        }
        _ => None,
    };
    Ok(EntryExplanation {
        entry_id: entry,
        revision_id: revision,
        eligible: verdict.rule.is_eligible(),
        explanation: verdict.rule.describe(),
        rule: verdict.rule,
        context,
        failing_source,
    })
}

async fn failing_source(
    pool: &PgPool,
    context: &EligibilityContext,
    source: SourceId,
) -> Result<FailingSource, PrivacyError> {
    // One read of the source: who in the destination audience its known audience lacks (none
    // when its evidence is unknown: that source fails on evidence, not on an actor).
    let (kind, evidence_basis, missing): (crate::store::SourceKind, String, Vec<uuid::Uuid>) = sqlx::query_as(
        "SELECT s.kind, s.evidence_basis,
                ARRAY(SELECT d.actor_id FROM unnest($2::uuid[]) AS d(actor_id)
                       WHERE s.evidence = 'known' AND d.actor_id <> ALL (s.audience)
                       ORDER BY d.actor_id)
           FROM revision_sources s WHERE s.id = $1",
    )
    .bind(source)
    .bind(context.audience_uuids())
    .fetch_one(pool)
    .await?;
    let missing_actors = missing.into_iter().map(ActorId).collect();
    Ok(FailingSource { source_id: source, kind, evidence_basis, missing_actors })
}

/// How the destination audience moved between retrieval and delivery.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudienceChange {
    /// Actors who can read the conversation now but could not at retrieval.
    pub joined: Vec<ActorId>,
    /// Actors who could read it at retrieval but no longer can.
    pub left: Vec<ActorId>,
}

/// A used revision that is no longer eligible at delivery, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleRevision {
    /// The revision the reply was built from.
    pub revision_id: RevisionId,
    /// The rule that now rejects it (for the current audience).
    pub rule: Rule,
}

/// The delivery recheck: whether a reply built from retrieved memory may still be delivered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRecheck {
    /// The audience now.
    pub current_audience: Vec<ActorId>,
    /// Set when the audience differs from the retrieval-time snapshot.
    pub audience_change: Option<AudienceChange>,
    /// Used revisions that are no longer eligible for the current audience (forgotten, amended,
    /// grant revoked, audience widened...).
    pub stale_revisions: Vec<StaleRevision>,
}

impl DeliveryRecheck {
    /// True when the audience is unchanged and every used revision is still eligible: only then
    /// may the reply be delivered.
    pub fn is_clear(&self) -> bool {
        self.audience_change.is_none() && self.stale_revisions.is_empty()
    }

    /// The recheck of the audience now (`context`) against the retrieval-time snapshot, with the
    /// used revisions' verdicts for it.
    fn judge(context: EligibilityContext, snapshot_audience: &[ActorId], verdicts: Vec<Verdict>) -> Self {
        let before: BTreeSet<ActorId> = snapshot_audience.iter().copied().collect();
        let now: BTreeSet<ActorId> = context.audience.iter().copied().collect();
        let audience_change = (before != now).then(|| AudienceChange {
            joined: now.difference(&before).copied().collect(),
            left: before.difference(&now).copied().collect(),
        });
        let stale_revisions = verdicts
            .into_iter()
            .filter(|v| !v.rule.is_eligible())
            .map(|v| StaleRevision { revision_id: v.revision_id, rule: v.rule })
            .collect();
        DeliveryRecheck { current_audience: context.audience, audience_change, stale_revisions }
    }
}

/// Rechecks, just before delivery, that the conversation's audience equals the snapshot taken at
/// retrieval and that every used revision is still eligible (current, live, same predicate) for
/// the audience as it is now. The caller withholds the reply unless [`DeliveryRecheck::is_clear`].
pub async fn recheck_delivery(
    store: &Store,
    agent: AgentId,
    conversation: ConversationId,
    snapshot_audience: &[ActorId],
    used_revisions: &[RevisionId],
) -> Result<DeliveryRecheck, PrivacyError> {
    let context = EligibilityContext::resolve(store, agent, conversation).await?;
    let verdicts = revision_verdicts(store.pool(), &context, used_revisions).await?;
    Ok(DeliveryRecheck::judge(context, snapshot_audience, verdicts))
}

/// [`recheck_delivery`] on `conn`, a transaction's connection: the turn engine rechecks, records
/// the reply and persists the turn in one transaction that holds the erasure lock shared
/// ([`crate::erasure::ERASURE_LOCK_KEY`]), so an erasure either committed before this recheck
/// (which then sees the revision erased) or reads its scope after the reply is stored.
pub(crate) async fn recheck_delivery_on(
    conn: &mut PgConnection,
    agent: AgentId,
    conversation: ConversationId,
    snapshot_audience: &[ActorId],
    used_revisions: &[RevisionId],
) -> Result<DeliveryRecheck, PrivacyError> {
    let context = EligibilityContext::resolve_on(&mut *conn, agent, conversation).await?;
    let verdicts = revision_verdicts(&mut *conn, &context, used_revisions).await?;
    Ok(DeliveryRecheck::judge(context, snapshot_audience, verdicts))
}
