//! Candidate sources, each one SQL statement that selects *from* the policy's set form, the SQL
//! function `memory_eligible_revisions` (parameters `$1` agent, `$2` conversation, `$3` audience;
//! see [`crate::privacy::eligibility`]). A rejected row never reaches Rust, so no score can
//! restore it. Every source returns at most `per_source_limit` rows, best first, with the features
//! fusion ranks on but no text: [`hydrate`] reads the text of the rows that packing considers from
//! canonical rows, re-checking each with the policy's verdict (`memory_eligibility_verdict`) in
//! the same statement.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use uuid::Uuid;

use super::sign_bits::SignBits;
use super::EligibleRevision;
use crate::ids::{ActorId, ConversationId, EntryId, RevisionId};
use crate::privacy::EligibilityContext;

/// The columns every candidate query returns, from the eligible projection rows aliased `p`.
macro_rules! candidate_columns {
    () => {
        "p.entry_id, p.revision_id, p.subject_actor_id, p.origin_conversation_id, p.always_on, p.created_at"
    };
}

/// `FROM` the eligible rows of the projection, aliased `p` (parameters `$1`..`$3`), read through
/// the audience array, which the full-text index carries beside the text.
macro_rules! from_eligible {
    () => {
        " FROM memory_eligible_revisions($1, $2, $3, p_reading => 'audience_array') AS p "
    };
}

/// Which candidate source proposed a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
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

/// An eligible current revision with what fusion ranks on (no text yet).
#[derive(Clone, Debug, sqlx::FromRow)]
pub(crate) struct CandidateRow {
    pub entry_id: EntryId,
    pub revision_id: RevisionId,
    pub subject_actor_id: Option<ActorId>,
    pub origin_conversation_id: Option<ConversationId>,
    pub always_on: bool,
    pub created_at: DateTime<Utc>,
}

/// The canonical row of a candidate that packing considers: its text and attribution, read from
/// `memory_entry_revisions` and `memory_entries` under the canonical predicate.
#[derive(Clone, Debug, sqlx::FromRow)]
pub(crate) struct HydratedRow {
    pub revision_id: RevisionId,
    pub revision_number: i32,
    pub body: String,
    pub subject_actor_id: Option<ActorId>,
    pub source_actor_id: Option<ActorId>,
    pub origin_conversation_id: Option<ConversationId>,
    pub always_on: bool,
    /// When the revision was learned (`memory_learned_times`): what the line says and ranking uses.
    pub learned_at: DateTime<Utc>,
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

    /// The subjects of the candidates (with repeats).
    pub fn subjects(&self) -> impl Iterator<Item = ActorId> + '_ {
        self.by_key.values().filter_map(|c| c.row.subject_actor_id)
    }

    pub fn into_candidates(self) -> Vec<Candidate> {
        self.by_key.into_values().collect()
    }
}

/// A destination's whole eligible set as one statement read it: the rows with their ranking
/// features, newest first, and the same revisions with their sign bits for a semantic index that
/// ranks them ([`super::SemanticIndex::ranks_sign_bits`]).
pub(crate) struct EligibleSet {
    pub rows: Vec<CandidateRow>,
    pub revisions: Vec<EligibleRevision>,
}

/// One row of the eligible-set statement.
#[derive(sqlx::FromRow)]
struct EligibleSetRow {
    #[sqlx(flatten)]
    row: CandidateRow,
    embedding_bits: Option<SignBits>,
}

/// The whole eligible set of this destination, or `None` when it has more than `limit` rows. One
/// statement over the set form read through audience classes: an index-only scan of a few
/// pages per class, so the subject, conversation and always-on sources and the semantic search are
/// answered from it without a statement of their own. `with_sign_bits` also returns each row's
/// quantized embedding (carried in the same index; 48 bytes at 384 dimensions).
pub(crate) async fn eligible_set(
    pool: &PgPool,
    ctx: &EligibilityContext,
    limit: usize,
    with_sign_bits: bool,
) -> Result<Option<EligibleSet>, sqlx::Error> {
    let probe = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
    macro_rules! eligible_set_sql {
        ($bits:literal) => {
            concat!(
                "SELECT p.entry_id, p.revision_id, p.subject_actor_id, p.origin_conversation_id, p.always_on,
                        p.created_at, ",
                $bits,
                " AS embedding_bits
                   FROM memory_eligible_revisions($1, $2, $3, p_reading => 'class_scan') AS p LIMIT $4"
            )
        };
    }
    let sql = match with_sign_bits {
        true => eligible_set_sql!("p.embedding_bits"),
        false => eligible_set_sql!("NULL::varbit"),
    };
    let read: Vec<EligibleSetRow> = sqlx::query_as(sql)
        .bind(ctx.agent)
        .bind(ctx.conversation)
        .bind(ctx.audience_uuids())
        .bind(probe)
        .fetch_all(pool)
        .await?;
    if read.len() > limit {
        return Ok(None);
    }
    let (mut rows, revisions): (Vec<CandidateRow>, Vec<EligibleRevision>) = read
        .into_iter()
        .map(|r| {
            let revision = EligibleRevision { revision_id: r.row.revision_id, sign_bits: r.embedding_bits };
            (r.row, revision)
        })
        .unzip();
    sort_newest_first(&mut rows);
    Ok(Some(EligibleSet { rows, revisions }))
}

