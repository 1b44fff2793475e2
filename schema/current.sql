CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;

CREATE TYPE public.actor_kind AS ENUM (
    'human',
    'agent',
    'service'
);

CREATE TYPE public.agent_turn_outcome AS ENUM (
    'delivered',
    'claim_guard_failed',
    'withheld',
    'failed'
);

CREATE TYPE public.audience_evidence_state AS ENUM (
    'known',
    'unknown'
);

CREATE TYPE public.conversation_topology AS ENUM (
    'direct',
    'group',
    'channel',
    'unknown'
);

CREATE TYPE public.embedding_generation_state AS ENUM (
    'building',
    'active',
    'retired',
    'failed'
);

CREATE TYPE public.grant_authority AS ENUM (
    'source_actor_confirmation',
    'operator_approval'
);

CREATE TYPE public.index_work_kind AS ENUM (
    'index_revision',
    'retire_entry'
);

CREATE TYPE public.memory_eligibility AS (
	rule text,
	source_id uuid
);

CREATE TYPE public.memory_entry_state AS ENUM (
    'live',
    'forgotten'
);

CREATE TYPE public.memory_erasure_object AS (
	kind text,
	id uuid,
	body text
);

CREATE TYPE public.memory_restriction AS ENUM (
    'none',
    'conversation_only'
);

CREATE TYPE public.memory_set_reading AS ENUM (
    'audience_array',
    'class_scan',
    'newest_about',
    'newest_from',
    'newest_always_on'
);

CREATE TYPE public.message_direction AS ENUM (
    'inbound',
    'outbound'
);

CREATE TYPE public.retrieval_mode AS ENUM (
    'prompt',
    'recall'
);

CREATE TYPE public.revision_operation AS ENUM (
    'create',
    'amend'
);

CREATE TYPE public.revision_source_kind AS ENUM (
    'message',
    'history_message',
    'parent_revision',
    'retrieved_revision'
);

CREATE TYPE public.sharing_request_state AS ENUM (
    'pending',
    'approved',
    'denied',
    'expired'
);

CREATE FUNCTION public.memory_audience_digest(p_members uuid[]) RETURNS bytea
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT sha256(convert_to(array_to_string(p_members, ','), 'UTF8')) $$;

CREATE FUNCTION public.memory_bm25_query_weights(p_agent uuid, p_text text, OUT lexemes text[], OUT weights double precision[], OUT mean_length double precision) RETURNS record
    LANGUAGE sql STABLE
    AS $$
    WITH pending AS (
        SELECT p.sign, p.lexemes, p.length FROM lexical_statistics_pending p WHERE p.runtime_agent_id = p_agent),
    corpus AS (
        SELECT coalesce((SELECT c.documents FROM lexical_corpus_statistics c WHERE c.runtime_agent_id = p_agent), 0)
                 + coalesce((SELECT sum(p.sign) FROM pending p), 0)::float8 AS n,
               coalesce((SELECT c.lexemes FROM lexical_corpus_statistics c WHERE c.runtime_agent_id = p_agent), 0)
                 + coalesce((SELECT sum(p.sign * p.length) FROM pending p), 0)::float8 AS total),
    query AS (
        SELECT u.lexeme, greatest(cardinality(u.positions), 1) AS occurrences
          FROM unnest(to_tsvector('english'::regconfig, coalesce(p_text, ''))) AS u),
    -- Each layer filtered by agent and lexeme before adding up (the views would add up first).
    frequency AS (
        SELECT layers.lexeme, sum(layers.documents)::float8 AS df
          FROM (SELECT t.lexeme, t.documents FROM lexical_term_statistics t
                 WHERE t.runtime_agent_id = p_agent AND t.lexeme IN (SELECT q.lexeme FROM query q)
                UNION ALL
                SELECT u.lexeme, p.sign FROM pending p CROSS JOIN LATERAL unnest(p.lexemes) AS u(lexeme)
                 WHERE u.lexeme IN (SELECT q.lexeme FROM query q)) AS layers
         GROUP BY layers.lexeme
        HAVING sum(layers.documents) > 0)
    SELECT array_agg(q.lexeme ORDER BY q.lexeme),
           array_agg(q.occurrences * ln((c.n - f.df + 0.5) / (f.df + 0.5) + 1) ORDER BY q.lexeme),
           (SELECT CASE WHEN c2.n > 0 THEN c2.total / c2.n ELSE 1 END FROM corpus c2)
      FROM query q JOIN frequency f ON f.lexeme = q.lexeme CROSS JOIN corpus c
$$;

CREATE FUNCTION public.memory_covering_audience_classes(p_agent uuid, p_audience uuid[]) RETURNS TABLE(id bigint)
    LANGUAGE sql STABLE ROWS 8
    SET enable_seqscan TO 'off'
    AS $$
    SELECT c.id FROM audience_classes c
     WHERE c.runtime_agent_id = p_agent AND cardinality(p_audience) > 0 AND c.members @> p_audience
$$;

CREATE FUNCTION public.memory_direct_proof(p_source uuid) RETURNS TABLE(rule text, counterpart uuid)
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN c.topology = 'direct' THEN 'direct_topology' ELSE 'later_direct_observation' END,
           m.sender_actor_id
      FROM revision_sources s
      JOIN messages m ON m.id = s.message_id
      JOIN conversations c ON c.id = m.conversation_id
      JOIN runtime_agents ra ON ra.id = m.runtime_agent_id
      JOIN connector_identities ci ON ci.id = m.sender_identity_id
     WHERE s.id = p_source
       AND s.evidence = 'unknown'
       -- 1. inbound, exact connector identity of the sender on this connector
       AND m.direction = 'inbound'
       AND ci.actor_id = m.sender_actor_id
       AND ci.connector = c.connector
       -- 2. proven direct
       AND (c.topology = 'direct'
            OR (c.topology = 'unknown' AND EXISTS (
                    SELECT 1 FROM conversation_observations o
                     WHERE o.conversation_id = c.id AND o.topology = 'direct' AND o.authenticated
                       AND o.counterpart_identity_id = m.sender_identity_id
                       AND o.observed_at >= m.sent_at)))
       -- 3. nobody else: no contradictory inbound sender, outbound only by the agent, no third member
       AND NOT EXISTS (SELECT 1 FROM messages o
                        WHERE o.conversation_id = c.id AND o.direction = 'inbound'
                          AND o.sender_actor_id <> m.sender_actor_id)
       AND NOT EXISTS (SELECT 1 FROM messages o
                        WHERE o.conversation_id = c.id AND o.direction = 'outbound'
                          AND o.sender_actor_id <> ra.actor_id)
       AND NOT EXISTS (SELECT 1 FROM conversation_memberships cm
                        WHERE cm.conversation_id = c.id
                          AND cm.actor_id NOT IN (m.sender_actor_id, ra.actor_id))
$$;

CREATE FUNCTION public.memory_eligibility_verdict(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[]) RETURNS public.memory_eligibility
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

CREATE FUNCTION public.memory_lexeme_count(p_tsv tsvector) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
    SELECT coalesce(sum(greatest(cardinality(u.positions), 1)), 0)::integer FROM unnest(p_tsv) AS u
$$;

CREATE TABLE public.searchable_revisions (
    revision_id uuid NOT NULL,
    entry_id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    restriction public.memory_restriction NOT NULL,
    restricted_conversation_id uuid,
    evidence_known boolean NOT NULL,
    audience uuid[] NOT NULL,
    body_tsv tsvector NOT NULL,
    subject_actor_id uuid,
    origin_conversation_id uuid,
    always_on boolean NOT NULL,
    created_at timestamp with time zone NOT NULL,
    audience_class_id bigint,
    embedding_bits bit varying,
    lexeme_count integer GENERATED ALWAYS AS (public.memory_lexeme_count(body_tsv)) STORED
);

CREATE FUNCTION public.memory_eligible_revisions(p_agent uuid, p_conversation uuid, p_audience uuid[], p_reading public.memory_set_reading, p_key uuid DEFAULT NULL::uuid, p_newest bigint DEFAULT NULL::bigint) RETURNS SETOF public.searchable_revisions
    LANGUAGE sql STABLE
    AS $$
    SELECT eligible.*
      FROM (SELECT p.*
              FROM searchable_revisions p
             WHERE p_reading = 'audience_array' AND p.runtime_agent_id = p_agent
               AND p.evidence_known AND p.audience @> p_audience
            UNION ALL
            SELECT p.*
              FROM memory_covering_audience_classes(p_agent, p_audience) AS c
              JOIN searchable_revisions p ON p.audience_class_id = c.id
             WHERE p_reading = 'class_scan'
            UNION ALL
            SELECT newest.*
              FROM (SELECT p.*
                      FROM searchable_revisions p
                     WHERE p_reading IN ('newest_about', 'newest_from', 'newest_always_on')
                       AND p.runtime_agent_id = p_agent
                       AND CASE p_reading WHEN 'newest_about' THEN p.subject_actor_id = p_key
                                          WHEN 'newest_from' THEN p.origin_conversation_id = p_key
                                          ELSE p.always_on END
                       AND (p.restriction = 'none' OR p.restricted_conversation_id = p_conversation)
                       AND array_position(ARRAY(SELECT c.id FROM memory_covering_audience_classes(p_agent, p_audience) AS c),
                                          p.audience_class_id) IS NOT NULL
                     ORDER BY p.created_at DESC, p.revision_id
                     LIMIT p_newest) AS newest
            UNION ALL
            SELECT p.*
              FROM searchable_revisions p
             WHERE p.runtime_agent_id = p_agent
               AND CASE p_reading WHEN 'newest_about' THEN p.subject_actor_id = p_key
                                  WHEN 'newest_from' THEN p.origin_conversation_id = p_key
                                  WHEN 'newest_always_on' THEN p.always_on
                                  ELSE true END
               AND NOT (p.evidence_known AND p.audience @> p_audience)
               AND p.revision_id IN (SELECT g.revision_id FROM memory_released_revisions(p_agent, p_audience) g)
           ) AS eligible
     WHERE cardinality(p_audience) > 0
       AND (eligible.restriction = 'none' OR eligible.restricted_conversation_id = p_conversation)
$$;

CREATE FUNCTION public.memory_embedding_bits(p_revision uuid) RETURNS bit varying
    LANGUAGE sql STABLE
    AS $$
            SELECT binary_quantize(x.embedding)::varbit
              FROM embedding_generations g
              JOIN revision_embeddings x ON x.generation_id = g.id AND x.revision_id = p_revision
             WHERE g.state = 'active'
             LIMIT 1
        $$;

CREATE FUNCTION public.memory_erasure_marker() RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT '[erased]'::text $$;

CREATE FUNCTION public.memory_erasure_scope(p_scope text, p_target uuid, p_agent uuid) RETURNS TABLE(kind text, id uuid, body text)
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

CREATE FUNCTION public.memory_first_failing_rule(p_audience_known boolean, p_found boolean, p_erased boolean, p_live boolean, p_current boolean, p_restricted_elsewhere boolean, p_released boolean, p_source_count bigint, p_evidence_known boolean, p_covers boolean) RETURNS text
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

CREATE FUNCTION public.memory_insert_message_sources(p_ids uuid[], p_agents uuid[], p_revisions uuid[], p_messages uuid[], p_kinds text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    written bigint;
    missing uuid;
BEGIN
    WITH input AS (
        SELECT * FROM unnest(p_ids, p_agents, p_revisions, p_messages, p_kinds)
                   AS i(source_id, agent_id, revision_id, message_id, kind)
    ), msg AS (
        SELECT i.source_id, i.agent_id, i.revision_id, i.kind, m.id, c.topology <> 'unknown' AS known,
               ARRAY(SELECT readers.actor_id
                       FROM (SELECT cm.actor_id FROM conversation_memberships cm
                              WHERE cm.conversation_id = m.conversation_id AND cm.joined_at <= m.sent_at
                                AND (cm.left_at IS NULL OR cm.left_at > m.sent_at)
                             UNION
                             SELECT m.sender_actor_id WHERE m.direction = 'inbound') readers
                      WHERE readers.actor_id <> ra.actor_id
                      ORDER BY readers.actor_id) AS readers
          FROM input i
          JOIN messages m ON m.id = i.message_id AND m.runtime_agent_id = i.agent_id
          JOIN conversations c ON c.id = m.conversation_id
          JOIN runtime_agents ra ON ra.id = m.runtime_agent_id
    )
    INSERT INTO revision_sources (id, revision_id, runtime_agent_id, kind, message_id, evidence, evidence_basis,
                                  audience)
    SELECT msg.source_id, msg.revision_id, msg.agent_id, msg.kind::revision_source_kind, msg.id,
           CASE WHEN msg.known THEN 'known' ELSE 'unknown' END::audience_evidence_state,
           CASE WHEN msg.known THEN 'conversation members when the message was sent'
                ELSE 'conversation topology is not proven' END,
           CASE WHEN msg.known THEN msg.readers END
      FROM msg;
    GET DIAGNOSTICS written = ROW_COUNT;
    IF written < coalesce(cardinality(p_ids), 0) THEN
        SELECT i.message_id INTO missing
          FROM unnest(p_agents, p_messages) WITH ORDINALITY AS i(agent_id, message_id, position)
         WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = i.message_id AND m.runtime_agent_id = i.agent_id)
         ORDER BY i.position
         LIMIT 1;
        RAISE EXCEPTION 'message % is not a message of the writing runtime agent', missing
              USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'revision_sources_message_of_the_writing_agent',
                    DETAIL = missing::text;
    END IF;
END;
$$;

CREATE FUNCTION public.memory_keep_source_evidence_unknown(p_source uuid, p_reason text) RETURNS void
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

