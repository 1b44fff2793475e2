//! Erasure: the one operation that removes stored text (table owner: `erasures`,
//! `erased_revisions`, `erased_messages`, `erasure_fingerprints`; migration `20261208100000`).
//!
//! Memory is append-only, except erasure by an operator, which removes text and keeps the
//! skeleton. The database enforces it: the history tables refuse every UPDATE but one made by the
//! transaction that recorded an erasure, changing only their text columns, and only
//! `mesh_operator_erase` (EXECUTE for members of `mesh_eraser`) records one. This module is what
//! the operator layer ([`crate::operator::OperatorSession::erase`]) runs:
//!
//! 1. [`preview`]: what an erasure of a scope reaches, counts per kind and the exact object ids;
//! 2. [`execute`]: one transaction that re-reads the scope, refuses when it is not what the
//!    operator previewed, fingerprints the text ([`fingerprint`]) and calls the function; then
//!    `VACUUM` of the tables it rewrote, so dead tuples do not keep the text;
//! 3. [`verify`]: anyone with read access (and the master key, for the text scan) checks that the
//!    erased bodies are markers, no embedding or projection row is left, and no text or JSON
//!    column of any table holds a fingerprint of the erased text.
//!
//! What it cannot reach (WAL archives, backups, replicas' disks): `docs/erasure.md`.

pub mod fingerprint;
mod verify;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::ids::{ActorId, AgentId, EntryId, MessageId, RevisionId, ShortEntryId};
use crate::sqlstate::ProjectSqlState;
pub use fingerprint::FingerprintKey;
pub use verify::{erased_revisions, verify, ErasureVerification, TextFound};

/// The text an erased body, message or quotation reads (the SQL `memory_erasure_marker()`).
pub const ERASURE_MARKER: &str = "[erased]";

/// The advisory-lock key that orders erasures against reply deliveries, so a reply is either
/// withheld or reachable by the erasure (never stored after the erasure that should have removed
/// it). An erasure takes `pg_advisory_xact_lock(ERASURE_LOCK_KEY)` (exclusive) before it reads
/// its scope; a delivery takes `pg_advisory_xact_lock_shared(ERASURE_LOCK_KEY)` at the start of
/// the one transaction in which it rechecks the used revisions, records the reply and persists
/// the turn ([`crate::turn::TurnEngine::deliver`]). Deliveries do not wait for one another.
pub const ERASURE_LOCK_KEY: i64 = 2060261208;

/// What an erasure reaches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub enum ErasureScope {
    /// Every revision of one entry.
    Entry {
        /// The entry.
        entry: EntryId,
    },
    /// Every revision about or told by one person, and the messages they sent, within one
    /// runtime agent or (`None`) all of them.
    Person {
        /// The person.
        actor: ActorId,
        /// The runtime agent it is limited to.
        agent: Option<AgentId>,
    },
}

impl ErasureScope {
    fn sql_parts(&self) -> (&'static str, Uuid, Option<Uuid>) {
        match self {
            Self::Entry { entry } => ("entry", entry.0, None),
            Self::Person { actor, agent } => ("person", actor.0, agent.map(|a| a.0)),
        }
    }
}

impl fmt::Display for ErasureScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Entry { entry } => write!(f, "entry {}", ShortEntryId::of(*entry)),
            Self::Person { actor, agent: Some(agent) } => write!(f, "person {} in runtime agent {}", actor.0, agent.0),
            Self::Person { actor, agent: None } => write!(f, "person {} in every runtime agent", actor.0),
        }
    }
}

/// How many objects of each kind an erasure reaches (or reached).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ErasureCounts {
    /// Memory revisions whose body goes.
    pub revisions: u32,
    /// Messages the person sent.
    pub messages: u32,
    /// Messages the erased revisions were learned from (erased whole: they hold the very text).
    pub source_messages: u32,
    /// Delivered replies built from erased memory or answering an erased message (erased whole).
    pub replies: u32,
    /// Turn records whose tool calls, results and claims are redacted.
    pub turns: u32,
    /// Live entries retired because their current revision goes.
    pub entries: u32,
    /// Sharing requests for an erased revision (rationale erased; a pending one is denied).
    pub sharing_requests: u32,
    /// Stored embeddings of erased revisions, in every generation.
    pub embeddings: u32,
}

