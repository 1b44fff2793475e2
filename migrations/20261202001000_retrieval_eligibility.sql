-- The eligibility predicate: ONE definition, in SQL, shared by every candidate query of
-- retrieval, by the explain API and by the delivery recheck (src/privacy/eligibility.rs wraps it).
--
-- A revision r is eligible for (runtime agent A, destination conversation C, destination audience D)
-- iff, in this order of evaluation (the first failing rule is the verdict):
--   1. r belongs to A                                   else 'foreign_agent'
--   2. its entry is live                                else 'forgotten'
--   3. r is the entry's current revision                else 'not_current'
--   4. the explicit restriction holds ('none', or
--      'conversation_only' confined to C)               else 'restriction'
--   5. a live (unrevoked) sharing grant on exactly r
--      whose audience covers D                          then 'eligible'
--   6. r has at least one lineage source                else 'no_lineage'
--   7. no source has unknown audience evidence          else 'unknown_evidence' (names the source)
--   8. every source's known audience covers D           else 'audience_not_covered' (names the source)
--   otherwise                                           'eligible'
-- A NULL audience fails closed ('audience_unknown'). D is passed in (a snapshot taken by the
-- caller, normally Store::current_audience) so that a delivery recheck can compare snapshots.

CREATE TYPE memory_eligibility AS (rule text, source_id uuid);

CREATE FUNCTION memory_eligibility_verdict(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
RETURNS memory_eligibility
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    entry_row record;
    failing   uuid;
BEGIN
    IF p_audience IS NULL THEN
        RETURN ROW('audience_unknown', NULL)::memory_eligibility;
    END IF;

    SELECT e.state, e.current_revision_id, e.restriction, e.restricted_conversation_id
      INTO entry_row
      FROM memory_entry_revisions r
      JOIN memory_entries e ON e.id = r.entry_id AND e.runtime_agent_id = r.runtime_agent_id
     WHERE r.id = p_revision AND r.runtime_agent_id = p_agent;
    IF NOT FOUND THEN
        RETURN ROW('foreign_agent', NULL)::memory_eligibility;
    END IF;
    IF entry_row.state <> 'live' THEN
        RETURN ROW('forgotten', NULL)::memory_eligibility;
    END IF;
    IF entry_row.current_revision_id <> p_revision THEN
        RETURN ROW('not_current', NULL)::memory_eligibility;
    END IF;
    IF entry_row.restriction = 'conversation_only'
       AND entry_row.restricted_conversation_id IS DISTINCT FROM p_conversation THEN
        RETURN ROW('restriction', NULL)::memory_eligibility;
    END IF;

    -- A grant releases exactly this revision to its audience; it must cover all of D.
    IF EXISTS (
        SELECT 1 FROM sharing_grants g
         WHERE g.revision_id = p_revision AND g.runtime_agent_id = p_agent AND g.revoked_at IS NULL
           AND NOT EXISTS (
               SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                WHERE NOT EXISTS (SELECT 1 FROM sharing_grant_audience ga
                                   WHERE ga.grant_id = g.id AND ga.actor_id = d.actor_id))
    ) THEN
        RETURN ROW('eligible', NULL)::memory_eligibility;
    END IF;

    IF NOT EXISTS (SELECT 1 FROM revision_sources s WHERE s.revision_id = p_revision) THEN
        RETURN ROW('no_lineage', NULL)::memory_eligibility;
    END IF;

    SELECT s.id INTO failing
      FROM revision_sources s
     WHERE s.revision_id = p_revision AND s.evidence = 'unknown'
     ORDER BY s.created_at, s.id
     LIMIT 1;
    IF failing IS NOT NULL THEN
        RETURN ROW('unknown_evidence', failing)::memory_eligibility;
    END IF;

    SELECT s.id INTO failing
      FROM revision_sources s
     WHERE s.revision_id = p_revision
       AND EXISTS (SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                    WHERE NOT EXISTS (SELECT 1 FROM revision_source_audience a
                                       WHERE a.source_id = s.id AND a.actor_id = d.actor_id))
     ORDER BY s.created_at, s.id
     LIMIT 1;
    IF failing IS NOT NULL THEN
        RETURN ROW('audience_not_covered', failing)::memory_eligibility;
    END IF;

    RETURN ROW('eligible', NULL)::memory_eligibility;
END;
$$;

COMMENT ON FUNCTION memory_eligibility_verdict(uuid, uuid, uuid, uuid[]) IS
    'The one eligibility predicate of memory retrieval: the first failing rule, or eligible.';

-- The boolean form every candidate query embeds in its WHERE clause.
CREATE FUNCTION memory_revision_eligible(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT (memory_eligibility_verdict(p_agent, p_revision, p_conversation, p_audience)).rule = 'eligible'
$$;

-- Lexical query over the whole archive: every English lexeme of the text OR-ed together, so that
-- "tabs or spaces?" matches a memory that mentions either; ts_rank_cd then prefers rows matching
-- more (and closer) terms. Lexemes are already normalised, so they are quoted and cast directly.
-- NULL when the text has no searchable term (only stop words or punctuation).
CREATE FUNCTION memory_lexical_query(p_text text)
RETURNS tsquery
LANGUAGE sql IMMUTABLE
AS $$
    SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery
      FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, coalesce(p_text, '')))) AS lexeme
$$;
