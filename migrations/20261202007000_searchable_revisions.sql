-- searchable_revisions: one row per *current revision of a live entry*, holding everything the
-- candidate queries filter and rank on (agent, restriction, evidence summary, full-text vector,
-- subject, origin conversation, always-on, creation time) in one heap with indexes built for the
-- questions retrieval asks.
--
-- Why: at a million revisions the eligibility predicate evaluated row by row over canonical tables
-- costs about ten index probes per row, and the destination audience (the most selective filter)
-- lives in another table than the full-text vector, so neither side can drive the other. Here the
-- GIN index over (body_tsv, audience) intersects "matches the query" with "the audience is
-- covered" inside one index scan, and a GIN index over audience bounds the eligible set for the
-- semantic cap without touching canonical rows.
--
-- It is derived data, like revision_audience_summary: only the triggers below write it (as the
-- schema owner), from canonical rows, in the same transaction as the write that changed them, so
-- it can never lag a committed write. A revision without a summary row has no row here (fail
-- closed). Retrieval still hydrates every selected text from canonical rows and re-checks the
-- canonical predicate in that statement (src/retrieval/candidates.rs).

CREATE TABLE searchable_revisions (
    revision_id                uuid               PRIMARY KEY REFERENCES memory_entry_revisions (id),
    entry_id                   uuid               NOT NULL UNIQUE REFERENCES memory_entries (id),
    runtime_agent_id           uuid               NOT NULL,
    restriction                memory_restriction NOT NULL,
    restricted_conversation_id uuid               NULL,
    evidence_known             boolean            NOT NULL,
    audience                   uuid[]             NOT NULL,
    body_tsv                   tsvector           NOT NULL,
    subject_actor_id           uuid               NULL,
    origin_conversation_id     uuid               NULL,
    always_on                  boolean            NOT NULL,
    created_at                 timestamptz        NOT NULL
);

-- Lexical candidates: matches of the query whose audience covers the destination, in one scan.
CREATE INDEX searchable_revisions_text_audience ON searchable_revisions USING gin (body_tsv, audience);
-- The eligible set by audience alone (semantic cap, semantic candidates).
CREATE INDEX searchable_revisions_audience ON searchable_revisions USING gin (audience) WHERE evidence_known;
-- Withheld diagnostics: matches whose evidence is unknown are few and found without a full scan.
CREATE INDEX searchable_revisions_unknown_text ON searchable_revisions USING gin (body_tsv) WHERE NOT evidence_known;
-- Subject, conversation and always-on candidates, newest first.
CREATE INDEX searchable_revisions_subject ON searchable_revisions (runtime_agent_id, subject_actor_id, created_at DESC);
CREATE INDEX searchable_revisions_origin ON searchable_revisions (runtime_agent_id, origin_conversation_id, created_at DESC);
CREATE INDEX searchable_revisions_always_on ON searchable_revisions (runtime_agent_id, created_at DESC) WHERE always_on;

-- Recomputes the rows of the given entries from canonical tables: their current revision if the
-- entry is live, nothing otherwise. The triggers below call it whenever an entry changes (create,
-- amend, forget, restriction) or a revision's evidence summary does (new sources, repair,
-- operator review). Set-based, so that a
-- bulk COPY of a million entries refreshes in one pass.
CREATE FUNCTION memory_refresh_searchable(p_entries uuid[])
RETURNS void
LANGUAGE sql
AS $$
    DELETE FROM searchable_revisions
     WHERE entry_id IN (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id));
    INSERT INTO searchable_revisions (revision_id, entry_id, runtime_agent_id, restriction, restricted_conversation_id,
                                      evidence_known, audience, body_tsv, subject_actor_id, origin_conversation_id,
                                      always_on, created_at)
    SELECT r.id, e.id, e.runtime_agent_id, e.restriction, e.restricted_conversation_id,
           coalesce(s.evidence_known, false), coalesce(s.audience, '{}'), coalesce(r.body_tsv, ''::tsvector), r.subject_actor_id, e.origin_conversation_id,
           e.always_on, r.created_at
      FROM (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id)) AS changed
      JOIN memory_entries e ON e.id = changed.id
      JOIN memory_entry_revisions r ON r.id = e.current_revision_id AND r.entry_id = e.id
                                   AND r.runtime_agent_id = e.runtime_agent_id
      LEFT JOIN revision_audience_summary s ON s.revision_id = r.id
     WHERE e.state = 'live';
$$;

CREATE FUNCTION memory_searchable_after_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_refresh_searchable(ARRAY(SELECT id FROM changed_entries));
    RETURN NULL;
END;
$$;

CREATE FUNCTION memory_searchable_after_summary() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_refresh_searchable(ARRAY(
        SELECT r.entry_id FROM changed_summary c JOIN memory_entry_revisions r ON r.id = c.revision_id));
    RETURN NULL;
END;
$$;

CREATE TRIGGER memory_entries_searchable_insert
    AFTER INSERT ON memory_entries REFERENCING NEW TABLE AS changed_entries
    FOR EACH STATEMENT EXECUTE FUNCTION memory_searchable_after_entries();
CREATE TRIGGER memory_entries_searchable_update
    AFTER UPDATE ON memory_entries REFERENCING NEW TABLE AS changed_entries
    FOR EACH STATEMENT EXECUTE FUNCTION memory_searchable_after_entries();
CREATE TRIGGER revision_audience_summary_searchable_insert
    AFTER INSERT ON revision_audience_summary REFERENCING NEW TABLE AS changed_summary
    FOR EACH STATEMENT EXECUTE FUNCTION memory_searchable_after_summary();
CREATE TRIGGER revision_audience_summary_searchable_update
    AFTER UPDATE ON revision_audience_summary REFERENCING NEW TABLE AS changed_summary
    FOR EACH STATEMENT EXECUTE FUNCTION memory_searchable_after_summary();

-- Derived data: only the triggers write it, as the schema owner (see migration 20261202006100).
ALTER FUNCTION memory_searchable_after_entries() SECURITY DEFINER SET search_path FROM CURRENT;
ALTER FUNCTION memory_searchable_after_summary() SECURITY DEFINER SET search_path FROM CURRENT;
REVOKE ALL ON FUNCTION memory_refresh_searchable(uuid[]) FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_runtime') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON searchable_revisions FROM mesh_runtime;
    END IF;
END;
$$;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON searchable_revisions FROM PUBLIC;

-- Backfill what exists.
SELECT memory_refresh_searchable(ARRAY(SELECT id FROM memory_entries));
ANALYZE searchable_revisions;
