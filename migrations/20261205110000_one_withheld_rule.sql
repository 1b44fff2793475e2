-- The withheld diagnostics name rules from the one definition the eligibility rule uses.
--
-- memory_eligibility_rule (migration 20261205100000) and the withheld-count statement of
-- src/retrieval/candidates.rs each wrote the rules that follow an entry's lifecycle (restriction,
-- grant, lineage, evidence, coverage) as their own CASE, kept in the same order by hand. Both now
-- call memory_current_revision_rule: an IMMUTABLE SQL function of one CASE expression, which the
-- planner inlines, so the diagnostics pay nothing per row for sharing it.

-- The rule deciding a current revision of a live entry, from the facts each caller has at hand:
-- whether the destination audience is known (non-empty), whether an explicit restriction confines
-- it elsewhere, whether a live grant covering the audience releases it, how many lineage sources
-- it has, whether all their evidence is known, and whether that known audience covers the
-- destination. The first failing rule is the answer, in the order of memory_eligibility_verdict.
CREATE FUNCTION memory_current_revision_rule(p_audience_known boolean, p_restricted_elsewhere boolean,
                                             p_released boolean, p_source_count bigint,
                                             p_evidence_known boolean, p_covers boolean)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
               WHEN NOT coalesce(p_audience_known, false) THEN 'audience_unknown'
               WHEN coalesce(p_restricted_elsewhere, false) THEN 'restriction'
               WHEN coalesce(p_released, false) THEN 'eligible'
               WHEN coalesce(p_source_count, 0) = 0 THEN 'no_lineage'
               WHEN NOT coalesce(p_evidence_known, false) THEN 'unknown_evidence'
               WHEN NOT coalesce(p_covers, false) THEN 'audience_not_covered'
               ELSE 'eligible'
           END
$$;

CREATE OR REPLACE FUNCTION memory_eligibility_rule(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    verdict text;
BEGIN
    IF p_audience IS NULL OR cardinality(p_audience) = 0 THEN
        RETURN memory_current_revision_rule(false, NULL, NULL, NULL, NULL, NULL);
    END IF;
    SELECT CASE
               WHEN e.state <> 'live' THEN 'forgotten'
               WHEN e.current_revision_id <> r.id THEN 'not_current'
               ELSE memory_current_revision_rule(
                   true,
                   e.restriction = 'conversation_only' AND e.restricted_conversation_id IS DISTINCT FROM p_conversation,
                   EXISTS (
                       SELECT 1 FROM sharing_grants g
                        WHERE g.revision_id = r.id AND g.runtime_agent_id = p_agent AND g.revoked_at IS NULL
                          AND NOT EXISTS (
                              SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                               WHERE NOT EXISTS (SELECT 1 FROM sharing_grant_audience ga
                                                  WHERE ga.grant_id = g.id AND ga.actor_id = d.actor_id))),
                   s.source_count, s.evidence_known, s.audience @> p_audience)
           END
      INTO verdict
      FROM memory_entry_revisions r
      JOIN memory_entries e ON e.id = r.entry_id AND e.runtime_agent_id = r.runtime_agent_id
      LEFT JOIN revision_audience_summary s ON s.revision_id = r.id
     WHERE r.id = p_revision AND r.runtime_agent_id = p_agent;
    RETURN coalesce(verdict, 'foreign_agent');
END;
$$;
