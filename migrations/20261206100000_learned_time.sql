-- When each memory revision was learned (issue 33: memories that say when).
--
-- A revision is learned from the authenticated message it was told in: its `message` lineage
-- sources (the turn's inbound message, the hosted MCP call's recorded message). An amendment
-- copies every earlier source, so its message sources are the original's and the correction's;
-- the latest is when the correction was told (a correction is told after what it corrects). A
-- revision with no message source (an import, a bulk load) was learned when it was written.
--
-- Derived from canonical rows only, never stored a second time: messages and lineage sources
-- are immutable, so the learned time of a revision can never change or disagree with them.
-- Read per batch (retrieval ranks a bounded window of candidates with it, renders it, and the
-- operator views show it); `revision_sources_revision` and the messages' primary key answer it.
CREATE FUNCTION memory_learned_at(p_revision uuid)
RETURNS timestamptz
LANGUAGE sql
STABLE
AS $$
    SELECT coalesce(
               (SELECT max(m.sent_at)
                  FROM revision_sources s
                  JOIN messages m ON m.id = s.message_id AND m.runtime_agent_id = s.runtime_agent_id
                 WHERE s.revision_id = r.id AND s.kind = 'message'),
               r.created_at)
      FROM memory_entry_revisions r
     WHERE r.id = p_revision
$$;

COMMENT ON FUNCTION memory_learned_at(uuid) IS
    'When a revision was learned: the latest sent_at of its message sources, else when it was written.';