CREATE FUNCTION public.memory_learned_times(p_revisions uuid[]) RETURNS TABLE(revision_id uuid, learned_at timestamp with time zone)
    LANGUAGE sql STABLE
    AS $$
    SELECT r.id,
           coalesce((SELECT max(m.sent_at)
                       FROM revision_sources s
                       JOIN messages m ON m.id = s.message_id AND m.runtime_agent_id = s.runtime_agent_id
                      WHERE s.revision_id = r.id AND s.kind = 'message'),
                    r.created_at)
      FROM unnest(p_revisions) AS wanted(id)
      JOIN memory_entry_revisions r ON r.id = wanted.id
$$;

CREATE FUNCTION public.memory_lexical_query(p_text text) RETURNS tsquery
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery
      FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, coalesce(p_text, '')))) AS lexeme
$$;

CREATE FUNCTION public.memory_lexical_statistics_after_truncate() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
BEGIN
    TRUNCATE lexical_corpus_statistics, lexical_term_statistics, lexical_statistics_pending;
    RETURN NULL;
END;
$$;

CREATE FUNCTION public.memory_lexical_statistics_fold() RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(2060261204) THEN
        RETURN;
    END IF;
    WITH taken AS (DELETE FROM lexical_statistics_pending RETURNING runtime_agent_id, sign, lexemes, length),
    corpus AS (
        INSERT INTO lexical_corpus_statistics AS c (runtime_agent_id, documents, lexemes)
        SELECT t.runtime_agent_id, sum(t.sign), sum(t.sign * t.length)
          FROM taken t GROUP BY t.runtime_agent_id
        ON CONFLICT (runtime_agent_id)
        DO UPDATE SET documents = c.documents + excluded.documents, lexemes = c.lexemes + excluded.lexemes)
    INSERT INTO lexical_term_statistics AS s (runtime_agent_id, lexeme, documents)
    SELECT t.runtime_agent_id, u.lexeme, sum(t.sign)
      FROM taken t CROSS JOIN LATERAL unnest(t.lexemes) AS u(lexeme)
     GROUP BY t.runtime_agent_id, u.lexeme
    HAVING sum(t.sign) <> 0
    ON CONFLICT (runtime_agent_id, lexeme)
    DO UPDATE SET documents = s.documents + excluded.documents;
END;
$$;

CREATE FUNCTION public.memory_lexical_statistics_refuse_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'searchable_revisions rows are replaced, never updated in their text or agent (revision %)',
        OLD.revision_id;
END;
$$;

CREATE FUNCTION public.memory_lexical_terms(p_text text) RETURNS tsquery[]
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT coalesce(array_agg(('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''')::tsquery),
                    '{}')
      FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, coalesce(p_text, '')))) AS lexeme
$$;

CREATE FUNCTION public.memory_merge_text_pending_lists(p_revision_text boolean) RETURNS bigint
    LANGUAGE sql
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
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

CREATE FUNCTION public.memory_operator_action_agent(p_kind text, p_target uuid, p_details jsonb) RETURNS uuid
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

CREATE FUNCTION public.memory_projection_rule(p_row public.searchable_revisions, p_conversation uuid, p_audience uuid[], p_released uuid[], p_source_count bigint) RETURNS text
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

CREATE FUNCTION public.memory_redact_jsonb(p_doc jsonb, p_texts text[]) RETURNS jsonb
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

CREATE FUNCTION public.memory_redact_jsonb_whole(p_doc jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE WHEN p_doc IS NULL THEN NULL
                ELSE (SELECT coalesce(jsonb_agg(to_jsonb(memory_erasure_marker())), '[]')
                        FROM jsonb_array_elements(CASE jsonb_typeof(p_doc) WHEN 'array' THEN p_doc
                                                                           ELSE jsonb_build_array(p_doc) END))
           END
$$;

CREATE FUNCTION public.memory_redact_occurrences(p_text text, p_texts text[]) RETURNS text
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

CREATE FUNCTION public.memory_redact_text(p_text text, p_texts text[]) RETURNS text
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

CREATE FUNCTION public.memory_refresh_audience_summary(p_revisions uuid[]) RETURNS void
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
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

CREATE FUNCTION public.memory_refresh_searchable(p_entries uuid[]) RETURNS void
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
DECLARE
    removed_ids uuid[];
    added_ids uuid[];
    added_changes bigint;
    removed_changes bigint := 0;
BEGIN
    WITH removed AS (
        DELETE FROM searchable_revisions
         WHERE entry_id IN (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id))
        RETURNING revision_id)
    SELECT coalesce(array_agg(revision_id), '{}') INTO removed_ids FROM removed;
    -- New audiences get their class first. A concurrent writer creating the same class makes this
    -- wait for its commit and then do nothing; the next statement (a fresh snapshot: this function
    -- is volatile) sees the committed class.
    INSERT INTO audience_classes (runtime_agent_id, members, members_digest)
    SELECT DISTINCT e.runtime_agent_id, s.audience, memory_audience_digest(s.audience)
      FROM (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id)) AS changed
      JOIN memory_entries e ON e.id = changed.id
      JOIN revision_audience_summary s ON s.revision_id = e.current_revision_id
     WHERE e.state = 'live' AND s.evidence_known
    ON CONFLICT (runtime_agent_id, members_digest) DO NOTHING;
    -- The rows, and in the same statement the statistics of those that were not there before
    -- (a refresh that puts back the revision it removed records nothing).
    WITH added AS (
        INSERT INTO searchable_revisions (revision_id, entry_id, runtime_agent_id, restriction, restricted_conversation_id,
                                          evidence_known, audience, body_tsv, subject_actor_id, origin_conversation_id,
                                          always_on, created_at, audience_class_id)
        SELECT r.id, e.id, e.runtime_agent_id, e.restriction, e.restricted_conversation_id,
               coalesce(s.evidence_known, false), coalesce(s.audience, '{}'), coalesce(r.body_tsv, ''::tsvector),
               r.subject_actor_id, e.origin_conversation_id, e.always_on, r.created_at, c.id
          FROM (SELECT DISTINCT u.id FROM unnest(p_entries) AS u(id)) AS changed
          JOIN memory_entries e ON e.id = changed.id
          JOIN memory_entry_revisions r ON r.id = e.current_revision_id AND r.entry_id = e.id
                                       AND r.runtime_agent_id = e.runtime_agent_id
          LEFT JOIN revision_audience_summary s ON s.revision_id = r.id
          LEFT JOIN audience_classes c ON s.evidence_known AND c.runtime_agent_id = e.runtime_agent_id
                                      AND c.members_digest = memory_audience_digest(s.audience)
                                      AND c.members = s.audience
         WHERE e.state = 'live'
        RETURNING revision_id, runtime_agent_id, body_tsv, lexeme_count),
    recorded AS (
        INSERT INTO lexical_statistics_pending (runtime_agent_id, sign, lexemes, length)
        SELECT a.runtime_agent_id, 1, tsvector_to_array(a.body_tsv), a.lexeme_count
          FROM added a
         WHERE a.revision_id <> ALL (removed_ids)
        RETURNING 1)
    SELECT coalesce((SELECT array_agg(a.revision_id) FROM added a), '{}'), (SELECT count(*) FROM recorded)
      INTO added_ids, added_changes;
    -- Rows removed and not put back, read from their immutable revisions.
    IF NOT removed_ids <@ added_ids THEN
        INSERT INTO lexical_statistics_pending (runtime_agent_id, sign, lexemes, length)
        SELECT r.runtime_agent_id, -1, tsvector_to_array(coalesce(r.body_tsv, ''::tsvector)),
               memory_lexeme_count(coalesce(r.body_tsv, ''::tsvector))
          FROM unnest(removed_ids) AS x(id) JOIN memory_entry_revisions r ON r.id = x.id
         WHERE x.id <> ALL (added_ids);
        GET DIAGNOSTICS removed_changes = ROW_COUNT;
    END IF;
    IF added_changes + removed_changes >= 64 THEN
        PERFORM memory_lexical_statistics_fold();
    END IF;
END;
$$;

CREATE FUNCTION public.memory_released_revisions(p_agent uuid, p_audience uuid[]) RETURNS TABLE(revision_id uuid)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT g.revision_id
      FROM sharing_grants g
     WHERE g.runtime_agent_id = p_agent AND g.revoked_at IS NULL AND cardinality(p_audience) > 0
       AND NOT EXISTS (SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                        WHERE NOT EXISTS (SELECT 1 FROM sharing_grant_audience ga
                                           WHERE ga.grant_id = g.id AND ga.actor_id = d.actor_id))
$$;

CREATE FUNCTION public.memory_repair_audience_evidence(p_reason text) RETURNS TABLE(source_id uuid, revision_id uuid, rule text, audience uuid[])
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

CREATE FUNCTION public.memory_review_source_evidence(p_source uuid, p_audience uuid[], p_reason text) RETURNS void
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

CREATE FUNCTION public.memory_searchable_after_embeddings() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET plan_cache_mode TO 'force_generic_plan'
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
        BEGIN
            UPDATE searchable_revisions p
               SET embedding_bits = binary_quantize(c.embedding)::varbit
              FROM changed_embeddings c
              JOIN embedding_generations g ON g.id = c.generation_id AND g.state = 'active'
             WHERE p.revision_id = c.revision_id
               AND p.embedding_bits IS DISTINCT FROM binary_quantize(c.embedding)::varbit;
            RETURN NULL;
        END;
        $$;

CREATE FUNCTION public.memory_searchable_after_entries() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET plan_cache_mode TO 'force_generic_plan'
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    changed uuid[] := ARRAY(
        SELECT c.id FROM changed_entries c
         WHERE c.state <> 'live'
            OR EXISTS (SELECT 1 FROM memory_entry_revisions r WHERE r.id = c.current_revision_id));
BEGIN
    IF cardinality(changed) > 0 THEN
        PERFORM memory_refresh_searchable(changed);
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION public.memory_searchable_after_generations() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
        BEGIN
            UPDATE searchable_revisions p
               SET embedding_bits = fresh.bits
              FROM (SELECT s.revision_id, memory_embedding_bits(s.revision_id) AS bits
                      FROM searchable_revisions s) AS fresh
             WHERE p.revision_id = fresh.revision_id AND p.embedding_bits IS DISTINCT FROM fresh.bits;
            RETURN NULL;
        END;
        $$;

CREATE FUNCTION public.memory_searchable_after_summary() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET plan_cache_mode TO 'force_generic_plan'
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    changed uuid[] := ARRAY(
        SELECT e.id FROM changed_summary c
          JOIN memory_entry_revisions r ON r.id = c.revision_id
          JOIN memory_entries e ON e.id = r.entry_id AND e.current_revision_id = r.id);
BEGIN
    IF cardinality(changed) > 0 THEN
        PERFORM memory_refresh_searchable(changed);
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION public.memory_searchable_fill_bits() RETURNS trigger
    LANGUAGE plpgsql
    SET plan_cache_mode TO 'force_generic_plan'
    AS $$
        BEGIN
            NEW.embedding_bits := memory_embedding_bits(NEW.revision_id);
            RETURN NEW;
        END;
        $$;

CREATE FUNCTION public.memory_sharing_missing_voices(p_request uuid) RETURNS uuid[]
    LANGUAGE sql STABLE
    AS $$
    WITH req AS (
        SELECT q.id, q.revision_id,
               coalesce((SELECT array_agg(a.actor_id ORDER BY a.actor_id) FROM sharing_request_audience a
                          WHERE a.request_id = q.id), '{}') AS target
          FROM sharing_requests q WHERE q.id = p_request),
    needed AS (
        SELECT req.id, CASE WHEN cardinality(v.voices) > 0 THEN v.voices
                            ELSE coalesce(ARRAY[r.source_actor_id], '{}') END AS voices
          FROM req
          JOIN memory_entry_revisions r ON r.id = req.revision_id
          CROSS JOIN LATERAL (SELECT memory_uncovered_voices(req.revision_id, req.target) AS voices) v)
    SELECT coalesce(array_agg(x.actor_id ORDER BY x.actor_id), '{}')
      FROM needed CROSS JOIN LATERAL unnest(needed.voices) AS x(actor_id)
     WHERE x.actor_id IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM sharing_confirmations c
                        WHERE c.request_id = needed.id AND c.actor_id = x.actor_id)
$$;

CREATE FUNCTION public.memory_source_audience_intersection(p_revision uuid) RETURNS uuid[]
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(array_agg(x.actor_id ORDER BY x.actor_id), '{}')
      FROM (SELECT a.actor_id
              FROM revision_sources s CROSS JOIN LATERAL unnest(s.audience) AS a(actor_id)
             WHERE s.revision_id = p_revision
             GROUP BY a.actor_id
            HAVING count(*) = (SELECT count(*) FROM revision_sources s2 WHERE s2.revision_id = p_revision)) x
$$;

CREATE FUNCTION public.memory_summary_after_sources() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET plan_cache_mode TO 'force_generic_plan'
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    changed uuid[] := ARRAY(SELECT DISTINCT revision_id FROM changed_sources);
BEGIN
    IF cardinality(changed) > 0 THEN
        PERFORM memory_refresh_audience_summary(changed);
    END IF;
    RETURN NULL;
END;
$$;