/// The subject, conversation and always-on candidates of a destination, newest first, at most
/// `per_source` each: what [`newest_matching`] takes from the whole eligible set, for a search
/// that does not read the whole set.
#[derive(Default)]
pub(crate) struct StructuralPicks {
    pub subject: Vec<CandidateRow>,
    pub conversation: Vec<CandidateRow>,
    pub always_on: Vec<CandidateRow>,
}

impl StructuralPicks {
    /// The picks as fusion takes them: each source's rows, newest first.
    pub fn into_sources(self) -> Vec<(CandidateSource, Vec<CandidateRow>)> {
        vec![
            (CandidateSource::Subject, self.subject),
            (CandidateSource::Conversation, self.conversation),
            (CandidateSource::AlwaysOn, self.always_on),
        ]
    }
}

/// One row of the structural-picks statement: a picked row and which source picked it.
#[derive(sqlx::FromRow)]
struct PickRow {
    pick: String,
    #[sqlx(flatten)]
    row: CandidateRow,
}

/// The structural sources' candidates (subject, when `actor` is known, conversation and
/// always-on; at most `per_source` each, newest first) in one statement, from the set form's
/// newest readings (`newest_about`, `newest_from`, `newest_always_on`): each reads newest first
/// through its own column's index (`searchable_revisions_subject`, `_origin`, `_always_on`),
/// checks each row's audience class against the covering classes and stops at `per_source`. It
/// never reads the rest of the eligible set, however large that is (a direct conversation's is
/// typically a few thousand rows at 1M revisions, and tens of thousands for the largest).
pub(crate) async fn structural_picks(
    pool: &PgPool,
    ctx: &EligibilityContext,
    actor: Option<ActorId>,
    per_source: u32,
) -> Result<StructuralPicks, sqlx::Error> {
    macro_rules! newest {
        ($pick:literal, $reading:literal, $key:literal) => {
            concat!(
                "(SELECT '",
                $pick,
                "' AS pick, ",
                candidate_columns!(),
                " FROM memory_eligible_revisions($1, $2, $3, '",
                $reading,
                "', p_key => ",
                $key,
                ", p_newest => $5) AS p ORDER BY p.created_at DESC, p.revision_id LIMIT $5)"
            )
        };
    }
    let rows: Vec<PickRow> = sqlx::query_as(concat!(
        newest!("subject", "newest_about", "$4"),
        " UNION ALL ",
        newest!("conversation", "newest_from", "$2"),
        " UNION ALL ",
        newest!("always_on", "newest_always_on", "NULL"),
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(actor)
    .bind(i64::from(per_source))
    .fetch_all(pool)
    .await?;
    let mut picks = StructuralPicks::default();
    for PickRow { pick, row } in rows {
        match pick.as_str() {
            "subject" => picks.subject.push(row),
            "conversation" => picks.conversation.push(row),
            _ => picks.always_on.push(row),
        }
    }
    for rows in [&mut picks.subject, &mut picks.conversation, &mut picks.always_on] {
        sort_newest_first(rows);
    }
    Ok(picks)
}

/// Orders candidates as every structural source's statement does: `ORDER BY created_at DESC,
/// revision_id` (uuids compare bytewise in both PostgreSQL and Rust).
fn sort_newest_first(rows: &mut [CandidateRow]) {
    rows.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.revision_id.cmp(&b.revision_id)));
}

/// The first `limit` rows of a newest-first eligible set that `wanted` accepts: the same rows,
/// in the same order, as the subject, conversation and always-on statements return.
pub(crate) fn newest_matching(
    eligible: &[CandidateRow],
    limit: u32,
    wanted: impl Fn(&CandidateRow) -> bool,
) -> Vec<CandidateRow> {
    eligible.iter().filter(|row| wanted(row)).take(limit as usize).cloned().collect()
}

