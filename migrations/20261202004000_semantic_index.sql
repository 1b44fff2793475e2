-- Semantic index bookkeeping (src/semantic): bounded outbox retries, one rebuild at a time, and
-- per-generation HNSW indexes over the dimension-less `revision_embeddings.embedding` column.

-- A work item that failed `max_attempts` times is parked, not retried forever: it keeps its
-- last error category for operators, and a rebuild (which backfills every current revision)
-- covers what it missed.
ALTER TABLE index_outbox ADD COLUMN gave_up_at timestamptz NULL;
CREATE INDEX index_outbox_due ON index_outbox (next_attempt_at, id) WHERE completed_at IS NULL AND gave_up_at IS NULL;

-- At most one generation is being built at a time (a rebuild resumes it rather than racing it).
CREATE UNIQUE INDEX embedding_generations_one_building ON embedding_generations ((true)) WHERE state = 'building';

-- Finding a revision's embeddings across generations (backfill checks, audit).
CREATE INDEX revision_embeddings_revision ON revision_embeddings (revision_id);

-- HNSW needs a fixed dimension while the column is dimension-less, so each generation gets its own
-- partial expression index, cast to that generation's dimension: queries for generation N use
-- `embedding::vector(dim) <=> ...` with `generation_id = N` and match exactly this index.
-- Called when a generation becomes active (and idempotently afterwards). A no-op without pgvector;
-- above pgvector's HNSW limit of 2000 dimensions the generation is searched exactly instead.
CREATE FUNCTION semantic_ensure_generation_index(p_generation bigint)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    dim integer;
BEGIN
    SELECT dimension INTO dim FROM embedding_generations WHERE id = p_generation;
    IF dim IS NULL THEN
        RAISE EXCEPTION 'embedding generation % does not exist', p_generation USING ERRCODE = 'foreign_key_violation';
    END IF;
    IF dim > 2000 OR NOT EXISTS (
        SELECT 1 FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = 'revision_embeddings' AND column_name = 'embedding'
    ) THEN
        RETURN false;
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON revision_embeddings USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE generation_id = %s',
        'revision_embeddings_hnsw_g' || p_generation, dim, p_generation);
    RETURN true;
END;
$$;
