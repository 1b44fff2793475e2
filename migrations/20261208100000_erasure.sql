-- Erasure under operator authority: the one operation that removes stored text.
--
-- Memory stays append-only, except erasure by an operator, which removes text and keeps the
-- skeleton (ids, times, subject/source references, audience evidence, grants, lineage edges,
-- retrieval-event ids). It runs through one SECURITY DEFINER function, `mesh_operator_erase`, that
-- only members of the new `mesh_eraser` group may execute (distinct from `mesh_operator`, which
-- decides sharing; the runtime role can never erase). Every erasure is a row of `erasures` (who,
-- when, why, what) plus an `operator_actions` row.
--
-- The append-only triggers on the history tables now let one kind of UPDATE through: one made in
-- the same transaction that recorded an erasure (only `mesh_operator_erase` can insert into
-- `erasures`), changing nothing but the table's text columns named in the trigger. Everything
-- else is still refused, by anyone.
--
-- An erased revision is never eligible: the rule order gains `erased` (after `foreign_agent`,
-- before `forgotten`); its entry is retired when the erased revision was current, so the
-- projection (current revisions of live entries only) drops it and the lexical statistics count
-- it out; its embeddings are deleted and the vector mirror is told to prune it.

-- The group role. Cluster-global while each database migrates on its own, so creation tolerates
-- a concurrent creator (as in 20261202002100).
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_eraser') THEN
        BEGIN
            CREATE ROLE mesh_eraser NOLOGIN;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN
                NULL;
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'role mesh_eraser does not exist and this user may not create it'
                    USING HINT = 'have an administrator run: CREATE ROLE mesh_eraser NOLOGIN';
        END;
    END IF;
END;
$$;
GRANT USAGE ON SCHEMA public TO mesh_eraser;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO mesh_eraser;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO mesh_eraser;