/// A query's full-text form and BM25 weights, computed once per search and passed to the
/// full-text statements.
#[derive(Clone, Debug, sqlx::FromRow)]
pub(crate) struct LexicalQuery {
    /// `memory_lexical_query`: the query's lexemes OR-ed, as `tsquery` text. The statements read
    /// it with `(SELECT $4::tsquery)`: a scalar subquery is evaluated once per statement, where a
    /// function of a parameter in a cached generic plan would be evaluated again for every row it
    /// filters or ranks.
    pub tsquery: String,
    /// `memory_bm25_query_weights`: the query lexemes some document of the agent contains...
    pub bm25_lexemes: Vec<String>,
    /// ...their BM25 weights (idf times occurrences in the query), in the same order...
    pub bm25_weights: Vec<f64>,
    /// ...and the agent's mean document length in lexemes.
    pub bm25_mean_length: f64,
}

/// The query's full-text form for `agent`'s corpus, or `None` when it has no searchable term
/// (only stop words or punctuation). The BM25 weights read the agent's own statistics only.
pub(crate) async fn lexical_query(
    pool: &PgPool,
    agent: crate::ids::AgentId,
    query: &str,
) -> Result<Option<LexicalQuery>, sqlx::Error> {
    sqlx::query_as(
        "SELECT q.tsquery,
                coalesce(w.lexemes, '{}') AS bm25_lexemes, coalesce(w.weights, '{}') AS bm25_weights,
                w.mean_length AS bm25_mean_length
           FROM (SELECT memory_lexical_query($1)::text AS tsquery) AS q
          CROSS JOIN LATERAL memory_bm25_query_weights($2, $1) AS w
          WHERE q.tsquery IS NOT NULL",
    )
    .bind(query)
    .bind(agent)
    .fetch_optional(pool)
    .await
}

/// The Okapi BM25 score of the projection row `p` for the query weights bound as `$6` (lexemes),
/// `$7` (weights), `$8` (mean document length), `$9` (k1) and `$10` (b): the sum, over the query
/// lexemes the row contains, of `weight * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / mean))`.
/// `setweight` marks the query's lexemes and `ts_filter` keeps only them, so a row's other lexemes
/// are never unnested (`body_tsv` is a plain `to_tsvector`, every position weight D). Inline
/// rather than a SQL function: a function with a `FROM` clause is never inlined, and calling one
/// per match cost three times this correlated subquery. Parameters are read through scalar
/// subqueries, evaluated once per statement.
macro_rules! bm25_score {
    () => {
        "(SELECT coalesce(sum(w.weight * tf.n * ((SELECT $9::float8) + 1)
                        / (tf.n + (SELECT $9::float8) * (1 - (SELECT $10::float8)
                                 + (SELECT $10::float8) * p.lexeme_count / greatest((SELECT $8::float8), 1e-9)))), 0)
            FROM unnest(ts_filter(setweight(p.body_tsv, 'A', (SELECT $6::text[])), '{a}')) AS u
            JOIN unnest((SELECT $6::text[]), (SELECT $7::float8[])) AS w(lexeme, weight) ON w.lexeme = u.lexeme
           CROSS JOIN LATERAL (SELECT greatest(cardinality(u.positions), 1)::float8 AS n) AS tf)"
    };
}

/// Okapi BM25 parameters of the lexical ranking ([`crate::retrieval::RetrievalConfig::bm25_k1`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bm25Parameters {
    pub k1: f64,
    pub b: f64,
}

/// Full-text matches over the agent's whole archive, best Okapi BM25 score first
/// ([`bm25_score!`] over the agent's statistics, migration 20261204100000), for a query from
/// [`lexical_query`]. Terms are OR-ed (`memory_lexical_query`). The planner intersects the match
/// with the audience inside one GIN index (`searchable_revisions_text_audience`), so only eligible
/// matches are scored. Only the order leaves this function, never a score.
pub(crate) async fn lexical(
    pool: &PgPool,
    ctx: &EligibilityContext,
    query: &LexicalQuery,
    bm25: Bm25Parameters,
    limit: u32,
) -> Result<Vec<CandidateRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        "SELECT ",
        candidate_columns!(),
        from_eligible!(),
        " WHERE p.body_tsv @@ (SELECT $4::tsquery)
          ORDER BY ",
        bm25_score!(),
        " DESC, p.created_at DESC, p.revision_id
          LIMIT $5"
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(&query.tsquery)
    .bind(i64::from(limit))
    .bind(&query.bm25_lexemes)
    .bind(&query.bm25_weights)
    .bind(query.bm25_mean_length)
    .bind(bm25.k1)
    .bind(bm25.b)
    .fetch_all(pool)
    .await
}

