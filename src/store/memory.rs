//! Memory writes: create, amend, forget (tables `memory_entries`, `memory_entry_revisions`,
//! `index_outbox`). Each is one transaction that either commits whole or not at all, and each
//! returns what committed.

use serde::{Deserialize, Serialize};
use sqlx::{PgExecutor, PgPool, Postgres, Transaction};

use super::lineage::{
    foreign_message_source, insert_retrieved_revision_sources, names_retrieved_revisions, MessageSourceColumns,
    PlannedSource, SourceRef,
};
use super::{Store, StoreError};
use crate::ids::{ActorId, AgentId, ConversationId, EntryId, EntryReference, RevisionId, SourceId};

/// The longest memory body accepted, in characters. Memories are single facts, not documents;
/// the limit keeps any one entry well inside the default 4096-token retrieval allowance.
pub const MAX_BODY_CHARS: usize = 4000;

/// The most lineage sources one write may carry (a turn's messages plus retrieved memories).
pub const MAX_SOURCES_PER_WRITE: usize = 256;

/// Whether an entry can still be retrieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "memory_entry_state", rename_all = "lowercase")]
#[serde(rename_all = "lowercase")]
pub enum EntryState {
    /// Retrievable (subject to eligibility).
    Live,
    /// Retired; its history is kept.
    Forgotten,
}

/// An explicit policy restriction applied on top of audience eligibility.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "conversation", rename_all = "snake_case")]
pub enum Restriction {
    /// No restriction beyond audience evidence.
    None,
    /// Only ever eligible in this one conversation.
    ConversationOnly(ConversationId),
}

impl Restriction {
    /// Which kind of restriction, without its conversation (the `memory_restriction` column).
    pub fn kind(&self) -> RestrictionKind {
        match self {
            Restriction::None => RestrictionKind::None,
            Restriction::ConversationOnly(_) => RestrictionKind::ConversationOnly,
        }
    }
}

/// The kind of an entry's [`Restriction`], as the `memory_restriction` column stores it and the
/// console shows it (the conversation travels beside it, as `restricted_conversation_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "memory_restriction", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum RestrictionKind {
    /// No restriction beyond audience evidence.
    None,
    /// Only ever eligible in one conversation.
    ConversationOnly,
}

impl RestrictionKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RestrictionKind::None => "none",
            RestrictionKind::ConversationOnly => "conversation_only",
        }
    }
}

impl std::fmt::Display for RestrictionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Input for [`Store::create_entry`]. `source_actor` must come from the turn's authenticated
/// context, never from a model argument.
#[derive(Clone, Debug)]
pub struct NewMemory {
    /// Owning runtime agent.
    pub agent: AgentId,
    /// Natural prose; labels are never embedded.
    pub body: String,
    /// Who the claim concerns; `None` = not resolved yet.
    pub subject: Option<ActorId>,
    /// Who supplied the claim.
    pub source_actor: Option<ActorId>,
    /// The conversation the memory was formed in (drives conversation candidates).
    pub origin_conversation: Option<ConversationId>,
    /// Selected on every applicable turn.
    pub always_on: bool,
    /// Explicit restriction.
    pub restriction: Restriction,
    /// Lineage; at least one is required so that provenance is never empty.
    pub sources: Vec<SourceRef>,
}

/// How an amendment treats the subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "actor", rename_all = "snake_case")]
pub enum SubjectUpdate {
    /// Keep the current subject.
    Keep,
    /// Re-attribute to this actor.
    Set(ActorId),
    /// Mark the subject as not resolved.
    Clear,
}

/// Input for [`Store::amend_entry`].
#[derive(Clone, Debug)]
pub struct Amendment {
    /// Owning runtime agent.
    pub agent: AgentId,
    /// The entry to amend.
    pub entry: EntryId,
    /// The revision the caller read; the amend fails with a conflict if it is no longer current.
    pub expected_revision: RevisionId,
    /// The new body, or `None` to keep it.
    pub body: Option<String>,
    /// The subject change.
    pub subject: SubjectUpdate,
    /// Who supplied the correction (authenticated context).
    pub source_actor: Option<ActorId>,
    /// New sources, added to every earlier source (which are kept).
    pub sources: Vec<SourceRef>,
}