impl ErasureCounts {
    /// From `kind -> count` as `memory_erasure_scope`'s kinds and `mesh_operator_erase`'s
    /// result name them (`embeddings` included).
    fn from_kinds(kinds: &BTreeMap<String, u32>) -> Self {
        let n = |k: &str| kinds.get(k).copied().unwrap_or(0);
        Self {
            revisions: n("revision"),
            messages: n("message"),
            source_messages: n("source"),
            replies: n("reply"),
            turns: n("turn"),
            entries: n("entry"),
            sharing_requests: n("sharing_request"),
            embeddings: n("embeddings"),
        }
    }
}

impl fmt::Display for ErasureCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} revisions, {} messages sent, {} messages learned from, {} replies, {} turn records, {} entries \
             retired, {} sharing requests, {} embeddings",
            self.revisions,
            self.messages,
            self.source_messages,
            self.replies,
            self.turns,
            self.entries,
            self.sharing_requests,
            self.embeddings
        )
    }
}

/// A revision an erasure would remove the body of, as the preview lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RevisionToErase {
    /// Its entry's short id.
    pub entry: ShortEntryId,
    /// The revision.
    pub revision_id: RevisionId,
    /// The first 120 characters of the body (the operator sees what goes before confirming).
    pub excerpt: String,
}

/// A message an erasure would erase whole, as the preview lists it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct MessageToErase {
    /// The message.
    pub message_id: MessageId,
    /// Why it goes: `message` (the person sent it), `source` (a revision was learned from it) or
    /// `reply` (a reply built from erased memory or answering an erased message).
    pub kind: String,
    /// The first 120 characters of the body.
    pub excerpt: String,
}

/// What an erasure would do: the operator confirms this, and [`execute`] refuses if the scope
/// changed since.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ErasurePreview {
    /// The scope previewed.
    pub scope: ErasureScope,
    /// Counts per kind.
    pub counts: ErasureCounts,
    /// The revisions whose body goes.
    pub revisions: Vec<RevisionToErase>,
    /// The messages erased whole (sent by the person, learned from, replies).
    pub messages: Vec<MessageToErase>,
    /// Every object reached (revisions, messages, replies, turns, entries, requests): what the
    /// confirmation passes back.
    pub object_ids: Vec<Uuid>,
    /// A short digest of exactly this scope and these objects ([`confirmation_digest`]): the CLI
    /// erases only with `--confirm` of the digest its dry run printed.
    pub confirmation: String,
}

impl fmt::Display for ErasurePreview {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "erasure of {} would remove the text of:", self.scope)?;
        writeln!(f, "  {}", self.counts)?;
        for r in &self.revisions {
            writeln!(f, "  - {} revision {}: {}", r.entry, r.revision_id.0, r.excerpt)?;
        }
        for m in &self.messages {
            writeln!(f, "  - {} message {}: {}", m.kind, m.message_id.0, m.excerpt)?;
        }
        writeln!(f, "confirmation: {}", self.confirmation)
    }
}

/// The confirmation digest of a scope and the objects it reaches: the first 16 hex digits of
/// SHA-256 over the scope's kind, target and agent and the sorted object ids. Whoever confirms a
/// digest confirms exactly what the preview showed; a new message, an amend or another erasure
/// changes it.
pub fn confirmation_digest(scope: &ErasureScope, object_ids: &[Uuid]) -> String {
    use sha2::{Digest, Sha256};
    let (kind, target, agent) = scope.sql_parts();
    let mut ids = object_ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut hash = Sha256::new();
    hash.update(format!(
        "mesh-memory erasure v1\n{kind}\n{target}\n{}\n",
        agent.map(|a| a.to_string()).unwrap_or_default()
    ));
    for id in ids {
        hash.update(id.as_bytes());
    }
    hex::encode(&hash.finalize()[..8])
}

