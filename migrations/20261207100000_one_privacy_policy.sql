-- One privacy policy in two forms (docs/policy.md reads them in words).
--
-- Before this migration the audience rule was written about eight times: three Rust macros, the
-- SQL functions memory_eligibility_verdict, memory_eligibility_rule (with
-- memory_current_revision_rule) and memory_revision_eligible, and the inverse the withheld
-- diagnostics used (in Rust and in memory_withheld_known_matches). The grant-coverage test was
-- written five times and the rule order twice. From here on:
--
-- * memory_released_revisions: the one statement of grant coverage;
-- * memory_first_failing_rule: the one statement of the rule order;
-- * memory_eligibility_verdict: the per-revision form (canonical rows, names the failing source);
-- * memory_eligible_revisions: the set form every candidate path, the semantic revalidation and
--   hydration select from;
-- * memory_withheld_rules: the withheld diagnostics, classified by memory_first_failing_rule.
--
-- Every other form is dropped below.

-- Revisions of agent p_agent that an unrevoked sharing grant releases to every reader of
-- p_audience (a grant must cover the whole destination; an empty audience is released nothing).
-- A plain SQL set-returning function, so the planner inlines it into each caller's statement and
-- drives it from the grant's own index.
CREATE FUNCTION memory_released_revisions(p_agent uuid, p_audience uuid[])
RETURNS TABLE (revision_id uuid)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT g.revision_id
      FROM sharing_grants g
     WHERE g.runtime_agent_id = p_agent AND g.revoked_at IS NULL AND cardinality(p_audience) > 0
       AND NOT EXISTS (SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                        WHERE NOT EXISTS (SELECT 1 FROM sharing_grant_audience ga
                                           WHERE ga.grant_id = g.id AND ga.actor_id = d.actor_id))
$$;

-- The rule order: given the facts a caller has about one revision in one destination, the first
-- rule that rejects it, or 'eligible'. A NULL fact counts as the failing value (fail closed).
-- IMMUTABLE and one CASE expression, so the planner inlines it wherever it is called.
CREATE FUNCTION memory_first_failing_rule(p_audience_known boolean, p_found boolean, p_live boolean,
                                          p_current boolean, p_restricted_elsewhere boolean,
                                          p_released boolean, p_source_count bigint,
                                          p_evidence_known boolean, p_covers boolean)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
               WHEN NOT coalesce(p_audience_known, false) THEN 'audience_unknown'
               WHEN NOT coalesce(p_found, false) THEN 'foreign_agent'
               WHEN NOT coalesce(p_live, false) THEN 'forgotten'
               WHEN NOT coalesce(p_current, false) THEN 'not_current'
               WHEN coalesce(p_restricted_elsewhere, true) THEN 'restriction'
               WHEN coalesce(p_released, false) THEN 'eligible'
               WHEN coalesce(p_source_count, 0) = 0 THEN 'no_lineage'
               WHEN NOT coalesce(p_evidence_known, false) THEN 'unknown_evidence'
               WHEN NOT coalesce(p_covers, false) THEN 'audience_not_covered'
               ELSE 'eligible'
           END
$$;

-- The per-revision form: the verdict on revision p_revision of agent p_agent for destination
-- conversation p_conversation read by p_audience, from canonical rows (entries, revisions,
-- sources, grants), with the source that fails for the two source rules (the earliest such source).
-- Explain, the delivery recheck and hydration use it.
CREATE OR REPLACE FUNCTION memory_eligibility_verdict(p_agent uuid, p_revision uuid, p_conversation uuid,
                                                      p_audience uuid[])