/// Which durable operation committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOperation {
    /// A new entry at revision 1.
    Create,
    /// A new revision of an existing entry.
    Amend,
    /// The entry was retired.
    Forget,
}

/// How a revision came to be, as the `revision_operation` column stores it (a forget writes no
/// revision).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, sqlx::Type)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[sqlx(type_name = "revision_operation", rename_all = "snake_case")]
#[serde(rename_all = "snake_case")]
pub enum RevisionOperation {
    /// The entry's first revision.
    Create,
    /// A later revision.
    Amend,
}

impl std::fmt::Display for RevisionOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RevisionOperation::Create => "create",
            RevisionOperation::Amend => "amend",
        })
    }
}

/// What committed, from the store's own return values. The ledger, and so the claim guard, is
/// built from these alone, so only the store constructs one: the fields are private (read through
/// the accessors) and there is no `Deserialize` (a ledger read back from `agent_turns` holds
/// [`crate::turn::RecordedWrite`]s, which back no claim). Neither a literal nor a parse compiles:
///
/// ```compile_fail
/// use mesh_memory::store::{CommittedWrite, WriteOperation};
/// use mesh_memory::{EntryId, RevisionId};
///
/// fn forged(entry_id: EntryId, revision_id: RevisionId) -> CommittedWrite {
///     CommittedWrite { operation: WriteOperation::Create, entry_id, revision_id, revision_number: 1, subject_changed: false }
/// }
/// ```
///
/// ```compile_fail
/// fn parsed(json: &str) -> mesh_memory::store::CommittedWrite {
///     serde_json::from_str(json).unwrap()
/// }
/// ```
///
/// while the same literal and parse of the recorded form do (so the two above fail for the
/// reason they show):
///
/// ```
/// use mesh_memory::store::WriteOperation;
/// use mesh_memory::turn::RecordedWrite;
/// use mesh_memory::{EntryId, RevisionId};
///
/// fn recorded(entry_id: EntryId, revision_id: RevisionId) -> RecordedWrite {
///     RecordedWrite { operation: WriteOperation::Create, entry_id, revision_id, revision_number: 1, subject_changed: false }
/// }
/// fn parsed(json: &str) -> RecordedWrite {
///     serde_json::from_str(json).unwrap()
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommittedWrite {
    operation: WriteOperation,
    entry_id: EntryId,
    revision_id: RevisionId,
    revision_number: i32,
    subject_changed: bool,
}

impl CommittedWrite {
    /// The store's record of a committed write; nothing outside `store` may call it.
    pub(super) fn new(
        operation: WriteOperation,
        entry_id: EntryId,
        revision_id: RevisionId,
        revision_number: i32,
        subject_changed: bool,
    ) -> Self {
        CommittedWrite { operation, entry_id, revision_id, revision_number, subject_changed }
    }

    /// A write for the claim guard's unit tests, which need ledgers without a database.
    #[cfg(test)]
    pub(crate) fn for_test(operation: WriteOperation, subject_changed: bool) -> Self {
        Self::new(operation, EntryId::generate(), RevisionId::generate(), 1, subject_changed)
    }

    /// The operation.
    pub fn operation(&self) -> WriteOperation {
        self.operation
    }

    /// The entry written.
    pub fn entry_id(&self) -> EntryId {
        self.entry_id
    }

    /// The resulting (for forget: the final) revision.
    pub fn revision_id(&self) -> RevisionId {
        self.revision_id
    }

    /// Its number.
    pub fn revision_number(&self) -> i32 {
        self.revision_number
    }

    /// Whether the subject differs from the previous revision's (always false for create and
    /// forget). Only an amend with this set may be described as a re-attribution.
    pub fn subject_changed(&self) -> bool {
        self.subject_changed
    }
}

/// Why a write changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NothingChangedReason {
    /// No such entry for this runtime agent.
    UnknownEntry,
    /// The entry was already forgotten.
    AlreadyForgotten,
}

/// A typed "nothing changed" result: not an error, and never licence to claim a write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NothingChanged {
    /// The entry that was targeted.
    pub entry_id: EntryId,
    /// Why nothing changed.
    pub reason: NothingChangedReason,
}

