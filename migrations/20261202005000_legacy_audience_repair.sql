-- Legacy audience repair (spec: "Legacy audience repair"), as reusable SQL plus a forward run.
--
-- Evidence of a source becomes known only with proof. A message source with unknown evidence is
-- repaired to the audience {its sender} when ALL of these hold:
--   1. the message is inbound and carries an exact connector identity: sender_identity_id names an
--      identity of the sender actor on the conversation's own connector;
--   2. the conversation is proven direct: its stored topology is 'direct', or (stored topology
--      'unknown') a LATER authenticated direct observation of the same connector/channel names the
--      same counterpart identity;
--   3. every other participant is a recorded outbound voice of the runtime agent: no inbound
--      message from any other actor (a contradictory inbound sender), no outbound message by
--      anyone but the agent's own actor, and no membership of any third actor.
-- Channel id prefixes ("D123") and speaker counts alone prove nothing and are never consulted.
-- A parent/retrieved-revision source is then repaired when every source of the revision it names
-- is known (its audience: their intersection), repeated until nothing changes.
-- Repair only ever turns 'unknown' into 'known' on revision_sources (+ audience rows) and, for
-- rule 2's observation, fixes the conversation's topology to 'direct'. Bodies, source references,
-- restrictions, grants and transcript messages are untouched. Every change is logged in
-- evidence_repairs. Without proof the evidence stays unknown, for operator review.

-- An authenticated observation by a connector of a conversation's topology and counterpart
-- (e.g. a later DM event for the same channel). Append-only.
CREATE TABLE conversation_observations (
    id                       bigserial             PRIMARY KEY,
    conversation_id          uuid                  NOT NULL REFERENCES conversations (id),
    topology                 conversation_topology NOT NULL,
    counterpart_identity_id  uuid                  NULL REFERENCES connector_identities (id),
    authenticated            boolean               NOT NULL,
    observed_at              timestamptz           NOT NULL
);
CREATE INDEX conversation_observations_conversation ON conversation_observations (conversation_id);
CREATE TRIGGER conversation_observations_append_only
    BEFORE UPDATE OR DELETE ON conversation_observations
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();

-- Every evidence change, by repair or by operator review. Append-only.
CREATE TABLE evidence_repairs (
    id            bigserial   PRIMARY KEY,
    source_id     uuid        NOT NULL REFERENCES revision_sources (id),
    revision_id   uuid        NOT NULL REFERENCES memory_entry_revisions (id),
    rule          text        NOT NULL CHECK (rule IN ('direct_topology', 'later_direct_observation',
                                                       'derived_from_known_revision', 'operator_review')),
    audience      uuid[]      NOT NULL,
    repaired_at   timestamptz NOT NULL DEFAULT now(),
    repaired_by   text        NOT NULL DEFAULT session_user,
    reason        text        NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 2000)
);
CREATE INDEX evidence_repairs_source ON evidence_repairs (source_id);
CREATE TRIGGER evidence_repairs_append_only
    BEFORE UPDATE OR DELETE ON evidence_repairs
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();

-- The proof for one unknown message source, or NULL when there is none.
CREATE FUNCTION memory_direct_proof(p_source uuid)
RETURNS TABLE (rule text, counterpart uuid)
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

-- Repairs every source that has proof and returns what it changed. Run it inside a transaction
-- and roll back for a dry run (mesh-memory repair --dry-run does exactly that).
CREATE FUNCTION memory_repair_audience_evidence(p_reason text)
RETURNS TABLE (source_id uuid, revision_id uuid, rule text, audience uuid[])
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    candidate record;
    proof     record;
    changed   integer;
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
           SET evidence = 'known', evidence_basis = 'repaired: ' || proof.rule
         WHERE id = candidate.id;
        INSERT INTO revision_source_audience (source_id, actor_id) VALUES (candidate.id, proof.counterpart);
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
            UPDATE revision_sources
               SET evidence = 'known', evidence_basis = 'repaired: derived_from_known_revision'
             WHERE id = candidate.id;
            INSERT INTO revision_source_audience (source_id, actor_id)
            SELECT candidate.id, a.actor_id FROM revision_source_audience a
              JOIN revision_sources p ON p.id = a.source_id
             WHERE p.revision_id = candidate.parent_revision_id
             GROUP BY a.actor_id
            HAVING count(*) = (SELECT count(*) FROM revision_sources p2 WHERE p2.revision_id = candidate.parent_revision_id);
            source_id := candidate.id; revision_id := candidate.revision_id; rule := 'derived_from_known_revision';
            SELECT coalesce(array_agg(a.actor_id ORDER BY a.actor_id), '{}') INTO audience
              FROM revision_source_audience a WHERE a.source_id = candidate.id;
            INSERT INTO evidence_repairs (source_id, revision_id, rule, audience, reason)
            VALUES (candidate.id, candidate.revision_id, 'derived_from_known_revision', audience, p_reason);
            changed := changed + 1;
            RETURN NEXT;
        END LOOP;
        EXIT WHEN changed = 0;
    END LOOP;
END;
$$;

-- Operator review: an authenticated operator marks an unknown source's audience, with a reason.
-- SECURITY DEFINER so that operators need no write privilege on the tables; EXECUTE is granted to
-- the operator group role only. Logged in operator_actions (session_user) and evidence_repairs.
DO $$
BEGIN
    CREATE ROLE mesh_operator NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END;
$$;

CREATE FUNCTION memory_review_source_evidence(p_source uuid, p_audience uuid[], p_reason text)
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
    IF p_reason IS NULL OR length(btrim(p_reason)) = 0 THEN
        RAISE EXCEPTION 'an evidence review needs a reason' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_audience IS NULL OR cardinality(p_audience) = 0 THEN
        RAISE EXCEPTION 'an evidence review names at least one actor' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT id, revision_id, evidence INTO src FROM revision_sources WHERE id = p_source FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no source %', p_source USING ERRCODE = 'no_data_found';
    END IF;
    IF src.evidence <> 'unknown' THEN
        RAISE EXCEPTION 'source % already has known evidence', p_source USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE revision_sources SET evidence = 'known', evidence_basis = 'operator review by ' || session_user
     WHERE id = p_source;
    INSERT INTO revision_source_audience (source_id, actor_id)
    SELECT p_source, a FROM (SELECT DISTINCT unnest(p_audience) AS a) x;
    INSERT INTO evidence_repairs (source_id, revision_id, rule, audience, reason, repaired_by)
    VALUES (p_source, src.revision_id, 'operator_review', p_audience, p_reason, session_user);
    INSERT INTO operator_actions (role_name, action, target_kind, target_id, reason, details)
    VALUES (session_user, 'review_source_evidence', 'revision_source', p_source, p_reason,
            jsonb_build_object('revision_id', src.revision_id, 'audience', to_jsonb(p_audience)));
END;
$$;
REVOKE ALL ON FUNCTION memory_review_source_evidence(uuid, uuid[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memory_review_source_evidence(uuid, uuid[], text) TO mesh_operator;
REVOKE ALL ON FUNCTION memory_repair_audience_evidence(text) FROM PUBLIC;

-- The forward repair of whatever legacy evidence exists when this migration runs.
SELECT count(*) FROM memory_repair_audience_evidence('migration 20261202005000: legacy audience repair');
