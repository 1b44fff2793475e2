-- A source's audience evidence lives on the source row, as one sorted array of actor ids,
-- instead of one revision_source_audience row per actor.
--
-- Why: at a million revisions, a remember citing a message in a 53-member conversation wrote 53
-- audience rows, each with a primary-key insert and two foreign-key checks (~0.6 ms), and then
-- read them back to refresh the revision's evidence summary: most of the database time of a
-- remember (BENCHMARKS.md, "the write path"). An amend copied every earlier source's rows again.
-- Now a source is one row whichever the audience size, and the summary reads its arrays.
--
-- What the rows mean is unchanged:
--   evidence = 'known'   <=> audience IS NOT NULL (the actors who could read the source, sorted,
--                            without duplicates; possibly empty);
--   evidence = 'unknown' <=> audience IS NULL (withheld from retrieval).
-- The array is only ever computed in SQL from structured rows (conversation memberships, the
-- intersection of a parent revision's sources, a repair proof, an operator review that checks its
-- actors exist), as the audience rows were. It is also stricter than the table it replaces: the
-- runtime role could INSERT audience rows for a source written earlier (it had no UPDATE or DELETE
-- only), and it has no UPDATE on revision_sources, so a source's audience is now fixed once
-- written; only the schema owner's repair and review functions turn unknown evidence into known.

-- The audience trigger goes first: the backfill below must not refresh anything.
DROP TRIGGER revision_source_audience_summary_insert ON revision_source_audience;
DROP TRIGGER revision_source_audience_summary_delete ON revision_source_audience;
DROP FUNCTION memory_summary_after_audience();

ALTER TABLE revision_sources ADD COLUMN audience uuid[] NULL;

-- Backfill: the same actors, so every revision's summary (and so the projection) is unchanged and
-- the update trigger has nothing to do; it is disabled for the copy rather than run per row batch.
ALTER TABLE revision_sources DISABLE TRIGGER revision_sources_summary_update;
UPDATE revision_sources s
   SET audience = coalesce(
           (SELECT array_agg(a.actor_id ORDER BY a.actor_id) FROM revision_source_audience a WHERE a.source_id = s.id),
           '{}')
 WHERE s.evidence = 'known';
ALTER TABLE revision_sources ENABLE TRIGGER revision_sources_summary_update;

ALTER TABLE revision_sources
    ADD CONSTRAINT revision_sources_audience_iff_known CHECK ((evidence = 'known') = (audience IS NOT NULL));

COMMENT ON COLUMN revision_sources.audience IS
    'The actors who could read this source, sorted and distinct; NULL exactly when evidence is unknown.';

DROP TABLE revision_source_audience;

-- The summary: the intersection of the sources' arrays (same statement shape as before, with the
-- arrays unnested where the audience rows were joined).
CREATE OR REPLACE FUNCTION memory_refresh_audience_summary(p_revisions uuid[])
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
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
          CROSS JOIN LATERAL unnest(s.audience) AS a(actor_id)
         GROUP BY s.revision_id, a.actor_id
    ), intersection AS (
        SELECT p.revision_id, array_agg(p.actor_id ORDER BY p.actor_id) AS audience
          FROM per_actor p JOIN src ON src.revision_id = p.revision_id AND p.sources = src.sources
         GROUP BY p.revision_id
    )
    INSERT INTO revision_audience_summary AS old (revision_id, source_count, evidence_known, audience)
    SELECT revs.id, coalesce(src.sources, 0), coalesce(src.sources > 0 AND src.known, false), coalesce(i.audience, '{}')
      FROM revs
      LEFT JOIN src ON src.revision_id = revs.id
      LEFT JOIN intersection i ON i.revision_id = revs.id
    ON CONFLICT (revision_id) DO UPDATE
       SET source_count = EXCLUDED.source_count, evidence_known = EXCLUDED.evidence_known,
           audience = EXCLUDED.audience
     WHERE (old.source_count, old.evidence_known, old.audience)
           IS DISTINCT FROM (EXCLUDED.source_count, EXCLUDED.evidence_known, EXCLUDED.audience);
END;
$$;
REVOKE ALL ON FUNCTION memory_refresh_audience_summary(uuid[]) FROM PUBLIC;

-- A source and its evidence are one row now, so the insert trigger refreshes every revision with a
-- new source (migration 20261203000200 had left those with audience rows to the audience trigger).
DROP TRIGGER revision_sources_summary_insert ON revision_sources;
DROP FUNCTION memory_summary_after_source_insert();
CREATE TRIGGER revision_sources_summary_insert
    AFTER INSERT ON revision_sources REFERENCING NEW TABLE AS changed_sources
    FOR EACH STATEMENT EXECUTE FUNCTION memory_summary_after_sources();

