-- One evidence-summary refresh per written source, not two.
--
-- A message source is written by one statement that inserts the source row and its audience rows
-- together (lineage::insert_message_sources; an amend's copied sources likewise). Both tables'
-- statement triggers then refreshed the revision's summary, the second time computing the same
-- row again: 0.28 ms of a 1.7 ms source statement at a million revisions.
--
-- The insert trigger on revision_sources now leaves to the audience trigger every revision that
-- has a new source with audience rows. That is safe because those audience rows can only have
-- been inserted by the same statement (their foreign key to the new source is checked
-- immediately, and the source did not exist before this statement), so the audience insert
-- trigger fires for this statement too and refreshes the whole revision, from all its sources.
-- Revisions whose new sources have no audience rows (unknown evidence, an empty audience, or
-- audience rows still to come in a later statement) are refreshed here, as before. The UPDATE
-- trigger (repair, operator review) keeps refreshing every changed revision.
CREATE FUNCTION memory_summary_after_source_insert() RETURNS trigger LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    changed uuid[] := ARRAY(
        SELECT c.revision_id FROM changed_sources c
         GROUP BY c.revision_id
        HAVING NOT bool_or(EXISTS (SELECT 1 FROM revision_source_audience a WHERE a.source_id = c.id)));
BEGIN
    IF cardinality(changed) > 0 THEN
        PERFORM memory_refresh_audience_summary(changed);
    END IF;
    RETURN NULL;
END;
$$;

-- Derived data stays writable only by its triggers, as the schema owner (migration 20261202006100).
ALTER FUNCTION memory_summary_after_source_insert() SECURITY DEFINER SET search_path FROM CURRENT;

DROP TRIGGER revision_sources_summary_insert ON revision_sources;
CREATE TRIGGER revision_sources_summary_insert
    AFTER INSERT ON revision_sources REFERENCING NEW TABLE AS changed_sources
    FOR EACH STATEMENT EXECUTE FUNCTION memory_summary_after_source_insert();
