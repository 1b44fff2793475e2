-- Operators revoke MCP access tokens from the console under their own login role: a SECURITY
-- DEFINER function (the operator role has no UPDATE on the table) that records session_user and
-- the reason in operator_actions, as grant revocations are recorded.
CREATE FUNCTION mesh_operator_revoke_access_token(p_token uuid, p_reason text)
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
        RAISE EXCEPTION 'access token % was already revoked', p_token USING ERRCODE = 'MM002';
    END IF;
    UPDATE mcp_access_tokens SET revoked_at = now() WHERE id = t.id;
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user::text, 'revoke_access_token', 'mcp_access_token', t.id, p_reason,
            jsonb_build_object('conversation_id', t.conversation_id, 'identity_id', t.identity_id));
END;
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION mesh_operator_revoke_access_token(uuid, text) SET search_path = %I, pg_temp',
                   current_schema());
END;
$$;
REVOKE ALL ON FUNCTION mesh_operator_revoke_access_token(uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mesh_operator_revoke_access_token(uuid, text) TO mesh_operator;
