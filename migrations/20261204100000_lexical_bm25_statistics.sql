-- Okapi BM25 for lexical candidates: the term statistics and document lengths it needs,
-- maintained in the writer's transaction.
--
-- Scope: one runtime agent's searchable corpus, the rows of searchable_revisions (the current
-- revision of every live entry, whatever its audience). Statistics are never shared across
-- agents: every row below is keyed by runtime_agent_id and the ranking reads only its own agent's.
-- What they can reveal: an idf counts documents the asker may not see, so the *order* of two
-- eligible matches can shift with withheld memories containing a query term. Retrieval exposes
-- only ranks (never a BM25 score, a document frequency or a count), and eligibility still decides
-- which rows are ranked at all, in the same statement (ARCHITECTURE.md, "Invariants").
--
-- Shape: document length is a stored generated column of the projection (it cannot drift from
-- body_tsv). The statistics are kept in two layers. A write appends one row per revision it adds to
-- or removes from the projection (its agent, lexemes, length and a sign) to
-- lexical_statistics_pending: one plain insert in the writer's transaction, no row another writer
-- updates, so statistics are no hot row and group-commit batches never wait on each other. Every
-- 64th such write (and any write of 64 rows or more, a bulk load) folds the pending rows into the per-agent totals (lexical_corpus_statistics,
-- lexical_term_statistics) in that writer's transaction, under an advisory lock that a concurrent writer
-- skips rather than waits for. The views lexical_corpus_totals and lexical_term_totals add the
-- two layers; they are what the ranking reads, exact at every moment. The projection's one writer,
-- memory_refresh_searchable, keeps them (below): every path that changes the projection (create,
-- amend, forget, restriction, repair, review, bulk COPY) passes through it.

-- The number of lexeme occurrences of a tsvector (BM25's document length; stop words are not
-- lexemes). A lexeme without positions (a stripped vector) counts once.
CREATE FUNCTION memory_lexeme_count(p_tsv tsvector)
RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(sum(greatest(cardinality(u.positions), 1)), 0)::integer FROM unnest(p_tsv) AS u
$$;

ALTER TABLE searchable_revisions
    ADD COLUMN lexeme_count integer GENERATED ALWAYS AS (memory_lexeme_count(body_tsv)) STORED;

-- Folded totals per agent: projection rows and their lexeme occurrences (sum of lexeme_count).
CREATE TABLE lexical_corpus_statistics (
    runtime_agent_id uuid   PRIMARY KEY,
    documents        bigint NOT NULL,
    lexemes          bigint NOT NULL
);

-- Folded totals per agent and lexeme: projection rows containing it.
CREATE TABLE lexical_term_statistics (
    runtime_agent_id uuid   NOT NULL,
    lexeme           text   NOT NULL,
    documents        bigint NOT NULL,
    PRIMARY KEY (runtime_agent_id, lexeme)
);

-- Changes not folded yet: one row per projection row added (sign 1) or removed (sign -1).
CREATE TABLE lexical_statistics_pending (
    runtime_agent_id uuid     NOT NULL,
    sign             smallint NOT NULL CHECK (sign IN (-1, 1)),
    lexemes          text[]   NOT NULL,
    length           integer  NOT NULL
);
CREATE INDEX lexical_statistics_pending_agent ON lexical_statistics_pending (runtime_agent_id);

-- Which write folds the pending rows: every 64th (non-transactional, so concurrent writers never
-- wait on it).
CREATE SEQUENCE lexical_statistics_fold_ticket;

CREATE VIEW lexical_corpus_totals AS
SELECT runtime_agent_id, sum(documents)::bigint AS documents, sum(lexemes)::bigint AS lexemes
  FROM (SELECT runtime_agent_id, documents, lexemes FROM lexical_corpus_statistics
        UNION ALL
        SELECT runtime_agent_id, sign, sign * length FROM lexical_statistics_pending) AS layers
 GROUP BY runtime_agent_id;

