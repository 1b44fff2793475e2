-- BM25 statistics: less work per write for the same exact figures (issue 20).
--
-- Measured on one kept 1M store with the statistics switched on and off (BENCHMARKS.md): they
-- cost remembers 8.7-9.5%, about a quarter of it the pending insert in the writers' transactions
-- and the rest the fold. Two savings, neither changing what the ranking reads:
--
-- 1. The projection's writer records an added revision in the statement that adds it (a
--    data-modifying CTE over the inserted rows and their generated lexeme count) instead of a
--    second statement that looked the new rows up again. Removals (amend, forget, restriction)
--    still take a statement of their own, run only when a removed row was not put back.
-- 2. The fold leaves out lexemes whose pending changes cancel (an amendment removes and adds the
--    lexemes its two bodies share) and no longer sorts: folds run one at a time under their
--    advisory lock and nothing else writes the totals, so no lock order is needed.
CREATE OR REPLACE FUNCTION memory_refresh_searchable(p_entries uuid[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    removed_ids uuid[];
    added_ids uuid[];
    added_changes bigint;
    removed_changes bigint := 0;
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
    -- The rows, and in the same statement the statistics of those that were not there before
    -- (a refresh that puts back the revision it removed records nothing).
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
        RETURNING revision_id, runtime_agent_id, body_tsv, lexeme_count),
    recorded AS (
        INSERT INTO lexical_statistics_pending (runtime_agent_id, sign, lexemes, length)
        SELECT a.runtime_agent_id, 1, tsvector_to_array(a.body_tsv), a.lexeme_count
          FROM added a
         WHERE a.revision_id <> ALL (removed_ids)
        RETURNING 1)
    SELECT coalesce((SELECT array_agg(a.revision_id) FROM added a), '{}'), (SELECT count(*) FROM recorded)
      INTO added_ids, added_changes;
    -- Rows removed and not put back, read from their immutable revisions.
    IF NOT removed_ids <@ added_ids THEN
        INSERT INTO lexical_statistics_pending (runtime_agent_id, sign, lexemes, length)
        SELECT r.runtime_agent_id, -1, tsvector_to_array(coalesce(r.body_tsv, ''::tsvector)),
               memory_lexeme_count(coalesce(r.body_tsv, ''::tsvector))
          FROM unnest(removed_ids) AS x(id) JOIN memory_entry_revisions r ON r.id = x.id
         WHERE x.id <> ALL (added_ids);
        GET DIAGNOSTICS removed_changes = ROW_COUNT;
    END IF;
    IF added_changes + removed_changes >= 64 THEN
        PERFORM memory_lexical_statistics_fold();
    END IF;
END;
$$;

CREATE OR REPLACE FUNCTION memory_lexical_statistics_fold()
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
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
          FROM taken t GROUP BY t.runtime_agent_id
        ON CONFLICT (runtime_agent_id)
        DO UPDATE SET documents = c.documents + excluded.documents, lexemes = c.lexemes + excluded.lexemes)
    INSERT INTO lexical_term_statistics AS s (runtime_agent_id, lexeme, documents)
    SELECT t.runtime_agent_id, u.lexeme, sum(t.sign)
      FROM taken t CROSS JOIN LATERAL unnest(t.lexemes) AS u(lexeme)
     GROUP BY t.runtime_agent_id, u.lexeme
    HAVING sum(t.sign) <> 0
    ON CONFLICT (runtime_agent_id, lexeme)
    DO UPDATE SET documents = s.documents + excluded.documents;
END;
$$;
