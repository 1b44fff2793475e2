//! Candidate sources, each one SQL statement with the eligibility predicate inside its `WHERE`
//! clause (parameters `$1` agent, `$2` conversation, `$3` audience, see
//! [`crate::eligible_revision_sql`]). A rejected row never reaches Rust, so no score can restore
//! it. Every source returns at most `per_source_limit` rows, best first.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use crate::eligible_revision_sql;
use crate::ids::{ActorId, ConversationId, EntryId, RevisionId};
use crate::privacy::EligibilityContext;

/// The columns every candidate query returns (entry and revision aliased `e` and `r`).
macro_rules! candidate_columns {
    () => {
        "e.id AS entry_id, r.id AS revision_id, r.revision_number, r.body, r.subject_actor_id, r.source_actor_id,
         e.origin_conversation_id, e.always_on, r.created_at"
    };
}

/// The current revisions of the agent's entries; the eligibility predicate re-checks all of it.
macro_rules! candidate_from {
    () => {
        " FROM memory_entry_revisions r
          JOIN memory_entries e ON e.id = r.entry_id AND e.current_revision_id = r.id
         WHERE r.runtime_agent_id = $1 AND e.state = 'live' AND "
    };
}

/// Which candidate source proposed a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateSource {
    /// About the current actor.
    Subject,
    /// Formed in the destination conversation.
    Conversation,
    /// PostgreSQL full-text match.
    Lexical,
    /// Vector similarity.
    Semantic,
    /// Flagged always-on.
    AlwaysOn,
}

/// An eligible current revision as hydrated from canonical rows.
#[derive(Clone, Debug, sqlx::FromRow)]
pub(crate) struct CandidateRow {
    pub entry_id: EntryId,
    pub revision_id: RevisionId,
    pub revision_number: i32,
    pub body: String,
    pub subject_actor_id: Option<ActorId>,
    pub source_actor_id: Option<ActorId>,
    pub origin_conversation_id: Option<ConversationId>,
    pub always_on: bool,
    pub created_at: DateTime<Utc>,
}

/// A deduplicated candidate with the ranks the sources gave it.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub row: CandidateRow,
    pub sources: Vec<CandidateSource>,
    pub lexical_rank: Option<u32>,
    pub semantic_rank: Option<u32>,
}

/// The union of all sources, deduplicated by (entry, revision), in a stable order.
#[derive(Default)]
pub(crate) struct CandidateSet {
    by_key: BTreeMap<(EntryId, RevisionId), Candidate>,
}

impl CandidateSet {
    /// Adds rows of one source, best first; ranks count from 1 within that source.
    pub fn add(&mut self, source: CandidateSource, rows: Vec<CandidateRow>) {
        for (index, row) in rows.into_iter().enumerate() {
            let rank = u32::try_from(index + 1).unwrap_or(u32::MAX);
            let candidate = self.by_key.entry((row.entry_id, row.revision_id)).or_insert_with(|| Candidate {
                row,
                sources: Vec::new(),
                lexical_rank: None,
                semantic_rank: None,
            });
            if !candidate.sources.contains(&source) {
                candidate.sources.push(source);
                candidate.sources.sort();
            }
            match source {
                CandidateSource::Lexical => candidate.lexical_rank = Some(rank),
                CandidateSource::Semantic => candidate.semantic_rank = Some(rank),
                _ => {}
            }
        }
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    pub fn into_candidates(self) -> Vec<Candidate> {
        self.by_key.into_values().collect()
    }
}

/// Memories whose current revision is about `actor`, newest first.
pub(crate) async fn subject(
    pool: &PgPool,
    ctx: &EligibilityContext,
    actor: ActorId,
    limit: u32,
) -> Result<Vec<CandidateRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        candidate_columns!(),
        candidate_from!(),
        eligible_revision_sql!(),
        " AND r.subject_actor_id = $4 ORDER BY r.created_at DESC, r.id LIMIT $5"
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(actor)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
}

/// Memories formed in the destination conversation, newest first.
pub(crate) async fn conversation(
    pool: &PgPool,
    ctx: &EligibilityContext,
    limit: u32,
) -> Result<Vec<CandidateRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        candidate_columns!(),
        candidate_from!(),
        eligible_revision_sql!(),
        " AND e.origin_conversation_id = $2 ORDER BY r.created_at DESC, r.id LIMIT $4"
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
}

