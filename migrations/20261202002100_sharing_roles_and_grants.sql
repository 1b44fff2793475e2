-- Database roles and the only two ways a sharing grant can come into existence.
--
-- Roles (cluster-global, NOLOGIN groups; deployments create LOGIN roles that are members):
--   mesh_runtime  - the agent runtime. Reads and writes memory, transcript, turns and pending
--                   sharing requests; it has NO privilege to write sharing_grants,
--                   sharing_grant_audience or operator_actions, and cannot decide requests.
--   mesh_operator - people reviewing sharing requests in the console. Read access, plus EXECUTE on
--                   the operator functions below, which record session_user.
--
-- Grants are written only by SECURITY DEFINER functions:
--   mesh_confirm_sharing_by_source_actor  (runtime may execute) - requires a connector-
--       authenticated inbound message, in a direct conversation, from the revision's source actor,
--       received after the request was made.
--   mesh_operator_approve_sharing / _deny_sharing / _revoke_grant (operators only).
-- A request whose revision is no longer current (amended or forgotten) cannot be approved.
--
-- Tables created by later migrations get the same runtime/operator defaults (ALTER DEFAULT
-- PRIVILEGES below); a later migration adding a privileged table must REVOKE explicitly.

-- Roles are cluster-global while each database migrates separately (tests migrate many databases
-- at once), so creation tolerates a concurrent creator.
DO $$
DECLARE
    wanted text;
BEGIN
    FOREACH wanted IN ARRAY ARRAY['mesh_runtime', 'mesh_operator'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = wanted) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', wanted);
            EXCEPTION
                WHEN duplicate_object OR unique_violation THEN
                    NULL; -- created concurrently by another database's migration
                WHEN insufficient_privilege THEN
                    RAISE EXCEPTION 'role % does not exist and this user may not create it', wanted
                        USING HINT = format('have an administrator run: CREATE ROLE %I NOLOGIN', wanted);
            END;
        END IF;
    END LOOP;
END;
$$;

DO $$
DECLARE
    schema_name text := current_schema();
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO mesh_runtime, mesh_operator', schema_name);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA %I TO mesh_runtime', schema_name);
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO mesh_runtime', schema_name);
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO mesh_operator', schema_name);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE ON TABLES TO mesh_runtime', schema_name);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO mesh_runtime', schema_name);
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO mesh_operator', schema_name);
END;
$$;

-- Nobody but the definer functions writes grants or the operator log; requests change state only
-- through the functions too.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON sharing_grants, sharing_grant_audience, operator_actions
    FROM PUBLIC, mesh_runtime, mesh_operator;
REVOKE UPDATE, DELETE, TRUNCATE ON sharing_requests, sharing_request_audience FROM PUBLIC, mesh_runtime;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON _sqlx_migrations FROM PUBLIC, mesh_runtime;
-- The runtime inserts requests, but never their decision columns: a new request is pending.
REVOKE INSERT ON sharing_requests FROM mesh_runtime;
GRANT INSERT (id, runtime_agent_id, revision_id, requested_in_conversation_id, requested_by_actor_id,
              target_conversation_id, rationale, created_at, expires_at)
    ON sharing_requests TO mesh_runtime;

-- Shared checks of a request about to be decided: pending, unexpired, revision still current.
CREATE FUNCTION mesh_sharing_request_decidable(p_request uuid)
RETURNS sharing_requests
LANGUAGE plpgsql
AS $$
DECLARE
    req sharing_requests;
BEGIN
    SELECT * INTO req FROM sharing_requests WHERE id = p_request FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'sharing request % does not exist', p_request USING ERRCODE = 'MM001';
    END IF;
    IF req.state <> 'pending' THEN
        RAISE EXCEPTION 'sharing request % is already %', p_request, req.state USING ERRCODE = 'MM002';
    END IF;
    IF req.expires_at <= now() THEN
        RAISE EXCEPTION 'sharing request % expired at %', p_request, req.expires_at USING ERRCODE = 'MM003';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM memory_entries e
                    WHERE e.current_revision_id = req.revision_id AND e.state = 'live'
                      AND e.runtime_agent_id = req.runtime_agent_id) THEN
        RAISE EXCEPTION 'revision % of sharing request % is no longer current (amended or forgotten)',
            req.revision_id, p_request USING ERRCODE = 'MM004';
    END IF;
    RETURN req;
END;
$$;

CREATE FUNCTION mesh_grant_from_request(req sharing_requests, p_authority grant_authority, p_actor uuid,
                                        p_message uuid, p_role text, p_reason text)
RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    grant_id uuid := gen_random_uuid();
BEGIN
    INSERT INTO sharing_grants (id, runtime_agent_id, revision_id, request_id, authority, confirmed_by_actor_id,
                                confirmed_by_message_id, approved_by_role, reason)
    VALUES (grant_id, req.runtime_agent_id, req.revision_id, req.id, p_authority, p_actor, p_message, p_role, p_reason);
    INSERT INTO sharing_grant_audience (grant_id, actor_id)
    SELECT grant_id, a.actor_id FROM sharing_request_audience a WHERE a.request_id = req.id;
    RETURN grant_id;
END;
$$;

-- (a) The revision's source actor confirms, through the connector, in a direct conversation.
CREATE FUNCTION mesh_confirm_sharing_by_source_actor(p_request uuid, p_message uuid)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    req        sharing_requests;
    source     uuid;
    msg        record;
    grant_id   uuid;