CREATE FUNCTION public.memory_uncovered_voices(p_revision uuid, p_target uuid[]) RETURNS uuid[]
    LANGUAGE sql STABLE
    AS $$
    WITH RECURSIVE uncovered(revision_id) AS (
        SELECT p_revision
        UNION
        SELECT s.parent_revision_id
          FROM uncovered u
          JOIN revision_sources s ON s.revision_id = u.revision_id
         WHERE s.parent_revision_id IS NOT NULL
           AND NOT coalesce(s.evidence = 'known' AND s.audience @> p_target, false)
    )
    SELECT coalesce(array_agg(DISTINCT m.sender_actor_id ORDER BY m.sender_actor_id), '{}')
      FROM uncovered u
      JOIN revision_sources s ON s.revision_id = u.revision_id
      JOIN messages m ON m.id = s.message_id
     WHERE NOT coalesce(s.evidence = 'known' AND s.audience @> p_target, false)
$$;

CREATE FUNCTION public.memory_withheld_rules(p_agent uuid, p_conversation uuid, p_audience uuid[], p_query tsquery, p_terms tsquery[], p_limit bigint) RETURNS TABLE(rule text, matches bigint)
    LANGUAGE sql STABLE
    SET gin_fuzzy_search_limit TO '2000'
    AS $$
    WITH released AS (
        SELECT ARRAY(SELECT g.revision_id FROM memory_released_revisions(p_agent, p_audience) g) AS ids
    ), unknown AS (
        SELECT memory_projection_rule(u, p_conversation, p_audience, (SELECT r.ids FROM released r),
                                      s.source_count) AS rule
          FROM searchable_revisions u
          LEFT JOIN revision_audience_summary s ON s.revision_id = u.revision_id
         WHERE u.runtime_agent_id = p_agent AND NOT u.evidence_known AND u.body_tsv @@ p_query
           AND memory_projection_rule(u, p_conversation, p_audience, (SELECT r.ids FROM released r), 1)
               <> 'eligible'
         LIMIT p_limit
    ), known AS (
        SELECT DISTINCT found.revision_id, found.rule
          FROM (SELECT m.revision_id, m.rule
                  FROM unnest(p_terms) AS t(term)
                 CROSS JOIN LATERAL (
                       SELECT k.revision_id,
                              memory_projection_rule(k, p_conversation, p_audience,
                                                     (SELECT r.ids FROM released r), 1) AS rule
                         FROM searchable_revisions k
                        WHERE k.runtime_agent_id = p_agent AND k.evidence_known AND k.body_tsv @@ t.term
                          AND memory_projection_rule(k, p_conversation, p_audience,
                                                     (SELECT r.ids FROM released r), 1) <> 'eligible'
                        LIMIT p_limit) AS m
                 LIMIT p_limit) AS found
         LIMIT p_limit
    ), ruled AS (
        SELECT unknown.rule FROM unknown
        UNION ALL
        SELECT known.rule FROM known
    )
    SELECT ruled.rule, count(*) FROM ruled GROUP BY ruled.rule ORDER BY ruled.rule
$$;

CREATE FUNCTION public.memory_write_amend(p_agent uuid, p_entry uuid, p_expected uuid, p_revision uuid, p_body text, p_subject_update text, p_subject uuid, p_source_actor uuid, p_source_ids uuid[], p_source_agents uuid[], p_source_revisions uuid[], p_source_messages uuid[], p_source_kinds text[], OUT outcome text, OUT current_revision uuid, OUT revision_number integer, OUT subject_changed boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    entry_state memory_entry_state;
    parent uuid;
    parent_number integer;
    parent_body text;
    parent_subject uuid;
    new_body text;
    new_subject uuid;
BEGIN
    IF p_subject_update NOT IN ('keep', 'set', 'clear') THEN
        RAISE EXCEPTION 'unknown subject update %', p_subject_update USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT e.state, e.current_revision_id INTO entry_state, parent
      FROM memory_entries e
     WHERE e.id = p_entry AND e.runtime_agent_id = p_agent
       FOR UPDATE;
    IF NOT FOUND THEN
        outcome := 'unknown_entry';
        RETURN;
    END IF;
    IF entry_state = 'forgotten' THEN
        outcome := 'already_forgotten';
        RETURN;
    END IF;
    current_revision := parent;
    IF parent <> p_expected THEN
        outcome := 'revision_conflict';
        RETURN;
    END IF;
    SELECT r.revision_number, r.body, r.subject_actor_id INTO parent_number, parent_body, parent_subject
      FROM memory_entry_revisions r
     WHERE r.id = parent;
    new_subject := CASE p_subject_update WHEN 'keep' THEN parent_subject WHEN 'set' THEN p_subject END;
    new_body := coalesce(p_body, parent_body);
    subject_changed := new_subject IS DISTINCT FROM parent_subject;
    IF NOT subject_changed AND new_body = parent_body THEN
        outcome := 'unchanged';
        RETURN;
    END IF;

    INSERT INTO memory_entry_revisions (id, entry_id, runtime_agent_id, revision_number, operation, body,
                                        subject_actor_id, source_actor_id)
    VALUES (p_revision, p_entry, p_agent, parent_number + 1, 'amend', new_body, new_subject, p_source_actor);

    -- Every earlier source is kept, so an amendment can never be more shareable than what it
    -- amends; the parent's own parent edges add nothing (their audience is the intersection of
    -- sources that are copied too) and made revision k carry k sources.
    INSERT INTO revision_sources (id, revision_id, runtime_agent_id, kind, message_id, parent_revision_id, evidence,
                                  evidence_basis, audience)
    SELECT gen_random_uuid(), p_revision, s.runtime_agent_id, s.kind, s.message_id, s.parent_revision_id,
           s.evidence, s.evidence_basis, s.audience
      FROM revision_sources s
     WHERE s.revision_id = parent AND s.kind <> 'parent_revision'
    UNION ALL
    SELECT gen_random_uuid(), p_revision, p_agent, 'parent_revision'::revision_source_kind, NULL, parent,
           CASE WHEN k.known THEN 'known' ELSE 'unknown' END::audience_evidence_state,
           CASE WHEN k.known THEN 'intersection of the audiences of that revision''s sources'
                ELSE 'that revision has a source of unknown audience' END,
           CASE WHEN k.known THEN memory_source_audience_intersection(parent) END
      FROM (SELECT count(*) > 0 AND NOT coalesce(bool_or(s.evidence = 'unknown'), false) AS known
              FROM revision_sources s
             WHERE s.revision_id = parent) k;

    IF coalesce(cardinality(p_source_ids), 0) > 0 THEN
        PERFORM memory_insert_message_sources(p_source_ids, p_source_agents, p_source_revisions, p_source_messages,
                                              p_source_kinds);
    END IF;

    UPDATE memory_entries SET current_revision_id = p_revision, updated_at = now() WHERE id = p_entry;
    INSERT INTO index_outbox (runtime_agent_id, revision_id, work) VALUES (p_agent, p_revision, 'index_revision');
    current_revision := p_revision;
    revision_number := parent_number + 1;
    outcome := 'committed';
END;
$$;