-- The text an erased body, message or quotation is replaced by (no lexeme of a user's words).
CREATE FUNCTION memory_erasure_marker() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT '[erased]'::text $$;

CREATE TABLE erasures (
    id uuid PRIMARY KEY,
    -- `entry`: every revision of one entry; `person`: every revision about or told by one actor,
    -- and the messages that actor sent.
    scope text NOT NULL CHECK (scope IN ('entry', 'person')),
    target_id uuid NOT NULL,
    -- The runtime agent the erasure was limited to; NULL: all of them.
    runtime_agent_id uuid REFERENCES runtime_agents (id),
    erased_by text NOT NULL DEFAULT session_user,
    erased_at timestamptz NOT NULL DEFAULT now(),
    reason text NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 2000),
    -- Counts per kind of what was erased (the preview's shape).
    counts jsonb NOT NULL,
    -- Whether keyed fingerprints of the erased text were recorded (`erase verify` scans for them).
    fingerprinted boolean NOT NULL,
    -- The transaction that recorded it: the history triggers let its text updates through.
    recorded_in xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX erasures_recorded_in ON erasures (recorded_in);

CREATE TABLE erased_revisions (
    revision_id uuid PRIMARY KEY REFERENCES memory_entry_revisions (id),
    erasure_id uuid NOT NULL REFERENCES erasures (id)
);
CREATE INDEX erased_revisions_erasure ON erased_revisions (erasure_id);

CREATE TABLE erased_messages (
    message_id uuid PRIMARY KEY REFERENCES messages (id),
    erasure_id uuid NOT NULL REFERENCES erasures (id)
);
CREATE INDEX erased_messages_erasure ON erased_messages (erasure_id);

-- Keyed HMAC-SHA256 fingerprints (16 bytes) of the erased text's word windows, computed by the
-- application under a key the database never holds: `erase verify` finds a surviving copy of the
-- text without the database keeping the text or anything a guess could be checked against.
CREATE TABLE erasure_fingerprints (
    erasure_id uuid NOT NULL REFERENCES erasures (id),
    fingerprint bytea NOT NULL CHECK (octet_length(fingerprint) = 16),
    PRIMARY KEY (erasure_id, fingerprint)
);

CREATE TRIGGER erasures_append_only BEFORE DELETE OR UPDATE ON erasures
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();
CREATE TRIGGER erasures_no_truncate BEFORE TRUNCATE ON erasures
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_rewrite();
CREATE TRIGGER erased_revisions_append_only BEFORE DELETE OR UPDATE ON erased_revisions
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();
CREATE TRIGGER erased_messages_append_only BEFORE DELETE OR UPDATE ON erased_messages
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();
CREATE TRIGGER erasure_fingerprints_append_only BEFORE DELETE OR UPDATE ON erasure_fingerprints
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();

-- Only mesh_operator_erase writes these (the default privileges gave the runtime INSERT/UPDATE).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON erasures, erased_revisions, erased_messages, erasure_fingerprints
    FROM PUBLIC, mesh_runtime, mesh_operator, mesh_console_reader, mesh_eraser;
GRANT SELECT ON erasures, erased_revisions, erased_messages, erasure_fingerprints
    TO mesh_runtime, mesh_operator, mesh_console_reader, mesh_eraser;

-- The history triggers: append-only, except the text columns (the trigger's arguments) of a row
-- updated by the transaction that recorded an erasure.
CREATE FUNCTION refuse_history_rewrite_except_erasure() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND EXISTS (SELECT 1 FROM erasures WHERE recorded_in = pg_current_xact_id())
       AND (to_jsonb(NEW) - TG_ARGV) = (to_jsonb(OLD) - TG_ARGV) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;

DROP TRIGGER memory_entry_revisions_immutable ON memory_entry_revisions;
CREATE TRIGGER memory_entry_revisions_immutable BEFORE DELETE OR UPDATE ON memory_entry_revisions
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite_except_erasure('body', 'body_tsv');
DROP TRIGGER agent_turns_append_only ON agent_turns;
CREATE TRIGGER agent_turns_append_only BEFORE DELETE OR UPDATE ON agent_turns
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite_except_erasure(
        'tool_calls', 'ledger', 'unbacked_claims', 'withheld', 'failure_reason');
DROP TRIGGER operator_actions_append_only ON operator_actions;
CREATE TRIGGER operator_actions_append_only BEFORE DELETE OR UPDATE ON operator_actions
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite_except_erasure('reason', 'details');
DROP TRIGGER evidence_repairs_append_only ON evidence_repairs;
CREATE TRIGGER evidence_repairs_append_only BEFORE DELETE OR UPDATE ON evidence_repairs
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite_except_erasure('reason');
-- Messages were protected by privileges only (the runtime may INSERT, never UPDATE); now also by
-- the trigger, so the table owner cannot rewrite a transcript by accident either.
CREATE TRIGGER messages_append_only BEFORE DELETE OR UPDATE ON messages
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite_except_erasure('body');
CREATE TRIGGER messages_no_truncate BEFORE TRUNCATE ON messages
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_rewrite();

-- The rule order, once, now with `erased`. Replaces the nine-argument form of 20261207100000.
CREATE FUNCTION memory_first_failing_rule(
    p_audience_known boolean, p_found boolean, p_erased boolean, p_live boolean, p_current boolean,
    p_restricted_elsewhere boolean, p_released boolean, p_source_count bigint, p_evidence_known boolean,
    p_covers boolean) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE
               WHEN NOT coalesce(p_audience_known, false) THEN 'audience_unknown'
               WHEN NOT coalesce(p_found, false) THEN 'foreign_agent'
               WHEN coalesce(p_erased, true) THEN 'erased'
               WHEN NOT coalesce(p_live, false) THEN 'forgotten'
               WHEN NOT coalesce(p_current, false) THEN 'not_current'
               WHEN coalesce(p_restricted_elsewhere, true) THEN 'restriction'
               WHEN coalesce(p_released, false) THEN 'eligible'
               WHEN coalesce(p_source_count, 0) = 0 THEN 'no_lineage'
               WHEN NOT coalesce(p_evidence_known, false) THEN 'unknown_evidence'
               WHEN NOT coalesce(p_covers, false) THEN 'audience_not_covered'
               ELSE 'eligible'
           END
$$;

CREATE OR REPLACE FUNCTION memory_eligibility_verdict(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
    RETURNS memory_eligibility
    LANGUAGE sql STABLE
    AS $$
    WITH revision AS (
        SELECT e.state, e.current_revision_id = r.id AS is_current,
               e.restriction = 'conversation_only'
                   AND e.restricted_conversation_id IS DISTINCT FROM p_conversation AS restricted_elsewhere,
               EXISTS (SELECT 1 FROM erased_revisions x WHERE x.revision_id = r.id) AS erased
          FROM memory_entry_revisions r
          JOIN memory_entries e ON e.id = r.entry_id AND e.runtime_agent_id = r.runtime_agent_id
         WHERE r.id = p_revision AND r.runtime_agent_id = p_agent
    ), sources AS (
        SELECT count(*) AS source_count,
               (array_agg(s.id ORDER BY s.created_at, s.id) FILTER (WHERE s.evidence = 'unknown'))[1] AS unknown,
               (array_agg(s.id ORDER BY s.created_at, s.id)
                    FILTER (WHERE NOT coalesce(p_audience <@ s.audience, false)))[1] AS uncovered
          FROM revision_sources s
         WHERE s.revision_id = p_revision
    ), verdict AS (
        SELECT memory_first_failing_rule(
                   coalesce(cardinality(p_audience), 0) > 0,
                   revision.state IS NOT NULL,
                   revision.erased,
                   revision.state = 'live',
                   revision.is_current,
                   revision.restricted_elsewhere,
                   EXISTS (SELECT 1 FROM memory_released_revisions(p_agent, p_audience) g
                            WHERE g.revision_id = p_revision),
                   sources.source_count,
                   sources.unknown IS NULL,
                   sources.uncovered IS NULL) AS rule,
               sources.unknown, sources.uncovered
          FROM sources LEFT JOIN revision ON true
    )
    SELECT ROW(v.rule, CASE v.rule WHEN 'unknown_evidence' THEN v.unknown
                                   WHEN 'audience_not_covered' THEN v.uncovered END)::memory_eligibility
      FROM verdict v
$$;

-- The projection holds current revisions of live entries only, and an erased current revision's
-- entry is retired in the erasing transaction, so a projection row is never erased.
CREATE OR REPLACE FUNCTION memory_projection_rule(p_row searchable_revisions, p_conversation uuid, p_audience uuid[],
                                                  p_released uuid[], p_source_count bigint) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT memory_first_failing_rule(
               coalesce(cardinality(p_audience), 0) > 0, true, false, true, true,
               (p_row).restriction = 'conversation_only'
                   AND (p_row).restricted_conversation_id IS DISTINCT FROM p_conversation,
               (p_row).revision_id = ANY (p_released),
               p_source_count,
               (p_row).evidence_known,
               (p_row).audience @> p_audience)
$$;

DROP FUNCTION memory_first_failing_rule(boolean, boolean, boolean, boolean, boolean, boolean, bigint, boolean, boolean);

-- What an erasure of `p_scope` / `p_target` (limited to runtime agent `p_agent`, or all with NULL)
-- reaches, one row per object, with the text it removes:
--   revision - a revision erased (every revision of the entry; or about / told by the person);
--   message  - a message the person sent;
--   reply    - the delivered reply of a turn that used an erased revision or answered an erased
--              message (a reply may paraphrase what it was built from, so it goes whole);
--   turn     - a turn record whose tool calls, results and claims are redacted (no text here);
--   entry    - a live entry retired because its current revision is erased (no text);
--   sharing_request - a request for an erased revision (its rationale goes; no text here).
-- Already-erased objects are left out, so a second erasure of the same scope reaches nothing.
CREATE FUNCTION memory_erasure_scope(p_scope text, p_target uuid, p_agent uuid)
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
        SELECT * FROM revisions r WHERE NOT EXISTS (SELECT 1 FROM erased_revisions x WHERE x.revision_id = r.id)
    ), sent AS (
        SELECT m.id, m.body FROM messages m
         WHERE p_scope = 'person' AND m.sender_actor_id = p_target
           AND (p_agent IS NULL OR m.runtime_agent_id = p_agent)
           AND NOT EXISTS (SELECT 1 FROM erased_messages x WHERE x.message_id = m.id)
    ), turns AS (
        SELECT t.id, t.outbound_message_id FROM agent_turns t
         WHERE t.used_revision_ids && ARRAY(SELECT e.id FROM erasing e)
            OR t.inbound_message_id IN (SELECT s.id FROM sent s)
            OR t.inbound_message_id IN (SELECT src.message_id FROM revision_sources src
                                          JOIN erasing e ON e.id = src.revision_id
                                         WHERE src.message_id IS NOT NULL)
    )
    SELECT 'revision', e.id, e.body FROM erasing e
    UNION ALL
    SELECT 'message', s.id, s.body FROM sent s
    UNION ALL
    SELECT DISTINCT 'reply', m.id, m.body FROM turns t JOIN messages m ON m.id = t.outbound_message_id
     WHERE m.id NOT IN (SELECT s.id FROM sent s)
       AND NOT EXISTS (SELECT 1 FROM erased_messages x WHERE x.message_id = m.id)
    UNION ALL
    SELECT 'turn', t.id, NULL FROM turns t
    UNION ALL
    SELECT 'entry', en.id, NULL FROM memory_entries en
     WHERE en.state = 'live' AND en.current_revision_id IN (SELECT e.id FROM erasing e)
    UNION ALL
    SELECT 'sharing_request', q.id, NULL FROM sharing_requests q WHERE q.revision_id IN (SELECT e.id FROM erasing e)
$$;

-- `p_text` with every erased text in `p_texts` replaced by the marker: a text of 12 characters or
-- more wherever it occurs (also in its JSON-escaped form, as a tool call's arguments carry it),
-- a shorter one only where it is the whole value (so "hi" does not break "this").
CREATE FUNCTION memory_redact_text(p_text text, p_texts text[]) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    erased text;
    escaped text;
    result text := p_text;
BEGIN
    IF result IS NULL THEN
        RETURN NULL;
    END IF;
    FOREACH erased IN ARRAY coalesce(p_texts, '{}') LOOP
        CONTINUE WHEN erased IS NULL OR erased = memory_erasure_marker();
        IF btrim(result) = btrim(erased) THEN
            RETURN memory_erasure_marker();
        END IF;
        IF length(erased) >= 12 THEN
            result := replace(result, erased, memory_erasure_marker());
            escaped := substr(to_jsonb(erased)::text, 2, length(to_jsonb(erased)::text) - 2);
            result := replace(result, escaped, memory_erasure_marker());
        END IF;
    END LOOP;
    RETURN result;
END;
$$;

-- `p_doc` with every string (and object key) redacted by memory_redact_text.
CREATE FUNCTION memory_redact_jsonb(p_doc jsonb, p_texts text[]) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    result jsonb;
BEGIN
    CASE jsonb_typeof(p_doc)
        WHEN 'object' THEN
            SELECT coalesce(jsonb_object_agg(memory_redact_text(k, p_texts), memory_redact_jsonb(v, p_texts)), '{}')
              INTO result FROM jsonb_each(p_doc) AS e(k, v);
        WHEN 'array' THEN
            SELECT coalesce(jsonb_agg(memory_redact_jsonb(v, p_texts) ORDER BY i), '[]')
              INTO result FROM jsonb_array_elements(p_doc) WITH ORDINALITY AS a(v, i);
        WHEN 'string' THEN
            result := to_jsonb(memory_redact_text(p_doc #>> '{}', p_texts));
        ELSE
            result := p_doc;
    END CASE;
    RETURN result;
END;
$$;

-- Every string of `p_doc` replaced by the marker (claims quote a reply that is erased whole).
CREATE FUNCTION memory_redact_jsonb_whole(p_doc jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE WHEN p_doc IS NULL THEN NULL
                ELSE (SELECT coalesce(jsonb_agg(to_jsonb(memory_erasure_marker())), '[]')
                        FROM jsonb_array_elements(CASE jsonb_typeof(p_doc) WHEN 'array' THEN p_doc
                                                                           ELSE jsonb_build_array(p_doc) END))
           END
$$;

-- The erasure. The caller (the operator layer, under the operator's own login role) previews the
-- scope, fingerprints its text and passes the exact ids it showed: the function refuses (MM011)
-- when the scope no longer is what was previewed, so nothing is erased that the operator did not
-- see, and nothing previewed is left. One transaction: it commits whole or not at all.
CREATE FUNCTION mesh_operator_erase(p_erasure uuid, p_scope text, p_target uuid, p_agent uuid, p_reason text,
                                    p_previewed uuid[], p_fingerprints bytea[]) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    scope_ids uuid[];
    revisions uuid[];
    messages_gone uuid[];
    turns uuid[];
    entries uuid[];
    requests uuid[];
    texts text[];
    counts jsonb;
    agents uuid[];
BEGIN
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
    -- The entries it reaches are locked first (as every write locks its entry), so a concurrent
    -- amend or forget finishes before the scope is read, or waits and then finds the entry retired.
    PERFORM 1 FROM memory_entries en
     WHERE (p_agent IS NULL OR en.runtime_agent_id = p_agent)
       AND (p_scope = 'entry' AND en.id = p_target
            OR p_scope = 'person' AND en.id IN (SELECT r.entry_id FROM memory_entry_revisions r
                                                  WHERE r.subject_actor_id = p_target OR r.source_actor_id = p_target))
     ORDER BY en.id
       FOR UPDATE;
    CREATE TEMP TABLE IF NOT EXISTS pg_temp.erasing (kind text, id uuid, body text) ON COMMIT DROP;
    TRUNCATE pg_temp.erasing;
    INSERT INTO pg_temp.erasing SELECT * FROM memory_erasure_scope(p_scope, p_target, p_agent);
    scope_ids := ARRAY(SELECT DISTINCT e.id FROM pg_temp.erasing e ORDER BY 1);
    IF scope_ids IS DISTINCT FROM ARRAY(SELECT DISTINCT u FROM unnest(coalesce(p_previewed, '{}')) AS u ORDER BY 1) THEN
        RAISE EXCEPTION 'what this erasure reaches changed since its preview (% objects now, % previewed)',
            cardinality(scope_ids), cardinality(coalesce(p_previewed, '{}'))
            USING ERRCODE = 'MM011', HINT = 'preview again and confirm what it shows';
    END IF;
    IF cardinality(scope_ids) = 0 THEN
        RAISE EXCEPTION 'nothing to erase: the % % holds no text that is not erased already', p_scope, p_target
            USING ERRCODE = 'MM012';
    END IF;

    revisions := ARRAY(SELECT e.id FROM pg_temp.erasing e WHERE e.kind = 'revision');
    messages_gone := ARRAY(SELECT e.id FROM pg_temp.erasing e WHERE e.kind IN ('message', 'reply'));
    turns := ARRAY(SELECT e.id FROM pg_temp.erasing e WHERE e.kind = 'turn');
    entries := ARRAY(SELECT e.id FROM pg_temp.erasing e WHERE e.kind = 'entry');
    requests := ARRAY(SELECT e.id FROM pg_temp.erasing e WHERE e.kind = 'sharing_request');
    texts := ARRAY(SELECT DISTINCT e.body FROM pg_temp.erasing e WHERE e.body IS NOT NULL);
    counts := (SELECT jsonb_object_agg(c.kind, c.n)
                 FROM (SELECT e.kind, count(*) AS n FROM pg_temp.erasing e GROUP BY e.kind) AS c);
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
    UPDATE agent_turns
       SET tool_calls = memory_redact_jsonb(tool_calls, texts),
           ledger = memory_redact_jsonb(ledger, texts),
           unbacked_claims = memory_redact_jsonb_whole(unbacked_claims),
           withheld = memory_redact_jsonb(withheld, texts),
           failure_reason = memory_redact_text(failure_reason, texts)
     WHERE id = ANY (turns);
    UPDATE sharing_requests
       SET rationale = memory_erasure_marker(),
           decision_reason = CASE WHEN state = 'pending' THEN 'erased: ' || left(btrim(p_reason), 1990)
                                  ELSE memory_redact_text(decision_reason, texts) END,
           state = CASE WHEN state = 'pending' THEN 'denied'::sharing_request_state ELSE state END,
           decided_at = coalesce(decided_at, now()),
           decided_by = coalesce(decided_by, session_user::text)
     WHERE id = ANY (requests);
    UPDATE sharing_requests
       SET rationale = memory_redact_text(rationale, texts),
           decision_reason = memory_redact_text(decision_reason, texts)
     WHERE NOT (id = ANY (requests))
       AND (memory_redact_text(rationale, texts) IS DISTINCT FROM rationale
            OR memory_redact_text(decision_reason, texts) IS DISTINCT FROM decision_reason);
    UPDATE operator_actions
       SET reason = memory_redact_text(reason, texts), details = memory_redact_jsonb(details, texts)
     WHERE memory_redact_text(reason, texts) IS DISTINCT FROM reason
        OR memory_redact_jsonb(details, texts) IS DISTINCT FROM details;
    UPDATE evidence_repairs SET reason = memory_redact_text(reason, texts)
     WHERE memory_redact_text(reason, texts) IS DISTINCT FROM reason;

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
REVOKE ALL ON FUNCTION mesh_operator_erase(uuid, text, uuid, uuid, text, uuid[], bytea[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mesh_operator_erase(uuid, text, uuid, uuid, text, uuid[], bytea[]) TO mesh_eraser;

-- VACUUM after an erasure, so dead tuples do not keep the text: the eraser may maintain the
-- tables an erasure rewrites (the MAINTAIN privilege, PostgreSQL 17 and later; on an older server
-- the erasure still commits and reports the tables it could not vacuum).
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 170000 THEN
        EXECUTE 'GRANT MAINTAIN ON memory_entry_revisions, messages, agent_turns, sharing_requests, operator_actions,
                 evidence_repairs, revision_embeddings, searchable_revisions, lexical_term_statistics,
                 lexical_statistics_pending, memory_entries TO mesh_eraser';
    END IF;
END;
$$;