/// What an erasure did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ErasureReport {
    /// The erasure's id (for `erase verify`).
    pub erasure_id: Uuid,
    /// The role the database recorded.
    pub erased_by: String,
    /// Counts per kind.
    pub counts: ErasureCounts,
    /// Whether fingerprints were recorded (the master key was set), so `verify` can scan text.
    pub fingerprinted: bool,
    /// Tables vacuumed (and analysed) after the erasure committed.
    pub vacuumed: Vec<String>,
    /// Milliseconds the erasure's transaction held its locks (the erasure lock, which deliveries
    /// wait for, and the reached entries' rows): from taking them to the commit.
    pub locked_ms: u32,
    /// Milliseconds the vacuum and analyse took (after the commit, holding no erasure lock).
    pub vacuum_ms: u32,
}

impl fmt::Display for ErasureReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "erasure {} by {}: {}", self.erasure_id, self.erased_by, self.counts)?;
        writeln!(
            f,
            "locks held {} ms; vacuumed and analysed in {} ms: {}",
            self.locked_ms,
            self.vacuum_ms,
            self.vacuumed.join(", ")
        )?;
        if !self.fingerprinted {
            writeln!(
                f,
                "no fingerprints recorded (MESH_AGENT_MASTER_KEY is unset): `erase verify` can check markers and \
                 indexes but not scan for the text"
            )?;
        }
        Ok(())
    }
}

/// Why an erasure, its preview or its verification did not happen. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum ErasureError {
    /// The reason is missing or too long.
    #[error("an erasure needs a reason of 1 to 2000 characters (for example a ticket reference)")]
    ReasonRequired,
    /// The scope is not what the operator previewed (new messages, an amend, another erasure).
    #[error("what this erasure reaches changed since its preview; preview again and confirm what it shows")]
    ScopeChanged,
    /// The target does not exist, or holds nothing that is not erased already.
    #[error("{0}")]
    NothingToErase(String),
    /// No erasure has this id.
    #[error("no erasure with id {0}")]
    UnknownErasure(Uuid),
    /// The role may not erase (it is not a member of `mesh_eraser`).
    #[error("this role may not erase; ask an administrator to GRANT mesh_eraser TO it")]
    NotAnEraser,
    /// The reason quotes text the erasure removes; the reason stays in the audit for good.
    #[error("the reason quotes text this erasure removes; give a reference instead (a ticket number)")]
    ReasonQuotesErasedText,
    /// The signed-in login expired or lost LOGIN since it signed in (the database's words).
    #[error("{0}")]
    LoginNoLongerValid(String),
    /// The configured external vector index could not be checked.
    #[error("cannot check the vector index: {0}")]
    VectorIndex(String),
    /// `MESH_AGENT_MASTER_KEY` is set but too short.
    #[error(transparent)]
    WeakKey(#[from] crate::retrieval::WeakMasterKey),
    /// The database failed (a lock timeout included: nothing was erased).
    #[error("database error during erasure: {0}")]
    Database(sqlx::Error),
}

impl From<sqlx::Error> for ErasureError {
    /// Every failed statement of an erasure is read the one way [`ErasureError::from_sql`] reads
    /// it, whichever statement (or connection) failed.
    fn from(err: sqlx::Error) -> Self {
        Self::from_sql(err)
    }
}

