-- The withheld diagnostics classify each match where they find it, instead of reading it twice.
--
-- Why: memory_withheld_rules (migration 20261207100000) gathered the ids of up to 2 x p_limit
-- rejected matches with a provisional lineage count of 1, then read each of them again from the
-- projection and its audience summary to name its rule. On a durable store of 1.6M revisions
-- (release build, EXPLAIN ANALYZE of the prepared statement) that second read took 3 of the
-- statement's 5.7 ms: about a hundred random row lookups in two tables. The statement runs beside
-- each search's selection and its audit row waits for it; with it replaced by an empty function a
-- lexical search's p50 went from 7.8 to 5.6 ms (docs/benchmarks-history.md, "2026-12-12").
--
-- What changes: the rule is named in the scan that finds the row.
-- * Matches with known evidence: the provisional lineage count of 1 is exact for them, since
--   evidence is known only for a revision whose every source has known evidence, and the audience
--   summary has a row only for a revision with at least one source (migration 20261203200000:
--   count(*) and bool_and over its sources). So memory_projection_rule gives their final rule
--   without reading the summary.
-- * Matches with unknown evidence (at most p_limit, through their own small index): the summary's
--   lineage count is joined to each found row, the only place where no_lineage and
--   unknown_evidence can differ. "Rejected or not" does not depend on it (a release precedes the
--   lineage rule in memory_first_failing_rule), so the filter still uses the provisional count.
-- The two branches are disjoint (evidence known or not); a row a term sample finds for two terms
-- is counted once. Results are the same rule names and counts as before, bounded the same way.
-- Only rule names and counts leave it, never text or ids.
CREATE OR REPLACE FUNCTION memory_withheld_rules(p_agent uuid, p_conversation uuid, p_audience uuid[],
                                                 p_query tsquery, p_terms tsquery[], p_limit bigint)
RETURNS TABLE (rule text, matches bigint)
LANGUAGE sql STABLE
SET gin_fuzzy_search_limit = 2000
AS $$
    WITH released AS (
        SELECT ARRAY(SELECT g.revision_id FROM memory_released_revisions(p_agent, p_audience) g) AS ids
    ), unknown AS (
        SELECT memory_projection_rule(u, p_conversation, p_audience, (SELECT r.ids FROM released r),
                                      s.source_count) AS rule
          FROM searchable_revisions u
          LEFT JOIN revision_audience_summary s ON s.revision_id = u.revision_id
         WHERE u.runtime_agent_id = p_agent AND NOT u.evidence_known AND u.body_tsv @@ p_query
           AND memory_projection_rule(u, p_conversation, p_audience, (SELECT r.ids FROM released r), 1)
               <> 'eligible'
         LIMIT p_limit
    ), known AS (
        SELECT DISTINCT found.revision_id, found.rule
          FROM (SELECT m.revision_id, m.rule
                  FROM unnest(p_terms) AS t(term)
                 CROSS JOIN LATERAL (
                       SELECT k.revision_id,
                              memory_projection_rule(k, p_conversation, p_audience,
                                                     (SELECT r.ids FROM released r), 1) AS rule
                         FROM searchable_revisions k
                        WHERE k.runtime_agent_id = p_agent AND k.evidence_known AND k.body_tsv @@ t.term
                          AND memory_projection_rule(k, p_conversation, p_audience,
                                                     (SELECT r.ids FROM released r), 1) <> 'eligible'
                        LIMIT p_limit) AS m
                 LIMIT 2 * p_limit) AS found
         LIMIT p_limit
    ), ruled AS (
        SELECT unknown.rule FROM unknown
        UNION ALL
        SELECT known.rule FROM known
    )
    SELECT ruled.rule, count(*) FROM ruled GROUP BY ruled.rule ORDER BY ruled.rule
$$;
