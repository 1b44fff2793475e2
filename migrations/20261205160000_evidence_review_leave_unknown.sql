-- Operator evidence review, its second outcome: an operator who looked at a source of unknown
-- audience evidence and found no proof of who could read it records that, with a note, and the
-- evidence stays unknown (retrieval keeps withholding the revision until proof or a sharing grant).
-- The first outcome, marking a proven audience, is memory_review_source_evidence (migration
-- 20261203200000). Like it, this function is SECURITY DEFINER, executable by mesh_operator only,
-- refuses roles outside mesh_operator and records session_user (the operator's own login role);
-- the note goes to operator_actions, the append-only log of operator decisions. Nothing about the
-- source changes, so the eligibility projection has nothing to refresh.
CREATE FUNCTION memory_keep_source_evidence_unknown(p_source uuid, p_reason text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    src record;
BEGIN
    IF NOT pg_has_role(session_user, 'mesh_operator', 'MEMBER') THEN
        RAISE EXCEPTION 'role % is not a mesh operator', session_user USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_reason IS NULL OR length(btrim(p_reason)) NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'an evidence review needs a reason of 1 to 2000 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Locked like a review that marks the audience, so the two cannot interleave: whichever
    -- commits second sees the other's outcome.
    SELECT id, revision_id, evidence INTO src FROM revision_sources WHERE id = p_source FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no source %', p_source USING ERRCODE = 'no_data_found';
    END IF;
    IF src.evidence <> 'unknown' THEN
        RAISE EXCEPTION 'source % already has known evidence', p_source USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user, 'keep_source_evidence_unknown', 'revision_source', p_source, btrim(p_reason),
            jsonb_build_object('revision_id', src.revision_id));
END;
$$;
REVOKE ALL ON FUNCTION memory_keep_source_evidence_unknown(uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memory_keep_source_evidence_unknown(uuid, text) TO mesh_operator;
