-- Operator console: indexes for the memory browser's keyset pagination, and a read-only group
-- role for the people who sign in to the console.
--
-- The browser lists entries newest first by their time-ordered UUIDv7 id, a page at a time
-- ("id < last id of the previous page ORDER BY id DESC LIMIT n"). With an agent or state filter
-- these composite indexes turn every page into one index range scan, at any table size.
CREATE INDEX memory_entries_agent_keyset ON memory_entries (runtime_agent_id, id DESC);
CREATE INDEX memory_entries_state_keyset ON memory_entries (state, id DESC);
-- Evidence review pages through unknown-evidence sources by revision, newest first.
CREATE INDEX revision_sources_unknown_keyset ON revision_sources (revision_id DESC) WHERE evidence = 'unknown';

-- Roles are cluster-wide while migrations run once per database: create them only if missing,
-- and tolerate a concurrent migration of another database creating them first.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_console_reader') THEN
        CREATE ROLE mesh_console_reader NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END;
$$;
COMMENT ON ROLE mesh_console_reader IS
    'Mesh Memory console: read-only access to memory, lineage, audit and sharing rows (browse, explain, review)';

-- Console users read everything the console shows, and write nothing directly: operator
-- decisions go through SECURITY DEFINER functions that only mesh_operator may execute.
GRANT USAGE ON SCHEMA public TO mesh_console_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO mesh_console_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO mesh_console_reader;