/// Result of amend and forget (no `Deserialize`: it may hold a [`CommittedWrite`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WriteOutcome {
    /// The write committed.
    Committed(CommittedWrite),
    /// Nothing was written.
    NothingChanged(NothingChanged),
}

fn validate_body(body: &str) -> Result<(), StoreError> {
    if body.trim().is_empty() {
        return Err(StoreError::invalid("body", "must not be empty"));
    }
    let chars = body.chars().count();
    if chars > MAX_BODY_CHARS {
        return Err(StoreError::invalid(
            "body",
            format!("is {chars} characters; the limit is {MAX_BODY_CHARS} (store one fact per memory)"),
        ));
    }
    if body.contains('\0') {
        return Err(StoreError::invalid("body", "must not contain NUL characters"));
    }
    Ok(())
}

fn validate_sources(sources: &[SourceRef], required: bool) -> Result<(), StoreError> {
    if required && sources.is_empty() {
        return Err(StoreError::invalid("sources", "a new memory needs at least one lineage source"));
    }
    if sources.len() > MAX_SOURCES_PER_WRITE {
        return Err(StoreError::invalid("sources", format!("at most {MAX_SOURCES_PER_WRITE} per write")));
    }
    Ok(())
}

/// Deduplicates while keeping order, so a source named twice is recorded once, and gives each
/// source its (time-ordered) id.
fn plan_sources(agent: AgentId, revision: RevisionId, sources: &[SourceRef]) -> Vec<PlannedSource> {
    let mut seen = std::collections::HashSet::new();
    sources
        .iter()
        .copied()
        .filter(|s| seen.insert(*s))
        .map(|source| PlannedSource { id: SourceId::generate(), agent, revision, source })
        .collect()
}

/// A create that passed validation, with every id chosen: what one caller asked to write, ready
/// to be written alone or together with other callers' creates (see `group_commit`).
#[derive(Debug)]
pub(crate) struct PreparedCreate {
    new: NewMemory,
    entry: EntryId,
    revision: RevisionId,
    sources: Vec<PlannedSource>,
}

impl PreparedCreate {
    /// Validates the input and chooses the ids; nothing is written.
    pub(crate) fn prepare(new: NewMemory) -> Result<Self, StoreError> {
        validate_body(&new.body)?;
        validate_sources(&new.sources, true)?;
        let entry = EntryId::generate();
        let revision = RevisionId::generate();
        let sources = plan_sources(new.agent, revision, &new.sources);
        Ok(PreparedCreate { new, entry, revision, sources })
    }

    /// What this create's commit means to its caller.
    pub(crate) fn committed(&self) -> CommittedWrite {
        CommittedWrite::new(WriteOperation::Create, self.entry, self.revision, 1, false)
    }
}

/// The creates' fields as parallel arrays (one element per create): the array parameters of
/// `memory_write_creates`.
struct CreateColumns<'a> {
    entries: Vec<uuid::Uuid>,
    revisions: Vec<uuid::Uuid>,
    agents: Vec<uuid::Uuid>,
    always_on: Vec<bool>,
    restrictions: Vec<&'static str>,
    restricted_to: Vec<Option<uuid::Uuid>>,
    origins: Vec<Option<uuid::Uuid>>,
    bodies: Vec<&'a str>,
    subjects: Vec<Option<uuid::Uuid>>,
    source_actors: Vec<Option<uuid::Uuid>>,
}