CREATE VIEW lexical_term_totals AS
SELECT runtime_agent_id, lexeme, sum(documents)::bigint AS documents
  FROM (SELECT runtime_agent_id, lexeme, documents FROM lexical_term_statistics
        UNION ALL
        SELECT p.runtime_agent_id, u.lexeme, p.sign FROM lexical_statistics_pending p
         CROSS JOIN LATERAL unnest(p.lexemes) AS u(lexeme)) AS layers
 GROUP BY runtime_agent_id, lexeme;

-- Folds every pending row this transaction sees into the totals, unless another transaction is
-- folding (then the rows wait for the next fold). Aggregated per key and written in key order.
CREATE FUNCTION memory_lexical_statistics_fold()
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(2060261204) THEN
        RETURN;
    END IF;
    WITH taken AS (DELETE FROM lexical_statistics_pending RETURNING runtime_agent_id, sign, lexemes, length),
    corpus AS (
        INSERT INTO lexical_corpus_statistics AS c (runtime_agent_id, documents, lexemes)
        SELECT t.runtime_agent_id, sum(t.sign), sum(t.sign * t.length)
          FROM taken t GROUP BY t.runtime_agent_id ORDER BY t.runtime_agent_id
        ON CONFLICT (runtime_agent_id)
        DO UPDATE SET documents = c.documents + excluded.documents, lexemes = c.lexemes + excluded.lexemes)
    INSERT INTO lexical_term_statistics AS s (runtime_agent_id, lexeme, documents)
    SELECT t.runtime_agent_id, u.lexeme, sum(t.sign)
      FROM taken t CROSS JOIN LATERAL unnest(t.lexemes) AS u(lexeme)
     GROUP BY t.runtime_agent_id, u.lexeme ORDER BY t.runtime_agent_id, u.lexeme
    ON CONFLICT (runtime_agent_id, lexeme)
    DO UPDATE SET documents = s.documents + excluded.documents;
END;
$$;

