-- Privacy, second pass: an empty destination audience admits nothing, and a sharing request of a
-- revision with several voices needs the confirmation of every voice it would release.
--
-- 1. Fail closed on empty audiences. `audience @> '{}'` is true of every array, and a grant
--    "covers" every reader of an empty audience, so a conversation with no recorded members (or
--    whose audience was resolved without its speaker) used to admit every memory. The rule is now
--    stated once for every form of the predicate: a destination audience that is NULL *or empty*
--    is unknown, and nothing is eligible for it ('audience_unknown'). The inline forms in
--    src/privacy/eligibility.rs test `cardinality($3) > 0` for the same reason. The destination
--    side (Store::destination_audience) additionally refuses an audience that does not include the
--    speaker, by handing an empty one over, so both causes end here.
--
-- 2. Every voice confirms. A revision's voices are the senders of the messages in its lineage,
--    followed through parent and retrieved revisions. Releasing it to an audience needs the
--    confirmation of every voice whose evidence does not already cover that audience (the voices
--    of the sources that fail `audience @> target`), or an operator's approval. Matching only the
--    revision's source actor let an amender (who becomes the source actor) release the words of
--    the person they amended. Confirmations are recorded one by one in sharing_confirmations; the
--    grant is created by the confirmation that leaves no voice missing.

-- ---------------------------------------------------------------------------------------------
-- 1. Empty audiences fail closed
-- ---------------------------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION memory_eligibility_verdict(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
RETURNS memory_eligibility
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    entry_row record;
    failing   uuid;
BEGIN
    IF p_audience IS NULL OR cardinality(p_audience) = 0 THEN
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

-- memory_eligibility_rule gets the same rule in migration 20261205110000, which redefines it
-- over the one shared definition of the rules after an entry's lifecycle.

CREATE OR REPLACE FUNCTION memory_revision_eligible(p_agent uuid, p_revision uuid, p_conversation uuid, p_audience uuid[])
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(cardinality(p_audience) > 0, false) AND EXISTS (
        SELECT 1
          FROM memory_entry_revisions r
          JOIN memory_entries e ON e.id = r.entry_id AND e.runtime_agent_id = r.runtime_agent_id
         WHERE r.id = p_revision
           AND r.runtime_agent_id = p_agent
           AND e.state = 'live'
           AND e.current_revision_id = r.id
           AND (e.restriction = 'none' OR e.restricted_conversation_id = p_conversation)
           AND (EXISTS (SELECT 1 FROM revision_audience_summary s
                         WHERE s.revision_id = r.id AND s.evidence_known AND s.audience @> p_audience)
                OR EXISTS (SELECT 1 FROM sharing_grants g
                            WHERE g.revision_id = r.id AND g.runtime_agent_id = p_agent AND g.revoked_at IS NULL
                              AND NOT EXISTS (
                                  SELECT 1 FROM unnest(p_audience) AS d(actor_id)
                                   WHERE NOT EXISTS (SELECT 1 FROM sharing_grant_audience ga
                                                      WHERE ga.grant_id = g.id AND ga.actor_id = d.actor_id)))))
$$;

CREATE OR REPLACE FUNCTION memory_covering_audience_classes(p_agent uuid, p_audience uuid[])
RETURNS TABLE (id bigint)
LANGUAGE sql STABLE
ROWS 8
SET enable_seqscan = off
AS $$
    SELECT c.id FROM audience_classes c
     WHERE c.runtime_agent_id = p_agent AND cardinality(p_audience) > 0 AND c.members @> p_audience
$$;

-- Withheld diagnostics: for an unknown (NULL or empty) audience every known match is withheld.
CREATE OR REPLACE FUNCTION memory_withheld_known_matches(p_agent uuid, p_conversation uuid, p_audience uuid[],
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
                      AND (coalesce(cardinality(p_audience), 0) = 0
                           OR NOT ((w.restriction = 'none' OR w.restricted_conversation_id = p_conversation)
                                   AND w.audience @> p_audience))
                      AND w.revision_id <> ALL (coalesce(p_released, '{}'))
                    LIMIT p_limit) AS m
             LIMIT 2 * p_limit) AS found
     LIMIT p_limit
$$;

-- ---------------------------------------------------------------------------------------------
-- 2. Every voice confirms
-- ---------------------------------------------------------------------------------------------

-- One row per voice that confirmed a request, through their own authenticated direct message.
CREATE TABLE sharing_confirmations (
    request_id   uuid        NOT NULL REFERENCES sharing_requests (id),
    actor_id     uuid        NOT NULL REFERENCES actors (id),
    message_id   uuid        NOT NULL,
    confirmed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (request_id, actor_id)
);
-- Written only by the definer function below (default privileges would let the runtime insert).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON sharing_confirmations FROM PUBLIC, mesh_runtime, mesh_operator;

-- The voices of p_revision whose evidence does not cover p_target: the senders of the messages
-- of every source that fails `audience @> p_target` (unknown evidence fails), followed through
-- failing parent and retrieved revisions. Sorted, distinct. A source that covers the target needs
-- nobody's confirmation: its audience could already read it.
CREATE FUNCTION memory_uncovered_voices(p_revision uuid, p_target uuid[])
RETURNS uuid[]
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

-- The voices a request still waits for: those of its revision not covering its audience, less
-- those who confirmed. When no voice is uncovered (the revision could already reach that
-- audience, or its lineage names no message), the revision's source actor is the one to confirm,
-- as before.
CREATE FUNCTION memory_sharing_missing_voices(p_request uuid)
RETURNS uuid[]
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

-- A voice confirms through a connector-authenticated inbound message in a direct conversation,
-- received after the request. The confirmation is recorded; the one that leaves no voice missing
-- creates the grant and returns its id. Until then it returns NULL (the request stays pending).
CREATE OR REPLACE FUNCTION mesh_confirm_sharing_by_source_actor(p_request uuid, p_message uuid)
RETURNS uuid
LANGUAGE plpgsql
SECURITY DEFINER
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

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION mesh_confirm_sharing_by_source_actor(uuid, uuid) SET search_path = %I, pg_temp',
                   current_schema());
END;
$$;
REVOKE ALL ON FUNCTION mesh_confirm_sharing_by_source_actor(uuid, uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mesh_confirm_sharing_by_source_actor(uuid, uuid) TO mesh_runtime;