CREATE FUNCTION public.memory_write_creates(p_entries uuid[], p_revisions uuid[], p_agents uuid[], p_always_on boolean[], p_restrictions text[], p_restricted_to uuid[], p_origins uuid[], p_bodies text[], p_subjects uuid[], p_source_actors uuid[], p_source_ids uuid[], p_source_agents uuid[], p_source_revisions uuid[], p_source_messages uuid[], p_source_kinds text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- Each entry points at its first revision; that foreign key is deferred to commit.
    INSERT INTO memory_entries (id, runtime_agent_id, always_on, restriction, restricted_conversation_id,
                                origin_conversation_id, current_revision_id)
    SELECT * FROM unnest(p_entries, p_agents, p_always_on, p_restrictions::memory_restriction[], p_restricted_to,
                         p_origins, p_revisions);
    WITH revision AS (
        INSERT INTO memory_entry_revisions (id, entry_id, runtime_agent_id, revision_number, operation, body,
                                            subject_actor_id, source_actor_id)
        SELECT r.id, r.entry_id, r.agent_id, 1, 'create', r.body, r.subject, r.source_actor
          FROM unnest(p_revisions, p_entries, p_agents, p_bodies, p_subjects, p_source_actors)
               AS r(id, entry_id, agent_id, body, subject, source_actor)
        RETURNING id, runtime_agent_id
    )
    INSERT INTO index_outbox (runtime_agent_id, revision_id, work)
    SELECT runtime_agent_id, id, 'index_revision' FROM revision;
    IF coalesce(cardinality(p_source_ids), 0) > 0 THEN
        PERFORM memory_insert_message_sources(p_source_ids, p_source_agents, p_source_revisions, p_source_messages,
                                              p_source_kinds);
    END IF;
END;
$$;

CREATE FUNCTION public.mesh_confirm_sharing_by_source_actor(p_request uuid, p_message uuid) RETURNS uuid
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog', 'public', 'pg_temp'
    AS $$
DECLARE
    req      sharing_requests;
    msg      record;
    missing  uuid[];
    grant_id uuid;
BEGIN
    req := mesh_sharing_request_decidable(p_request);
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
    IF msg.topology <> 'direct' THEN
        RAISE EXCEPTION 'a sharing confirmation must be given in a direct conversation' USING ERRCODE = 'MM005';
    END IF;
    IF msg.recorded_at < req.created_at THEN
        RAISE EXCEPTION 'confirmation message % predates sharing request %', p_message, p_request
            USING ERRCODE = 'MM005';
    END IF;
    missing := memory_sharing_missing_voices(req.id);
    IF NOT (msg.sender_actor_id = ANY (missing)) THEN
        RAISE EXCEPTION 'only a person whose words revision % holds, and who has not confirmed yet, can confirm its release',
            req.revision_id USING ERRCODE = 'MM006';
    END IF;
    INSERT INTO sharing_confirmations (request_id, actor_id, message_id) VALUES (req.id, msg.sender_actor_id, p_message);
    IF cardinality(missing) > 1 THEN
        RETURN NULL;
    END IF;
    grant_id := mesh_grant_from_request(req, 'source_actor_confirmation', msg.sender_actor_id, p_message, NULL,
                                        'confirmed by every voice of the revision through authenticated messages');
    UPDATE sharing_requests
       SET state = 'approved', decided_at = now(), decided_by = 'source_actor:' || msg.sender_actor_id::text,
           decision_reason = 'confirmed by every voice'
     WHERE id = req.id;
    RETURN grant_id;
END;
$$;

CREATE TABLE public.sharing_requests (
    id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    revision_id uuid NOT NULL,
    requested_in_conversation_id uuid NOT NULL,
    requested_by_actor_id uuid NOT NULL,
    target_conversation_id uuid,
    rationale text NOT NULL,
    state public.sharing_request_state DEFAULT 'pending'::public.sharing_request_state NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    decided_at timestamp with time zone,
    decided_by text,
    decision_reason text,
    CONSTRAINT sharing_requests_check CHECK (((state = 'pending'::public.sharing_request_state) = (decided_at IS NULL))),
    CONSTRAINT sharing_requests_rationale_check CHECK (((length(rationale) >= 1) AND (length(rationale) <= 2000)))
);

CREATE FUNCTION public.mesh_grant_from_request(req public.sharing_requests, p_authority public.grant_authority, p_actor uuid, p_message uuid, p_role text, p_reason text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
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

CREATE FUNCTION public.mesh_operator_approve_sharing(p_request uuid, p_reason text) RETURNS uuid
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

CREATE FUNCTION public.mesh_operator_deny_sharing(p_request uuid, p_reason text) RETURNS void
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

CREATE FUNCTION public.mesh_operator_erase(p_erasure uuid, p_scope text, p_target uuid, p_agent uuid, p_reason text, p_previewed uuid[], p_fingerprints bytea[]) RETURNS jsonb
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

CREATE FUNCTION public.mesh_operator_issue_access_token(p_id uuid, p_token_hash bytea, p_agent uuid, p_conversation uuid, p_identity uuid, p_label text, p_expires_at timestamp with time zone, p_reason text) RETURNS void
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

CREATE FUNCTION public.mesh_operator_revoke_access_token(p_token uuid, p_reason text) RETURNS void
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

CREATE FUNCTION public.mesh_operator_revoke_grant(p_grant uuid, p_reason text) RETURNS void
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

CREATE FUNCTION public.mesh_require_operator_login(p_group text) RETURNS void
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

CREATE FUNCTION public.mesh_sharing_request_decidable(p_request uuid) RETURNS public.sharing_requests
    LANGUAGE plpgsql
    SET search_path TO 'public', 'pg_temp'
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

CREATE FUNCTION public.refuse_history_rewrite() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE FUNCTION public.refuse_history_rewrite_except_erasure() RETURNS trigger
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

CREATE TABLE public._sqlx_migrations (
    version bigint NOT NULL,
    description text NOT NULL,
    installed_on timestamp with time zone DEFAULT now() NOT NULL,
    success boolean NOT NULL,
    checksum bytea NOT NULL,
    execution_time bigint NOT NULL
);

CREATE TABLE public.actors (
    id uuid NOT NULL,
    kind public.actor_kind NOT NULL,
    display_name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT actors_display_name_check CHECK (((length(btrim(display_name)) >= 1) AND (length(btrim(display_name)) <= 200)))
);

CREATE TABLE public.agent_turns (
    id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    inbound_message_id uuid NOT NULL,
    outbound_message_id uuid,
    rounds integer NOT NULL,
    tool_calls jsonb DEFAULT '[]'::jsonb NOT NULL,
    ledger jsonb NOT NULL,
    outcome public.agent_turn_outcome NOT NULL,
    failure_reason text,
    unbacked_claims jsonb DEFAULT '[]'::jsonb NOT NULL,
    withheld jsonb,
    retrieval_event_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    used_revision_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    started_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT agent_turns_check CHECK (((outcome = 'delivered'::public.agent_turn_outcome) = (outbound_message_id IS NOT NULL))),
    CONSTRAINT agent_turns_check1 CHECK (((outcome = 'withheld'::public.agent_turn_outcome) = (withheld IS NOT NULL))),
    CONSTRAINT agent_turns_failure_reason_check CHECK (((failure_reason IS NULL) OR ((length(failure_reason) >= 1) AND (length(failure_reason) <= 2000)))),
    CONSTRAINT agent_turns_rounds_check CHECK (((rounds >= 0) AND (rounds <= 3)))
);

CREATE TABLE public.audience_classes (
    id bigint NOT NULL,
    runtime_agent_id uuid NOT NULL,
    members uuid[] NOT NULL,
    members_digest bytea NOT NULL
);

ALTER TABLE public.audience_classes ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.audience_classes_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.connector_identities (
    id uuid NOT NULL,
    connector text NOT NULL,
    external_id text NOT NULL,
    actor_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT connector_identities_connector_check CHECK (((length(connector) >= 1) AND (length(connector) <= 100))),
    CONSTRAINT connector_identities_external_id_check CHECK (((length(external_id) >= 1) AND (length(external_id) <= 200)))
);

CREATE TABLE public.conversation_memberships (
    id bigint NOT NULL,
    conversation_id uuid NOT NULL,
    actor_id uuid NOT NULL,
    joined_at timestamp with time zone DEFAULT now() NOT NULL,
    left_at timestamp with time zone,
    CONSTRAINT conversation_memberships_check CHECK (((left_at IS NULL) OR (left_at >= joined_at)))
);

CREATE SEQUENCE public.conversation_memberships_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.conversation_memberships_id_seq OWNED BY public.conversation_memberships.id;

CREATE TABLE public.conversation_observations (
    id bigint NOT NULL,
    conversation_id uuid NOT NULL,
    topology public.conversation_topology NOT NULL,
    counterpart_identity_id uuid,
    authenticated boolean NOT NULL,
    observed_at timestamp with time zone NOT NULL
);

CREATE SEQUENCE public.conversation_observations_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.conversation_observations_id_seq OWNED BY public.conversation_observations.id;

CREATE TABLE public.conversations (
    id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    connector text NOT NULL,
    external_channel_id text NOT NULL,
    topology public.conversation_topology NOT NULL,
    title text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT conversations_connector_check CHECK (((length(connector) >= 1) AND (length(connector) <= 100))),
    CONSTRAINT conversations_external_channel_id_check CHECK (((length(external_channel_id) >= 1) AND (length(external_channel_id) <= 200)))
);

CREATE TABLE public.embedding_generations (
    id bigint NOT NULL,
    provider text NOT NULL,
    model text NOT NULL,
    dimension integer NOT NULL,
    state public.embedding_generation_state DEFAULT 'building'::public.embedding_generation_state NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    activated_at timestamp with time zone,
    retired_at timestamp with time zone,
    document_form text NOT NULL,
    CONSTRAINT embedding_generations_dimension_check CHECK (((dimension >= 1) AND (dimension <= 16000))),
    CONSTRAINT embedding_generations_document_form_check CHECK (((length(document_form) >= 1) AND (length(document_form) <= 100))),
    CONSTRAINT embedding_generations_model_check CHECK (((length(model) >= 1) AND (length(model) <= 200))),
    CONSTRAINT embedding_generations_provider_check CHECK (((length(provider) >= 1) AND (length(provider) <= 100)))
);

CREATE SEQUENCE public.embedding_generations_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.embedding_generations_id_seq OWNED BY public.embedding_generations.id;

CREATE TABLE public.erased_messages (
    message_id uuid NOT NULL,
    erasure_id uuid NOT NULL
);

CREATE TABLE public.erased_revisions (
    revision_id uuid NOT NULL,
    erasure_id uuid NOT NULL
);

CREATE TABLE public.erasure_fingerprints (
    erasure_id uuid NOT NULL,
    fingerprint bytea NOT NULL,
    CONSTRAINT erasure_fingerprints_fingerprint_check CHECK ((octet_length(fingerprint) = 16))
);

CREATE TABLE public.erasures (
    id uuid NOT NULL,
    scope text NOT NULL,
    target_id uuid NOT NULL,
    runtime_agent_id uuid,
    erased_by text DEFAULT SESSION_USER NOT NULL,
    erased_at timestamp with time zone DEFAULT now() NOT NULL,
    reason text NOT NULL,
    counts jsonb NOT NULL,
    fingerprinted boolean NOT NULL,
    recorded_in xid8 DEFAULT pg_current_xact_id() NOT NULL,
    CONSTRAINT erasures_reason_check CHECK (((length(btrim(reason)) >= 1) AND (length(btrim(reason)) <= 2000))),
    CONSTRAINT erasures_scope_check CHECK ((scope = ANY (ARRAY['entry'::text, 'person'::text])))
);

CREATE TABLE public.evidence_repairs (
    id bigint NOT NULL,
    source_id uuid NOT NULL,
    revision_id uuid NOT NULL,
    rule text NOT NULL,
    audience uuid[] NOT NULL,
    repaired_at timestamp with time zone DEFAULT now() NOT NULL,
    repaired_by text DEFAULT SESSION_USER NOT NULL,
    reason text NOT NULL,
    CONSTRAINT evidence_repairs_reason_check CHECK (((length(btrim(reason)) >= 1) AND (length(btrim(reason)) <= 2000))),
    CONSTRAINT evidence_repairs_rule_check CHECK ((rule = ANY (ARRAY['direct_topology'::text, 'later_direct_observation'::text, 'derived_from_known_revision'::text, 'operator_review'::text])))
);

CREATE SEQUENCE public.evidence_repairs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.evidence_repairs_id_seq OWNED BY public.evidence_repairs.id;

CREATE TABLE public.index_outbox (
    id bigint NOT NULL,
    runtime_agent_id uuid NOT NULL,
    revision_id uuid NOT NULL,
    work public.index_work_kind NOT NULL,
    enqueued_at timestamp with time zone DEFAULT now() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    last_error_category text,
    gave_up_at timestamp with time zone,
    CONSTRAINT index_outbox_attempts_check CHECK ((attempts >= 0))
);

CREATE SEQUENCE public.index_outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.index_outbox_id_seq OWNED BY public.index_outbox.id;

CREATE TABLE public.lexical_corpus_statistics (
    runtime_agent_id uuid NOT NULL,
    documents bigint NOT NULL,
    lexemes bigint NOT NULL
);

CREATE TABLE public.lexical_statistics_pending (
    runtime_agent_id uuid NOT NULL,
    sign smallint NOT NULL,
    lexemes text[] NOT NULL,
    length integer NOT NULL,
    CONSTRAINT lexical_statistics_pending_sign_check CHECK ((sign = ANY (ARRAY['-1'::integer, 1])))
);

CREATE VIEW public.lexical_corpus_totals AS
 SELECT runtime_agent_id,
    (sum(documents))::bigint AS documents,
    (sum(lexemes))::bigint AS lexemes
   FROM ( SELECT lexical_corpus_statistics.runtime_agent_id,
            lexical_corpus_statistics.documents,
            lexical_corpus_statistics.lexemes
           FROM public.lexical_corpus_statistics
        UNION ALL
         SELECT lexical_statistics_pending.runtime_agent_id,
            lexical_statistics_pending.sign,
            (lexical_statistics_pending.sign * lexical_statistics_pending.length)
           FROM public.lexical_statistics_pending) layers
  GROUP BY runtime_agent_id;

CREATE TABLE public.lexical_term_statistics (
    runtime_agent_id uuid NOT NULL,
    lexeme text NOT NULL,
    documents bigint NOT NULL
);

CREATE VIEW public.lexical_term_totals AS
 SELECT runtime_agent_id,
    lexeme,
    (sum(documents))::bigint AS documents
   FROM ( SELECT lexical_term_statistics.runtime_agent_id,
            lexical_term_statistics.lexeme,
            lexical_term_statistics.documents
           FROM public.lexical_term_statistics
        UNION ALL
         SELECT p.runtime_agent_id,
            u.lexeme,
            p.sign
           FROM (public.lexical_statistics_pending p
             CROSS JOIN LATERAL unnest(p.lexemes) u(lexeme))) layers
  GROUP BY runtime_agent_id, lexeme;

CREATE TABLE public.mcp_access_tokens (
    id uuid NOT NULL,
    token_hash bytea NOT NULL,
    runtime_agent_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    identity_id uuid NOT NULL,
    label text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone,
    expires_at timestamp with time zone,
    CONSTRAINT mcp_access_tokens_check CHECK (((revoked_at IS NULL) OR (revoked_at >= created_at))),
    CONSTRAINT mcp_access_tokens_expires_after_issue CHECK (((expires_at IS NULL) OR (expires_at > created_at))),
    CONSTRAINT mcp_access_tokens_label_check CHECK ((length(label) <= 200)),
    CONSTRAINT mcp_access_tokens_token_hash_check CHECK ((octet_length(token_hash) = 32))
);

CREATE TABLE public.memory_entries (
    id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    state public.memory_entry_state DEFAULT 'live'::public.memory_entry_state NOT NULL,
    always_on boolean DEFAULT false NOT NULL,
    restriction public.memory_restriction DEFAULT 'none'::public.memory_restriction NOT NULL,
    restricted_conversation_id uuid,
    origin_conversation_id uuid,
    current_revision_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    forgotten_at timestamp with time zone,
    CONSTRAINT memory_entries_check CHECK (((restriction = 'conversation_only'::public.memory_restriction) = (restricted_conversation_id IS NOT NULL))),
    CONSTRAINT memory_entries_check1 CHECK (((state = 'forgotten'::public.memory_entry_state) = (forgotten_at IS NOT NULL)))
);

CREATE TABLE public.memory_entry_revisions (
    id uuid NOT NULL,
    entry_id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    revision_number integer NOT NULL,
    operation public.revision_operation NOT NULL,
    body text NOT NULL,
    subject_actor_id uuid,
    source_actor_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    body_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, body)) STORED,
    CONSTRAINT memory_entry_revisions_body_check CHECK (((length(btrim(body)) >= 1) AND (length(btrim(body)) <= 4000))),
    CONSTRAINT memory_entry_revisions_check CHECK (((operation = 'create'::public.revision_operation) = (revision_number = 1))),
    CONSTRAINT memory_entry_revisions_revision_number_check CHECK ((revision_number >= 1))
);

CREATE TABLE public.memory_retrieval_events (
    id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    current_actor_id uuid,
    mode public.retrieval_mode NOT NULL,
    query_digest bytea,
    query_was_empty boolean NOT NULL,
    destination_audience uuid[] NOT NULL,
    selected_revision_ids uuid[] NOT NULL,
    components jsonb NOT NULL,
    skipped_oversized jsonb DEFAULT '[]'::jsonb NOT NULL,
    withheld jsonb DEFAULT '{}'::jsonb NOT NULL,
    candidate_count integer NOT NULL,
    cost_tokens integer NOT NULL,
    token_budget integer NOT NULL,
    count_budget integer NOT NULL,
    elapsed_micros bigint NOT NULL,
    degradation_category text,
    degradation_categories text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    cost_bound text DEFAULT 'bytes'::text NOT NULL,
    CONSTRAINT memory_retrieval_events_candidate_count_check CHECK ((candidate_count >= 0)),
    CONSTRAINT memory_retrieval_events_cost_bound_check CHECK ((cost_bound = ANY (ARRAY['bytes'::text, 'tokenizer'::text]))),
    CONSTRAINT memory_retrieval_events_cost_tokens_check CHECK ((cost_tokens >= 0)),
    CONSTRAINT memory_retrieval_events_count_budget_check CHECK ((count_budget >= 0)),
    CONSTRAINT memory_retrieval_events_elapsed_micros_check CHECK ((elapsed_micros >= 0)),
    CONSTRAINT memory_retrieval_events_query_digest_check CHECK (((query_digest IS NULL) OR (length(query_digest) = 32))),
    CONSTRAINT memory_retrieval_events_token_budget_check CHECK ((token_budget >= 0))
);