impl<'a> CreateColumns<'a> {
    fn of(creates: &[&'a PreparedCreate]) -> Self {
        let column = |f: fn(&PreparedCreate) -> Option<uuid::Uuid>| creates.iter().map(|c| f(c)).collect::<Vec<_>>();
        let required = |f: fn(&PreparedCreate) -> uuid::Uuid| creates.iter().map(|c| f(c)).collect::<Vec<_>>();
        CreateColumns {
            entries: required(|c| c.entry.0),
            revisions: required(|c| c.revision.0),
            agents: required(|c| c.new.agent.0),
            always_on: creates.iter().map(|c| c.new.always_on).collect(),
            restrictions: creates.iter().map(|c| c.new.restriction.kind().as_str()).collect(),
            restricted_to: column(|c| match c.new.restriction {
                Restriction::None => None,
                Restriction::ConversationOnly(conversation) => Some(conversation.0),
            }),
            origins: column(|c| c.new.origin_conversation.map(|o| o.0)),
            bodies: creates.iter().map(|c| c.new.body.as_str()).collect(),
            subjects: column(|c| c.new.subject.map(|a| a.0)),
            source_actors: column(|c| c.new.source_actor.map(|a| a.0)),
        }
    }
}

/// Writes the creates all together: one call of the schema's `memory_write_creates` (entries,
/// revisions with their outbox rows, every message source, in that order), which is one round trip
/// and its own transaction; only when a create names a retrieved revision is the call wrapped in a
/// transaction that also writes those sources. Concurrent remembers share one commit and the
/// derived rows are refreshed once per statement for all of them. All commit or none does. For a
/// single create, a reference that does not exist is reported as the typed error naming it; for
/// several, the caller writes each alone to find out which one failed.
pub(crate) async fn write_creates(pool: &PgPool, creates: &[&PreparedCreate]) -> Result<(), StoreError> {
    // References are checked by the schema's foreign keys (no lookup round trips) and a violation
    // is mapped to the typed error naming the reference; the transaction rolls back.
    let reference_error = |e: sqlx::Error| match creates {
        [one] => reference_error(e, &one.new),
        _ => StoreError::Database(e),
    };
    let columns = CreateColumns::of(creates);
    let sources: Vec<PlannedSource> = creates.iter().flat_map(|c| c.sources.iter().copied()).collect();
    let messages = MessageSourceColumns::of(&sources);
    if !names_retrieved_revisions(&sources) {
        return call_write_creates(pool, &columns, &messages).await.map_err(reference_error);
    }
    let mut tx = pool.begin().await?;
    call_write_creates(&mut *tx, &columns, &messages).await.map_err(reference_error)?;
    insert_retrieved_revision_sources(&mut tx, &sources).await?;
    tx.commit().await?;
    Ok(())
}

/// One call of `memory_write_creates` (migration `20261204000000`) with the batch's columns.
async fn call_write_creates<'e>(
    executor: impl PgExecutor<'e>,
    columns: &CreateColumns<'_>,
    messages: &MessageSourceColumns,
) -> Result<(), sqlx::Error> {
    let query =
        sqlx::query("SELECT memory_write_creates($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)")
            .bind(&columns.entries)
            .bind(&columns.revisions)
            .bind(&columns.agents)
            .bind(&columns.always_on)
            .bind(&columns.restrictions)
            .bind(&columns.restricted_to)
            .bind(&columns.origins)
            .bind(&columns.bodies)
            .bind(&columns.subjects)
            .bind(&columns.source_actors);
    messages.bind(query).execute(executor).await?;
    Ok(())
}

/// The outcome `memory_write_amend` returns for an amend it wrote.
const AMEND_COMMITTED: &str = "committed";

/// What one call of `memory_write_amend` returned.
#[derive(sqlx::FromRow)]
struct AmendWritten {
    /// `committed`, or why nothing was written (see the migration).
    outcome: String,
    /// The entry's current revision after the call (the other one, on a conflict).
    current_revision: Option<RevisionId>,
    /// The new revision's number, when committed.
    revision_number: Option<i32>,
    /// Whether the subject changed, when the call got that far.
    subject_changed: Option<bool>,
}

