-- The derived-data refresh functions stop re-planning their statements on every call.
--
-- Why: measured at a million revisions, one write's triggers spent ~6 ms, almost all of it
-- planning: memory_refresh_searchable for one entry took 1.9 ms with a fresh plan and 0.17 ms
-- with a cached generic one; memory_refresh_audience_summary 0.55 ms against 0.13 ms. So the two
-- refresh functions move to PL/pgSQL (which keeps each statement's plan for the session; SQL
-- functions plan again per call) with the same statements, and they and the trigger functions
-- that call them use generic plans. A generic plan does not depend on the array's size: a bulk
-- refresh (a million entries in one COPY) runs as index probes rather than hash joins, linear
-- and slower per row than a custom plan but without the planning cost that dominates the
-- one-entry case every write pays. Behaviour is unchanged (each statement still takes a fresh
-- snapshot, which the audience-class insert relies on: see migration 20261202008000).

CREATE OR REPLACE FUNCTION memory_refresh_searchable(p_entries uuid[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM searchable_revisions
     WHERE entry_id IN (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id));
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
     WHERE e.state = 'live';
END;
$$;

CREATE OR REPLACE FUNCTION memory_refresh_audience_summary(p_revisions uuid[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    WITH revs AS (
        SELECT DISTINCT r.id FROM unnest(p_revisions) AS u(id) JOIN memory_entry_revisions r ON r.id = u.id
    ), src AS (
        SELECT s.revision_id, count(*) AS sources, bool_and(s.evidence = 'known') AS known
          FROM revision_sources s JOIN revs ON revs.id = s.revision_id
         GROUP BY s.revision_id
    ), per_actor AS (
        SELECT s.revision_id, a.actor_id, count(*) AS sources
          FROM revision_sources s
          JOIN revs ON revs.id = s.revision_id
          JOIN revision_source_audience a ON a.source_id = s.id
         GROUP BY s.revision_id, a.actor_id
    ), intersection AS (
        SELECT p.revision_id, array_agg(p.actor_id ORDER BY p.actor_id) AS audience
          FROM per_actor p JOIN src ON src.revision_id = p.revision_id AND p.sources = src.sources
         GROUP BY p.revision_id
    )
    INSERT INTO revision_audience_summary AS old (revision_id, source_count, evidence_known, audience)
    SELECT revs.id, coalesce(src.sources, 0), coalesce(src.sources > 0 AND src.known, false), coalesce(i.audience, '{}')
      FROM revs
      LEFT JOIN src ON src.revision_id = revs.id
      LEFT JOIN intersection i ON i.revision_id = revs.id
    ON CONFLICT (revision_id) DO UPDATE
       SET source_count = EXCLUDED.source_count, evidence_known = EXCLUDED.evidence_known,
           audience = EXCLUDED.audience
     WHERE (old.source_count, old.evidence_known, old.audience)
           IS DISTINCT FROM (EXCLUDED.source_count, EXCLUDED.evidence_known, EXCLUDED.audience);
END;
$$;

REVOKE ALL ON FUNCTION memory_refresh_searchable(uuid[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION memory_refresh_audience_summary(uuid[]) FROM PUBLIC;

ALTER FUNCTION memory_refresh_searchable(uuid[]) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION memory_refresh_audience_summary(uuid[]) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION memory_summary_after_sources() SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION memory_summary_after_audience() SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION memory_searchable_after_entries() SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION memory_searchable_after_summary() SET plan_cache_mode = force_generic_plan;
DO $$
BEGIN
    IF to_regproc('memory_searchable_after_embeddings') IS NOT NULL THEN
        ALTER FUNCTION memory_searchable_after_embeddings() SET plan_cache_mode = force_generic_plan;
        ALTER FUNCTION memory_searchable_fill_bits() SET plan_cache_mode = force_generic_plan;
    END IF;
END;
$$;
