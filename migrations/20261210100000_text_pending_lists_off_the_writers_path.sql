-- The full-text indexes' pending lists are merged off the writers' path.
--
-- Why: the three GIN indexes a remember and an amend write (`searchable_revisions_text_audience`,
-- `searchable_revisions_unknown_text`, `memory_entry_revisions_tsv`) defer their inserts to a
-- pending list (`fastupdate`), and PostgreSQL merges that list into the index inside the insert
-- that finds it over `gin_pending_list_limit`. At a million revisions, durable, that merge held
-- one writer's transaction for 50-100 ms about every 300 writes (the audience array's keys make
-- each merge touch many posting trees), and every create of its group-commit batch waited with
-- it: remembers' p99 was ten times their p50 (docs/benchmarks-history.md, "2026-12-11").
--
-- The store now calls this function on a task of its own after every few hundred committed
-- writes (`store::maintenance`), so the lists are merged before a writer finds one full: the
-- projection's two lists (256 kB each) on every call, the canonical revisions' list (the
-- default 4 MB, lexemes only) when `p_revision_text` asks for it, much less often. A merge costs
-- about one descent per distinct key whatever the list's length, so merging a long list early
-- would only add work. A writer
-- that still finds one full (writes from another process, or a burst between two merges) merges
-- it as before, unless this function is merging it at that moment: then the writer skips the
-- merge (PostgreSQL takes that lock conditionally for an insert) and the list briefly exceeds its
-- limit. Searches read the pending list as before; it stays as short as its limit.
--
-- `gin_clean_pending_list` may only be called by an index's owner, so the function runs as the
-- schema owner; it only moves index entries from the pending list into the index, reads and
-- returns nothing else, and the runtime role is the one granted to call it.
CREATE FUNCTION memory_merge_text_pending_lists(p_revision_text boolean) RETURNS bigint
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, public, pg_temp
    AS $$
    SELECT gin_clean_pending_list('public.searchable_revisions_text_audience'::regclass)
         + gin_clean_pending_list('public.searchable_revisions_unknown_text'::regclass)
         + CASE WHEN p_revision_text THEN gin_clean_pending_list('public.memory_entry_revisions_tsv'::regclass)
                ELSE 0 END
$$;

COMMENT ON FUNCTION memory_merge_text_pending_lists(boolean) IS
    'Merges the pending lists of the full-text indexes that writes fill (the canonical revisions'' one too when asked), off the writers'' path; returns the pending pages merged.';

REVOKE ALL ON FUNCTION memory_merge_text_pending_lists(boolean) FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_runtime') THEN
        GRANT EXECUTE ON FUNCTION memory_merge_text_pending_lists(boolean) TO mesh_runtime;
    END IF;
END;
$$;
