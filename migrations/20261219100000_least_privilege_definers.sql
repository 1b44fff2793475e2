-- Authority that cannot be turned against the store (issue 52).
--
-- 1. Every SECURITY DEFINER function is owned by `mesh_definer`, a NOLOGIN role that is not a
--    superuser, creates nothing, belongs to no role and holds only the table privileges the
--    definers need (below). Before this migration they ran as the migrating role (a superuser on
--    the embedded cluster), so anything a definer resolved in a schema the caller controls ran
--    with a superuser's rights: a member of `mesh_eraser` made itself superuser through a trigger
--    on its own `pg_temp.erasing`, which `mesh_operator_erase` reused.
-- 2. No definer touches a temporary object: `mesh_operator_erase` keeps its scope in an array of
--    `memory_erasure_object`, and every definer pins `search_path = pg_catalog, <schema>, pg_temp`
--    (pg_temp last: PostgreSQL searches the temporary schema first for relations unless it is
--    named, and never for functions or operators).
-- 3. The product's roles lose TEMPORARY on the database (none of them uses a temporary table):
--    `database::migrate` revokes it from PUBLIC on every migrate, since CREATE DATABASE from a
--    template does not copy a database's privileges.
-- 4. Every operator action re-checks the login in its own transaction
--    (`mesh_require_operator_login`): a pooled connection of a role whose password expired, that
--    was set NOLOGIN, or that left the group, can no longer act.
-- 5. Erasure reaches every copy it promises: the messages its revisions were learned from (whole
--    body; kind `source`), replies stored after an earlier erasure of the same scope, grants'
--    reasons; it refuses a reason that quotes the text it erases (MM013); it redacts audit rows
--    only of its own runtime agents and only where an erased text of 12 or more characters occurs
--    inside a human-written reason (never a whole short value elsewhere, never ids in details);
--    and it is set-based: each turn record is redacted with the few texts it is linked to, not
--    every text of the erasure. It holds the erasure lock (advisory key 2060261208) exclusively,
--    which every delivery holds shared from its recheck to its record, so a reply is either
--    withheld or stored before the erasure reads its scope.

-- The owner role. Cluster-global while each database migrates on its own, so creation tolerates
-- a concurrent creator (as in 20261202002100). A pre-existing role with any power beyond that of
-- an ordinary NOLOGIN role is refused rather than trusted.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_definer') THEN
        BEGIN
            CREATE ROLE mesh_definer NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL;
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'role mesh_definer does not exist and this user may not create it'
                    USING HINT = 'have an administrator run: CREATE ROLE mesh_definer NOLOGIN NOINHERIT';
        END;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_roles
                WHERE rolname = 'mesh_definer'
                  AND (rolsuper OR rolcanlogin OR rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls))
       OR EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = 'mesh_definer') THEN
        RAISE EXCEPTION 'role mesh_definer exists with more power than the functions it owns may have'
            USING HINT = 'make it NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS and a member of no role';
    END IF;
END;
$$;

-- What the definers need, and nothing else: they read the store (the policy, the projection and
-- erasure read across it) and write exactly these tables.
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO mesh_definer', current_schema());
    EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO mesh_definer', current_schema());
END;
$$;
-- The projection, its audience summary and classes, and the lexical statistics (the write
-- triggers, the fold, the merge of pending lists, the truncate trigger).
GRANT INSERT, UPDATE, DELETE ON searchable_revisions, revision_audience_summary, lexical_term_statistics TO mesh_definer;
GRANT INSERT, UPDATE ON lexical_corpus_statistics TO mesh_definer;
GRANT INSERT ON audience_classes TO mesh_definer;
GRANT INSERT, DELETE ON lexical_statistics_pending TO mesh_definer;
GRANT TRUNCATE ON lexical_corpus_statistics, lexical_term_statistics, lexical_statistics_pending TO mesh_definer;
GRANT USAGE ON SEQUENCE audience_classes_id_seq TO mesh_definer;
-- Sharing decisions and confirmations, token revocation, evidence review, the operator log.
GRANT UPDATE ON sharing_requests, revision_sources, mcp_access_tokens TO mesh_definer;
GRANT INSERT, UPDATE ON sharing_grants, operator_actions, evidence_repairs TO mesh_definer;
GRANT INSERT ON sharing_confirmations, sharing_grant_audience TO mesh_definer;
GRANT USAGE ON SEQUENCE operator_actions_id_seq, evidence_repairs_id_seq TO mesh_definer;
-- Erasure: its records, the text it replaces, the indexes it empties.
GRANT INSERT ON erasures, erased_revisions, erased_messages, erasure_fingerprints TO mesh_definer;
GRANT UPDATE ON memory_entries, memory_entry_revisions, messages, agent_turns TO mesh_definer;
GRANT INSERT, UPDATE ON index_outbox TO mesh_definer;
GRANT USAGE ON SEQUENCE index_outbox_id_seq TO mesh_definer;
GRANT DELETE ON revision_embeddings TO mesh_definer;
-- The internal functions the definers call (EXECUTE was revoked from PUBLIC on these).
GRANT EXECUTE ON FUNCTION memory_refresh_searchable(uuid[]), memory_refresh_audience_summary(uuid[]),
    mesh_sharing_request_decidable(uuid) TO mesh_definer;