RETURNS memory_eligibility
LANGUAGE sql STABLE
AS $$
    WITH revision AS (
        SELECT e.state, e.current_revision_id = r.id AS is_current,
               e.restriction = 'conversation_only'
                   AND e.restricted_conversation_id IS DISTINCT FROM p_conversation AS restricted_elsewhere
          FROM memory_entry_revisions r
          JOIN memory_entries e ON e.id = r.entry_id AND e.runtime_agent_id = r.runtime_agent_id
         WHERE r.id = p_revision AND r.runtime_agent_id = p_agent
    ), sources AS (
        SELECT count(*) AS source_count,
               (array_agg(s.id ORDER BY s.created_at, s.id) FILTER (WHERE s.evidence = 'unknown'))[1] AS unknown,
               (array_agg(s.id ORDER BY s.created_at, s.id)
                    FILTER (WHERE NOT coalesce(p_audience <@ s.audience, false)))[1] AS uncovered
          FROM revision_sources s
         WHERE s.revision_id = p_revision
    ), verdict AS (
        SELECT memory_first_failing_rule(
                   coalesce(cardinality(p_audience), 0) > 0,
                   revision.state IS NOT NULL,
                   revision.state = 'live',
                   revision.is_current,
                   revision.restricted_elsewhere,
                   EXISTS (SELECT 1 FROM memory_released_revisions(p_agent, p_audience) g
                            WHERE g.revision_id = p_revision),
                   sources.source_count,
                   sources.unknown IS NULL,
                   sources.uncovered IS NULL) AS rule,
               sources.unknown, sources.uncovered
          FROM sources LEFT JOIN revision ON true
    )
    SELECT ROW(v.rule, CASE v.rule WHEN 'unknown_evidence' THEN v.unknown
                                   WHEN 'audience_not_covered' THEN v.uncovered END)::memory_eligibility
      FROM verdict v
$$;

-- The set form: the eligible rows of the searchable_revisions projection (the current revisions of
-- live entries, with their audience summary) for agent p_agent, destination conversation
-- p_conversation, read by p_audience. Candidate queries select FROM it, so a row it rejects is
-- never a candidate. A plain SQL function: the planner inlines it into each statement.
--
-- Two disjoint branches, each driven by an index: rows whose known audience covers the destination,
-- and rows that branch does not admit but a grant releases (memory_released_revisions).
-- p_through_classes chooses how the first branch reads "known and covering", never what it means:
-- true reads it through audience classes (audience_class_id is set exactly when evidence is known
-- and names the class whose members equal the row's audience; one index-only scan of the class
-- index, for the whole eligible set), false through the audience array (inside the full-text GIN
-- index, for lexical matches). Callers pass a literal, so the planner folds the other path away.
CREATE FUNCTION memory_eligible_revisions(p_agent uuid, p_conversation uuid, p_audience uuid[],
                                          p_through_classes boolean)
RETURNS SETOF searchable_revisions
LANGUAGE sql STABLE
AS $$
    SELECT eligible.*
      FROM (SELECT p.*
              FROM searchable_revisions p
             WHERE NOT p_through_classes AND p.runtime_agent_id = p_agent
               AND p.evidence_known AND p.audience @> p_audience
            UNION ALL
            SELECT p.*
              FROM memory_covering_audience_classes(p_agent, p_audience) AS c
              JOIN searchable_revisions p ON p.audience_class_id = c.id
             WHERE p_through_classes
            UNION ALL
            SELECT p.*
              FROM searchable_revisions p
             WHERE p.runtime_agent_id = p_agent
               AND NOT (p.evidence_known AND p.audience @> p_audience)
               AND p.revision_id IN (SELECT g.revision_id FROM memory_released_revisions(p_agent, p_audience) g)
           ) AS eligible
     WHERE cardinality(p_audience) > 0
       AND (eligible.restriction = 'none' OR eligible.restricted_conversation_id = p_conversation)
$$;

-- The rule deciding one row of the searchable_revisions projection (a current revision of a live
-- entry) for a destination, by memory_first_failing_rule; p_released holds the revisions
-- memory_released_revisions releases to p_audience, p_source_count the row's lineage source count
-- (evidence_known implies at least one). One CASE after inlining, evaluated per row.
CREATE FUNCTION memory_projection_rule(p_row searchable_revisions, p_conversation uuid, p_audience uuid[],
                                       p_released uuid[], p_source_count bigint)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT memory_first_failing_rule(
               coalesce(cardinality(p_audience), 0) > 0, true, true, true,
               (p_row).restriction = 'conversation_only'
                   AND (p_row).restricted_conversation_id IS DISTINCT FROM p_conversation,
               (p_row).revision_id = ANY (p_released),
               p_source_count,
               (p_row).evidence_known,
               (p_row).audience @> p_audience)
$$;