-- The explain predicate's rule 8: D must be contained in every source's known audience.
CREATE OR REPLACE FUNCTION memory_eligibility_verdict(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
RETURNS memory_eligibility
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    entry_row record;
    failing   uuid;
BEGIN
    IF p_audience IS NULL THEN
        RETURN ROW('audience_unknown', NULL)::memory_eligibility;
    END IF;

    SELECT e.state, e.current_revision_id, e.restriction, e.restricted_conversation_id
      INTO entry_row
      FROM memory_entry_revisions r
      JOIN memory_entries e ON e.id = r.entry_id AND e.runtime_agent_id = r.runtime_agent_id
     WHERE r.id = p_revision AND r.runtime_agent_id = p_agent;
    IF NOT FOUND THEN
        RETURN ROW('foreign_agent', NULL)::memory_eligibility;
    END IF;
    IF entry_row.state <> 'live' THEN
        RETURN ROW('forgotten', NULL)::memory_eligibility;
    END IF;
    IF entry_row.current_revision_id <> p_revision THEN
        RETURN ROW('not_current', NULL)::memory_eligibility;
    END IF;
    IF entry_row.restriction = 'conversation_only'
       AND entry_row.restricted_conversation_id IS DISTINCT FROM p_conversation THEN
        RETURN ROW('restriction', NULL)::memory_eligibility;
    END IF;

    -- A grant releases exactly this revision to its audience; it must cover all of D.
    IF EXISTS (
        SELECT 1 FROM sharing_grants g
         WHERE g.revision_id = p_revision AND g.runtime_agent_id = p_agent AND g.revoked_at IS NULL
           AND NOT EXISTS (
               SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                WHERE NOT EXISTS (SELECT 1 FROM sharing_grant_audience ga
                                   WHERE ga.grant_id = g.id AND ga.actor_id = d.actor_id))
    ) THEN
        RETURN ROW('eligible', NULL)::memory_eligibility;
    END IF;

    IF NOT EXISTS (SELECT 1 FROM revision_sources s WHERE s.revision_id = p_revision) THEN
        RETURN ROW('no_lineage', NULL)::memory_eligibility;
    END IF;

    SELECT s.id INTO failing
      FROM revision_sources s
     WHERE s.revision_id = p_revision AND s.evidence = 'unknown'
     ORDER BY s.created_at, s.id
     LIMIT 1;
    IF failing IS NOT NULL THEN
        RETURN ROW('unknown_evidence', failing)::memory_eligibility;
    END IF;

    SELECT s.id INTO failing
      FROM revision_sources s
     WHERE s.revision_id = p_revision AND NOT (p_audience <@ s.audience)
     ORDER BY s.created_at, s.id
     LIMIT 1;
    IF failing IS NOT NULL THEN
        RETURN ROW('audience_not_covered', failing)::memory_eligibility;
    END IF;

    RETURN ROW('eligible', NULL)::memory_eligibility;
END;
$$;

-- The audience a source naming revision p inherits: the intersection of the audiences of p's
-- sources, sorted (lineage::insert_revision_source and the repair below; the caller has checked
-- that p has sources and that all of them are known).
CREATE FUNCTION memory_source_audience_intersection(p_revision uuid)
RETURNS uuid[]
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(array_agg(x.actor_id ORDER BY x.actor_id), '{}')
      FROM (SELECT a.actor_id
              FROM revision_sources s CROSS JOIN LATERAL unnest(s.audience) AS a(actor_id)
             WHERE s.revision_id = p_revision
             GROUP BY a.actor_id
            HAVING count(*) = (SELECT count(*) FROM revision_sources s2 WHERE s2.revision_id = p_revision)) x
$$;

-- Repair: the same rules (migration 20261202005000), writing the proven audience onto the source.
CREATE OR REPLACE FUNCTION memory_repair_audience_evidence(p_reason text)
RETURNS TABLE (source_id uuid, revision_id uuid, rule text, audience uuid[])
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    candidate record;
    proof     record;
    changed   integer;
    derived   uuid[];
BEGIN
    IF p_reason IS NULL OR length(btrim(p_reason)) = 0 THEN
        RAISE EXCEPTION 'a repair needs a reason' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    FOR candidate IN
        SELECT s.id, s.revision_id FROM revision_sources s
         WHERE s.evidence = 'unknown' AND s.message_id IS NOT NULL
         ORDER BY s.created_at, s.id
         FOR UPDATE OF s
    LOOP
        SELECT * INTO proof FROM memory_direct_proof(candidate.id);
        CONTINUE WHEN NOT FOUND;
        IF proof.rule = 'later_direct_observation' THEN
            UPDATE conversations c SET topology = 'direct'
              FROM messages m JOIN revision_sources s ON s.message_id = m.id
             WHERE s.id = candidate.id AND c.id = m.conversation_id AND c.topology = 'unknown';
        END IF;
        UPDATE revision_sources
           SET evidence = 'known', evidence_basis = 'repaired: ' || proof.rule, audience = ARRAY[proof.counterpart]
         WHERE id = candidate.id;
        INSERT INTO evidence_repairs (source_id, revision_id, rule, audience, reason)
        VALUES (candidate.id, candidate.revision_id, proof.rule, ARRAY[proof.counterpart], p_reason);
        source_id := candidate.id; revision_id := candidate.revision_id;
        rule := proof.rule; audience := ARRAY[proof.counterpart];
        RETURN NEXT;
    END LOOP;

    -- Revision sources whose referenced revision is now fully known, until a fixpoint.
    LOOP
        changed := 0;
        FOR candidate IN
            SELECT s.id, s.revision_id, s.parent_revision_id FROM revision_sources s
             WHERE s.evidence = 'unknown' AND s.parent_revision_id IS NOT NULL
               AND EXISTS (SELECT 1 FROM revision_sources p WHERE p.revision_id = s.parent_revision_id)
               AND NOT EXISTS (SELECT 1 FROM revision_sources p
                                WHERE p.revision_id = s.parent_revision_id AND p.evidence = 'unknown')
             ORDER BY s.created_at, s.id
             FOR UPDATE OF s
        LOOP
            derived := memory_source_audience_intersection(candidate.parent_revision_id);
            UPDATE revision_sources
               SET evidence = 'known', evidence_basis = 'repaired: derived_from_known_revision', audience = derived
             WHERE id = candidate.id;
            INSERT INTO evidence_repairs (source_id, revision_id, rule, audience, reason)
            VALUES (candidate.id, candidate.revision_id, 'derived_from_known_revision', derived, p_reason);
            source_id := candidate.id; revision_id := candidate.revision_id; rule := 'derived_from_known_revision';
            audience := derived;
            changed := changed + 1;
            RETURN NEXT;
        END LOOP;
        EXIT WHEN changed = 0;
    END LOOP;
END;
$$;
REVOKE ALL ON FUNCTION memory_repair_audience_evidence(text) FROM PUBLIC;

-- Operator review: as before, and an actor that does not exist is refused (the audience rows'
-- foreign key used to refuse it) with the same error code.
CREATE OR REPLACE FUNCTION memory_review_source_evidence(p_source uuid, p_audience uuid[], p_reason text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    src     record;
    missing uuid;
BEGIN
    IF NOT pg_has_role(session_user, 'mesh_operator', 'MEMBER') THEN
        RAISE EXCEPTION 'role % is not a mesh operator', session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_reason IS NULL OR length(btrim(p_reason)) = 0 THEN
        RAISE EXCEPTION 'an evidence review needs a reason' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_audience IS NULL OR cardinality(p_audience) = 0 THEN
        RAISE EXCEPTION 'an evidence review names at least one actor' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT d.actor_id INTO missing FROM unnest(p_audience) AS d(actor_id)
     WHERE d.actor_id IS NULL OR NOT EXISTS (SELECT 1 FROM actors a WHERE a.id = d.actor_id)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'no actor %', missing USING ERRCODE = 'foreign_key_violation';
    END IF;
    SELECT id, revision_id, evidence INTO src FROM revision_sources WHERE id = p_source FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no source %', p_source USING ERRCODE = 'no_data_found';
    END IF;
    IF src.evidence <> 'unknown' THEN
        RAISE EXCEPTION 'source % already has known evidence', p_source USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE revision_sources
       SET evidence = 'known', evidence_basis = 'operator review by ' || session_user,
           audience = ARRAY(SELECT DISTINCT a FROM unnest(p_audience) AS a ORDER BY a)
     WHERE id = p_source;
    INSERT INTO evidence_repairs (source_id, revision_id, rule, audience, reason, repaired_by)
    VALUES (p_source, src.revision_id, 'operator_review', p_audience, p_reason, session_user);
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user, 'review_source_evidence', 'revision_source', p_source, p_reason,
            jsonb_build_object('revision_id', src.revision_id, 'audience', to_jsonb(p_audience)));
END;
$$;
REVOKE ALL ON FUNCTION memory_review_source_evidence(uuid, uuid[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memory_review_source_evidence(uuid, uuid[], text) TO mesh_operator;