GRANT EXECUTE ON FUNCTION mesh_grant_from_request(sharing_requests, grant_authority, uuid, uuid, text, text) TO mesh_definer;

-- Merging the full-text pending lists (`gin_clean_pending_list`) needs the index's owner, which is
-- the table's owner: no least-privilege role can do it. So the merge is no longer a definer: it
-- runs as its caller and merges only when the caller owns the tables (the schema owner, as the
-- embedded cluster's runtime connects); for any other caller it merges nothing and returns 0, and
-- the lists are merged by the insert that finds one full, or by autovacuum, as PostgreSQL does
-- without help. Nothing else ever needed the owner's rights.
CREATE OR REPLACE FUNCTION memory_merge_text_pending_lists(p_revision_text boolean) RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY INVOKER
    SET search_path = pg_catalog, public, pg_temp
    AS $$
    SELECT CASE WHEN NOT pg_has_role((SELECT c.relowner FROM pg_class c
                                       WHERE c.oid = 'public.searchable_revisions'::regclass), 'USAGE') THEN 0
                ELSE gin_clean_pending_list('public.searchable_revisions_text_audience'::regclass)
                   + gin_clean_pending_list('public.searchable_revisions_unknown_text'::regclass)
                   + CASE WHEN p_revision_text
                          THEN gin_clean_pending_list('public.memory_entry_revisions_tsv'::regclass)
                          ELSE 0 END
           END
$$;

-- The one check of an operator's login, made by every operator action in its own transaction:
-- the session's login role (`session_user`, never the definer) may still log in, its password
-- has not expired, and it is still a member of `p_group`. PostgreSQL checks a login's password
-- and LOGIN only when it connects; without this, a pooled connection outlives a revoked account.
CREATE FUNCTION mesh_require_operator_login(p_group text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog', 'pg_temp'
    AS $$
DECLARE
    login record;
BEGIN
    SELECT r.rolcanlogin, r.rolvaliduntil INTO login FROM pg_catalog.pg_roles r WHERE r.rolname = session_user;
    IF NOT FOUND OR NOT login.rolcanlogin THEN
        RAISE EXCEPTION 'role % may no longer log in; this session can no longer act', session_user
            USING ERRCODE = 'MM014', HINT = 'sign in again with a role that has LOGIN';
    END IF;
    IF login.rolvaliduntil IS NOT NULL AND login.rolvaliduntil <= now() THEN
        RAISE EXCEPTION 'the password of role % expired on %; this session can no longer act', session_user,
            login.rolvaliduntil
            USING ERRCODE = 'MM014', HINT = 'ask an administrator to renew the password, then sign in again';
    END IF;
    IF NOT pg_catalog.pg_has_role(session_user, p_group, 'MEMBER') THEN
        RAISE EXCEPTION 'role % is no longer a member of %', session_user, p_group
            USING ERRCODE = 'insufficient_privilege';
    END IF;
END;
$$;

-- The operator actions, each now re-checking the login first (bodies otherwise as they were).
CREATE OR REPLACE FUNCTION mesh_operator_approve_sharing(p_request uuid, p_reason text) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    req      sharing_requests;
    grant_id uuid;
BEGIN
    PERFORM mesh_require_operator_login('mesh_operator');
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

CREATE OR REPLACE FUNCTION mesh_operator_deny_sharing(p_request uuid, p_reason text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    req sharing_requests;
BEGIN
    PERFORM mesh_require_operator_login('mesh_operator');
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

CREATE OR REPLACE FUNCTION mesh_operator_revoke_access_token(p_token uuid, p_reason text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    t mcp_access_tokens;
BEGIN
    PERFORM mesh_require_operator_login('mesh_operator');
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

CREATE OR REPLACE FUNCTION mesh_operator_revoke_grant(p_grant uuid, p_reason text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    g sharing_grants;
BEGIN
    PERFORM mesh_require_operator_login('mesh_operator');
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

CREATE OR REPLACE FUNCTION memory_keep_source_evidence_unknown(p_source uuid, p_reason text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    src record;
BEGIN
    PERFORM mesh_require_operator_login('mesh_operator');
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

CREATE OR REPLACE FUNCTION memory_review_source_evidence(p_source uuid, p_audience uuid[], p_reason text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    src     record;
    missing uuid;
BEGIN
    PERFORM mesh_require_operator_login('mesh_operator');
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

-- One object an erasure reaches (the rows of memory_erasure_scope), so the erasure can hold its
-- scope in a variable instead of a temporary table.
CREATE TYPE memory_erasure_object AS (kind text, id uuid, body text);

-- What an erasure of `p_scope` / `p_target` (limited to runtime agent `p_agent`, or all with NULL)
-- reaches, one row per object, with the text it removes:
--   revision - a revision erased (every revision of the entry; or about / told by the person);
--   message  - a message the person sent (person scope);
--   source   - a message a reached revision was learned from (erased whole: "remember my door
--              code is ..." holds the very text), including an MCP call's recorded message;
--   reply    - the delivered reply of a turn that used a reached revision or answered a reached
--              message (a reply may paraphrase what it was built from, so it goes whole);
--   turn     - a turn record whose tool calls, results and claims are redacted (no text here);
--   entry    - a live entry retired because its current revision is erased (no text);
--   sharing_request - a request for an erased revision (its rationale goes; no text here).
-- Already-erased objects are left out, so a second erasure of the same scope reaches nothing; but
-- turns are found through erased objects too, so a reply stored after an earlier erasure of the
-- scope is still reached.
CREATE OR REPLACE FUNCTION memory_erasure_scope(p_scope text, p_target uuid, p_agent uuid)
    RETURNS TABLE (kind text, id uuid, body text)
    LANGUAGE sql STABLE
    AS $$
    WITH revisions AS (
        SELECT r.id, r.entry_id, r.body FROM memory_entry_revisions r
         WHERE p_scope = 'entry' AND r.entry_id = p_target
           AND (p_agent IS NULL OR r.runtime_agent_id = p_agent)
        UNION
        SELECT r.id, r.entry_id, r.body FROM memory_entry_revisions r
         WHERE p_scope = 'person' AND (r.subject_actor_id = p_target OR r.source_actor_id = p_target)
           AND (p_agent IS NULL OR r.runtime_agent_id = p_agent)
    ), erasing AS (
        SELECT r.* FROM revisions r WHERE NOT EXISTS (SELECT 1 FROM erased_revisions x WHERE x.revision_id = r.id)
    ), sent AS (
        SELECT m.id, m.body FROM messages m
         WHERE p_scope = 'person' AND m.sender_actor_id = p_target
           AND (p_agent IS NULL OR m.runtime_agent_id = p_agent)
    ), learned_from AS (
        SELECT DISTINCT m.id, m.body FROM revision_sources s
          JOIN revisions r ON r.id = s.revision_id
          JOIN messages m ON m.id = s.message_id
         WHERE s.message_id IS NOT NULL AND m.id NOT IN (SELECT sent.id FROM sent)
    ), reached_messages AS (
        SELECT sent.id FROM sent UNION ALL SELECT learned_from.id FROM learned_from
    ), turns AS (
        SELECT t.id, t.outbound_message_id FROM agent_turns t
         WHERE t.used_revision_ids && ARRAY(SELECT r.id FROM revisions r)
            OR t.inbound_message_id IN (SELECT reached_messages.id FROM reached_messages)
    ), replies AS (
        SELECT DISTINCT m.id, m.body FROM turns t JOIN messages m ON m.id = t.outbound_message_id
         WHERE m.id NOT IN (SELECT reached_messages.id FROM reached_messages)
           AND NOT EXISTS (SELECT 1 FROM erased_messages x WHERE x.message_id = m.id)
    ), unerased_messages AS (
        SELECT u.id FROM reached_messages u
         WHERE NOT EXISTS (SELECT 1 FROM erased_messages x WHERE x.message_id = u.id)
    ), turns_reached AS (
        -- A turn with something left to redact: linked to a revision or message erased now, or
        -- holding a reply not erased yet.
        SELECT t.id FROM turns t JOIN agent_turns a ON a.id = t.id
         WHERE a.used_revision_ids && ARRAY(SELECT e.id FROM erasing e)
            OR a.inbound_message_id IN (SELECT u.id FROM unerased_messages u)
            OR t.outbound_message_id IN (SELECT replies.id FROM replies)
    )
    SELECT 'revision', e.id, e.body FROM erasing e
    UNION ALL
    SELECT 'message', s.id, s.body FROM sent s
     WHERE NOT EXISTS (SELECT 1 FROM erased_messages x WHERE x.message_id = s.id)
    UNION ALL
    SELECT 'source', l.id, l.body FROM learned_from l
     WHERE NOT EXISTS (SELECT 1 FROM erased_messages x WHERE x.message_id = l.id)
    UNION ALL
    SELECT 'reply', r.id, r.body FROM replies r
    UNION ALL
    SELECT 'turn', t.id, NULL FROM turns_reached t
    UNION ALL
    SELECT 'entry', en.id, NULL FROM memory_entries en
     WHERE en.state = 'live' AND en.current_revision_id IN (SELECT e.id FROM erasing e)
    UNION ALL
    SELECT 'sharing_request', q.id, NULL FROM sharing_requests q WHERE q.revision_id IN (SELECT e.id FROM erasing e)
$$;

-- `p_text` with every occurrence of an erased text of 12 or more characters replaced by the
-- marker: how an erasure redacts what people wrote elsewhere (a reason, a rationale) without
-- touching a value that merely equals a short erased message ("approved", "ok").
CREATE FUNCTION memory_redact_occurrences(p_text text, p_texts text[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    erased text;
    result text := p_text;
BEGIN
    IF result IS NULL THEN
        RETURN NULL;
    END IF;
    FOREACH erased IN ARRAY coalesce(p_texts, '{}') LOOP
        CONTINUE WHEN erased IS NULL OR length(erased) < 12 OR strpos(result, erased) = 0;
        result := replace(result, erased, memory_erasure_marker());
    END LOOP;
    RETURN result;
END;
$$;

-- The runtime agent an operator action concerns (through its target), or NULL when it concerns
-- every agent: an erasure limited to one agent redacts only that agent's audit rows.
CREATE FUNCTION memory_operator_action_agent(p_kind text, p_target uuid, p_details jsonb) RETURNS uuid
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE p_kind
               WHEN 'sharing_request' THEN (SELECT q.runtime_agent_id FROM sharing_requests q WHERE q.id = p_target)
               WHEN 'sharing_grant' THEN (SELECT g.runtime_agent_id FROM sharing_grants g WHERE g.id = p_target)
               WHEN 'revision_source' THEN (SELECT s.runtime_agent_id FROM revision_sources s WHERE s.id = p_target)
               WHEN 'mcp_access_token' THEN (SELECT t.runtime_agent_id FROM mcp_access_tokens t WHERE t.id = p_target)
               WHEN 'entry' THEN (SELECT e.runtime_agent_id FROM memory_entries e WHERE e.id = p_target)
               ELSE (p_details ->> 'runtime_agent_id')::uuid
           END
$$;

-- The erasure. The caller (the operator layer, under the operator's own login role) previews the
-- scope, fingerprints its text and passes the exact ids it showed: the function refuses (MM011)
-- when the scope no longer is what was previewed, so nothing is erased that the operator did not
-- see, and nothing previewed is left. One transaction: it commits whole or not at all.
CREATE OR REPLACE FUNCTION mesh_operator_erase(p_erasure uuid, p_scope text, p_target uuid, p_agent uuid, p_reason text,
                                               p_previewed uuid[], p_fingerprints bytea[]) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    scope memory_erasure_object[];
    scope_ids uuid[];
    revisions uuid[];
    messages_gone uuid[];
    turns uuid[];
    entries uuid[];
    requests uuid[];
    texts text[];
    long_texts text[];
    counts jsonb;
    agents uuid[];
BEGIN
    PERFORM mesh_require_operator_login('mesh_eraser');
    IF p_reason IS NULL OR length(btrim(p_reason)) NOT BETWEEN 1 AND 2000 THEN
        RAISE EXCEPTION 'an erasure needs a reason of 1 to 2000 characters (for example a ticket reference)'
            USING ERRCODE = 'MM007';
    END IF;
    IF p_scope IS NULL OR p_scope NOT IN ('entry', 'person') THEN
        RAISE EXCEPTION 'erasure scope must be entry or person, not %', p_scope USING ERRCODE = '22023';
    END IF;
    IF p_scope = 'entry' AND NOT EXISTS (SELECT 1 FROM memory_entries WHERE id = p_target)
       OR p_scope = 'person' AND NOT EXISTS (SELECT 1 FROM actors WHERE id = p_target) THEN
        RAISE EXCEPTION 'no % with id %', p_scope, p_target USING ERRCODE = 'MM012';
    END IF;
    -- The erasure lock: deliveries hold it shared from their recheck to their record, so none is
    -- between the two while the scope is read (a reply is withheld, or stored and reached here).
    PERFORM pg_advisory_xact_lock(2060261208);
    -- The entries it reaches are locked first (as every write locks its entry), so a concurrent
    -- amend or forget finishes before the scope is read, or waits and then finds the entry retired.
    PERFORM 1 FROM memory_entries en
     WHERE (p_agent IS NULL OR en.runtime_agent_id = p_agent)
       AND (p_scope = 'entry' AND en.id = p_target
            OR p_scope = 'person' AND en.id IN (SELECT r.entry_id FROM memory_entry_revisions r
                                                  WHERE r.subject_actor_id = p_target OR r.source_actor_id = p_target))
     ORDER BY en.id
       FOR UPDATE;
    scope := ARRAY(SELECT ROW(s.kind, s.id, s.body)::memory_erasure_object
                     FROM memory_erasure_scope(p_scope, p_target, p_agent) AS s);
    scope_ids := ARRAY(SELECT DISTINCT e.id FROM unnest(scope) AS e ORDER BY 1);
    IF scope_ids IS DISTINCT FROM ARRAY(SELECT DISTINCT u FROM unnest(coalesce(p_previewed, '{}')) AS u ORDER BY 1) THEN
        RAISE EXCEPTION 'what this erasure reaches changed since its preview (% objects now, % previewed)',
            cardinality(scope_ids), cardinality(coalesce(p_previewed, '{}'))
            USING ERRCODE = 'MM011', HINT = 'preview again and confirm what it shows';
    END IF;
    IF cardinality(scope_ids) = 0 THEN
        RAISE EXCEPTION 'nothing to erase: the % % holds no text that is not erased already', p_scope, p_target
            USING ERRCODE = 'MM012';
    END IF;

    revisions := ARRAY(SELECT e.id FROM unnest(scope) AS e WHERE e.kind = 'revision');
    messages_gone := ARRAY(SELECT e.id FROM unnest(scope) AS e WHERE e.kind IN ('message', 'source', 'reply'));
    turns := ARRAY(SELECT e.id FROM unnest(scope) AS e WHERE e.kind = 'turn');
    entries := ARRAY(SELECT e.id FROM unnest(scope) AS e WHERE e.kind = 'entry');
    requests := ARRAY(SELECT e.id FROM unnest(scope) AS e WHERE e.kind = 'sharing_request');
    texts := ARRAY(SELECT DISTINCT e.body FROM unnest(scope) AS e
                    WHERE e.body IS NOT NULL AND e.body <> memory_erasure_marker());
    long_texts := ARRAY(SELECT t FROM unnest(texts) AS t WHERE length(t) >= 12);

    -- The reason stays readable in the audit forever: it must not quote what it erases.
    IF EXISTS (SELECT 1 FROM unnest(texts) AS t
                WHERE length(t) >= 12 AND strpos(lower(p_reason), lower(t)) > 0
                   OR lower(btrim(t)) = lower(btrim(p_reason))) THEN
        RAISE EXCEPTION 'the reason quotes text this erasure removes; give a reference instead (a ticket number)'
            USING ERRCODE = 'MM013';
    END IF;

    counts := (SELECT jsonb_object_agg(c.kind, c.n)
                 FROM (SELECT e.kind, count(*) AS n FROM unnest(scope) AS e GROUP BY e.kind) AS c);
    counts := counts || jsonb_build_object(
        'embeddings', (SELECT count(*) FROM revision_embeddings x WHERE x.revision_id = ANY (revisions)));

    -- The record first: the history triggers let this transaction's text updates through.
    INSERT INTO erasures (id, scope, target_id, runtime_agent_id, reason, counts, fingerprinted)
    VALUES (p_erasure, p_scope, p_target, p_agent, btrim(p_reason), counts,
            coalesce(cardinality(p_fingerprints), 0) > 0);
    INSERT INTO erasure_fingerprints (erasure_id, fingerprint)
    SELECT DISTINCT p_erasure, f FROM unnest(coalesce(p_fingerprints, '{}')) AS f;
    INSERT INTO erased_revisions (revision_id, erasure_id) SELECT u, p_erasure FROM unnest(revisions) AS u;
    INSERT INTO erased_messages (message_id, erasure_id) SELECT u, p_erasure FROM unnest(messages_gone) AS u;

    -- Out of every index: pending embedding work is done (nothing embeds the text again), live
    -- entries whose current revision goes are retired (the projection and the lexical statistics
    -- count them out), every generation's embeddings go, and the vector mirror prunes the points.
    UPDATE index_outbox SET completed_at = now()
     WHERE revision_id = ANY (revisions) AND work = 'index_revision' AND completed_at IS NULL;
    UPDATE memory_entries SET state = 'forgotten', forgotten_at = now(), updated_at = now()
     WHERE id = ANY (entries) AND state = 'live';
    DELETE FROM revision_embeddings WHERE revision_id = ANY (revisions);
    INSERT INTO index_outbox (runtime_agent_id, revision_id, work)
    SELECT DISTINCT en.runtime_agent_id, en.current_revision_id, 'retire_entry'::index_work_kind
      FROM memory_entries en
     WHERE en.id IN (SELECT r.entry_id FROM memory_entry_revisions r WHERE r.id = ANY (revisions));

    -- The text, wherever it was kept.
    UPDATE memory_entry_revisions SET body = memory_erasure_marker() WHERE id = ANY (revisions);
    UPDATE messages SET body = memory_erasure_marker() WHERE id = ANY (messages_gone);
    -- Each turn record with the texts it is linked to: the revisions it used or wrote, the
    -- messages it answered or sent. Set-based: a turn's few texts, never every text of the erasure.
    WITH objects AS (
        SELECT e.kind, e.id, e.body FROM unnest(scope) AS e WHERE e.body IS NOT NULL
    ), reached AS (
        SELECT t.id, t.inbound_message_id, t.outbound_message_id, t.used_revision_ids
          FROM agent_turns t WHERE t.id = ANY (turns)
    ), links AS (
        SELECT r.id, o.body FROM reached r CROSS JOIN LATERAL unnest(r.used_revision_ids) AS u(revision_id)
          JOIN objects o ON o.kind = 'revision' AND o.id = u.revision_id
        UNION
        SELECT r.id, o.body FROM reached r
          JOIN revision_sources s ON s.message_id = r.inbound_message_id
          JOIN objects o ON o.kind = 'revision' AND o.id = s.revision_id
        UNION
        SELECT r.id, o.body FROM reached r JOIN objects o ON o.kind <> 'revision' AND o.id = r.inbound_message_id
        UNION
        SELECT r.id, o.body FROM reached r JOIN objects o ON o.kind <> 'revision' AND o.id = r.outbound_message_id
    ), per_turn AS (
        SELECT l.id, array_agg(l.body) AS texts FROM links l GROUP BY l.id
    ), linked AS (
        SELECT r.id, coalesce(p.texts, '{}') AS texts FROM reached r LEFT JOIN per_turn p ON p.id = r.id
    )
    UPDATE agent_turns t
       SET tool_calls = memory_redact_jsonb(t.tool_calls, linked.texts),
           ledger = memory_redact_jsonb(t.ledger, linked.texts),
           unbacked_claims = memory_redact_jsonb_whole(t.unbacked_claims),
           withheld = memory_redact_jsonb(t.withheld, linked.texts),
           failure_reason = memory_redact_text(t.failure_reason, linked.texts)
      FROM linked
     WHERE t.id = linked.id;
    UPDATE sharing_requests
       SET rationale = memory_erasure_marker(),
           decision_reason = CASE WHEN state = 'pending' THEN 'erased: ' || left(btrim(p_reason), 1990)
                                  ELSE memory_redact_occurrences(decision_reason, long_texts) END,
           state = CASE WHEN state = 'pending' THEN 'denied'::sharing_request_state ELSE state END,
           decided_at = coalesce(decided_at, now()),
           decided_by = coalesce(decided_by, session_user::text)
     WHERE id = ANY (requests);

    -- What people wrote elsewhere (rationales, decisions, grants' and actions' reasons), in this
    -- erasure's runtime agents only: exact occurrences of the longer texts, found set-based.
    IF cardinality(long_texts) > 0 THEN
        UPDATE sharing_requests q
           SET rationale = memory_redact_occurrences(q.rationale, long_texts),
               decision_reason = memory_redact_occurrences(q.decision_reason, long_texts)
         WHERE NOT (q.id = ANY (requests))
           AND (p_agent IS NULL OR q.runtime_agent_id = p_agent)
           AND EXISTS (SELECT 1 FROM unnest(long_texts) AS t
                        WHERE strpos(q.rationale, t) > 0 OR strpos(coalesce(q.decision_reason, ''), t) > 0);
        UPDATE sharing_grants g
           SET reason = memory_redact_occurrences(g.reason, long_texts)
         WHERE (p_agent IS NULL OR g.runtime_agent_id = p_agent)
           AND EXISTS (SELECT 1 FROM unnest(long_texts) AS t WHERE strpos(g.reason, t) > 0);
        UPDATE operator_actions a
           SET reason = memory_redact_occurrences(a.reason, long_texts)
         WHERE EXISTS (SELECT 1 FROM unnest(long_texts) AS t WHERE strpos(a.reason, t) > 0)
           AND (p_agent IS NULL OR memory_operator_action_agent(a.target_kind, a.target_id, a.details) = p_agent);
        UPDATE evidence_repairs x
           SET reason = memory_redact_occurrences(x.reason, long_texts)
         WHERE EXISTS (SELECT 1 FROM unnest(long_texts) AS t WHERE strpos(x.reason, t) > 0)
           AND (p_agent IS NULL
                OR EXISTS (SELECT 1 FROM memory_entry_revisions r WHERE r.id = x.revision_id AND r.runtime_agent_id = p_agent));
    END IF;

    -- The lexical statistics: fold the retirements in now and drop the terms no document has, so
    -- no lexeme of the erased text stays as a statistics key.
    agents := ARRAY(SELECT DISTINCT r.runtime_agent_id FROM memory_entry_revisions r WHERE r.id = ANY (revisions));
    PERFORM pg_advisory_xact_lock(2060261204);
    PERFORM memory_lexical_statistics_fold();
    DELETE FROM lexical_term_statistics WHERE runtime_agent_id = ANY (agents) AND documents <= 0;

    INSERT INTO operator_actions (action, target_kind, target_id, reason, details)
    VALUES ('erase', p_scope, p_target, btrim(p_reason),
            jsonb_build_object('erasure_id', p_erasure, 'runtime_agent_id', p_agent, 'counts', counts));
    RETURN counts;
END;
$$;

-- The eraser now also vacuums and analyses the grants it redacts.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 170000 THEN
        EXECUTE 'GRANT MAINTAIN ON sharing_grants TO mesh_eraser';
    END IF;
END;
$$;

-- Every definer: owned by mesh_definer, resolving nothing in a schema the caller controls. A
-- migrating role that is not a superuser must be able to act as the new owner, which needs CREATE
-- on the schema for the moment of the change only.
DO $$
DECLARE
    f regprocedure;
    superuser boolean := (SELECT rolsuper FROM pg_roles WHERE rolname = current_user);
BEGIN
    IF NOT superuser THEN
        EXECUTE format('GRANT mesh_definer TO %I', current_user);
        EXECUTE format('GRANT CREATE ON SCHEMA %I TO mesh_definer', current_schema());
    END IF;
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
              WHERE p.prosecdef AND p.pronamespace = current_schema()::regnamespace
              ORDER BY p.oid
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp', f, current_schema());
        EXECUTE format('ALTER FUNCTION %s OWNER TO mesh_definer', f);
    END LOOP;
    IF NOT superuser THEN
        EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM mesh_definer', current_schema());
        -- A later migration that replaces a definer grants itself the membership again, briefly.
        EXECUTE format('REVOKE mesh_definer FROM %I', current_user);
    END IF;
END;
$$;

-- Nobody but the schema's owner creates objects in it (PostgreSQL 15 made this the default for a
-- new database; an older one may still grant it).
DO $$
BEGIN
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM PUBLIC', current_schema());
END;
$$;