/// Always-on memories, newest first.
pub(crate) async fn always_on(
    pool: &PgPool,
    ctx: &EligibilityContext,
    limit: u32,
) -> Result<Vec<CandidateRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        candidate_columns!(),
        candidate_from!(),
        eligible_revision_sql!(),
        " AND e.always_on ORDER BY r.created_at DESC, r.id LIMIT $4"
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
}

/// Whether the query has any searchable full-text term (not only stop words or punctuation).
pub(crate) async fn has_lexical_terms(pool: &PgPool, query: &str) -> Result<bool, sqlx::Error> {
    let (has,): (bool,) =
        sqlx::query_as("SELECT memory_lexical_query($1) IS NOT NULL").bind(query).fetch_one(pool).await?;
    Ok(has)
}

/// Full-text matches over the agent's whole archive, best `ts_rank_cd` first. Terms are OR-ed
/// (`memory_lexical_query`), so rows matching more of them rank higher.
pub(crate) async fn lexical(
    pool: &PgPool,
    ctx: &EligibilityContext,
    query: &str,
    limit: u32,
) -> Result<Vec<CandidateRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        candidate_columns!(),
        " FROM (SELECT memory_lexical_query($4) AS tsq) q
          JOIN memory_entry_revisions r ON r.body_tsv @@ q.tsq
          JOIN memory_entries e ON e.id = r.entry_id AND e.current_revision_id = r.id
         WHERE r.runtime_agent_id = $1 AND e.state = 'live' AND ",
        eligible_revision_sql!(),
        " ORDER BY ts_rank_cd(r.body_tsv, q.tsq) DESC, r.created_at DESC, r.id LIMIT $5"
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(query)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
}

/// Counts, by rejecting rule, the full-text matches that the predicate withheld: among the
/// `limit` best matches of the agent's live current revisions *before* eligibility (the rows that
/// would have been lexical candidates), those the predicate rejects, named by
/// `memory_eligibility_rule`. Bounded by `limit` whatever the archive size. Only categories and
/// counts leave this function, never text or ids.
pub(crate) async fn withheld_lexical(
    pool: &PgPool,
    ctx: &EligibilityContext,
    query: &str,
    limit: u32,
) -> Result<BTreeMap<String, i64>, sqlx::Error> {
    let rows: Vec<(String, i64)> = sqlx::query_as(concat!(
        "SELECT memory_eligibility_rule($1, top.id, $2, $3) AS rule, count(*)
           FROM (SELECT r.id
                   FROM (SELECT memory_lexical_query($4) AS tsq) q
                   JOIN memory_entry_revisions r ON r.body_tsv @@ q.tsq
                   JOIN memory_entries e ON e.id = r.entry_id AND e.current_revision_id = r.id
                  WHERE r.runtime_agent_id = $1 AND e.state = 'live'
                  ORDER BY ts_rank_cd(r.body_tsv, q.tsq) DESC, r.created_at DESC, r.id
                  LIMIT $5) top
           JOIN memory_entry_revisions r ON r.id = top.id
          WHERE NOT ",
        eligible_revision_sql!(),
        " GROUP BY 1 ORDER BY 1"
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(query)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().filter(|(rule, _)| rule != "eligible").collect())
}

/// Hydrates semantic hits from canonical rows, revalidating each with the eligibility predicate;
/// the result keeps the hits' order. Hits that are no longer eligible (or never were) vanish.
pub(crate) async fn hydrate_semantic(
    pool: &PgPool,
    ctx: &EligibilityContext,
    hits: &[RevisionId],
) -> Result<Vec<CandidateRow>, sqlx::Error> {
    let ids: Vec<Uuid> = hits.iter().map(|h| h.0).collect();
    sqlx::query_as(concat!(
        "SELECT ",
        candidate_columns!(),
        " FROM unnest($4::uuid[]) WITH ORDINALITY AS hit(id, position)
          JOIN memory_entry_revisions r ON r.id = hit.id
          JOIN memory_entries e ON e.id = r.entry_id AND e.current_revision_id = r.id
         WHERE r.runtime_agent_id = $1 AND e.state = 'live' AND ",
        eligible_revision_sql!(),
        " ORDER BY hit.position"
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(ids)
    .fetch_all(pool)
    .await
}
