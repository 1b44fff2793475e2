-- BM25 statistics: the fold leaves the writers' transactions (issue 20).
--
-- Until now every 64th write folded the pending statistics into the totals inside its own
-- transaction (migration 20261204100000): ~1,500 upserts that held that group-commit batch, and
-- every writer queued behind it, for several milliseconds. The store now runs the fold in a
-- transaction of its own on a spawned task, after every 64 committed writes of its process
-- (src/store/lexical_statistics.rs). The ranking reads folded totals plus pending rows, so the
-- figures are exact at every moment, whenever the fold runs.
--
-- What stays here: a change of 64 rows or more in one call (a COPY load, a migration's refresh)
-- folds at once, as before, so bulk loads never leave a long pending layer behind.
--
-- And the pending rows are written by the projection's writer itself, in one statement: a new
-- row's lexeme count is read from the projection row just inserted (its generated column)
-- instead of being computed a second time, and no function call sits between the two.
CREATE OR REPLACE FUNCTION memory_refresh_searchable(p_entries uuid[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    removed_ids uuid[];
    added_ids uuid[];
    changed bigint;
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
    -- The net change, by revision id: rows removed and not put back (read from their immutable
    -- revisions), rows added that were not there (read from the projection rows just written).
    -- Most refreshes put back what they removed and stop here.
    IF removed_ids <> added_ids THEN
        INSERT INTO lexical_statistics_pending (runtime_agent_id, sign, lexemes, length)
        SELECT r.runtime_agent_id, -1, tsvector_to_array(coalesce(r.body_tsv, ''::tsvector)),
               memory_lexeme_count(coalesce(r.body_tsv, ''::tsvector))
          FROM unnest(removed_ids) AS x(id) JOIN memory_entry_revisions r ON r.id = x.id
         WHERE x.id <> ALL (added_ids)
        UNION ALL
        SELECT p.runtime_agent_id, 1, tsvector_to_array(p.body_tsv), p.lexeme_count
          FROM unnest(added_ids) AS x(id) JOIN searchable_revisions p ON p.revision_id = x.id
         WHERE x.id <> ALL (removed_ids);
        GET DIAGNOSTICS changed = ROW_COUNT;
        IF changed >= 64 THEN
            PERFORM memory_lexical_statistics_fold();
        END IF;
    END IF;
END;
$$;

DROP FUNCTION memory_lexical_statistics_record(uuid[], uuid[]);
DROP SEQUENCE lexical_statistics_fold_ticket;

-- The store's fold runs as the runtime role (migration 20261204100000 revoked it from PUBLIC, as
-- it was only ever called from inside the projection's writer). It only moves counts between the
-- two layers, so it runs as the schema owner, like the projection's writer.
ALTER FUNCTION memory_lexical_statistics_fold() SECURITY DEFINER SET search_path FROM CURRENT;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_runtime') THEN
        GRANT EXECUTE ON FUNCTION memory_lexical_statistics_fold() TO mesh_runtime;
    END IF;
END;
$$;
