-- The audience classes that cover a destination audience, found through their GIN index whatever
-- plan the calling statement gets.
--
-- Why: every connection now plans prepared statements generically (plan_cache_mode =
-- force_generic_plan, see src/database.rs). A generic plan cannot estimate `members @> $3`, and
-- for the eligible-set statement it chose a sequential scan of audience_classes: 1,871 classes at
-- 1M revisions, 0.4-0.8 ms per search where the GIN index answers in under 0.1 ms, and growing
-- with every distinct audience. A function with its own planner setting keeps the index-driven
-- lookup inside every statement that reads eligible rows by class (eligible_class_rows! in
-- src/privacy/eligibility.rs). The predicate is the one that statement had: same agent, a known
-- audience, members containing every destination reader.
CREATE FUNCTION memory_covering_audience_classes(p_agent uuid, p_audience uuid[])
RETURNS TABLE (id bigint)
LANGUAGE sql STABLE
ROWS 8
SET enable_seqscan = off
AS $$
    SELECT c.id FROM audience_classes c
     WHERE c.runtime_agent_id = p_agent AND p_audience IS NOT NULL AND c.members @> p_audience
$$;