/// One call of `memory_write_amend` (migration `20261209100000`). A subject or source actor that
/// does not exist fails on the revision's foreign key and is reported as the typed error naming
/// the field, as the lookups this call replaced reported it.
async fn call_write_amend<'e>(
    executor: impl PgExecutor<'e>,
    amendment: &Amendment,
    revision: RevisionId,
    messages: &MessageSourceColumns,
) -> Result<AmendWritten, StoreError> {
    let (subject_update, subject) = match amendment.subject {
        SubjectUpdate::Keep => ("keep", None),
        SubjectUpdate::Set(actor) => ("set", Some(actor)),
        SubjectUpdate::Clear => ("clear", None),
    };
    let query = sqlx::query_as(
        "SELECT outcome, current_revision, revision_number, subject_changed
           FROM memory_write_amend($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
    )
    .bind(amendment.agent)
    .bind(amendment.entry)
    .bind(amendment.expected_revision)
    .bind(revision)
    .bind(amendment.body.as_deref())
    .bind(subject_update)
    .bind(subject)
    .bind(amendment.source_actor);
    messages.bind_as(query).fetch_one(executor).await.map_err(|e| amend_reference_error(e, amendment, subject))
}

/// Maps a foreign-key violation of an amend to the typed error naming the field or source.
fn amend_reference_error(err: sqlx::Error, amendment: &Amendment, subject: Option<ActorId>) -> StoreError {
    if let Some(source_error) = foreign_message_source(&err) {
        return source_error;
    }
    let sqlx::Error::Database(db) = &err else { return StoreError::Database(err) };
    let missing = |field: &'static str, actor: Option<ActorId>| {
        StoreError::invalid(field, format!("actor {} does not exist", actor.map(|a| a.to_string()).unwrap_or_default()))
    };
    match (db.is_foreign_key_violation(), db.constraint()) {
        (true, Some("memory_entry_revisions_subject_actor_id_fkey")) => missing("subject", subject),
        (true, Some("memory_entry_revisions_source_actor_id_fkey")) => missing("source actor", amendment.source_actor),
        _ => StoreError::Database(err),
    }
}

