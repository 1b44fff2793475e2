-- One meaning per SQLSTATE code (the catalogue is src/sqlstate.rs, `ProjectSqlState`).
--
-- Until here MM002 meant two things: "this sharing request is already decided" (raised by
-- mesh_sharing_request_decidable and mesh_operator_deny_sharing) and "this grant or access token
-- was already revoked" (mesh_operator_revoke_grant, mesh_operator_revoke_access_token). A caller
-- matching the code could not tell a decided request from a revoked grant. The revocations now
-- raise MM010; MM002 keeps its first meaning. Nothing else in either function changes.
CREATE OR REPLACE FUNCTION mesh_operator_revoke_access_token(p_token uuid, p_reason text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    t mcp_access_tokens;
BEGIN
    IF p_reason IS NULL OR length(btrim(p_reason)) NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'a revocation needs a reason of 1 to 2000 characters' USING ERRCODE = 'MM007';
    END IF;
    SELECT * INTO t FROM mcp_access_tokens WHERE id = p_token FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'access token % does not exist', p_token USING ERRCODE = 'MM009';
    END IF;
    IF t.revoked_at IS NOT NULL THEN
        RAISE EXCEPTION 'access token % was already revoked', p_token USING ERRCODE = 'MM010';
    END IF;
    UPDATE mcp_access_tokens SET revoked_at = now() WHERE id = t.id;
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user::text, 'revoke_access_token', 'mcp_access_token', t.id, p_reason,
            jsonb_build_object('conversation_id', t.conversation_id, 'identity_id', t.identity_id));
END;
$$;

CREATE OR REPLACE FUNCTION mesh_operator_revoke_grant(p_grant uuid, p_reason text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    g sharing_grants;
BEGIN
    IF p_reason IS NULL OR length(btrim(p_reason)) NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'a revocation needs a reason of 1 to 2000 characters' USING ERRCODE = 'MM007';
    END IF;
    SELECT * INTO g FROM sharing_grants WHERE id = p_grant FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'sharing grant % does not exist', p_grant USING ERRCODE = 'MM008';
    END IF;
    IF g.revoked_at IS NOT NULL THEN
        RAISE EXCEPTION 'sharing grant % was already revoked', p_grant USING ERRCODE = 'MM010';
    END IF;
    UPDATE sharing_grants SET revoked_at = now(), revoked_by = session_user::text WHERE id = g.id;
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user::text, 'revoke_grant', 'sharing_grant', g.id, p_reason,
            jsonb_build_object('revision_id', g.revision_id));
END;
$$;

-- CREATE OR REPLACE resets a function's SET clauses (its privileges stay): pin the search_path
-- again, as every SECURITY DEFINER function does (tests/schema.rs checks the catalogue).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION mesh_operator_revoke_access_token(uuid, text) SET search_path = %I, pg_temp',
                   current_schema());
    EXECUTE format('ALTER FUNCTION mesh_operator_revoke_grant(uuid, text) SET search_path = %I, pg_temp',
                   current_schema());
END;
$$;