/// Counts, by rejecting rule, full-text matches among the agent's live current revisions that the
/// policy withheld (SQL `memory_withheld_rules`, which names each by the policy's rule order):
/// exact up to `limit` for `unknown_evidence`, which decides `eligibility_withheld_unknown`, lower
/// bounds for the others (at most `limit` sampled in all, term by term: a later term's index scan
/// runs only when the earlier terms found fewer), so the work is bounded by `limit` whatever the
/// archive size ([`super::RetrievalConfig::withheld_count_limit`]), for the
/// text the lexical side searches. Only categories and counts leave this function, never text or
/// ids.
pub(crate) async fn withheld_lexical(
    pool: &PgPool,
    ctx: &EligibilityContext,
    searched_text: &str,
    limit: u32,
) -> Result<BTreeMap<String, i64>, sqlx::Error> {
    // The query's full-text form is computed in this statement from the same text the lexical
    // side searches (`memory_lexical_query`, one `tsquery` per lexeme from `memory_lexical_terms`),
    // so the count starts at once instead of after the statement that reads the BM25 weights. A
    // text without a searchable term gives a NULL query and no term: no row, nothing counted.
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT w.rule, w.matches
           FROM memory_withheld_rules($1, $2, $3, memory_lexical_query($4), memory_lexical_terms($4), $5) AS w",
    )
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(searched_text)
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
}

/// The eligible projection rows of the given revisions, in the given order; ids that are not
/// eligible (or not current) vanish. Semantic hits from any index pass through here, so a hit is
/// a candidate only if the same predicate as every other source admits it.
pub(crate) async fn eligible_rows_of(
    pool: &PgPool,
    ctx: &EligibilityContext,
    hits: &[RevisionId],
) -> Result<Vec<CandidateRow>, sqlx::Error> {
    let ids: Vec<Uuid> = hits.iter().map(|h| h.0).collect();
    sqlx::query_as(concat!(
        "SELECT ",
        candidate_columns!(),
        " FROM unnest($4::uuid[]) WITH ORDINALITY AS hit(id, position)
          JOIN memory_eligible_revisions($1, $2, $3, p_reading => 'audience_array') AS p
            ON p.revision_id = hit.id
         ORDER BY hit.position"
    ))
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(ids)
    .fetch_all(pool)
    .await
}

/// Reads the text and attribution of `revisions` from canonical rows, re-checking each in the same
/// statement with the policy's verdict (`memory_eligibility_verdict`, read from canonical rows,
/// evaluated per row: the batch is small): a revision that stopped being eligible since its
/// candidate query (or that the projection admitted wrongly) is simply absent.
pub(crate) async fn hydrate(
    pool: &PgPool,
    ctx: &EligibilityContext,
    revisions: &[RevisionId],
) -> Result<Vec<HydratedRow>, sqlx::Error> {
    let ids: Vec<Uuid> = revisions.iter().map(|r| r.0).collect();
    sqlx::query_as(
        "SELECT r.id AS revision_id, r.revision_number, r.body, r.subject_actor_id, r.source_actor_id,
                e.origin_conversation_id, e.always_on, t.learned_at
           FROM unnest($4::uuid[]) AS wanted(id)
           JOIN memory_entry_revisions r ON r.id = wanted.id
          CROSS JOIN LATERAL memory_learned_times(ARRAY[r.id]) AS t
           JOIN memory_entries e ON e.id = r.entry_id AND e.current_revision_id = r.id
          WHERE r.runtime_agent_id = $1 AND e.state = 'live'
            AND (memory_eligibility_verdict($1, r.id, $2, $3)).rule = 'eligible'",
    )
    .bind(ctx.agent)
    .bind(ctx.conversation)
    .bind(ctx.audience_uuids())
    .bind(ids)
    .fetch_all(pool)
    .await
}

/// When each of `revisions` (the agent's) was learned, by the one definition
/// `memory_learned_times` (migration `20261206100000`): the latest `sent_at` of its message sources,
/// else when it was written. Ranking reads it for a bounded window of candidates
/// ([`crate::retrieval::RetrievalConfig::time_rerank_window`]); revisions of another agent are
/// absent.
pub(crate) async fn learned_times(
    pool: &PgPool,
    agent: crate::ids::AgentId,
    revisions: &[RevisionId],
) -> Result<std::collections::HashMap<RevisionId, DateTime<Utc>>, sqlx::Error> {
    let ids: Vec<Uuid> = revisions.iter().map(|r| r.0).collect();
    let rows: Vec<(RevisionId, DateTime<Utc>)> = sqlx::query_as(
        "SELECT t.revision_id, t.learned_at
           FROM memory_learned_times($2::uuid[]) AS t
           JOIN memory_entry_revisions r ON r.id = t.revision_id
          WHERE r.runtime_agent_id = $1",
    )
    .bind(agent)
    .bind(ids)
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().collect())
}