async fn enqueue_index_work(
    tx: &mut Transaction<'_, Postgres>,
    agent: AgentId,
    revision: RevisionId,
    work: &str,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO index_outbox (runtime_agent_id, revision_id, work) VALUES ($1, $2, $3::index_work_kind)")
        .bind(agent)
        .bind(revision)
        .bind(work)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The entry row as forget needs it, locked for the rest of the transaction.
struct LockedEntry {
    state: EntryState,
    current_revision: RevisionId,
    revision_number: i32,
}

async fn lock_entry(
    tx: &mut Transaction<'_, Postgres>,
    agent: AgentId,
    entry: EntryId,
) -> Result<Option<LockedEntry>, StoreError> {
    // Lock the entry row on its own: a FOR UPDATE over a join would, after waiting for a
    // concurrent amend, re-check the join against the old snapshot and lose the row. The
    // revision is read by a second statement, which sees the committed state after the lock.
    let locked: Option<(EntryState, RevisionId)> = sqlx::query_as(
        "SELECT state, current_revision_id FROM memory_entries WHERE id = $1 AND runtime_agent_id = $2 FOR UPDATE",
    )
    .bind(entry)
    .bind(agent)
    .fetch_optional(&mut **tx)
    .await?;
    let Some((state, current_revision)) = locked else {
        return Ok(None);
    };
    let revision_number: i32 = sqlx::query_scalar("SELECT revision_number FROM memory_entry_revisions WHERE id = $1")
        .bind(current_revision)
        .fetch_one(&mut **tx)
        .await?;
    Ok(Some(LockedEntry { state, current_revision, revision_number }))
}

impl Store {
    /// Creates a new entry at revision 1 with its lineage. Create-only: there is no way to
    /// target an existing entry through this call.
    ///
    /// Concurrent calls are group-committed (one transaction for those that arrive while another
    /// batch is being written); each caller still gets its own result, and a batch that fails is
    /// written again one create at a time, so one caller's bad reference never fails another's.
    pub async fn create_entry(&self, new: NewMemory) -> Result<CommittedWrite, StoreError> {
        let prepared = PreparedCreate::prepare(new)?;
        let committed = self.creates.submit(&self.pool, prepared).await?;
        self.wrote(1);
        Ok(committed)
    }

    /// Adds a revision to a live entry, provided `expected_revision` is still current. Earlier
    /// evidence is kept (copied) and the parent revision is recorded as a source.
    ///
    /// One call of the schema's `memory_write_amend` (migration `20261209100000`): one round trip
    /// and its own transaction, which locks the entry, checks the expected revision and writes the
    /// revision, its evidence, the entry's pointer and the outbox row; only an amendment naming a
    /// retrieved revision is wrapped in a transaction that also writes those sources.
    pub async fn amend_entry(&self, amendment: Amendment) -> Result<WriteOutcome, StoreError> {
        if let Some(body) = &amendment.body {
            validate_body(body)?;
        }
        validate_sources(&amendment.sources, false)?;
        let revision = RevisionId::generate();
        let planned = plan_sources(amendment.agent, revision, &amendment.sources);
        let messages = MessageSourceColumns::of(&planned);
        let written = if names_retrieved_revisions(&planned) {
            let mut tx = self.pool.begin().await?;
            let written = call_write_amend(&mut *tx, &amendment, revision, &messages).await?;
            if written.outcome == AMEND_COMMITTED {
                insert_retrieved_revision_sources(&mut tx, &planned).await?;
                tx.commit().await?;
            }
            written
        } else {
            call_write_amend(&self.pool, &amendment, revision, &messages).await?
        };
        let outcome = match written.outcome.as_str() {
            AMEND_COMMITTED => WriteOutcome::Committed(CommittedWrite::new(
                WriteOperation::Amend,
                amendment.entry,
                revision,
                written.revision_number.unwrap_or_default(),
                written.subject_changed.unwrap_or_default(),
            )),
            "unknown_entry" => nothing_changed(amendment.entry, NothingChangedReason::UnknownEntry),
            "already_forgotten" => nothing_changed(amendment.entry, NothingChangedReason::AlreadyForgotten),
            "revision_conflict" => {
                return Err(StoreError::RevisionConflict {
                    entry: amendment.entry.0,
                    expected: amendment.expected_revision.0,
                    actual: written.current_revision.map(|r| r.0).unwrap_or_default(),
                })
            }
            "unchanged" => return Err(StoreError::invalid("amendment", "changes neither the body nor the subject")),
            other => return Err(StoreError::Database(sqlx::Error::Protocol(format!("unknown amend outcome {other}")))),
        };
        if matches!(outcome, WriteOutcome::Committed(_)) {
            self.wrote(1);
        }
        Ok(outcome)
    }

    /// Retires a live entry. Its revisions, sources and grants stay as history.
    pub async fn forget_entry(&self, agent: AgentId, entry: EntryId) -> Result<WriteOutcome, StoreError> {
        let mut tx = self.pool.begin().await?;
        let Some(current) = lock_entry(&mut tx, agent, entry).await? else {
            return Ok(nothing_changed(entry, NothingChangedReason::UnknownEntry));
        };
        if current.state == EntryState::Forgotten {
            return Ok(nothing_changed(entry, NothingChangedReason::AlreadyForgotten));
        }
        sqlx::query(
            "UPDATE memory_entries SET state = 'forgotten', forgotten_at = now(), updated_at = now() WHERE id = $1",
        )
        .bind(entry)
        .execute(&mut *tx)
        .await?;
        enqueue_index_work(&mut tx, agent, current.current_revision, "retire_entry").await?;
        tx.commit().await?;
        self.wrote(1);
        Ok(WriteOutcome::Committed(CommittedWrite::new(
            WriteOperation::Forget,
            entry,
            current.current_revision,
            current.revision_number,
            false,
        )))
    }

    /// The live entries of `agent` a tool call's reference may name, with their current
    /// revisions: the entry with that full id, or every entry whose id ends in that short id
    /// (at most [`MAX_REFERENCE_MATCHES`]). Forgotten entries are left out, so they answer like
    /// unknown ones. The caller decides which of them the asker may see: eligibility is not
    /// this table's rule, and a reference must resolve only among eligible entries so that no
    /// answer tells of a memory the asker cannot see.
    pub async fn current_revisions_by_reference(
        &self,
        agent: AgentId,
        reference: &EntryReference,
    ) -> Result<Vec<CurrentRevision>, StoreError> {
        // One statement per form, so that each is planned on its own index (the primary key, or
        // memory_entries_short_id) rather than as an OR the planner may scan the agent for.
        macro_rules! live_entries_of_agent {
            () => {
                "SELECT e.id, e.current_revision_id, r.revision_number
                   FROM memory_entries e JOIN memory_entry_revisions r ON r.id = e.current_revision_id
                  WHERE e.runtime_agent_id = $1 AND e.state = 'live'"
            };
        }
        let rows: Vec<(EntryId, RevisionId, i32)> = match reference {
            EntryReference::Full(entry) => {
                sqlx::query_as(concat!(live_entries_of_agent!(), " AND e.id = $2"))
                    .bind(agent)
                    .bind(entry)
                    .fetch_all(&self.pool)
                    .await?
            }
            EntryReference::Short(short) => {
                sqlx::query_as(concat!(
                    live_entries_of_agent!(),
                    " AND right(e.id::text, 12) = $2 ORDER BY e.id LIMIT $3"
                ))
                .bind(agent)
                .bind(short.as_str())
                .bind(MAX_REFERENCE_MATCHES)
                .fetch_all(&self.pool)
                .await?
            }
        };
        Ok(rows.into_iter().map(|(entry, revision, number)| CurrentRevision { entry, revision, number }).collect())
    }

    /// The entry an operator names by its full id or by the short id a prompt or tool result
    /// showed (`show`, `explain`): operators may read every agent's memory, so the short id is
    /// looked up across agents, and a short id two entries share is refused as ambiguous rather
    /// than guessed.
    pub async fn find_entry(&self, text: &str) -> Result<EntryId, StoreError> {
        let reference: EntryReference =
            text.parse().map_err(|e: crate::ids::MalformedId| StoreError::invalid("entry", e.to_string()))?;
        let short = match reference {
            EntryReference::Full(entry) => return Ok(entry),
            EntryReference::Short(short) => short,
        };
        let found: Vec<EntryId> =
            sqlx::query_scalar("SELECT id FROM memory_entries WHERE right(id::text, 12) = $1 LIMIT 2")
                .bind(short.as_str())
                .fetch_all(&self.pool)
                .await?;
        match found.as_slice() {
            [one] => Ok(*one),
            [] => Err(StoreError::invalid("entry", format!("no entry id ends in {short}"))),
            _ => Err(StoreError::invalid("entry", format!("more than one entry id ends in {short}; give the full id"))),
        }
    }
}

/// The most entries one short id is resolved to (a short id shared by two entries is about one
/// chance in 2^48 per pair; the bound only keeps a pathological table from being read whole).
pub const MAX_REFERENCE_MATCHES: i64 = 8;

/// A live entry and its current revision, as a tool reference resolved them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CurrentRevision {
    /// The entry.
    pub entry: EntryId,
    /// Its current revision.
    pub revision: RevisionId,
    /// That revision's number (what models see as "rev N").
    pub number: i32,
}