-- Records the statistics of revisions that left (p_removed) and entered (p_added) the projection,
-- read from their canonical rows (a revision's text never changes, so its lexemes are those the
-- projection held), and folds on every 64th call, or at once after a large change (a bulk load,
-- a migration's refresh).
CREATE FUNCTION memory_lexical_statistics_record(p_removed uuid[], p_added uuid[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF cardinality(p_removed) = 0 AND cardinality(p_added) = 0 THEN
        RETURN;
    END IF;
    INSERT INTO lexical_statistics_pending (runtime_agent_id, sign, lexemes, length)
    SELECT r.runtime_agent_id, c.sign, tsvector_to_array(coalesce(r.body_tsv, ''::tsvector)),
           memory_lexeme_count(coalesce(r.body_tsv, ''::tsvector))
      FROM (SELECT x.id, -1 AS sign FROM unnest(p_removed) AS x(id)
            UNION ALL
            SELECT x.id, 1 FROM unnest(p_added) AS x(id)) AS c
      JOIN memory_entry_revisions r ON r.id = c.id;
    IF cardinality(p_removed) + cardinality(p_added) >= 64
       OR nextval('lexical_statistics_fold_ticket') % 64 = 0 THEN
        PERFORM memory_lexical_statistics_fold();
    END IF;
END;
$$;

-- The one writer of the projection (migration 20261202008000), now also keeping the statistics:
-- it replaces the rows of the given entries, and only the *net* change counts. A refresh that puts
-- back the same revision (an evidence summary changed, a restriction, a review: most refreshes)
-- changes no statistics and costs nothing here; a create adds its revision once, an amend swaps
-- the old revision's statistics for the new one's, a forget removes them. Revision text never
-- changes (revisions are immutable), so a revision id stands for its lexemes.
CREATE OR REPLACE FUNCTION memory_refresh_searchable(p_entries uuid[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    removed_ids uuid[];
    added_ids uuid[];
BEGIN
    WITH removed AS (
        DELETE FROM searchable_revisions
         WHERE entry_id IN (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id))
        RETURNING revision_id)
    SELECT coalesce(array_agg(revision_id), '{}') INTO removed_ids FROM removed;
    -- New audiences get their class first. A concurrent writer creating the same class makes this
    -- wait for its commit and then do nothing; the next statement (a fresh snapshot: this function
    -- is volatile) sees the committed class.
    INSERT INTO audience_classes (runtime_agent_id, members, members_digest)
    SELECT DISTINCT e.runtime_agent_id, s.audience, memory_audience_digest(s.audience)
      FROM (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id)) AS changed
      JOIN memory_entries e ON e.id = changed.id
      JOIN revision_audience_summary s ON s.revision_id = e.current_revision_id
     WHERE e.state = 'live' AND s.evidence_known
    ON CONFLICT (runtime_agent_id, members_digest) DO NOTHING;
    WITH added AS (
        INSERT INTO searchable_revisions (revision_id, entry_id, runtime_agent_id, restriction, restricted_conversation_id,
                                          evidence_known, audience, body_tsv, subject_actor_id, origin_conversation_id,
                                          always_on, created_at, audience_class_id)
        SELECT r.id, e.id, e.runtime_agent_id, e.restriction, e.restricted_conversation_id,
               coalesce(s.evidence_known, false), coalesce(s.audience, '{}'), coalesce(r.body_tsv, ''::tsvector),
               r.subject_actor_id, e.origin_conversation_id, e.always_on, r.created_at, c.id
          FROM (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id)) AS changed
          JOIN memory_entries e ON e.id = changed.id
          JOIN memory_entry_revisions r ON r.id = e.current_revision_id AND r.entry_id = e.id
                                       AND r.runtime_agent_id = e.runtime_agent_id
          LEFT JOIN revision_audience_summary s ON s.revision_id = r.id
          LEFT JOIN audience_classes c ON s.evidence_known AND c.runtime_agent_id = e.runtime_agent_id
                                      AND c.members_digest = memory_audience_digest(s.audience)
                                      AND c.members = s.audience
         WHERE e.state = 'live'
        RETURNING revision_id)
    SELECT coalesce(array_agg(revision_id), '{}') INTO added_ids FROM added;
    -- The net change, by revision id: rows removed and not put back, rows added that were not
    -- there. Most refreshes put back what they removed and stop here.
    IF removed_ids <> added_ids THEN
        PERFORM memory_lexical_statistics_record(
            ARRAY(SELECT x FROM unnest(removed_ids) AS x WHERE x <> ALL (added_ids)),
            ARRAY(SELECT x FROM unnest(added_ids) AS x WHERE x <> ALL (removed_ids)));
    END IF;
END;
$$;

-- A truncated projection (a migration rebuilding it) has no statistics; its refill adds them.
CREATE FUNCTION memory_lexical_statistics_after_truncate() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    TRUNCATE lexical_corpus_statistics, lexical_term_statistics, lexical_statistics_pending;
    RETURN NULL;
END;
$$;

-- The statistics assume a projection row's text and agent never change in place (the projection
-- replaces rows; only embedding_bits is updated). Anything else fails loudly.
CREATE FUNCTION memory_lexical_statistics_refuse_update() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION 'searchable_revisions rows are replaced, never updated in their text or agent (revision %)',
        OLD.revision_id;
END;
$$;

-- Backfill from the projection as it stands; memory_refresh_searchable keeps them from
-- here on.
INSERT INTO lexical_corpus_statistics (runtime_agent_id, documents, lexemes)
SELECT runtime_agent_id, count(*), sum(lexeme_count) FROM searchable_revisions GROUP BY runtime_agent_id;
INSERT INTO lexical_term_statistics (runtime_agent_id, lexeme, documents)
SELECT p.runtime_agent_id, u.lexeme, count(*)
  FROM searchable_revisions p CROSS JOIN LATERAL unnest(p.body_tsv) AS u
 GROUP BY p.runtime_agent_id, u.lexeme;

CREATE TRIGGER searchable_revisions_lexical_statistics_truncate
    AFTER TRUNCATE ON searchable_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION memory_lexical_statistics_after_truncate();
CREATE TRIGGER searchable_revisions_lexical_statistics_frozen
    BEFORE UPDATE ON searchable_revisions
    FOR EACH ROW WHEN (OLD.body_tsv IS DISTINCT FROM NEW.body_tsv
                       OR OLD.runtime_agent_id IS DISTINCT FROM NEW.runtime_agent_id)
    EXECUTE FUNCTION memory_lexical_statistics_refuse_update();

-- Derived data: only the projection's writer and the truncate trigger write it, as the schema owner
-- (migration 20261202006100).
ALTER FUNCTION memory_lexical_statistics_after_truncate() SECURITY DEFINER SET search_path FROM CURRENT;
REVOKE ALL ON FUNCTION memory_lexical_statistics_fold() FROM PUBLIC;
REVOKE ALL ON FUNCTION memory_lexical_statistics_record(uuid[], uuid[]) FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_runtime') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE
            ON lexical_corpus_statistics, lexical_term_statistics, lexical_statistics_pending FROM mesh_runtime;
    END IF;
END;
$$;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE
    ON lexical_corpus_statistics, lexical_term_statistics, lexical_statistics_pending FROM PUBLIC;

-- The BM25 weight of each query lexeme for one agent's corpus, with the corpus's mean document
-- length: what the lexical statement needs besides the rows, computed once per search.
-- idf = ln((N - df + 0.5) / (df + 0.5) + 1) (always positive), times the lexeme's count in the
-- query, as a bag-of-words BM25 scores repeated query terms. Lexemes no document contains are
-- left out (they match nothing).
CREATE FUNCTION memory_bm25_query_weights(p_agent uuid, p_text text,
                                          OUT lexemes text[], OUT weights float8[], OUT mean_length float8)
LANGUAGE sql STABLE
AS $$
    WITH pending AS (
        SELECT p.sign, p.lexemes, p.length FROM lexical_statistics_pending p WHERE p.runtime_agent_id = p_agent),
    corpus AS (
        SELECT coalesce((SELECT c.documents FROM lexical_corpus_statistics c WHERE c.runtime_agent_id = p_agent), 0)
                 + coalesce((SELECT sum(p.sign) FROM pending p), 0)::float8 AS n,
               coalesce((SELECT c.lexemes FROM lexical_corpus_statistics c WHERE c.runtime_agent_id = p_agent), 0)
                 + coalesce((SELECT sum(p.sign * p.length) FROM pending p), 0)::float8 AS total),
    query AS (
        SELECT u.lexeme, greatest(cardinality(u.positions), 1) AS occurrences
          FROM unnest(to_tsvector('english'::regconfig, coalesce(p_text, ''))) AS u),
    -- Each layer filtered by agent and lexeme before adding up (the views would add up first).
    frequency AS (
        SELECT layers.lexeme, sum(layers.documents)::float8 AS df
          FROM (SELECT t.lexeme, t.documents FROM lexical_term_statistics t
                 WHERE t.runtime_agent_id = p_agent AND t.lexeme IN (SELECT q.lexeme FROM query q)
                UNION ALL
                SELECT u.lexeme, p.sign FROM pending p CROSS JOIN LATERAL unnest(p.lexemes) AS u(lexeme)
                 WHERE u.lexeme IN (SELECT q.lexeme FROM query q)) AS layers
         GROUP BY layers.lexeme
        HAVING sum(layers.documents) > 0)
    SELECT array_agg(q.lexeme ORDER BY q.lexeme),
           array_agg(q.occurrences * ln((c.n - f.df + 0.5) / (f.df + 0.5) + 1) ORDER BY q.lexeme),
           (SELECT CASE WHEN c2.n > 0 THEN c2.total / c2.n ELSE 1 END FROM corpus c2)
      FROM query q JOIN frequency f ON f.lexeme = q.lexeme CROSS JOIN corpus c
$$;

-- The per-row score is an expression in the lexical statement (src/retrieval/candidates.rs,
-- bm25_score!), not a function here: a SQL function with a FROM clause is never inlined, and
-- calling one per GIN match cost three times the inline subquery.

ANALYZE searchable_revisions;
ANALYZE lexical_corpus_statistics;
ANALYZE lexical_term_statistics;
ANALYZE lexical_statistics_pending;
