-- An amend is written by one function call: one round trip, its evidence in one statement.
--
-- Why: an amend was about a dozen round trips (BEGIN, lock the entry, read its revision, check
-- the subject and the source actor, insert the revision, copy the parent's sources, read the
-- parent's evidence, insert the parent edge, the new message sources, point the entry at the new
-- revision, queue its index work, COMMIT), and the copied sources and the parent edge were two
-- statements, so the revision's evidence summary was computed twice. With eight writers on two
-- cores the round trips, not the work, set the rate: 400 amends/s against the 500/s that issue 38
-- asks of a durable store (docs/benchmarks-history.md, "2026-12-08").
--
-- The statements are the ones the store ran from Rust (`store::memory::amend_entry`,
-- `store::lineage`), in the same order, so the summary and projection triggers see the same
-- rows: the new revision, its sources (the parent's sources without the parent's own parent
-- edges, plus one edge to the parent whose audience is the intersection of the parent's sources;
-- then the new message sources), then the entry's pointer, which makes the revision current and
-- writes its projection row once. SECURITY INVOKER: the runtime role writes with its own
-- privileges, and the revision's foreign keys reject a subject or source actor that does not
-- exist (the store maps the constraint to its typed error, as it does for a create).
--
-- Outcomes that change nothing are returned, not raised, so the store answers them with its
-- typed results: `unknown_entry` (no such entry of this agent), `already_forgotten`,
-- `revision_conflict` (with the revision that is current instead) and `unchanged` (neither the
-- body nor the subject would change). `committed` returns the new revision's number.
--
-- The entry row is locked by a statement of its own, and the current revision read by the next
-- one: a FOR UPDATE over a join would, after waiting for a concurrent amend, re-check the join
-- against the old snapshot and lose the row; in a volatile PL/pgSQL function each statement takes
-- a new snapshot, so the second one sees the revision the concurrent amend committed.
CREATE FUNCTION memory_write_amend(
    p_agent uuid, p_entry uuid, p_expected uuid, p_revision uuid, p_body text, p_subject_update text,
    p_subject uuid, p_source_actor uuid,
    p_source_ids uuid[], p_source_agents uuid[], p_source_revisions uuid[], p_source_messages uuid[],
    p_source_kinds text[],
    OUT outcome text, OUT current_revision uuid, OUT revision_number integer, OUT subject_changed boolean)
LANGUAGE plpgsql AS $$
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