impl ErasureError {
    fn from_sql(err: sqlx::Error) -> Self {
        if crate::sqlstate::login_refused(&err) {
            return Self::LoginNoLongerValid(
                err.as_database_error().map(|e| e.message().to_owned()).unwrap_or_default(),
            );
        }
        match ProjectSqlState::of(&err) {
            Some(ProjectSqlState::ReasonRequired) => Self::ReasonRequired,
            Some(ProjectSqlState::ErasureScopeChanged) => Self::ScopeChanged,
            Some(ProjectSqlState::ReasonQuotesErasedText) => Self::ReasonQuotesErasedText,
            Some(ProjectSqlState::LoginNoLongerValid) => {
                Self::LoginNoLongerValid(err.as_database_error().map(|e| e.message().to_owned()).unwrap_or_default())
            }
            Some(ProjectSqlState::NothingToErase) => {
                Self::NothingToErase(err.as_database_error().map(|e| e.message().to_owned()).unwrap_or_default())
            }
            _ if err.as_database_error().and_then(|e| e.code()).as_deref() == Some("42501") => Self::NotAnEraser,
            _ => Self::Database(err),
        }
    }
}

/// One object of a scope as `memory_erasure_scope` returns it.
#[derive(sqlx::FromRow)]
struct ScopeRow {
    kind: String,
    id: Uuid,
    body: Option<String>,
}

async fn scope_rows<'e, E>(executor: E, scope: &ErasureScope) -> Result<Vec<ScopeRow>, sqlx::Error>
where
    E: sqlx::PgExecutor<'e>,
{
    let (kind, target, agent) = scope.sql_parts();
    sqlx::query_as("SELECT kind, id, body FROM memory_erasure_scope($1, $2, $3) ORDER BY kind, id")
        .bind(kind)
        .bind(target)
        .bind(agent)
        .fetch_all(executor)
        .await
}

fn sorted_ids(rows: &[ScopeRow]) -> Vec<Uuid> {
    rows.iter().map(|r| r.id).collect::<BTreeSet<_>>().into_iter().collect()
}

/// What erasing `scope` would reach now. Read with the caller's own privileges.
pub async fn preview(pool: &PgPool, scope: &ErasureScope) -> Result<ErasurePreview, ErasureError> {
    let rows = scope_rows(pool, scope).await?;
    let mut kinds: BTreeMap<String, u32> = BTreeMap::new();
    for row in &rows {
        *kinds.entry(row.kind.clone()).or_default() += 1;
    }
    let revision_ids: Vec<Uuid> = rows.iter().filter(|r| r.kind == "revision").map(|r| r.id).collect();
    let listed: Vec<(Uuid, Uuid, i64, String)> = sqlx::query_as(
        "SELECT r.id, r.entry_id,
                (SELECT count(*) FROM revision_embeddings x WHERE x.revision_id = r.id),
                left(r.body, 120)
           FROM memory_entry_revisions r WHERE r.id = ANY($1) ORDER BY r.entry_id, r.revision_number",
    )
    .bind(&revision_ids)
    .fetch_all(pool)
    .await?;
    kinds.insert("embeddings".to_owned(), listed.iter().map(|l| l.2 as u32).sum());
    let revisions = listed
        .into_iter()
        .map(|(id, entry, _, excerpt)| RevisionToErase {
            entry: ShortEntryId::of(EntryId(entry)),
            revision_id: RevisionId(id),
            excerpt,
        })
        .collect();
    let messages = rows
        .iter()
        .filter(|r| matches!(r.kind.as_str(), "message" | "source" | "reply"))
        .map(|r| MessageToErase {
            message_id: MessageId(r.id),
            kind: r.kind.clone(),
            excerpt: r.body.as_deref().unwrap_or_default().chars().take(120).collect(),
        })
        .collect();
    Ok(ErasurePreview {
        scope: scope.clone(),
        counts: ErasureCounts::from_kinds(&kinds),
        revisions,
        messages,
        confirmation: confirmation_digest(scope, &sorted_ids(&rows)),
        object_ids: sorted_ids(&rows),
    })
}

/// How [`execute`] runs.
#[derive(Clone, Debug)]
pub struct ErasureOptions {
    /// Key of the fingerprints `verify` scans for (`None`: none recorded).
    pub fingerprint_key: Option<FingerprintKey>,
    /// How long the erasure waits for a row another transaction holds before it gives up
    /// (and erases nothing).
    pub lock_timeout: std::time::Duration,
}

