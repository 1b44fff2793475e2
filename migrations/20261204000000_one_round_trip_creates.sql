-- A batch of new memories is written by one function call: one round trip, one statement, its
-- own transaction when the caller has none.
--
-- Why: a group-committed batch of remembers was six round trips (the pool's check, BEGIN, the
-- entries, the revisions with their outbox rows, the message sources, COMMIT). On a two-core
-- machine each round trip is a pair of context switches and a scheduler turn on both sides, and
-- the database sat half idle between the statements of the two batches in flight: the same
-- statements replayed by pgbench, where round trips are cheap, wrote twice as many remembers per
-- second (BENCHMARKS.md, "one round trip per batch").
--
-- The statements are the ones the store ran from Rust (`store::memory`, `store::lineage`), in the
-- same order, so the triggers that keep the evidence summary and the searchable projection run
-- exactly as before. Nothing here widens privileges: both functions are SECURITY INVOKER, so the
-- runtime role writes with its own INSERT privileges and the schema's foreign keys and CHECKs
-- decide what is accepted.

-- Message sources with their evidence, computed from structured rows (never taken from a caller):
-- a known-topology conversation gives the members when the message was sent, plus its inbound
-- sender, without the agent's own actor, sorted; a conversation of unknown topology gives
-- `unknown` evidence. A message that is missing or belongs to another runtime agent rejects the
-- call with a foreign_key_violation naming the constraint below, its id in DETAIL, so that the
-- store reports the first such message by its id and the caller's transaction rolls back.
CREATE FUNCTION memory_insert_message_sources(p_ids uuid[], p_agents uuid[], p_revisions uuid[], p_messages uuid[],
                                              p_kinds text[])
RETURNS void
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

-- New entries at revision 1, each with its outbox row and its message sources. Columns are
-- parallel arrays, one element per entry (sources: one element per source). Retrieved-revision
-- sources are not written here: the store writes them after this call, in the same transaction.
CREATE FUNCTION memory_write_creates(p_entries uuid[], p_revisions uuid[], p_agents uuid[], p_always_on boolean[],
                                     p_restrictions text[], p_restricted_to uuid[], p_origins uuid[], p_bodies text[],
                                     p_subjects uuid[], p_source_actors uuid[],
                                     p_source_ids uuid[], p_source_agents uuid[], p_source_revisions uuid[],
                                     p_source_messages uuid[], p_source_kinds text[])
RETURNS void
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
