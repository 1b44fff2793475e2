-- revision_embeddings.embedding is stored in half precision (pgvector's halfvec, 0.7 and later):
-- 2 bytes a component instead of 4.
--
-- Why: a hybrid search re-ranks its shortlist (400 revisions) by exact cosine, one random probe
-- of this table each. At 10M revisions the table was 15 GB, larger than the page cache could keep
-- beside the projection, so a third of those probes went to disk and a re-rank half took 4-10 ms
-- against about 1 ms at 1M (docs/benchmarks-history.md "2026-12-17"). In half precision the table
-- is about half the size, and every revision takes about 640 bytes less on disk.
--
-- What it trades: embedders' vectors are L2-normalised before they are stored (every component in
-- [-1, 1]), and half precision keeps 11 significant bits of each: a cosine similarity moves by
-- about 1e-4, against gaps of 1e-2 between the hits a search ranks. Queries are not rounded: the
-- re-rank converts the stored vector back to single precision and compares it with the query's
-- own vector (src/semantic/vector_index.rs). Sign bits (binary_quantize) keep their signs; only a
-- component smaller than 6e-8 becomes zero.
--
-- Where pgvector is older than 0.7 (no halfvec type) the column stays in single precision, and
-- every statement reads it the same way, since they cast it to vector(dimension). Where pgvector is
-- not installed there is no column and nothing to do; where the column is already halfvec, neither.
--
-- The statement rewrites the table and its indexes once, at upgrade, holding an exclusive lock on
-- the table meanwhile (BENCHMARKS.md says how long it took for the benchmark's stores).
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = 'revision_embeddings'
           AND column_name = 'embedding' AND udt_name = 'vector') THEN
        RETURN;
    END IF;
    IF to_regtype('halfvec') IS NULL THEN
        RAISE NOTICE 'pgvector % has no halfvec; embeddings stay in single precision',
            (SELECT extversion FROM pg_extension WHERE extname = 'vector');
        RETURN;
    END IF;
    ALTER TABLE revision_embeddings ALTER COLUMN embedding TYPE halfvec USING embedding::halfvec;
END;
$$;
