-- The rule name alone, answered from the per-revision evidence summary (revision_audience_summary,
-- created by 20261202006000_eligibility_audience_summary.sql; PL/pgSQL so that this body is only
-- resolved when called, after every migration has run). Retrieval uses it to count the full-text
-- matches the predicate withheld, by rule, without walking every source of every match; it is a
-- diagnostic and never admits anything. It applies the rules of memory_eligibility_verdict in the
-- same order, and tests/eligibility.rs checks that the two agree on every generated workspace.
CREATE FUNCTION memory_eligibility_rule(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    verdict text;
BEGIN
    IF p_audience IS NULL THEN
        RETURN 'audience_unknown';
    END IF;
    SELECT CASE
               WHEN e.state <> 'live' THEN 'forgotten'
               WHEN e.current_revision_id <> r.id THEN 'not_current'
               WHEN e.restriction = 'conversation_only'
                    AND e.restricted_conversation_id IS DISTINCT FROM p_conversation THEN 'restriction'
               WHEN EXISTS (
                   SELECT 1 FROM sharing_grants g
                    WHERE g.revision_id = r.id AND g.runtime_agent_id = p_agent AND g.revoked_at IS NULL
                      AND NOT EXISTS (
                          SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                           WHERE NOT EXISTS (SELECT 1 FROM sharing_grant_audience ga
                                              WHERE ga.grant_id = g.id AND ga.actor_id = d.actor_id))) THEN 'eligible'
               WHEN coalesce(s.source_count, 0) = 0 THEN 'no_lineage'
               WHEN NOT s.evidence_known THEN 'unknown_evidence'
               WHEN NOT s.audience @> p_audience THEN 'audience_not_covered'
               ELSE 'eligible'
           END
      INTO verdict
      FROM memory_entry_revisions r
      JOIN memory_entries e ON e.id = r.entry_id AND e.runtime_agent_id = r.runtime_agent_id
      LEFT JOIN revision_audience_summary s ON s.revision_id = r.id
     WHERE r.id = p_revision AND r.runtime_agent_id = p_agent;
    RETURN coalesce(verdict, 'foreign_agent');
END;
$$;
