-- The set form can answer "the newest N eligible rows about a subject, from a conversation, or
-- always-on" by reading them newest first from that column's own index and stopping at N.
--
-- Why: a search's subject, conversation and always-on sources each take the newest 200 eligible
-- rows about the speaker, from the destination, or always-on. Through audience classes (migration
-- 20261207100000) the set form joins every covering class to all of its rows, so these sources
-- read the destination's whole eligible set first (~0.6 us a row; a direct conversation's set is
-- typically a few thousand rows at 1M revisions), and over 10,000 rows they fell back to
-- statements that read thousands of heap rows through the audience array. Read newest first from
-- the subject, origin and always-on indexes, each row's audience class checked against the
-- covering classes, the three take ~1 ms together (docs/benchmarks-history.md, "2026-12-14").
--
-- What changes: the boolean p_through_classes becomes p_reading, one of memory_set_reading, with
-- two optional parameters for the newest readings (p_key, p_newest). A reading chooses how "known
-- and covering" is read and whether all of the set is read, never which rows are eligible; the
-- rule is still stated once, here. The bound sits inside the function because the planner does
-- not carry a caller's ORDER BY ... LIMIT into the branches of a UNION ALL: it sorted every
-- matching row first.
CREATE TYPE memory_set_reading AS ENUM (
    -- The whole set, "known and covering" read through the audience array, which the full-text
    -- GIN index carries beside the text: for full-text matches and for rows named by id.
    'audience_array',
    -- The whole set, through the covering audience classes, every row of each (an index-only scan
    -- of the class index).
    'class_scan',
    -- The newest eligible rows about subject p_key, from origin conversation p_key, or flagged
    -- always-on: read newest first through that column's own index, each row's audience class
    -- checked against the covering classes, stopping at p_newest (with the released rows that
    -- pass the same filter).
    'newest_about',
    'newest_from',
    'newest_always_on'
);

DROP FUNCTION memory_eligible_revisions(uuid, uuid, uuid[], boolean);

-- The set form: the eligible rows of the searchable_revisions projection (the current revisions of
-- live entries, with their audience summary) for agent p_agent, destination conversation
-- p_conversation, read by p_audience. Candidate queries select FROM it, so a row it rejects is
-- never a candidate. A plain SQL function: the planner inlines it into each statement.
--
-- Two disjoint parts: rows whose known audience covers the destination, and rows that part does
-- not admit but a grant releases (memory_released_revisions). p_reading chooses how the first part
-- reads "known and covering" (audience_class_id is set exactly when evidence is known, and names
-- the class whose members equal the row's audience, so a covering class and a known covering
-- audience are the same fact) and whether all of the set is read; never which rows are eligible.
--
-- The newest readings return a subset: the eligible rows passing the reading's filter, at least
-- the newest p_newest of them, so a caller orders by (created_at DESC, revision_id) and limits to
-- p_newest again. Their row check is written with array_position rather than = ANY: the planner
-- estimates an = ANY over an array it does not know yet as a tiny fraction of the rows and then
-- sorts every row of the filter instead of reading newest first (4-9 ms against 0.6 ms for a
-- direct conversation's 600 rows about its member; docs/benchmarks-history.md, "2026-12-14").
-- Callers pass p_reading as a literal, so the planner folds the other readings away.
CREATE FUNCTION memory_eligible_revisions(p_agent uuid, p_conversation uuid, p_audience uuid[],
                                          p_reading memory_set_reading,
                                          p_key uuid DEFAULT NULL, p_newest bigint DEFAULT NULL)
RETURNS SETOF searchable_revisions
LANGUAGE sql STABLE
AS $$
    SELECT eligible.*
      FROM (SELECT p.*
              FROM searchable_revisions p
             WHERE p_reading = 'audience_array' AND p.runtime_agent_id = p_agent
               AND p.evidence_known AND p.audience @> p_audience
            UNION ALL
            SELECT p.*
              FROM memory_covering_audience_classes(p_agent, p_audience) AS c
              JOIN searchable_revisions p ON p.audience_class_id = c.id
             WHERE p_reading = 'class_scan'
            UNION ALL
            SELECT newest.*
              FROM (SELECT p.*
                      FROM searchable_revisions p
                     WHERE p_reading IN ('newest_about', 'newest_from', 'newest_always_on')
                       AND p.runtime_agent_id = p_agent
                       AND CASE p_reading WHEN 'newest_about' THEN p.subject_actor_id = p_key
                                          WHEN 'newest_from' THEN p.origin_conversation_id = p_key
                                          ELSE p.always_on END
                       AND (p.restriction = 'none' OR p.restricted_conversation_id = p_conversation)
                       AND array_position(ARRAY(SELECT c.id FROM memory_covering_audience_classes(p_agent, p_audience) AS c),
                                          p.audience_class_id) IS NOT NULL
                     ORDER BY p.created_at DESC, p.revision_id
                     LIMIT p_newest) AS newest
            UNION ALL
            SELECT p.*
              FROM searchable_revisions p
             WHERE p.runtime_agent_id = p_agent
               AND CASE p_reading WHEN 'newest_about' THEN p.subject_actor_id = p_key
                                  WHEN 'newest_from' THEN p.origin_conversation_id = p_key
                                  WHEN 'newest_always_on' THEN p.always_on
                                  ELSE true END
               AND NOT (p.evidence_known AND p.audience @> p_audience)
               AND p.revision_id IN (SELECT g.revision_id FROM memory_released_revisions(p_agent, p_audience) g)
           ) AS eligible
     WHERE cardinality(p_audience) > 0
       AND (eligible.restriction = 'none' OR eligible.restricted_conversation_id = p_conversation)
$$;