/// Maps a foreign-key violation of a new entry or revision to the typed error naming the
/// reference that does not exist (constraint names are PostgreSQL's defaults, `<table>_<cols>_fkey`).
fn reference_error(err: sqlx::Error, new: &NewMemory) -> StoreError {
    if let Some(source_error) = foreign_message_source(&err) {
        return source_error;
    }
    let sqlx::Error::Database(db) = &err else { return StoreError::Database(err) };
    if !db.is_foreign_key_violation() {
        return StoreError::Database(err);
    }
    let constraint = db.constraint().unwrap_or_default();
    let conversation = |c: Option<ConversationId>| StoreError::UnknownReference {
        kind: ConversationId::LABEL,
        id: c.map(|c| c.0).unwrap_or_default(),
    };
    let actor = |field: &'static str, a: Option<ActorId>| {
        StoreError::invalid(field, format!("actor {} does not exist", a.map(|a| a.to_string()).unwrap_or_default()))
    };
    match constraint {
        "memory_entries_runtime_agent_id_fkey" => {
            StoreError::UnknownReference { kind: AgentId::LABEL, id: new.agent.0 }
        }
        c if c.starts_with("memory_entries_origin_conversation") => conversation(new.origin_conversation),
        c if c.starts_with("memory_entries_restricted_conversation") => conversation(match new.restriction {
            Restriction::ConversationOnly(c) => Some(c),
            Restriction::None => None,
        }),
        "memory_entry_revisions_subject_actor_id_fkey" => actor("subject", new.subject),
        "memory_entry_revisions_source_actor_id_fkey" => actor("source actor", new.source_actor),
        _ => StoreError::Database(err),
    }
}

fn nothing_changed(entry: EntryId, reason: NothingChangedReason) -> WriteOutcome {
    WriteOutcome::NothingChanged(NothingChanged { entry_id: entry, reason })
}
