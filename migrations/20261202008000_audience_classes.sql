-- audience_classes: one row per distinct known audience (the sorted intersection that
-- revision_audience_summary holds) per runtime agent. searchable_revisions.audience_class_id names
-- the class of a row whose evidence is known, and is NULL otherwise.
--
-- Why: the eligible set of a destination audience D is "evidence known, audience ⊇ D" (plus
-- grants). Through the GIN index over audience arrays that costs one heap page per eligible row,
-- scattered over the whole table (at a million revisions, ~3,400 pages for a direct conversation:
-- 5–30 ms). An agent has few distinct audiences (about one per conversation), so "which classes
-- cover D" is a probe into a small table, and the rows of those classes are contiguous ranges of
-- the covering B-tree below: the eligible set with every feature retrieval ranks on is read by an
-- index-only scan of a few dozen pages.
--
-- Invariant (checked by the eligibility property test): audience_class_id is set exactly when
-- evidence_known, and then names the class whose members equal the row's audience. So "the row's
-- class covers D" decides the same rows as "evidence_known AND audience @> D".
--
-- Like the projection, classes are derived data written only by memory_refresh_searchable (run
-- by the SECURITY DEFINER triggers of migration 20261202007000). A class is never deleted: it is a
-- set of actor ids, and an unused one costs one small row.

CREATE TABLE audience_classes (
    id               bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    runtime_agent_id uuid    NOT NULL,
    members          uuid[]  NOT NULL,
    -- Audiences can be large (a channel of hundreds); uniqueness is kept on a digest so that the
    -- B-tree entry stays small whatever the size. Lookups also compare members.
    members_digest   bytea   NOT NULL,
    UNIQUE (runtime_agent_id, members_digest)
);

CREATE INDEX audience_classes_members ON audience_classes USING gin (members);

-- The digest of a sorted audience array (the summary keeps audiences sorted and distinct).
CREATE FUNCTION memory_audience_digest(p_members uuid[]) RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT sha256(convert_to(array_to_string(p_members, ','), 'UTF8')) $$;

-- No foreign key: the projection is derived and rebuilt by the same function that creates classes.
ALTER TABLE searchable_revisions ADD COLUMN audience_class_id bigint NULL;

-- The eligible set by class, newest first within a class, with every column the candidate
-- sources rank on, so that it is read without touching the heap (index-only scan).
CREATE INDEX searchable_revisions_class ON searchable_revisions
    (audience_class_id, created_at DESC, revision_id)
    INCLUDE (entry_id, subject_actor_id, origin_conversation_id, always_on, restriction, restricted_conversation_id)
    WHERE audience_class_id IS NOT NULL;

-- The audience-only GIN index is superseded by the classes (lexical candidates keep the
-- (body_tsv, audience) index); one index fewer to update per write.
DROP INDEX searchable_revisions_audience;

-- PL/pgSQL with cached generic plans: measured at a million revisions, a one-entry refresh took
-- 1.9 ms when its statements were planned on every call (as SQL-language functions are) and
-- 0.17 ms with a cached generic plan, and every write pays it. A generic plan does not depend on
-- the array's size, so a bulk refresh (a million entries in one COPY) runs as index probes rather
-- than hash joins: linear, slower per row than a custom plan, without the per-call planning.
CREATE OR REPLACE FUNCTION memory_refresh_searchable(p_entries uuid[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
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

REVOKE ALL ON FUNCTION memory_refresh_searchable(uuid[]) FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_runtime') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON audience_classes FROM mesh_runtime;
    END IF;
END;
$$;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON audience_classes FROM PUBLIC;

-- Rebuild the projection with classes (derived data: recomputed from canonical rows).
TRUNCATE searchable_revisions;
SELECT memory_refresh_searchable(ARRAY(SELECT id FROM memory_entries));
ANALYZE audience_classes;
ANALYZE searchable_revisions;
