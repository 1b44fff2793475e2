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
-- body_tsv); corpus size, total length and per-lexeme document frequencies are sums over 16
-- shards per agent. A writing transaction claims a shard no concurrent writer holds (a
-- transaction-scoped advisory lock) and adds its deltas there, so statistics are no hot row: two
-- group-commit batches never wait on each other's statistics rows, and no two writers can
-- deadlock on them however many statements each runs. Statement triggers on the projection keep
-- them: every path that changes the projection (create, amend, forget, restriction, repair, review,
-- bulk COPY) passes through them.

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

CREATE TABLE lexical_corpus_statistics (
    runtime_agent_id uuid     NOT NULL,
    shard            smallint NOT NULL CHECK (shard BETWEEN 0 AND 15),
    -- Projection rows counted in this shard (a shard may go negative: a row counted in one shard
    -- can be removed by a transaction holding another; only the sum over shards means anything).
    documents        bigint   NOT NULL,
    -- Their lexeme occurrences (sum of lexeme_count).
    lexemes          bigint   NOT NULL,
    PRIMARY KEY (runtime_agent_id, shard)
);

CREATE TABLE lexical_term_statistics (
    runtime_agent_id uuid     NOT NULL,
    lexeme           text     NOT NULL,
    shard            smallint NOT NULL CHECK (shard BETWEEN 0 AND 15),
    -- Projection rows containing the lexeme, counted in this shard (see above).
    documents        bigint   NOT NULL,
    PRIMARY KEY (runtime_agent_id, lexeme, shard)
);

-- The statistics shard of the current transaction: the one it claimed already, else the first
-- free one from a starting point that varies by transaction. A transaction-scoped advisory lock
-- (class 2060261204, arbitrary but fixed) keeps a shard to one transaction at a time; only when
-- all 16 are held does a transaction share one, and then its upserts wait for that holder's
-- commit like any row update.
CREATE FUNCTION memory_lexical_statistics_shard()
RETURNS smallint
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    claimed text := current_setting('mesh.lexical_statistics_shard', true);
    first_try integer := (txid_current() % 16)::integer;
    candidate integer;
BEGIN
    IF claimed IS NOT NULL AND claimed <> '' THEN
        RETURN claimed::smallint;
    END IF;
    FOR step IN 0..15 LOOP
        candidate := (first_try + step) % 16;
        IF pg_try_advisory_xact_lock(2060261204, candidate) THEN
            PERFORM set_config('mesh.lexical_statistics_shard', candidate::text, true);
            RETURN candidate::smallint;
        END IF;
    END LOOP;
    PERFORM set_config('mesh.lexical_statistics_shard', first_try::text, true);
    RETURN first_try::smallint;
END;
$$;

