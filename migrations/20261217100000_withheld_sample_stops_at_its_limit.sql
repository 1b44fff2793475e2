-- The withheld diagnostics' sample of matches with known evidence stops at p_limit rows in all,
-- not 2 x p_limit: a query's second term is scanned only when its first found fewer.
--
-- Why: every GIN scan of the projection's text-and-audience index reads the index's whole pending
-- list (migration 20261216100000 lets it hold up to 2,048 writes between merges, about 160 pages
-- of the benchmark's rows), besides the term's posting tree, and each sampled row is a heap probe.
-- Sampling 2 x p_limit rows per query meant two term scans for almost every query, since a term
-- usually has p_limit rejected matches of its own. On a durable store of 10.5M revisions
-- (release build, 300 destinations and three-term queries from the benchmark's vocabulary, the
-- function timed with generic plans as the store runs it, docs/benchmarks-history.md "2026-12-17"):
-- 3.8 -> 2.3 ms a call with a 336-page list, 1.9 -> 1.35 ms with the list merged.
--
-- What changes: only how many known-evidence matches the diagnostics sample (they were, and stay,
-- lower bounds for audience_not_covered, restriction and no_lineage). The unknown-evidence branch,
-- which decides eligibility_withheld_unknown, is unchanged; so are the rules each match is named
-- by, and eligibility itself (these rows are only counted, never returned).
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
                 LIMIT p_limit) AS found
         LIMIT p_limit
    ), ruled AS (
        SELECT unknown.rule FROM unknown
        UNION ALL
        SELECT known.rule FROM known
    )
    SELECT ruled.rule, count(*) FROM ruled GROUP BY ruled.rule ORDER BY ruled.rule
$$;