-- The withheld diagnostics: full-text matches among agent p_agent's live current revisions that
-- the policy rejects for this destination, counted by the rule that rejects them
-- (memory_projection_rule). Up to p_limit whose evidence is unknown, found with the whole query
-- through their own small index (exact: it decides eligibility_withheld_unknown), and up to
-- p_limit others, found one term at a time (a term with more than 2,000 matches is sampled, so
-- those counts are lower bounds). While matches are gathered only "rejected or not" matters, so
-- the lineage count is taken as 1 there and read from the audience summary for the final rule.
-- Only rule names and counts leave it, never text or ids.
CREATE FUNCTION memory_withheld_rules(p_agent uuid, p_conversation uuid, p_audience uuid[], p_query tsquery,
                                      p_terms tsquery[], p_limit bigint)
RETURNS TABLE (rule text, matches bigint)
LANGUAGE sql STABLE
SET gin_fuzzy_search_limit = 2000
AS $$
    WITH released AS (
        SELECT ARRAY(SELECT g.revision_id FROM memory_released_revisions(p_agent, p_audience) g) AS ids
    ), matched AS (
        (SELECT u.revision_id FROM searchable_revisions u
          WHERE u.runtime_agent_id = p_agent AND NOT u.evidence_known AND u.body_tsv @@ p_query
            AND memory_projection_rule(u, p_conversation, p_audience, (SELECT r.ids FROM released r), 1)
                <> 'eligible'
          LIMIT p_limit)
        UNION
        (SELECT DISTINCT found.revision_id
           FROM (SELECT m.revision_id
                   FROM unnest(p_terms) AS t(term)
                  CROSS JOIN LATERAL (
                        SELECT k.revision_id FROM searchable_revisions k
                         WHERE k.runtime_agent_id = p_agent AND k.evidence_known AND k.body_tsv @@ t.term
                           AND memory_projection_rule(k, p_conversation, p_audience, (SELECT r.ids FROM released r), 1)
                               <> 'eligible'
                         LIMIT p_limit) AS m
                  LIMIT 2 * p_limit) AS found
          LIMIT p_limit)
    ), ruled AS (
        SELECT memory_projection_rule(w, p_conversation, p_audience, (SELECT r.ids FROM released r),
                                      s.source_count) AS rule
          FROM matched
          JOIN searchable_revisions w ON w.revision_id = matched.revision_id
          LEFT JOIN revision_audience_summary s ON s.revision_id = w.revision_id
    )
    SELECT ruled.rule, count(*) FROM ruled WHERE ruled.rule <> 'eligible' GROUP BY ruled.rule ORDER BY ruled.rule
$$;

-- The forms the above replace.
DROP FUNCTION memory_revision_eligible(uuid, uuid, uuid, uuid[]);
DROP FUNCTION memory_eligibility_rule(uuid, uuid, uuid, uuid[]);
DROP FUNCTION memory_current_revision_rule(boolean, boolean, boolean, bigint, boolean, boolean);
DROP FUNCTION memory_withheld_known_matches(uuid, uuid, uuid[], tsquery[], uuid[], bigint);

-- Every SECURITY DEFINER function pins its search_path, with no "$user" schema and pg_temp named
-- last (left out, pg_temp would be searched first for tables), and grants EXECUTE to no one but
-- its callers (tests/schema.rs checks the catalogue). The trigger functions are called by their
-- triggers only.
ALTER FUNCTION memory_keep_source_evidence_unknown(uuid, text) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION memory_review_source_evidence(uuid, uuid[], text) SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION memory_lexical_statistics_fold() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION memory_lexical_statistics_after_truncate() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION memory_searchable_after_embeddings() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION memory_searchable_after_entries() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION memory_searchable_after_generations() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION memory_searchable_after_summary() SET search_path = pg_catalog, public, pg_temp;
ALTER FUNCTION memory_summary_after_sources() SET search_path = pg_catalog, public, pg_temp;
REVOKE EXECUTE ON FUNCTION memory_lexical_statistics_after_truncate() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION memory_searchable_after_embeddings() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION memory_searchable_after_entries() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION memory_searchable_after_generations() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION memory_searchable_after_summary() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION memory_summary_after_sources() FROM PUBLIC;