CREATE TABLE public.messages (
    id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    direction public.message_direction NOT NULL,
    sender_actor_id uuid NOT NULL,
    sender_identity_id uuid,
    external_message_id text,
    body text NOT NULL,
    sent_at timestamp with time zone NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.operator_actions (
    id bigint NOT NULL,
    acted_at timestamp with time zone DEFAULT now() NOT NULL,
    role_name text DEFAULT SESSION_USER NOT NULL,
    action text NOT NULL,
    target_kind text NOT NULL,
    target_id uuid NOT NULL,
    reason text NOT NULL,
    details jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT operator_actions_action_check CHECK (((length(action) >= 1) AND (length(action) <= 100))),
    CONSTRAINT operator_actions_reason_check CHECK (((length(btrim(reason)) >= 1) AND (length(btrim(reason)) <= 2000))),
    CONSTRAINT operator_actions_target_kind_check CHECK (((length(target_kind) >= 1) AND (length(target_kind) <= 100)))
);

CREATE SEQUENCE public.operator_actions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.operator_actions_id_seq OWNED BY public.operator_actions.id;

CREATE TABLE public.revision_audience_summary (
    revision_id uuid NOT NULL,
    source_count integer NOT NULL,
    evidence_known boolean NOT NULL,
    audience uuid[] NOT NULL,
    CONSTRAINT revision_audience_summary_source_count_check CHECK ((source_count >= 0))
);

CREATE TABLE public.revision_embeddings (
    generation_id bigint NOT NULL,
    revision_id uuid NOT NULL,
    model text NOT NULL,
    dimension integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    embedding public.halfvec NOT NULL,
    CONSTRAINT revision_embeddings_dimension_check CHECK ((dimension >= 1))
);

CREATE TABLE public.revision_sources (
    id uuid NOT NULL,
    revision_id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    kind public.revision_source_kind NOT NULL,
    message_id uuid,
    parent_revision_id uuid,
    evidence public.audience_evidence_state NOT NULL,
    evidence_basis text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    audience uuid[],
    CONSTRAINT revision_sources_audience_iff_known CHECK (((evidence = 'known'::public.audience_evidence_state) = (audience IS NOT NULL))),
    CONSTRAINT revision_sources_check CHECK (((kind = ANY (ARRAY['message'::public.revision_source_kind, 'history_message'::public.revision_source_kind])) = (message_id IS NOT NULL))),
    CONSTRAINT revision_sources_check1 CHECK (((kind = ANY (ARRAY['parent_revision'::public.revision_source_kind, 'retrieved_revision'::public.revision_source_kind])) = (parent_revision_id IS NOT NULL))),
    CONSTRAINT revision_sources_evidence_basis_check CHECK (((length(evidence_basis) >= 1) AND (length(evidence_basis) <= 500)))
);

CREATE TABLE public.runtime_agents (
    id uuid NOT NULL,
    name text NOT NULL,
    actor_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT runtime_agents_name_check CHECK (((length(btrim(name)) >= 1) AND (length(btrim(name)) <= 200)))
);

CREATE TABLE public.sharing_confirmations (
    request_id uuid NOT NULL,
    actor_id uuid NOT NULL,
    message_id uuid NOT NULL,
    confirmed_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.sharing_grant_audience (
    grant_id uuid NOT NULL,
    actor_id uuid NOT NULL
);

CREATE TABLE public.sharing_grants (
    id uuid NOT NULL,
    runtime_agent_id uuid NOT NULL,
    revision_id uuid NOT NULL,
    request_id uuid,
    authority public.grant_authority NOT NULL,
    confirmed_by_actor_id uuid,
    confirmed_by_message_id uuid,
    approved_by_role text,
    reason text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    revoked_by text,
    CONSTRAINT sharing_grants_check CHECK (((authority = 'source_actor_confirmation'::public.grant_authority) = ((confirmed_by_actor_id IS NOT NULL) AND (confirmed_by_message_id IS NOT NULL)))),
    CONSTRAINT sharing_grants_check1 CHECK (((authority = 'operator_approval'::public.grant_authority) = (approved_by_role IS NOT NULL))),
    CONSTRAINT sharing_grants_check2 CHECK (((revoked_at IS NULL) = (revoked_by IS NULL))),
    CONSTRAINT sharing_grants_reason_check CHECK (((length(reason) >= 1) AND (length(reason) <= 2000)))
);

CREATE TABLE public.sharing_request_audience (
    request_id uuid NOT NULL,
    actor_id uuid NOT NULL
);

ALTER TABLE ONLY public.conversation_memberships ALTER COLUMN id SET DEFAULT nextval('public.conversation_memberships_id_seq'::regclass);

ALTER TABLE ONLY public.conversation_observations ALTER COLUMN id SET DEFAULT nextval('public.conversation_observations_id_seq'::regclass);

ALTER TABLE ONLY public.embedding_generations ALTER COLUMN id SET DEFAULT nextval('public.embedding_generations_id_seq'::regclass);

ALTER TABLE ONLY public.evidence_repairs ALTER COLUMN id SET DEFAULT nextval('public.evidence_repairs_id_seq'::regclass);

ALTER TABLE ONLY public.index_outbox ALTER COLUMN id SET DEFAULT nextval('public.index_outbox_id_seq'::regclass);

ALTER TABLE ONLY public.operator_actions ALTER COLUMN id SET DEFAULT nextval('public.operator_actions_id_seq'::regclass);

ALTER TABLE ONLY public._sqlx_migrations
    ADD CONSTRAINT _sqlx_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.actors
    ADD CONSTRAINT actors_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.agent_turns
    ADD CONSTRAINT agent_turns_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.audience_classes
    ADD CONSTRAINT audience_classes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.audience_classes
    ADD CONSTRAINT audience_classes_runtime_agent_id_members_digest_key UNIQUE (runtime_agent_id, members_digest);

ALTER TABLE ONLY public.connector_identities
    ADD CONSTRAINT connector_identities_connector_external_id_key UNIQUE (connector, external_id);

ALTER TABLE ONLY public.connector_identities
    ADD CONSTRAINT connector_identities_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.conversation_memberships
    ADD CONSTRAINT conversation_memberships_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.conversation_observations
    ADD CONSTRAINT conversation_observations_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.conversations
    ADD CONSTRAINT conversations_id_runtime_agent_id_key UNIQUE (id, runtime_agent_id);

ALTER TABLE ONLY public.conversations
    ADD CONSTRAINT conversations_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.conversations
    ADD CONSTRAINT conversations_runtime_agent_id_connector_external_channel_i_key UNIQUE (runtime_agent_id, connector, external_channel_id);

ALTER TABLE ONLY public.embedding_generations
    ADD CONSTRAINT embedding_generations_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.erased_messages
    ADD CONSTRAINT erased_messages_pkey PRIMARY KEY (message_id);

ALTER TABLE ONLY public.erased_revisions
    ADD CONSTRAINT erased_revisions_pkey PRIMARY KEY (revision_id);

ALTER TABLE ONLY public.erasure_fingerprints
    ADD CONSTRAINT erasure_fingerprints_pkey PRIMARY KEY (erasure_id, fingerprint);

ALTER TABLE ONLY public.erasures
    ADD CONSTRAINT erasures_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.evidence_repairs
    ADD CONSTRAINT evidence_repairs_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.index_outbox
    ADD CONSTRAINT index_outbox_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.lexical_corpus_statistics
    ADD CONSTRAINT lexical_corpus_statistics_pkey PRIMARY KEY (runtime_agent_id);

ALTER TABLE ONLY public.lexical_term_statistics
    ADD CONSTRAINT lexical_term_statistics_pkey PRIMARY KEY (runtime_agent_id, lexeme);

ALTER TABLE ONLY public.mcp_access_tokens
    ADD CONSTRAINT mcp_access_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.mcp_access_tokens
    ADD CONSTRAINT mcp_access_tokens_token_hash_key UNIQUE (token_hash);

ALTER TABLE ONLY public.memory_entries
    ADD CONSTRAINT memory_entries_current_revision_id_key UNIQUE (current_revision_id);

ALTER TABLE ONLY public.memory_entries
    ADD CONSTRAINT memory_entries_id_runtime_agent_id_key UNIQUE (id, runtime_agent_id);

ALTER TABLE ONLY public.memory_entries
    ADD CONSTRAINT memory_entries_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.memory_entry_revisions
    ADD CONSTRAINT memory_entry_revisions_entry_id_revision_number_key UNIQUE (entry_id, revision_number);

ALTER TABLE ONLY public.memory_entry_revisions
    ADD CONSTRAINT memory_entry_revisions_id_entry_id_key UNIQUE (id, entry_id);

ALTER TABLE ONLY public.memory_entry_revisions
    ADD CONSTRAINT memory_entry_revisions_id_runtime_agent_id_key UNIQUE (id, runtime_agent_id);

ALTER TABLE ONLY public.memory_entry_revisions
    ADD CONSTRAINT memory_entry_revisions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.memory_retrieval_events
    ADD CONSTRAINT memory_retrieval_events_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_id_runtime_agent_id_key UNIQUE (id, runtime_agent_id);

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.operator_actions
    ADD CONSTRAINT operator_actions_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.revision_audience_summary
    ADD CONSTRAINT revision_audience_summary_pkey PRIMARY KEY (revision_id);

ALTER TABLE ONLY public.revision_embeddings
    ADD CONSTRAINT revision_embeddings_pkey PRIMARY KEY (generation_id, revision_id);

ALTER TABLE ONLY public.revision_sources
    ADD CONSTRAINT revision_sources_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.runtime_agents
    ADD CONSTRAINT runtime_agents_actor_id_key UNIQUE (actor_id);

ALTER TABLE ONLY public.runtime_agents
    ADD CONSTRAINT runtime_agents_name_key UNIQUE (name);

ALTER TABLE ONLY public.runtime_agents
    ADD CONSTRAINT runtime_agents_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.searchable_revisions
    ADD CONSTRAINT searchable_revisions_entry_id_key UNIQUE (entry_id);

ALTER TABLE ONLY public.searchable_revisions
    ADD CONSTRAINT searchable_revisions_pkey PRIMARY KEY (revision_id);

ALTER TABLE ONLY public.sharing_confirmations
    ADD CONSTRAINT sharing_confirmations_pkey PRIMARY KEY (request_id, actor_id);

ALTER TABLE ONLY public.sharing_grant_audience
    ADD CONSTRAINT sharing_grant_audience_pkey PRIMARY KEY (grant_id, actor_id);

ALTER TABLE ONLY public.sharing_grants
    ADD CONSTRAINT sharing_grants_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.sharing_request_audience
    ADD CONSTRAINT sharing_request_audience_pkey PRIMARY KEY (request_id, actor_id);

ALTER TABLE ONLY public.sharing_requests
    ADD CONSTRAINT sharing_requests_pkey PRIMARY KEY (id);

CREATE INDEX agent_turns_agent_time ON public.agent_turns USING btree (runtime_agent_id, created_at DESC);

CREATE INDEX agent_turns_conversation ON public.agent_turns USING btree (conversation_id, created_at DESC);

CREATE INDEX audience_classes_members ON public.audience_classes USING gin (members);

CREATE INDEX connector_identities_actor ON public.connector_identities USING btree (actor_id);

CREATE INDEX conversation_memberships_actor ON public.conversation_memberships USING btree (actor_id);

CREATE INDEX conversation_memberships_history ON public.conversation_memberships USING btree (conversation_id, joined_at) INCLUDE (actor_id, left_at);

CREATE UNIQUE INDEX conversation_memberships_open ON public.conversation_memberships USING btree (conversation_id, actor_id) WHERE (left_at IS NULL);

CREATE INDEX conversation_observations_conversation ON public.conversation_observations USING btree (conversation_id);

CREATE UNIQUE INDEX embedding_generations_one_active ON public.embedding_generations USING btree ((true)) WHERE (state = 'active'::public.embedding_generation_state);

CREATE UNIQUE INDEX embedding_generations_one_building ON public.embedding_generations USING btree ((true)) WHERE (state = 'building'::public.embedding_generation_state);

CREATE INDEX erased_messages_erasure ON public.erased_messages USING btree (erasure_id);

CREATE INDEX erased_revisions_erasure ON public.erased_revisions USING btree (erasure_id);

CREATE INDEX erasures_recorded_in ON public.erasures USING btree (recorded_in);

CREATE INDEX evidence_repairs_source ON public.evidence_repairs USING btree (source_id);

CREATE INDEX index_outbox_due ON public.index_outbox USING btree (next_attempt_at, id) WHERE ((completed_at IS NULL) AND (gave_up_at IS NULL));

CREATE INDEX index_outbox_pending ON public.index_outbox USING btree (next_attempt_at) WHERE (completed_at IS NULL);

CREATE INDEX lexical_statistics_pending_agent ON public.lexical_statistics_pending USING btree (runtime_agent_id);

CREATE INDEX mcp_access_tokens_agent ON public.mcp_access_tokens USING btree (runtime_agent_id, created_at);

CREATE INDEX memory_entries_agent_keyset ON public.memory_entries USING btree (runtime_agent_id, id DESC);

CREATE INDEX memory_entries_agent_state ON public.memory_entries USING btree (runtime_agent_id, state);

CREATE INDEX memory_entries_always_on ON public.memory_entries USING btree (runtime_agent_id) WHERE (always_on AND (state = 'live'::public.memory_entry_state));

CREATE INDEX memory_entries_origin_conversation ON public.memory_entries USING btree (origin_conversation_id) WHERE (state = 'live'::public.memory_entry_state);

CREATE INDEX memory_entries_short_id ON public.memory_entries USING btree ("right"((id)::text, 12));

CREATE INDEX memory_entries_state_keyset ON public.memory_entries USING btree (state, id DESC);

CREATE INDEX memory_entry_revisions_agent_created ON public.memory_entry_revisions USING btree (runtime_agent_id, created_at DESC);

CREATE INDEX memory_entry_revisions_subject ON public.memory_entry_revisions USING btree (subject_actor_id);

CREATE INDEX memory_entry_revisions_subject_entry ON public.memory_entry_revisions USING btree (subject_actor_id, entry_id DESC) WHERE (subject_actor_id IS NOT NULL);

CREATE INDEX memory_entry_revisions_tsv ON public.memory_entry_revisions USING gin (body_tsv);

CREATE INDEX memory_retrieval_events_agent_time ON public.memory_retrieval_events USING btree (runtime_agent_id, created_at DESC);

CREATE INDEX messages_conversation_time ON public.messages USING btree (conversation_id, sent_at);

CREATE INDEX revision_embeddings_revision ON public.revision_embeddings USING btree (revision_id);

CREATE INDEX revision_sources_message ON public.revision_sources USING btree (message_id) WHERE (message_id IS NOT NULL);

CREATE INDEX revision_sources_parent ON public.revision_sources USING btree (parent_revision_id) WHERE (parent_revision_id IS NOT NULL);

CREATE INDEX revision_sources_revision ON public.revision_sources USING btree (revision_id);

CREATE INDEX revision_sources_unknown ON public.revision_sources USING btree (revision_id) WHERE (evidence = 'unknown'::public.audience_evidence_state);

CREATE INDEX revision_sources_unknown_keyset ON public.revision_sources USING btree (revision_id DESC) WHERE (evidence = 'unknown'::public.audience_evidence_state);

CREATE INDEX searchable_revisions_always_on ON public.searchable_revisions USING btree (runtime_agent_id, created_at DESC) WHERE always_on;

CREATE INDEX searchable_revisions_class ON public.searchable_revisions USING btree (audience_class_id, created_at DESC, revision_id) INCLUDE (entry_id, subject_actor_id, origin_conversation_id, always_on, restriction, restricted_conversation_id, embedding_bits) WHERE (audience_class_id IS NOT NULL);

CREATE INDEX searchable_revisions_origin ON public.searchable_revisions USING btree (runtime_agent_id, origin_conversation_id, created_at DESC);

CREATE INDEX searchable_revisions_subject ON public.searchable_revisions USING btree (runtime_agent_id, subject_actor_id, created_at DESC);

CREATE INDEX searchable_revisions_text_audience ON public.searchable_revisions USING gin (body_tsv, audience) WITH (gin_pending_list_limit='4096');

CREATE INDEX searchable_revisions_unknown_text ON public.searchable_revisions USING gin (body_tsv) WITH (gin_pending_list_limit='4096') WHERE (NOT evidence_known);

CREATE INDEX sharing_grants_revision_live ON public.sharing_grants USING btree (revision_id) WHERE (revoked_at IS NULL);

CREATE INDEX sharing_requests_pending ON public.sharing_requests USING btree (created_at) WHERE (state = 'pending'::public.sharing_request_state);

CREATE TRIGGER agent_turns_append_only BEFORE DELETE OR UPDATE ON public.agent_turns FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite_except_erasure('tool_calls', 'ledger', 'unbacked_claims', 'withheld', 'failure_reason');

CREATE TRIGGER agent_turns_no_truncate BEFORE TRUNCATE ON public.agent_turns FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER conversation_observations_append_only BEFORE DELETE OR UPDATE ON public.conversation_observations FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE CONSTRAINT TRIGGER embedding_generations_searchable_insert AFTER INSERT ON public.embedding_generations DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ((new.state = 'active'::public.embedding_generation_state)) EXECUTE FUNCTION public.memory_searchable_after_generations();

CREATE CONSTRAINT TRIGGER embedding_generations_searchable_update AFTER UPDATE OF state ON public.embedding_generations DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (((old.state IS DISTINCT FROM new.state) AND ((old.state = 'active'::public.embedding_generation_state) OR (new.state = 'active'::public.embedding_generation_state)))) EXECUTE FUNCTION public.memory_searchable_after_generations();

CREATE TRIGGER erased_messages_append_only BEFORE DELETE OR UPDATE ON public.erased_messages FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER erased_revisions_append_only BEFORE DELETE OR UPDATE ON public.erased_revisions FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER erasure_fingerprints_append_only BEFORE DELETE OR UPDATE ON public.erasure_fingerprints FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER erasures_append_only BEFORE DELETE OR UPDATE ON public.erasures FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER erasures_no_truncate BEFORE TRUNCATE ON public.erasures FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER evidence_repairs_append_only BEFORE DELETE OR UPDATE ON public.evidence_repairs FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite_except_erasure('reason');

CREATE TRIGGER memory_entries_searchable_insert AFTER INSERT ON public.memory_entries REFERENCING NEW TABLE AS changed_entries FOR EACH STATEMENT EXECUTE FUNCTION public.memory_searchable_after_entries();

CREATE TRIGGER memory_entries_searchable_update AFTER UPDATE ON public.memory_entries REFERENCING NEW TABLE AS changed_entries FOR EACH STATEMENT EXECUTE FUNCTION public.memory_searchable_after_entries();

CREATE TRIGGER memory_entry_revisions_immutable BEFORE DELETE OR UPDATE ON public.memory_entry_revisions FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite_except_erasure('body', 'body_tsv');

CREATE TRIGGER memory_entry_revisions_no_truncate BEFORE TRUNCATE ON public.memory_entry_revisions FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER memory_retrieval_events_append_only BEFORE DELETE OR UPDATE ON public.memory_retrieval_events FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER messages_append_only BEFORE DELETE OR UPDATE ON public.messages FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite_except_erasure('body');

CREATE TRIGGER messages_no_truncate BEFORE TRUNCATE ON public.messages FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER operator_actions_append_only BEFORE DELETE OR UPDATE ON public.operator_actions FOR EACH ROW EXECUTE FUNCTION public.refuse_history_rewrite_except_erasure('reason', 'details');

CREATE TRIGGER operator_actions_no_truncate BEFORE TRUNCATE ON public.operator_actions FOR EACH STATEMENT EXECUTE FUNCTION public.refuse_history_rewrite();

CREATE TRIGGER revision_audience_summary_searchable_insert AFTER INSERT ON public.revision_audience_summary REFERENCING NEW TABLE AS changed_summary FOR EACH STATEMENT EXECUTE FUNCTION public.memory_searchable_after_summary();

CREATE TRIGGER revision_audience_summary_searchable_update AFTER UPDATE ON public.revision_audience_summary REFERENCING NEW TABLE AS changed_summary FOR EACH STATEMENT EXECUTE FUNCTION public.memory_searchable_after_summary();

CREATE TRIGGER revision_embeddings_searchable_insert AFTER INSERT ON public.revision_embeddings REFERENCING NEW TABLE AS changed_embeddings FOR EACH STATEMENT EXECUTE FUNCTION public.memory_searchable_after_embeddings();

CREATE TRIGGER revision_embeddings_searchable_update AFTER UPDATE ON public.revision_embeddings REFERENCING NEW TABLE AS changed_embeddings FOR EACH STATEMENT EXECUTE FUNCTION public.memory_searchable_after_embeddings();

CREATE TRIGGER revision_sources_summary_insert AFTER INSERT ON public.revision_sources REFERENCING NEW TABLE AS changed_sources FOR EACH STATEMENT EXECUTE FUNCTION public.memory_summary_after_sources();

CREATE TRIGGER revision_sources_summary_update AFTER UPDATE ON public.revision_sources REFERENCING NEW TABLE AS changed_sources FOR EACH STATEMENT EXECUTE FUNCTION public.memory_summary_after_sources();

CREATE TRIGGER searchable_revisions_fill_bits BEFORE INSERT ON public.searchable_revisions FOR EACH ROW EXECUTE FUNCTION public.memory_searchable_fill_bits();

CREATE TRIGGER searchable_revisions_lexical_statistics_frozen BEFORE UPDATE ON public.searchable_revisions FOR EACH ROW WHEN (((old.body_tsv IS DISTINCT FROM new.body_tsv) OR (old.runtime_agent_id IS DISTINCT FROM new.runtime_agent_id))) EXECUTE FUNCTION public.memory_lexical_statistics_refuse_update();

CREATE TRIGGER searchable_revisions_lexical_statistics_truncate AFTER TRUNCATE ON public.searchable_revisions FOR EACH STATEMENT EXECUTE FUNCTION public.memory_lexical_statistics_after_truncate();

ALTER TABLE ONLY public.agent_turns
    ADD CONSTRAINT agent_turns_conversation_id_runtime_agent_id_fkey FOREIGN KEY (conversation_id, runtime_agent_id) REFERENCES public.conversations(id, runtime_agent_id);

ALTER TABLE ONLY public.agent_turns
    ADD CONSTRAINT agent_turns_inbound_message_id_runtime_agent_id_fkey FOREIGN KEY (inbound_message_id, runtime_agent_id) REFERENCES public.messages(id, runtime_agent_id);

ALTER TABLE ONLY public.agent_turns
    ADD CONSTRAINT agent_turns_outbound_message_id_runtime_agent_id_fkey FOREIGN KEY (outbound_message_id, runtime_agent_id) REFERENCES public.messages(id, runtime_agent_id);

ALTER TABLE ONLY public.agent_turns
    ADD CONSTRAINT agent_turns_runtime_agent_id_fkey FOREIGN KEY (runtime_agent_id) REFERENCES public.runtime_agents(id);

ALTER TABLE ONLY public.connector_identities
    ADD CONSTRAINT connector_identities_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.conversation_memberships
    ADD CONSTRAINT conversation_memberships_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.conversation_memberships
    ADD CONSTRAINT conversation_memberships_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES public.conversations(id);

ALTER TABLE ONLY public.conversation_observations
    ADD CONSTRAINT conversation_observations_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES public.conversations(id);

ALTER TABLE ONLY public.conversation_observations
    ADD CONSTRAINT conversation_observations_counterpart_identity_id_fkey FOREIGN KEY (counterpart_identity_id) REFERENCES public.connector_identities(id);

ALTER TABLE ONLY public.conversations
    ADD CONSTRAINT conversations_runtime_agent_id_fkey FOREIGN KEY (runtime_agent_id) REFERENCES public.runtime_agents(id);

ALTER TABLE ONLY public.erased_messages
    ADD CONSTRAINT erased_messages_erasure_id_fkey FOREIGN KEY (erasure_id) REFERENCES public.erasures(id);

ALTER TABLE ONLY public.erased_messages
    ADD CONSTRAINT erased_messages_message_id_fkey FOREIGN KEY (message_id) REFERENCES public.messages(id);

ALTER TABLE ONLY public.erased_revisions
    ADD CONSTRAINT erased_revisions_erasure_id_fkey FOREIGN KEY (erasure_id) REFERENCES public.erasures(id);

ALTER TABLE ONLY public.erased_revisions
    ADD CONSTRAINT erased_revisions_revision_id_fkey FOREIGN KEY (revision_id) REFERENCES public.memory_entry_revisions(id);

ALTER TABLE ONLY public.erasure_fingerprints
    ADD CONSTRAINT erasure_fingerprints_erasure_id_fkey FOREIGN KEY (erasure_id) REFERENCES public.erasures(id);

ALTER TABLE ONLY public.erasures
    ADD CONSTRAINT erasures_runtime_agent_id_fkey FOREIGN KEY (runtime_agent_id) REFERENCES public.runtime_agents(id);

ALTER TABLE ONLY public.evidence_repairs
    ADD CONSTRAINT evidence_repairs_revision_id_fkey FOREIGN KEY (revision_id) REFERENCES public.memory_entry_revisions(id);

ALTER TABLE ONLY public.evidence_repairs
    ADD CONSTRAINT evidence_repairs_source_id_fkey FOREIGN KEY (source_id) REFERENCES public.revision_sources(id);

ALTER TABLE ONLY public.index_outbox
    ADD CONSTRAINT index_outbox_revision_id_fkey FOREIGN KEY (revision_id) REFERENCES public.memory_entry_revisions(id);

ALTER TABLE ONLY public.index_outbox
    ADD CONSTRAINT index_outbox_runtime_agent_id_fkey FOREIGN KEY (runtime_agent_id) REFERENCES public.runtime_agents(id);

ALTER TABLE ONLY public.mcp_access_tokens
    ADD CONSTRAINT mcp_access_tokens_conversation_id_fkey FOREIGN KEY (conversation_id) REFERENCES public.conversations(id);

ALTER TABLE ONLY public.mcp_access_tokens
    ADD CONSTRAINT mcp_access_tokens_identity_id_fkey FOREIGN KEY (identity_id) REFERENCES public.connector_identities(id);

ALTER TABLE ONLY public.mcp_access_tokens
    ADD CONSTRAINT mcp_access_tokens_runtime_agent_id_fkey FOREIGN KEY (runtime_agent_id) REFERENCES public.runtime_agents(id);

ALTER TABLE ONLY public.memory_entries
    ADD CONSTRAINT memory_entries_current_revision_fk FOREIGN KEY (current_revision_id, id) REFERENCES public.memory_entry_revisions(id, entry_id) DEFERRABLE INITIALLY DEFERRED;

ALTER TABLE ONLY public.memory_entries
    ADD CONSTRAINT memory_entries_origin_conversation_id_runtime_agent_id_fkey FOREIGN KEY (origin_conversation_id, runtime_agent_id) REFERENCES public.conversations(id, runtime_agent_id);

ALTER TABLE ONLY public.memory_entries
    ADD CONSTRAINT memory_entries_restricted_conversation_id_runtime_agent_id_fkey FOREIGN KEY (restricted_conversation_id, runtime_agent_id) REFERENCES public.conversations(id, runtime_agent_id);

ALTER TABLE ONLY public.memory_entries
    ADD CONSTRAINT memory_entries_runtime_agent_id_fkey FOREIGN KEY (runtime_agent_id) REFERENCES public.runtime_agents(id);

ALTER TABLE ONLY public.memory_entry_revisions
    ADD CONSTRAINT memory_entry_revisions_entry_id_runtime_agent_id_fkey FOREIGN KEY (entry_id, runtime_agent_id) REFERENCES public.memory_entries(id, runtime_agent_id);

ALTER TABLE ONLY public.memory_entry_revisions
    ADD CONSTRAINT memory_entry_revisions_source_actor_id_fkey FOREIGN KEY (source_actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.memory_entry_revisions
    ADD CONSTRAINT memory_entry_revisions_subject_actor_id_fkey FOREIGN KEY (subject_actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.memory_retrieval_events
    ADD CONSTRAINT memory_retrieval_events_conversation_id_runtime_agent_id_fkey FOREIGN KEY (conversation_id, runtime_agent_id) REFERENCES public.conversations(id, runtime_agent_id);

ALTER TABLE ONLY public.memory_retrieval_events
    ADD CONSTRAINT memory_retrieval_events_current_actor_id_fkey FOREIGN KEY (current_actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.memory_retrieval_events
    ADD CONSTRAINT memory_retrieval_events_runtime_agent_id_fkey FOREIGN KEY (runtime_agent_id) REFERENCES public.runtime_agents(id);

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_conversation_id_runtime_agent_id_fkey FOREIGN KEY (conversation_id, runtime_agent_id) REFERENCES public.conversations(id, runtime_agent_id);

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_sender_actor_id_fkey FOREIGN KEY (sender_actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.messages
    ADD CONSTRAINT messages_sender_identity_id_fkey FOREIGN KEY (sender_identity_id) REFERENCES public.connector_identities(id);

ALTER TABLE ONLY public.revision_audience_summary
    ADD CONSTRAINT revision_audience_summary_revision_id_fkey FOREIGN KEY (revision_id) REFERENCES public.memory_entry_revisions(id);

ALTER TABLE ONLY public.revision_embeddings
    ADD CONSTRAINT revision_embeddings_generation_id_fkey FOREIGN KEY (generation_id) REFERENCES public.embedding_generations(id);

ALTER TABLE ONLY public.revision_embeddings
    ADD CONSTRAINT revision_embeddings_revision_id_fkey FOREIGN KEY (revision_id) REFERENCES public.memory_entry_revisions(id);

ALTER TABLE ONLY public.revision_sources
    ADD CONSTRAINT revision_sources_message_id_runtime_agent_id_fkey FOREIGN KEY (message_id, runtime_agent_id) REFERENCES public.messages(id, runtime_agent_id);

ALTER TABLE ONLY public.revision_sources
    ADD CONSTRAINT revision_sources_parent_revision_id_runtime_agent_id_fkey FOREIGN KEY (parent_revision_id, runtime_agent_id) REFERENCES public.memory_entry_revisions(id, runtime_agent_id);

ALTER TABLE ONLY public.revision_sources
    ADD CONSTRAINT revision_sources_revision_id_runtime_agent_id_fkey FOREIGN KEY (revision_id, runtime_agent_id) REFERENCES public.memory_entry_revisions(id, runtime_agent_id);

ALTER TABLE ONLY public.runtime_agents
    ADD CONSTRAINT runtime_agents_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.searchable_revisions
    ADD CONSTRAINT searchable_revisions_entry_id_fkey FOREIGN KEY (entry_id) REFERENCES public.memory_entries(id);

ALTER TABLE ONLY public.searchable_revisions
    ADD CONSTRAINT searchable_revisions_revision_id_fkey FOREIGN KEY (revision_id) REFERENCES public.memory_entry_revisions(id);

ALTER TABLE ONLY public.sharing_confirmations
    ADD CONSTRAINT sharing_confirmations_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.sharing_confirmations
    ADD CONSTRAINT sharing_confirmations_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.sharing_requests(id);

ALTER TABLE ONLY public.sharing_grant_audience
    ADD CONSTRAINT sharing_grant_audience_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.sharing_grant_audience
    ADD CONSTRAINT sharing_grant_audience_grant_id_fkey FOREIGN KEY (grant_id) REFERENCES public.sharing_grants(id);

ALTER TABLE ONLY public.sharing_grants
    ADD CONSTRAINT sharing_grants_confirmed_by_actor_id_fkey FOREIGN KEY (confirmed_by_actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.sharing_grants
    ADD CONSTRAINT sharing_grants_confirmed_by_message_id_runtime_agent_id_fkey FOREIGN KEY (confirmed_by_message_id, runtime_agent_id) REFERENCES public.messages(id, runtime_agent_id);

ALTER TABLE ONLY public.sharing_grants
    ADD CONSTRAINT sharing_grants_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.sharing_requests(id);

ALTER TABLE ONLY public.sharing_grants
    ADD CONSTRAINT sharing_grants_revision_id_runtime_agent_id_fkey FOREIGN KEY (revision_id, runtime_agent_id) REFERENCES public.memory_entry_revisions(id, runtime_agent_id);

ALTER TABLE ONLY public.sharing_request_audience
    ADD CONSTRAINT sharing_request_audience_actor_id_fkey FOREIGN KEY (actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.sharing_request_audience
    ADD CONSTRAINT sharing_request_audience_request_id_fkey FOREIGN KEY (request_id) REFERENCES public.sharing_requests(id);

ALTER TABLE ONLY public.sharing_requests
    ADD CONSTRAINT sharing_requests_requested_by_actor_id_fkey FOREIGN KEY (requested_by_actor_id) REFERENCES public.actors(id);

ALTER TABLE ONLY public.sharing_requests
    ADD CONSTRAINT sharing_requests_requested_in_conversation_id_runtime_agen_fkey FOREIGN KEY (requested_in_conversation_id, runtime_agent_id) REFERENCES public.conversations(id, runtime_agent_id);

ALTER TABLE ONLY public.sharing_requests
    ADD CONSTRAINT sharing_requests_revision_id_runtime_agent_id_fkey FOREIGN KEY (revision_id, runtime_agent_id) REFERENCES public.memory_entry_revisions(id, runtime_agent_id);

ALTER TABLE ONLY public.sharing_requests
    ADD CONSTRAINT sharing_requests_target_conversation_id_runtime_agent_id_fkey FOREIGN KEY (target_conversation_id, runtime_agent_id) REFERENCES public.conversations(id, runtime_agent_id);

GRANT USAGE ON SCHEMA public TO mesh_runtime;
GRANT USAGE ON SCHEMA public TO mesh_operator;
GRANT USAGE ON SCHEMA public TO mesh_console_reader;
GRANT USAGE ON SCHEMA public TO mesh_eraser;
GRANT USAGE ON SCHEMA public TO mesh_definer;

GRANT SELECT ON TABLE public.searchable_revisions TO mesh_runtime;
GRANT SELECT ON TABLE public.searchable_revisions TO mesh_operator;
GRANT SELECT ON TABLE public.searchable_revisions TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.searchable_revisions TO mesh_eraser;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.searchable_revisions TO mesh_definer;

REVOKE ALL ON FUNCTION public.memory_keep_source_evidence_unknown(p_source uuid, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.memory_keep_source_evidence_unknown(p_source uuid, p_reason text) TO mesh_operator;

REVOKE ALL ON FUNCTION public.memory_lexical_statistics_after_truncate() FROM PUBLIC;

REVOKE ALL ON FUNCTION public.memory_lexical_statistics_fold() FROM PUBLIC;
GRANT ALL ON FUNCTION public.memory_lexical_statistics_fold() TO mesh_runtime;

REVOKE ALL ON FUNCTION public.memory_merge_text_pending_lists(p_revision_text boolean) FROM PUBLIC;
GRANT ALL ON FUNCTION public.memory_merge_text_pending_lists(p_revision_text boolean) TO mesh_runtime;

REVOKE ALL ON FUNCTION public.memory_refresh_audience_summary(p_revisions uuid[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.memory_refresh_audience_summary(p_revisions uuid[]) TO mesh_definer;

REVOKE ALL ON FUNCTION public.memory_refresh_searchable(p_entries uuid[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.memory_refresh_searchable(p_entries uuid[]) TO mesh_definer;

REVOKE ALL ON FUNCTION public.memory_repair_audience_evidence(p_reason text) FROM PUBLIC;

REVOKE ALL ON FUNCTION public.memory_review_source_evidence(p_source uuid, p_audience uuid[], p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.memory_review_source_evidence(p_source uuid, p_audience uuid[], p_reason text) TO mesh_operator;

REVOKE ALL ON FUNCTION public.memory_searchable_after_embeddings() FROM PUBLIC;

REVOKE ALL ON FUNCTION public.memory_searchable_after_entries() FROM PUBLIC;

REVOKE ALL ON FUNCTION public.memory_searchable_after_generations() FROM PUBLIC;

REVOKE ALL ON FUNCTION public.memory_searchable_after_summary() FROM PUBLIC;

REVOKE ALL ON FUNCTION public.memory_summary_after_sources() FROM PUBLIC;

REVOKE ALL ON FUNCTION public.mesh_confirm_sharing_by_source_actor(p_request uuid, p_message uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_confirm_sharing_by_source_actor(p_request uuid, p_message uuid) TO mesh_runtime;

GRANT SELECT ON TABLE public.sharing_requests TO mesh_runtime;
GRANT SELECT ON TABLE public.sharing_requests TO mesh_operator;
GRANT SELECT ON TABLE public.sharing_requests TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.sharing_requests TO mesh_eraser;
GRANT SELECT,UPDATE ON TABLE public.sharing_requests TO mesh_definer;

GRANT INSERT(id) ON TABLE public.sharing_requests TO mesh_runtime;

GRANT INSERT(runtime_agent_id) ON TABLE public.sharing_requests TO mesh_runtime;

GRANT INSERT(revision_id) ON TABLE public.sharing_requests TO mesh_runtime;

GRANT INSERT(requested_in_conversation_id) ON TABLE public.sharing_requests TO mesh_runtime;

GRANT INSERT(requested_by_actor_id) ON TABLE public.sharing_requests TO mesh_runtime;

GRANT INSERT(target_conversation_id) ON TABLE public.sharing_requests TO mesh_runtime;

GRANT INSERT(rationale) ON TABLE public.sharing_requests TO mesh_runtime;

GRANT INSERT(created_at) ON TABLE public.sharing_requests TO mesh_runtime;

GRANT INSERT(expires_at) ON TABLE public.sharing_requests TO mesh_runtime;

REVOKE ALL ON FUNCTION public.mesh_grant_from_request(req public.sharing_requests, p_authority public.grant_authority, p_actor uuid, p_message uuid, p_role text, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_grant_from_request(req public.sharing_requests, p_authority public.grant_authority, p_actor uuid, p_message uuid, p_role text, p_reason text) TO mesh_definer;

REVOKE ALL ON FUNCTION public.mesh_operator_approve_sharing(p_request uuid, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_operator_approve_sharing(p_request uuid, p_reason text) TO mesh_operator;

REVOKE ALL ON FUNCTION public.mesh_operator_deny_sharing(p_request uuid, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_operator_deny_sharing(p_request uuid, p_reason text) TO mesh_operator;

REVOKE ALL ON FUNCTION public.mesh_operator_erase(p_erasure uuid, p_scope text, p_target uuid, p_agent uuid, p_reason text, p_previewed uuid[], p_fingerprints bytea[]) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_operator_erase(p_erasure uuid, p_scope text, p_target uuid, p_agent uuid, p_reason text, p_previewed uuid[], p_fingerprints bytea[]) TO mesh_eraser;

REVOKE ALL ON FUNCTION public.mesh_operator_issue_access_token(p_id uuid, p_token_hash bytea, p_agent uuid, p_conversation uuid, p_identity uuid, p_label text, p_expires_at timestamp with time zone, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_operator_issue_access_token(p_id uuid, p_token_hash bytea, p_agent uuid, p_conversation uuid, p_identity uuid, p_label text, p_expires_at timestamp with time zone, p_reason text) TO mesh_operator;

REVOKE ALL ON FUNCTION public.mesh_operator_revoke_access_token(p_token uuid, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_operator_revoke_access_token(p_token uuid, p_reason text) TO mesh_operator;

REVOKE ALL ON FUNCTION public.mesh_operator_revoke_grant(p_grant uuid, p_reason text) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_operator_revoke_grant(p_grant uuid, p_reason text) TO mesh_operator;

REVOKE ALL ON FUNCTION public.mesh_sharing_request_decidable(p_request uuid) FROM PUBLIC;
GRANT ALL ON FUNCTION public.mesh_sharing_request_decidable(p_request uuid) TO mesh_definer;

GRANT SELECT ON TABLE public._sqlx_migrations TO mesh_runtime;
GRANT SELECT ON TABLE public._sqlx_migrations TO mesh_operator;
GRANT SELECT ON TABLE public._sqlx_migrations TO mesh_console_reader;
GRANT SELECT ON TABLE public._sqlx_migrations TO mesh_eraser;
GRANT SELECT ON TABLE public._sqlx_migrations TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.actors TO mesh_runtime;
GRANT SELECT ON TABLE public.actors TO mesh_operator;
GRANT SELECT ON TABLE public.actors TO mesh_console_reader;
GRANT SELECT ON TABLE public.actors TO mesh_eraser;
GRANT SELECT ON TABLE public.actors TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.agent_turns TO mesh_runtime;
GRANT SELECT ON TABLE public.agent_turns TO mesh_operator;
GRANT SELECT ON TABLE public.agent_turns TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.agent_turns TO mesh_eraser;
GRANT SELECT,UPDATE ON TABLE public.agent_turns TO mesh_definer;

GRANT SELECT ON TABLE public.audience_classes TO mesh_runtime;
GRANT SELECT ON TABLE public.audience_classes TO mesh_operator;
GRANT SELECT ON TABLE public.audience_classes TO mesh_console_reader;
GRANT SELECT ON TABLE public.audience_classes TO mesh_eraser;
GRANT SELECT,INSERT ON TABLE public.audience_classes TO mesh_definer;

GRANT SELECT,USAGE ON SEQUENCE public.audience_classes_id_seq TO mesh_runtime;
GRANT USAGE ON SEQUENCE public.audience_classes_id_seq TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.connector_identities TO mesh_runtime;
GRANT SELECT ON TABLE public.connector_identities TO mesh_operator;
GRANT SELECT ON TABLE public.connector_identities TO mesh_console_reader;
GRANT SELECT ON TABLE public.connector_identities TO mesh_eraser;
GRANT SELECT ON TABLE public.connector_identities TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.conversation_memberships TO mesh_runtime;
GRANT SELECT ON TABLE public.conversation_memberships TO mesh_operator;
GRANT SELECT ON TABLE public.conversation_memberships TO mesh_console_reader;
GRANT SELECT ON TABLE public.conversation_memberships TO mesh_eraser;
GRANT SELECT ON TABLE public.conversation_memberships TO mesh_definer;

GRANT SELECT,USAGE ON SEQUENCE public.conversation_memberships_id_seq TO mesh_runtime;

GRANT SELECT,INSERT ON TABLE public.conversation_observations TO mesh_runtime;
GRANT SELECT ON TABLE public.conversation_observations TO mesh_operator;
GRANT SELECT ON TABLE public.conversation_observations TO mesh_console_reader;
GRANT SELECT ON TABLE public.conversation_observations TO mesh_eraser;
GRANT SELECT ON TABLE public.conversation_observations TO mesh_definer;

GRANT SELECT,USAGE ON SEQUENCE public.conversation_observations_id_seq TO mesh_runtime;

GRANT SELECT,INSERT,UPDATE ON TABLE public.conversations TO mesh_runtime;
GRANT SELECT ON TABLE public.conversations TO mesh_operator;
GRANT SELECT ON TABLE public.conversations TO mesh_console_reader;
GRANT SELECT ON TABLE public.conversations TO mesh_eraser;
GRANT SELECT ON TABLE public.conversations TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.embedding_generations TO mesh_runtime;
GRANT SELECT ON TABLE public.embedding_generations TO mesh_operator;
GRANT SELECT ON TABLE public.embedding_generations TO mesh_console_reader;
GRANT SELECT ON TABLE public.embedding_generations TO mesh_eraser;
GRANT SELECT ON TABLE public.embedding_generations TO mesh_definer;

GRANT SELECT,USAGE ON SEQUENCE public.embedding_generations_id_seq TO mesh_runtime;

GRANT SELECT ON TABLE public.erased_messages TO mesh_runtime;
GRANT SELECT ON TABLE public.erased_messages TO mesh_operator;
GRANT SELECT ON TABLE public.erased_messages TO mesh_console_reader;
GRANT SELECT ON TABLE public.erased_messages TO mesh_eraser;
GRANT SELECT,INSERT ON TABLE public.erased_messages TO mesh_definer;

GRANT SELECT ON TABLE public.erased_revisions TO mesh_runtime;
GRANT SELECT ON TABLE public.erased_revisions TO mesh_operator;
GRANT SELECT ON TABLE public.erased_revisions TO mesh_console_reader;
GRANT SELECT ON TABLE public.erased_revisions TO mesh_eraser;
GRANT SELECT,INSERT ON TABLE public.erased_revisions TO mesh_definer;

GRANT SELECT ON TABLE public.erasure_fingerprints TO mesh_runtime;
GRANT SELECT ON TABLE public.erasure_fingerprints TO mesh_operator;
GRANT SELECT ON TABLE public.erasure_fingerprints TO mesh_console_reader;
GRANT SELECT ON TABLE public.erasure_fingerprints TO mesh_eraser;
GRANT SELECT,INSERT ON TABLE public.erasure_fingerprints TO mesh_definer;

GRANT SELECT ON TABLE public.erasures TO mesh_runtime;
GRANT SELECT ON TABLE public.erasures TO mesh_operator;
GRANT SELECT ON TABLE public.erasures TO mesh_console_reader;
GRANT SELECT ON TABLE public.erasures TO mesh_eraser;
GRANT SELECT,INSERT ON TABLE public.erasures TO mesh_definer;

GRANT SELECT ON TABLE public.evidence_repairs TO mesh_runtime;
GRANT SELECT ON TABLE public.evidence_repairs TO mesh_operator;
GRANT SELECT ON TABLE public.evidence_repairs TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.evidence_repairs TO mesh_eraser;
GRANT SELECT,INSERT,UPDATE ON TABLE public.evidence_repairs TO mesh_definer;

GRANT SELECT,USAGE ON SEQUENCE public.evidence_repairs_id_seq TO mesh_runtime;
GRANT USAGE ON SEQUENCE public.evidence_repairs_id_seq TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.index_outbox TO mesh_runtime;
GRANT SELECT ON TABLE public.index_outbox TO mesh_operator;
GRANT SELECT ON TABLE public.index_outbox TO mesh_console_reader;
GRANT SELECT ON TABLE public.index_outbox TO mesh_eraser;
GRANT SELECT,INSERT,UPDATE ON TABLE public.index_outbox TO mesh_definer;

GRANT SELECT,USAGE ON SEQUENCE public.index_outbox_id_seq TO mesh_runtime;
GRANT USAGE ON SEQUENCE public.index_outbox_id_seq TO mesh_definer;

GRANT SELECT ON TABLE public.lexical_corpus_statistics TO mesh_runtime;
GRANT SELECT ON TABLE public.lexical_corpus_statistics TO mesh_operator;
GRANT SELECT ON TABLE public.lexical_corpus_statistics TO mesh_console_reader;
GRANT SELECT ON TABLE public.lexical_corpus_statistics TO mesh_eraser;
GRANT SELECT,INSERT,TRUNCATE,UPDATE ON TABLE public.lexical_corpus_statistics TO mesh_definer;

GRANT SELECT ON TABLE public.lexical_statistics_pending TO mesh_runtime;
GRANT SELECT ON TABLE public.lexical_statistics_pending TO mesh_operator;
GRANT SELECT ON TABLE public.lexical_statistics_pending TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.lexical_statistics_pending TO mesh_eraser;
GRANT SELECT,INSERT,DELETE,TRUNCATE ON TABLE public.lexical_statistics_pending TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.lexical_corpus_totals TO mesh_runtime;
GRANT SELECT ON TABLE public.lexical_corpus_totals TO mesh_operator;
GRANT SELECT ON TABLE public.lexical_corpus_totals TO mesh_console_reader;
GRANT SELECT ON TABLE public.lexical_corpus_totals TO mesh_eraser;
GRANT SELECT ON TABLE public.lexical_corpus_totals TO mesh_definer;

GRANT SELECT ON TABLE public.lexical_term_statistics TO mesh_runtime;
GRANT SELECT ON TABLE public.lexical_term_statistics TO mesh_operator;
GRANT SELECT ON TABLE public.lexical_term_statistics TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.lexical_term_statistics TO mesh_eraser;
GRANT SELECT,INSERT,DELETE,TRUNCATE,UPDATE ON TABLE public.lexical_term_statistics TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.lexical_term_totals TO mesh_runtime;
GRANT SELECT ON TABLE public.lexical_term_totals TO mesh_operator;
GRANT SELECT ON TABLE public.lexical_term_totals TO mesh_console_reader;
GRANT SELECT ON TABLE public.lexical_term_totals TO mesh_eraser;
GRANT SELECT ON TABLE public.lexical_term_totals TO mesh_definer;

GRANT SELECT ON TABLE public.mcp_access_tokens TO mesh_runtime;
GRANT SELECT ON TABLE public.mcp_access_tokens TO mesh_operator;
GRANT SELECT ON TABLE public.mcp_access_tokens TO mesh_console_reader;
GRANT SELECT ON TABLE public.mcp_access_tokens TO mesh_eraser;
GRANT SELECT,INSERT,UPDATE ON TABLE public.mcp_access_tokens TO mesh_definer;

GRANT UPDATE(last_used_at) ON TABLE public.mcp_access_tokens TO mesh_runtime;

GRANT SELECT,INSERT,UPDATE ON TABLE public.memory_entries TO mesh_runtime;
GRANT SELECT ON TABLE public.memory_entries TO mesh_operator;
GRANT SELECT ON TABLE public.memory_entries TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.memory_entries TO mesh_eraser;
GRANT SELECT,UPDATE ON TABLE public.memory_entries TO mesh_definer;

GRANT SELECT,INSERT ON TABLE public.memory_entry_revisions TO mesh_runtime;
GRANT SELECT ON TABLE public.memory_entry_revisions TO mesh_operator;
GRANT SELECT ON TABLE public.memory_entry_revisions TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.memory_entry_revisions TO mesh_eraser;
GRANT SELECT,UPDATE ON TABLE public.memory_entry_revisions TO mesh_definer;

GRANT SELECT,INSERT ON TABLE public.memory_retrieval_events TO mesh_runtime;
GRANT SELECT ON TABLE public.memory_retrieval_events TO mesh_operator;
GRANT SELECT ON TABLE public.memory_retrieval_events TO mesh_console_reader;
GRANT SELECT ON TABLE public.memory_retrieval_events TO mesh_eraser;
GRANT SELECT ON TABLE public.memory_retrieval_events TO mesh_definer;

GRANT SELECT,INSERT ON TABLE public.messages TO mesh_runtime;
GRANT SELECT ON TABLE public.messages TO mesh_operator;
GRANT SELECT ON TABLE public.messages TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.messages TO mesh_eraser;
GRANT SELECT,UPDATE ON TABLE public.messages TO mesh_definer;

GRANT SELECT ON TABLE public.operator_actions TO mesh_runtime;
GRANT SELECT ON TABLE public.operator_actions TO mesh_operator;
GRANT SELECT ON TABLE public.operator_actions TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.operator_actions TO mesh_eraser;
GRANT SELECT,INSERT,UPDATE ON TABLE public.operator_actions TO mesh_definer;

GRANT SELECT,USAGE ON SEQUENCE public.operator_actions_id_seq TO mesh_runtime;
GRANT USAGE ON SEQUENCE public.operator_actions_id_seq TO mesh_definer;

GRANT SELECT ON TABLE public.revision_audience_summary TO mesh_runtime;
GRANT SELECT ON TABLE public.revision_audience_summary TO mesh_operator;
GRANT SELECT ON TABLE public.revision_audience_summary TO mesh_console_reader;
GRANT SELECT ON TABLE public.revision_audience_summary TO mesh_eraser;
GRANT SELECT,INSERT,DELETE,UPDATE ON TABLE public.revision_audience_summary TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.revision_embeddings TO mesh_runtime;
GRANT SELECT ON TABLE public.revision_embeddings TO mesh_operator;
GRANT SELECT ON TABLE public.revision_embeddings TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.revision_embeddings TO mesh_eraser;
GRANT SELECT,DELETE ON TABLE public.revision_embeddings TO mesh_definer;

GRANT SELECT,INSERT ON TABLE public.revision_sources TO mesh_runtime;
GRANT SELECT ON TABLE public.revision_sources TO mesh_operator;
GRANT SELECT ON TABLE public.revision_sources TO mesh_console_reader;
GRANT SELECT ON TABLE public.revision_sources TO mesh_eraser;
GRANT SELECT,UPDATE ON TABLE public.revision_sources TO mesh_definer;

GRANT SELECT,INSERT,UPDATE ON TABLE public.runtime_agents TO mesh_runtime;
GRANT SELECT ON TABLE public.runtime_agents TO mesh_operator;
GRANT SELECT ON TABLE public.runtime_agents TO mesh_console_reader;
GRANT SELECT ON TABLE public.runtime_agents TO mesh_eraser;
GRANT SELECT ON TABLE public.runtime_agents TO mesh_definer;

GRANT SELECT ON TABLE public.sharing_confirmations TO mesh_runtime;
GRANT SELECT ON TABLE public.sharing_confirmations TO mesh_operator;
GRANT SELECT ON TABLE public.sharing_confirmations TO mesh_console_reader;
GRANT SELECT ON TABLE public.sharing_confirmations TO mesh_eraser;
GRANT SELECT,INSERT ON TABLE public.sharing_confirmations TO mesh_definer;

GRANT SELECT ON TABLE public.sharing_grant_audience TO mesh_runtime;
GRANT SELECT ON TABLE public.sharing_grant_audience TO mesh_operator;
GRANT SELECT ON TABLE public.sharing_grant_audience TO mesh_console_reader;
GRANT SELECT ON TABLE public.sharing_grant_audience TO mesh_eraser;
GRANT SELECT,INSERT ON TABLE public.sharing_grant_audience TO mesh_definer;

GRANT SELECT ON TABLE public.sharing_grants TO mesh_runtime;
GRANT SELECT ON TABLE public.sharing_grants TO mesh_operator;
GRANT SELECT ON TABLE public.sharing_grants TO mesh_console_reader;
GRANT SELECT,MAINTAIN ON TABLE public.sharing_grants TO mesh_eraser;
GRANT SELECT,INSERT,UPDATE ON TABLE public.sharing_grants TO mesh_definer;

GRANT SELECT,INSERT ON TABLE public.sharing_request_audience TO mesh_runtime;
GRANT SELECT ON TABLE public.sharing_request_audience TO mesh_operator;
GRANT SELECT ON TABLE public.sharing_request_audience TO mesh_console_reader;
GRANT SELECT ON TABLE public.sharing_request_audience TO mesh_eraser;
GRANT SELECT ON TABLE public.sharing_request_audience TO mesh_definer;

ALTER DEFAULT PRIVILEGES FOR ROLE mesh IN SCHEMA public GRANT SELECT,USAGE ON SEQUENCES TO mesh_runtime;

ALTER DEFAULT PRIVILEGES FOR ROLE mesh IN SCHEMA public GRANT SELECT,INSERT,UPDATE ON TABLES TO mesh_runtime;
ALTER DEFAULT PRIVILEGES FOR ROLE mesh IN SCHEMA public GRANT SELECT ON TABLES TO mesh_operator;
ALTER DEFAULT PRIVILEGES FOR ROLE mesh IN SCHEMA public GRANT SELECT ON TABLES TO mesh_console_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE mesh IN SCHEMA public GRANT SELECT ON TABLES TO mesh_eraser;
