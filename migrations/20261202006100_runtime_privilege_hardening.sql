-- Least privilege for the agent runtime's database role on the provenance tables.
--
-- Migration 20261202002100 gives mesh_runtime SELECT, INSERT and UPDATE on every table (and by
-- default privileges on later ones). Provenance must not be rewritable by the runtime: a runtime
-- that could UPDATE revision_sources could mark unknown evidence as known and widen an audience
-- without any grant. The store only ever INSERTs lineage; repair and operator review run as the
-- schema owner (migration / SECURITY DEFINER functions).

REVOKE UPDATE, DELETE, TRUNCATE ON revision_sources, revision_source_audience FROM PUBLIC, mesh_runtime;
REVOKE UPDATE, DELETE, TRUNCATE ON messages, memory_entry_revisions, memory_retrieval_events FROM PUBLIC, mesh_runtime;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON evidence_repairs FROM PUBLIC, mesh_runtime;
REVOKE UPDATE, DELETE, TRUNCATE ON conversation_observations FROM PUBLIC, mesh_runtime;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON revision_audience_summary FROM PUBLIC, mesh_runtime;

-- The evidence summary is derived data: only its triggers write it, as the schema owner.
ALTER FUNCTION memory_summary_after_sources() SECURITY DEFINER SET search_path FROM CURRENT;
ALTER FUNCTION memory_summary_after_audience() SECURITY DEFINER SET search_path FROM CURRENT;
REVOKE ALL ON FUNCTION memory_refresh_audience_summary(uuid[]) FROM PUBLIC;
