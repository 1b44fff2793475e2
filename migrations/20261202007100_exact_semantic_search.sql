-- Semantic candidates are an exact cosine search over the eligible set (src/semantic/vector_index.rs),
-- which the spec caps at 10,000 revisions: a destination audience typically admits well under 1%
-- of an archive, and an HNSW graph filtered that selectively walks most of its nodes before it
-- finds 200 eligible neighbours, so the per-generation HNSW indexes were never the fast path. They
-- only cost every embedding write an index insert and every rebuild an index build. Drop them, and
-- the function that created them; revision_embeddings' primary key (generation_id, revision_id)
-- serves the exact search's join.
DO $$
DECLARE
    index_name text;
BEGIN
    FOR index_name IN
        SELECT indexname FROM pg_indexes
         WHERE schemaname = current_schema() AND tablename = 'revision_embeddings'
           AND indexname LIKE 'revision_embeddings\_hnsw\_g%'
    LOOP
        EXECUTE format('DROP INDEX %I', index_name);
    END LOOP;
END;
$$;
DROP FUNCTION semantic_ensure_generation_index(bigint);