impl Default for ErasureOptions {
    fn default() -> Self {
        Self { fingerprint_key: None, lock_timeout: std::time::Duration::from_secs(10) }
    }
}

impl ErasureOptions {
    /// The defaults, with the fingerprint key from `MESH_AGENT_MASTER_KEY` (none when unset):
    /// what every shell erases with.
    pub fn from_environment() -> Result<Self, ErasureError> {
        let fingerprint_key = crate::service::fingerprint_key_from_environment()?;
        Ok(Self { fingerprint_key, ..Self::default() })
    }
}

/// Erases what `previewed` showed of `scope`, with `reason`, as the pool's role (a member of
/// `mesh_eraser`), then vacuums the tables it rewrote. One transaction: on any failure nothing is
/// erased. Called by [`crate::operator::OperatorSession::erase`].
pub(crate) async fn execute(
    pool: &PgPool,
    scope: &ErasureScope,
    previewed: &[Uuid],
    reason: &str,
    options: &ErasureOptions,
) -> Result<ErasureReport, ErasureError> {
    let reason = reason.trim();
    if reason.is_empty() || reason.chars().count() > 2000 {
        return Err(ErasureError::ReasonRequired);
    }
    let erasure_id = Uuid::now_v7();
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT set_config('lock_timeout', $1, true)")
        .bind(format!("{}ms", options.lock_timeout.as_millis().max(1)))
        .execute(&mut *tx)
        .await?;
    // The erasure lock before the scope is read: no delivery is then between its recheck and its
    // record (`mesh_operator_erase` takes it again; it is re-entrant in one transaction).
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(ERASURE_LOCK_KEY).execute(&mut *tx).await?;
    let locked_at = std::time::Instant::now();
    let rows = scope_rows(&mut *tx, scope).await.map_err(ErasureError::from_sql)?;
    let mut wanted: Vec<Uuid> = previewed.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    if sorted_ids(&rows) != wanted {
        return Err(ErasureError::ScopeChanged);
    }
    if reason_quotes_erased_text(reason, rows.iter().filter_map(|r| r.body.as_deref())) {
        return Err(ErasureError::ReasonQuotesErasedText);
    }
    let fingerprints = verify::erasure_fingerprints(
        &mut tx,
        options.fingerprint_key.as_ref(),
        rows.iter().filter_map(|r| r.body.as_deref()),
    )
    .await?;
    let (kind, target, agent) = scope.sql_parts();
    let counts: sqlx::types::Json<BTreeMap<String, u32>> =
        sqlx::query_scalar("SELECT mesh_operator_erase($1, $2, $3, $4, $5, $6, $7)")
            .bind(erasure_id)
            .bind(kind)
            .bind(target)
            .bind(agent)
            .bind(reason)
            .bind(&wanted)
            .bind(&fingerprints)
            .fetch_one(&mut *tx)
            .await
            .map_err(ErasureError::from_sql)?;
    let erased_by: String = sqlx::query_scalar("SELECT session_user::text").fetch_one(&mut *tx).await?;
    tx.commit().await?;
    let locked_ms = locked_at.elapsed().as_millis().min(u32::MAX as u128) as u32;
    let vacuum_started = std::time::Instant::now();
    let vacuumed = vacuum(pool).await;
    Ok(ErasureReport {
        erasure_id,
        erased_by,
        counts: ErasureCounts::from_kinds(&counts.0),
        fingerprinted: !fingerprints.is_empty(),
        vacuumed,
        locked_ms,
        vacuum_ms: vacuum_started.elapsed().as_millis().min(u32::MAX as u128) as u32,
    })
}

/// Whether `reason` shares a window of words with one of the erased `bodies` (whatever its case
/// and punctuation): the reason stays readable in the audit, so it must not carry the text away.
/// Compared under a key made for this call only. The database refuses a reason holding a whole
/// erased text too (MM013); this also catches a quoted part of a longer one.
fn reason_quotes_erased_text<'a>(reason: &str, bodies: impl Iterator<Item = &'a str>) -> bool {
    let key = FingerprintKey::from_master_key(Uuid::new_v4().as_bytes().repeat(2).as_slice())
        .expect("32 random bytes are a strong enough key");
    let quoted = key.of_text(reason);
    !quoted.is_empty() && bodies.into_iter().any(|body| !key.of_text(body).is_disjoint(&quoted))
}

