-- A per-revision summary of lineage evidence, so that the eligibility predicate inside every
-- candidate query is a few index probes instead of a PL/pgSQL walk over every source.
--
-- revision_audience_summary.source_count   = how many lineage sources the revision has;
-- revision_audience_summary.evidence_known = every source of the revision has known evidence
--   (and there is at least one source);
-- revision_audience_summary.audience       = the intersection of the sources' audiences, sorted.
-- "Every source known and D a subset of every source's audience" is exactly
-- "evidence_known AND audience @> D", so the fast predicate below decides the same rows as
-- memory_eligibility_verdict (which explain keeps using, because it names the failing source).
-- The summary is maintained by statement-level triggers on revision_sources and
-- revision_source_audience, so no writer (store, repair, operator review, bulk COPY) can forget
-- it; a revision without a summary row is not eligible (fail closed).

CREATE TABLE revision_audience_summary (
    revision_id    uuid    PRIMARY KEY REFERENCES memory_entry_revisions (id),
    source_count   integer NOT NULL CHECK (source_count >= 0),
    evidence_known boolean NOT NULL,
    audience       uuid[]  NOT NULL
);

-- Set-based (grouped joins, no correlated subqueries), so that a bulk COPY of a million sources
-- refreshes in one pass even before the new rows have planner statistics.
CREATE FUNCTION memory_refresh_audience_summary(p_revisions uuid[])
RETURNS void
LANGUAGE sql
AS $$
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
    INSERT INTO revision_audience_summary (revision_id, source_count, evidence_known, audience)
    SELECT revs.id, coalesce(src.sources, 0), coalesce(src.sources > 0 AND src.known, false), coalesce(i.audience, '{}')
      FROM revs
      LEFT JOIN src ON src.revision_id = revs.id
      LEFT JOIN intersection i ON i.revision_id = revs.id
    ON CONFLICT (revision_id) DO UPDATE
       SET source_count = EXCLUDED.source_count, evidence_known = EXCLUDED.evidence_known,
           audience = EXCLUDED.audience
$$;

CREATE FUNCTION memory_summary_after_sources() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_refresh_audience_summary(ARRAY(SELECT DISTINCT revision_id FROM changed_sources));
    RETURN NULL;
END;
$$;

CREATE FUNCTION memory_summary_after_audience() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memory_refresh_audience_summary(ARRAY(
        SELECT DISTINCT s.revision_id FROM changed_audience c JOIN revision_sources s ON s.id = c.source_id));
    RETURN NULL;
END;
$$;

CREATE TRIGGER revision_sources_summary_insert
    AFTER INSERT ON revision_sources REFERENCING NEW TABLE AS changed_sources
    FOR EACH STATEMENT EXECUTE FUNCTION memory_summary_after_sources();
CREATE TRIGGER revision_sources_summary_update
    AFTER UPDATE ON revision_sources REFERENCING NEW TABLE AS changed_sources
    FOR EACH STATEMENT EXECUTE FUNCTION memory_summary_after_sources();
CREATE TRIGGER revision_source_audience_summary_insert
    AFTER INSERT ON revision_source_audience REFERENCING NEW TABLE AS changed_audience
    FOR EACH STATEMENT EXECUTE FUNCTION memory_summary_after_audience();
CREATE TRIGGER revision_source_audience_summary_delete
    AFTER DELETE ON revision_source_audience REFERENCING OLD TABLE AS changed_audience
    FOR EACH STATEMENT EXECUTE FUNCTION memory_summary_after_audience();

-- Backfill what exists.
SELECT memory_refresh_audience_summary(ARRAY(SELECT id FROM memory_entry_revisions));

-- The boolean predicate every candidate query embeds: same rules as memory_eligibility_verdict,
-- answered from the summary and index probes. A NULL audience fails closed.
CREATE OR REPLACE FUNCTION memory_revision_eligible(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT p_audience IS NOT NULL AND EXISTS (
        SELECT 1
          FROM memory_entry_revisions r
          JOIN memory_entries e ON e.id = r.entry_id AND e.runtime_agent_id = r.runtime_agent_id
         WHERE r.id = p_revision
           AND r.runtime_agent_id = p_agent
           AND e.state = 'live'
           AND e.current_revision_id = r.id
           AND (e.restriction = 'none' OR e.restricted_conversation_id = p_conversation)
           AND (EXISTS (SELECT 1 FROM revision_audience_summary s
                         WHERE s.revision_id = r.id AND s.evidence_known AND s.audience @> p_audience)
                OR EXISTS (SELECT 1 FROM sharing_grants g
                            WHERE g.revision_id = r.id AND g.runtime_agent_id = p_agent AND g.revoked_at IS NULL
                              AND NOT EXISTS (
                                  SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                                   WHERE NOT EXISTS (SELECT 1 FROM sharing_grant_audience ga
                                                      WHERE ga.grant_id = g.id AND ga.actor_id = d.actor_id)))))
$$;