BEGIN
    req := mesh_sharing_request_decidable(p_request);
    SELECT r.source_actor_id INTO source FROM memory_entry_revisions r WHERE r.id = req.revision_id;
    SELECT m.sender_actor_id, m.direction, m.recorded_at, c.topology, ci.actor_id AS identity_actor
      INTO msg
      FROM messages m
      JOIN conversations c ON c.id = m.conversation_id
      LEFT JOIN connector_identities ci ON ci.id = m.sender_identity_id
     WHERE m.id = p_message AND m.runtime_agent_id = req.runtime_agent_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'confirmation message % does not exist for this runtime agent', p_message
            USING ERRCODE = 'MM005';
    END IF;
    IF msg.direction <> 'inbound' OR msg.identity_actor IS NULL OR msg.identity_actor <> msg.sender_actor_id THEN
        RAISE EXCEPTION 'confirmation message % is not a connector-authenticated inbound message', p_message
            USING ERRCODE = 'MM005';
    END IF;
    IF source IS NULL OR msg.sender_actor_id <> source THEN
        RAISE EXCEPTION 'only the source actor of revision % can confirm its release', req.revision_id
            USING ERRCODE = 'MM006';
    END IF;
    IF msg.topology <> 'direct' THEN
        RAISE EXCEPTION 'a sharing confirmation must be given in a direct conversation' USING ERRCODE = 'MM005';
    END IF;
    IF msg.recorded_at < req.created_at THEN
        RAISE EXCEPTION 'confirmation message % predates sharing request %', p_message, p_request
            USING ERRCODE = 'MM005';
    END IF;
    grant_id := mesh_grant_from_request(req, 'source_actor_confirmation', source, p_message, NULL,
                                        'confirmed by the source actor through an authenticated message');
    UPDATE sharing_requests
       SET state = 'approved', decided_at = now(), decided_by = 'source_actor:' || source::text,
           decision_reason = 'source actor confirmation'
     WHERE id = req.id;
    RETURN grant_id;
END;
$$;

-- (b) An operator approves, denies or revokes; session_user (the operator's own login role) is
-- recorded on the grant and in operator_actions.
CREATE FUNCTION mesh_operator_approve_sharing(p_request uuid, p_reason text)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    req      sharing_requests;
    grant_id uuid;
BEGIN
    IF p_reason IS NULL OR length(btrim(p_reason)) NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'an approval needs a reason of 1 to 2000 characters' USING ERRCODE = 'MM007';
    END IF;
    req := mesh_sharing_request_decidable(p_request);
    grant_id := mesh_grant_from_request(req, 'operator_approval', NULL, NULL, session_user::text, p_reason);
    UPDATE sharing_requests
       SET state = 'approved', decided_at = now(), decided_by = session_user::text, decision_reason = p_reason
     WHERE id = req.id;
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user::text, 'approve_sharing', 'sharing_request', req.id, p_reason,
            jsonb_build_object('grant_id', grant_id, 'revision_id', req.revision_id));
    RETURN grant_id;
END;
$$;

CREATE FUNCTION mesh_operator_deny_sharing(p_request uuid, p_reason text)
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    req sharing_requests;
BEGIN
    IF p_reason IS NULL OR length(btrim(p_reason)) NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'a denial needs a reason of 1 to 2000 characters' USING ERRCODE = 'MM007';
    END IF;
    SELECT * INTO req FROM sharing_requests WHERE id = p_request FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'sharing request % does not exist', p_request USING ERRCODE = 'MM001';
    END IF;
    IF req.state <> 'pending' THEN
        RAISE EXCEPTION 'sharing request % is already %', p_request, req.state USING ERRCODE = 'MM002';
    END IF;
    UPDATE sharing_requests
       SET state = 'denied', decided_at = now(), decided_by = session_user::text, decision_reason = p_reason
     WHERE id = req.id;
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user::text, 'deny_sharing', 'sharing_request', req.id, p_reason,
            jsonb_build_object('revision_id', req.revision_id));
END;
$$;

CREATE FUNCTION mesh_operator_revoke_grant(p_grant uuid, p_reason text)
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
        RAISE EXCEPTION 'sharing grant % was already revoked', p_grant USING ERRCODE = 'MM002';
    END IF;
    UPDATE sharing_grants SET revoked_at = now(), revoked_by = session_user::text WHERE id = g.id;
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user::text, 'revoke_grant', 'sharing_grant', g.id, p_reason,
            jsonb_build_object('revision_id', g.revision_id));
END;
$$;

-- Definer functions get a fixed search_path ending in pg_temp, so no caller-created object can
-- shadow a table they use; then EXECUTE is narrowed to the roles that may call them.
DO $$
DECLARE
    schema_name text := current_schema();
    fn text;
BEGIN
    FOREACH fn IN ARRAY ARRAY[
        'mesh_sharing_request_decidable(uuid)',
        'mesh_grant_from_request(sharing_requests, grant_authority, uuid, uuid, text, text)',
        'mesh_confirm_sharing_by_source_actor(uuid, uuid)',
        'mesh_operator_approve_sharing(uuid, text)',
        'mesh_operator_deny_sharing(uuid, text)',
        'mesh_operator_revoke_grant(uuid, text)'
    ] LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', fn, schema_name);
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
    END LOOP;
END;
$$;

GRANT EXECUTE ON FUNCTION mesh_confirm_sharing_by_source_actor(uuid, uuid) TO mesh_runtime;
GRANT EXECUTE ON FUNCTION mesh_operator_approve_sharing(uuid, text) TO mesh_operator;
GRANT EXECUTE ON FUNCTION mesh_operator_deny_sharing(uuid, text) TO mesh_operator;
GRANT EXECUTE ON FUNCTION mesh_operator_revoke_grant(uuid, text) TO mesh_operator;