/// VACUUM of the tables the role may maintain (outside any transaction, as VACUUM must run):
/// an eraser holds `MAINTAIN` on exactly the tables an erasure rewrites (migration
/// `20261208100000`). Returns what was vacuumed; one that fails, or a server without `MAINTAIN`
/// (before PostgreSQL 17), is left out, not an error: the erasure has committed.
async fn vacuum(pool: &PgPool) -> Vec<String> {
    let maintainable: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = current_schema() AND c.relkind = 'r' AND has_table_privilege(c.oid, 'MAINTAIN')
          ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    let mut done = Vec::new();
    for table in maintainable {
        // The name comes from the catalogue, quoted; never input.
        // ANALYZE too: the planner's statistics sample stored values (`pg_stats` shows them to
        // every reader of the table), so they must not keep the erased text either.
        let statement = format!("VACUUM (ANALYZE) \"{}\"", table.replace('"', "\"\""));
        if sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(pool).await.is_ok() {
            done.push(table);
        }
    }
    done
}

/// The erasure that removed a revision's body, as lineage and history show it:
/// "erased by <role> on <date>: <reason>".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct ErasureNote {
    /// The erasure.
    pub erasure_id: Uuid,
    /// The role that erased.
    pub erased_by: String,
    /// The day (UTC, `YYYY-MM-DD`).
    pub erased_on: String,
    /// The reason given.
    pub reason: String,
}

impl fmt::Display for ErasureNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "erased by {} on {}: {}", self.erased_by, self.erased_on, self.reason)
    }
}

/// The erasure notes of the given revisions that were erased.
pub async fn notes_for_revisions(
    pool: &PgPool,
    revisions: &[RevisionId],
) -> Result<BTreeMap<RevisionId, ErasureNote>, sqlx::Error> {
    let ids: Vec<Uuid> = revisions.iter().map(|r| r.0).collect();
    Ok(notes(pool, ERASED_REVISION_NOTES, &ids).await?.into_iter().map(|(id, note)| (RevisionId(id), note)).collect())
}

/// The erasure notes of the given messages that were erased.
pub async fn notes_for_messages(
    pool: &PgPool,
    messages: &[MessageId],
) -> Result<BTreeMap<MessageId, ErasureNote>, sqlx::Error> {
    let ids: Vec<Uuid> = messages.iter().map(|m| m.0).collect();
    Ok(notes(pool, ERASED_MESSAGE_NOTES, &ids).await?.into_iter().map(|(id, note)| (MessageId(id), note)).collect())
}

const ERASED_REVISION_NOTES: &str = "SELECT x.revision_id, e.id, e.erased_by,
        to_char(e.erased_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), e.reason
   FROM erased_revisions x JOIN erasures e ON e.id = x.erasure_id
  WHERE x.revision_id = ANY($1)";

const ERASED_MESSAGE_NOTES: &str = "SELECT x.message_id, e.id, e.erased_by,
        to_char(e.erased_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), e.reason
   FROM erased_messages x JOIN erasures e ON e.id = x.erasure_id
  WHERE x.message_id = ANY($1)";

async fn notes(pool: &PgPool, statement: &'static str, ids: &[Uuid]) -> Result<Vec<(Uuid, ErasureNote)>, sqlx::Error> {
    let rows: Vec<(Uuid, Uuid, String, String, String)> = sqlx::query_as(statement).bind(ids).fetch_all(pool).await?;
    Ok(rows
        .into_iter()
        .map(|(target, id, by, on, reason)| {
            (target, ErasureNote { erasure_id: id, erased_by: by, erased_on: on, reason })
        })
        .collect())
}
