-- Withheld diagnostics: the matches withheld by a restriction or an uncovered audience are found
-- one query term at a time, each term's GIN scan sampled once it has more than 2,000 matches.
--
-- Why: the withheld statement looked for "up to 200 full-text matches that are not eligible" with
-- one bitmap of every archive match of the whole OR-query. A common word ("deploy": 88,000
-- matches at 1M revisions) made that bitmap cost 20-40 ms on every search, although the answer
-- stops at 200. GIN samples a scan (gin_fuzzy_search_limit) only when *every* entry of the scan
-- exceeds the limit, which an OR of a common and a rare word never does; a scan of one term does.
-- So each term is scanned on its own, with the limit set on the function.
--
-- What it changes: for a term with more than 2,000 matches, its withheld matches are counted in
-- a random sample of about 2,000 of them, so the restriction / audience_not_covered counts are
-- lower bounds (they were already capped at 200). The unknown-evidence count, which decides
-- `eligibility_withheld_unknown`, is not counted here and stays exact (its own small index).
-- Eligibility itself is untouched: these rows are only counted, never returned to a caller.

-- The terms of a query, one single-lexeme tsquery each: the lexemes memory_lexical_query ORs
-- (the same expression; tests assert the two agree).
CREATE FUNCTION memory_lexical_terms(p_text text)
RETURNS tsquery[]
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(array_agg(('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''')::tsquery),
                    '{}')
      FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, coalesce(p_text, '')))) AS lexeme
$$;

-- Up to p_limit distinct live current revisions with known evidence that match one of p_terms
-- and are not eligible for (p_conversation, p_audience) by a restriction or an uncovered
-- audience (every match when the audience is unknown, NULL), leaving out p_released (revisions
-- a sharing grant covering the audience releases: the caller passes them, so the grant rule is
-- written once, in the retrieval module). Terms are scanned in order and the scan stops after
-- 2 * p_limit rows, so a duplicate across terms rarely costs a slot.
CREATE FUNCTION memory_withheld_known_matches(p_agent uuid, p_conversation uuid, p_audience uuid[],
                                              p_terms tsquery[], p_released uuid[], p_limit bigint)
RETURNS TABLE (revision_id uuid, restriction memory_restriction, restricted_conversation_id uuid)
LANGUAGE sql STABLE
SET gin_fuzzy_search_limit = 2000
AS $$
    SELECT DISTINCT found.revision_id, found.restriction, found.restricted_conversation_id
      FROM (SELECT m.revision_id, m.restriction, m.restricted_conversation_id
              FROM unnest(p_terms) AS t(term)
             CROSS JOIN LATERAL (
                   SELECT w.revision_id, w.restriction, w.restricted_conversation_id
                     FROM searchable_revisions w
                    WHERE w.runtime_agent_id = p_agent AND w.evidence_known AND w.body_tsv @@ t.term
                      AND (p_audience IS NULL
                           OR NOT ((w.restriction = 'none' OR w.restricted_conversation_id = p_conversation)
                                   AND w.audience @> p_audience))
                      AND w.revision_id <> ALL (coalesce(p_released, '{}'))
                    LIMIT p_limit) AS m
             LIMIT 2 * p_limit) AS found
     LIMIT p_limit
$$;