-- Adds (p_sign = 1) or removes (p_sign = -1) the statistics of a set of projection rows. Rows
-- are aggregated per key and written in key order, one statement per table.
CREATE FUNCTION memory_lexical_statistics_add(p_sign integer, p_agents uuid[], p_tsvs tsvector[],
                                              p_lengths integer[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    target smallint := memory_lexical_statistics_shard();
BEGIN
    INSERT INTO lexical_corpus_statistics AS c (runtime_agent_id, shard, documents, lexemes)
    SELECT d.agent, target, p_sign * count(*), p_sign * coalesce(sum(d.length), 0)
      FROM unnest(p_agents, p_lengths) AS d(agent, length)
     GROUP BY d.agent
     ORDER BY d.agent
    ON CONFLICT (runtime_agent_id, shard)
    DO UPDATE SET documents = c.documents + excluded.documents, lexemes = c.lexemes + excluded.lexemes;

    INSERT INTO lexical_term_statistics AS t (runtime_agent_id, lexeme, shard, documents)
    SELECT d.agent, u.lexeme, target, p_sign * count(*)
      FROM unnest(p_agents, p_tsvs) AS d(agent, tsv)
     CROSS JOIN LATERAL unnest(d.tsv) AS u
     GROUP BY d.agent, u.lexeme
     ORDER BY d.agent, u.lexeme
    ON CONFLICT (runtime_agent_id, lexeme, shard)
    DO UPDATE SET documents = t.documents + excluded.documents;
END;
$$;

CREATE FUNCTION memory_lexical_statistics_after_insert() RETURNS trigger
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    agents uuid[];
    tsvs tsvector[];
    lengths integer[];
BEGIN
    SELECT array_agg(n.runtime_agent_id), array_agg(n.body_tsv), array_agg(n.lexeme_count)
      INTO agents, tsvs, lengths
      FROM added_rows n;
    IF agents IS NOT NULL THEN
        PERFORM memory_lexical_statistics_add(1, agents, tsvs, lengths);
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION memory_lexical_statistics_after_delete() RETURNS trigger
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    agents uuid[];
    tsvs tsvector[];
    lengths integer[];
BEGIN
    SELECT array_agg(o.runtime_agent_id), array_agg(o.body_tsv), array_agg(o.lexeme_count)
      INTO agents, tsvs, lengths
      FROM removed_rows o;
    IF agents IS NOT NULL THEN
        PERFORM memory_lexical_statistics_add(-1, agents, tsvs, lengths);
    END IF;
    RETURN NULL;
END;
$$;

-- A truncated projection (a migration rebuilding it) has no statistics; its refill adds them.
CREATE FUNCTION memory_lexical_statistics_after_truncate() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    TRUNCATE lexical_corpus_statistics, lexical_term_statistics;
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

-- Backfill from the projection as it stands (one shard), before the triggers exist.
INSERT INTO lexical_corpus_statistics (runtime_agent_id, shard, documents, lexemes)
SELECT runtime_agent_id, 0, count(*), sum(lexeme_count) FROM searchable_revisions GROUP BY runtime_agent_id;
INSERT INTO lexical_term_statistics (runtime_agent_id, lexeme, shard, documents)
SELECT p.runtime_agent_id, u.lexeme, 0, count(*)
  FROM searchable_revisions p CROSS JOIN LATERAL unnest(p.body_tsv) AS u
 GROUP BY p.runtime_agent_id, u.lexeme;

CREATE TRIGGER searchable_revisions_lexical_statistics_insert
    AFTER INSERT ON searchable_revisions REFERENCING NEW TABLE AS added_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_lexical_statistics_after_insert();
CREATE TRIGGER searchable_revisions_lexical_statistics_delete
    AFTER DELETE ON searchable_revisions REFERENCING OLD TABLE AS removed_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_lexical_statistics_after_delete();
CREATE TRIGGER searchable_revisions_lexical_statistics_truncate
    AFTER TRUNCATE ON searchable_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION memory_lexical_statistics_after_truncate();
CREATE TRIGGER searchable_revisions_lexical_statistics_frozen
    BEFORE UPDATE ON searchable_revisions
    FOR EACH ROW WHEN (OLD.body_tsv IS DISTINCT FROM NEW.body_tsv
                       OR OLD.runtime_agent_id IS DISTINCT FROM NEW.runtime_agent_id)
    EXECUTE FUNCTION memory_lexical_statistics_refuse_update();

-- Derived data: only the triggers write it, as the schema owner (migration 20261202006100).
ALTER FUNCTION memory_lexical_statistics_after_insert() SECURITY DEFINER SET search_path FROM CURRENT;
ALTER FUNCTION memory_lexical_statistics_after_delete() SECURITY DEFINER SET search_path FROM CURRENT;
ALTER FUNCTION memory_lexical_statistics_after_truncate() SECURITY DEFINER SET search_path FROM CURRENT;
REVOKE ALL ON FUNCTION memory_lexical_statistics_add(integer, uuid[], tsvector[], integer[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION memory_lexical_statistics_shard() FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_runtime') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON lexical_corpus_statistics, lexical_term_statistics FROM mesh_runtime;
    END IF;
END;
$$;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON lexical_corpus_statistics, lexical_term_statistics FROM PUBLIC;

-- The BM25 weight of each query lexeme for one agent's corpus, with the corpus's mean document
-- length: what the lexical statement needs besides the rows, computed once per search.
-- idf = ln((N - df + 0.5) / (df + 0.5) + 1) (always positive), times the lexeme's count in the
-- query, as a bag-of-words BM25 scores repeated query terms. Lexemes no document contains are
-- left out (they match nothing).
CREATE FUNCTION memory_bm25_query_weights(p_agent uuid, p_text text,
                                          OUT lexemes text[], OUT weights float8[], OUT mean_length float8)
LANGUAGE sql STABLE
AS $$
    WITH corpus AS (
        SELECT coalesce(sum(documents), 0)::float8 AS n,
               coalesce(sum(lexemes), 0)::float8 AS total
          FROM lexical_corpus_statistics WHERE runtime_agent_id = p_agent),
    query AS (
        SELECT u.lexeme, greatest(cardinality(u.positions), 1) AS occurrences
          FROM unnest(to_tsvector('english'::regconfig, coalesce(p_text, ''))) AS u),
    frequency AS (
        SELECT t.lexeme, sum(t.documents)::float8 AS df
          FROM lexical_term_statistics t
         WHERE t.runtime_agent_id = p_agent AND t.lexeme IN (SELECT q.lexeme FROM query q)
         GROUP BY t.lexeme
        HAVING sum(t.documents) > 0)
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
