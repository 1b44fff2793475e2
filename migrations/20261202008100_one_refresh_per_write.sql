-- One projection refresh per write, not six.
--
-- Measured at a million revisions: a remember (entry, revision, one message source with its
-- audience) ran memory_refresh_audience_summary twice and memory_refresh_searchable about six
-- times, most of them with nothing to do: the entry insert fires before its revision exists,
-- INSERT ... ON CONFLICT DO UPDATE fires both the INSERT and the UPDATE statement triggers (one
-- with an empty transition table), the second summary refresh rewrites an unchanged row, and an
-- amend refreshes the entry once for the new revision's summary (while the old revision is still
-- current) and again when the entry moves to it.
--
-- The triggers keep exactly their meaning (derived rows always equal what canonical rows imply,
-- in the writer's transaction); they only skip work that cannot change anything:
-- - the summary is rewritten only when it differs;
-- - the projection is refreshed for an entry only when its current revision exists (entry
--   triggers) or when the changed summary is the current revision's (summary triggers);
-- - an empty transition table does nothing.
-- And none of them plans its statements again on every call: the summary refresh becomes PL/pgSQL
-- with the same statement, and all of them use cached generic plans (0.55 -> 0.13 ms for one
-- revision's summary; see memory_refresh_searchable in migration 20261202008000 for why).
-- tests/common::assert_projection_matches_canonical and the eligibility property test check the
-- derived rows against canonical rows after every kind of write.

CREATE OR REPLACE FUNCTION memory_refresh_audience_summary(p_revisions uuid[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
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

CREATE OR REPLACE FUNCTION memory_summary_after_sources() RETURNS trigger LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    changed uuid[] := ARRAY(SELECT DISTINCT revision_id FROM changed_sources);
BEGIN
    IF cardinality(changed) > 0 THEN
        PERFORM memory_refresh_audience_summary(changed);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION memory_summary_after_audience() RETURNS trigger LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    changed uuid[] := ARRAY(
        SELECT DISTINCT s.revision_id FROM changed_audience c JOIN revision_sources s ON s.id = c.source_id);
BEGIN
    IF cardinality(changed) > 0 THEN
        PERFORM memory_refresh_audience_summary(changed);
    END IF;
    RETURN NULL;
END;
$$;

-- An entry whose current revision does not exist yet (the entry row is written first) has
-- nothing to project; the summary trigger projects it once its sources arrive, and the statement
-- that inserts the revision cannot make it current without touching the entry again.
CREATE OR REPLACE FUNCTION memory_searchable_after_entries() RETURNS trigger LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    changed uuid[] := ARRAY(
        SELECT c.id FROM changed_entries c
         WHERE c.state <> 'live'
            OR EXISTS (SELECT 1 FROM memory_entry_revisions r WHERE r.id = c.current_revision_id));
BEGIN
    IF cardinality(changed) > 0 THEN
        PERFORM memory_refresh_searchable(changed);
    END IF;
    RETURN NULL;
END;
$$;

-- Only a current revision's summary is projected; a new revision's summary changes while its
-- entry still points at the previous one, and the entry update that follows refreshes it.
CREATE OR REPLACE FUNCTION memory_searchable_after_summary() RETURNS trigger LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    changed uuid[] := ARRAY(
        SELECT e.id FROM changed_summary c
          JOIN memory_entry_revisions r ON r.id = c.revision_id
          JOIN memory_entries e ON e.id = r.entry_id AND e.current_revision_id = r.id);
BEGIN
    IF cardinality(changed) > 0 THEN
        PERFORM memory_refresh_searchable(changed);
    END IF;
    RETURN NULL;
END;
$$;

-- CREATE OR REPLACE resets these attributes: derived data stays writable only by its triggers,
-- as the schema owner (migrations 20261202006100 and 20261202007000).
ALTER FUNCTION memory_summary_after_sources() SECURITY DEFINER SET search_path FROM CURRENT;
ALTER FUNCTION memory_summary_after_audience() SECURITY DEFINER SET search_path FROM CURRENT;
ALTER FUNCTION memory_searchable_after_entries() SECURITY DEFINER SET search_path FROM CURRENT;
ALTER FUNCTION memory_searchable_after_summary() SECURITY DEFINER SET search_path FROM CURRENT;
REVOKE ALL ON FUNCTION memory_refresh_audience_summary(uuid[]) FROM PUBLIC;
