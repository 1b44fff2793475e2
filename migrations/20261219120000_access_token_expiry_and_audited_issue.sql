-- MCP access tokens that end, issued as an audited operator action (issue 52).
--
-- 1. A token may carry an expiry (`mesh-memory mcp token create --expires-in 30d`). An expired
--    token authenticates nothing, exactly like a revoked one (`authenticate_access_token` asks
--    `expires_at > now()` in the statement that records its use), and stays listed.
-- 2. Issuing was a plain INSERT by whoever held the schema owner's URL, and left no trace of who
--    issued a token or why. It is now `mesh_operator_issue_access_token`, a SECURITY DEFINER
--    function executable by `mesh_operator` only, which re-checks the operator's login, checks
--    the binding (the conversation is the agent's, the identity is on its connector and a member
--    of it now), stores the token's hash and records the role (`session_user`), the required
--    reason, the binding and the expiry in `operator_actions`, as a revocation is recorded. The
--    secret never reaches the database: the caller sends its SHA-256 only.

ALTER TABLE mcp_access_tokens
    ADD COLUMN expires_at timestamptz NULL,
    ADD CONSTRAINT mcp_access_tokens_expires_after_issue CHECK (expires_at IS NULL OR expires_at > created_at);

CREATE FUNCTION mesh_operator_issue_access_token(
    p_id uuid,
    p_token_hash bytea,
    p_agent uuid,
    p_conversation uuid,
    p_identity uuid,
    p_label text,
    p_expires_at timestamptz,
    p_reason text
) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    c conversations;
    speaker uuid;
BEGIN
    PERFORM mesh_require_operator_login('mesh_operator');
    IF p_reason IS NULL OR length(btrim(p_reason)) NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'issuing a token needs a reason of 1 to 2000 characters' USING ERRCODE = 'MM007';
    END IF;
    IF p_label IS NULL OR length(p_label) > 200 THEN
        RAISE EXCEPTION 'a token label is at most 200 characters' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_expires_at IS NOT NULL AND p_expires_at <= now() THEN
        RAISE EXCEPTION 'a token must expire in the future' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO c FROM conversations WHERE id = p_conversation AND runtime_agent_id = p_agent;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % is not a conversation of runtime agent %', p_conversation, p_agent
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT ci.actor_id INTO speaker FROM connector_identities ci WHERE ci.id = p_identity AND ci.connector = c.connector;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'identity % is not a % identity', p_identity, c.connector
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM conversation_memberships cm
                     JOIN runtime_agents ra ON ra.id = c.runtime_agent_id
                    WHERE cm.conversation_id = c.id AND cm.actor_id = speaker AND cm.actor_id <> ra.actor_id
                      AND cm.joined_at <= now() AND (cm.left_at IS NULL OR cm.left_at > now())) THEN
        RAISE EXCEPTION 'the speaker is not a member of conversation % now', c.id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO mcp_access_tokens (id, token_hash, runtime_agent_id, conversation_id, identity_id, label, expires_at)
    VALUES (p_id, p_token_hash, c.runtime_agent_id, c.id, p_identity, btrim(p_label), p_expires_at);
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user::text, 'issue_access_token', 'mcp_access_token', p_id, p_reason,
            jsonb_build_object('runtime_agent_id', c.runtime_agent_id, 'conversation_id', c.id,
                               'identity_id', p_identity, 'expires_at', p_expires_at));
END;
$$;

REVOKE ALL ON FUNCTION mesh_operator_issue_access_token(uuid, bytea, uuid, uuid, uuid, text, timestamptz, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mesh_operator_issue_access_token(uuid, bytea, uuid, uuid, uuid, text, timestamptz, text)
    TO mesh_operator;

-- What the function needs beyond what the definers hold already (SELECT on every table, INSERT
-- on operator_actions and its sequence): inserting the token.
GRANT INSERT ON mcp_access_tokens TO mesh_definer;

-- The definer contract of 20261219100000: the search path names this schema, and the function
-- is owned by mesh_definer (a migrating role that is not a superuser needs CREATE on the schema
-- for the moment of the change only).
DO $$
DECLARE
    superuser boolean := (SELECT rolsuper FROM pg_roles WHERE rolname = current_user);
    f regprocedure := 'mesh_operator_issue_access_token(uuid, bytea, uuid, uuid, uuid, text, timestamptz, text)';
BEGIN
    IF NOT superuser THEN
        EXECUTE format('GRANT mesh_definer TO %I', current_user);
        EXECUTE format('GRANT CREATE ON SCHEMA %I TO mesh_definer', current_schema());
    END IF;
    EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
    EXECUTE format('ALTER FUNCTION %s OWNER TO mesh_definer', f);
    IF NOT superuser THEN
        EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM mesh_definer', current_schema());
    END IF;
END;
$$;
