-- Binary-quantized vectors in the eligible-set index, for a semantic shortlist without heap reads.
--
-- Why: exact semantic search over an eligible set of a few thousand revisions read one
-- revision_embeddings row per eligible revision through an index probe: ~6 µs each on the
-- benchmark machine, 20 ms for a direct conversation at a million revisions. The eligible set
-- itself is read by an index-only scan of the audience-class index (migration 20261202008000).
-- Carrying each revision's sign bits (pgvector's binary_quantize of its embedding in the active
-- generation: dimension/8 bytes, 48 for 384 dimensions) in that index lets one index-only scan
-- rank the whole eligible set by Hamming distance; only a shortlist is then re-ranked by exact
-- cosine against revision_embeddings (src/semantic/vector_index.rs). This is pgvector's
-- documented "binary quantization with re-ranking"; eligibility is unchanged (the shortlist is
-- drawn from the eligible rows in the same statement).
--
-- Invariant: searchable_revisions.embedding_bits is the quantized embedding of the row's revision
-- in the active generation, or NULL when that generation has none (not indexed yet, or no active
-- generation). Maintained by the triggers below, created only where pgvector is installed
-- (without it the column stays NULL and semantic search is unavailable anyway).

ALTER TABLE searchable_revisions ADD COLUMN embedding_bits varbit NULL;

DROP INDEX searchable_revisions_class;
CREATE INDEX searchable_revisions_class ON searchable_revisions
    (audience_class_id, created_at DESC, revision_id)
    INCLUDE (entry_id, subject_actor_id, origin_conversation_id, always_on, restriction, restricted_conversation_id,
             embedding_bits)
    WHERE audience_class_id IS NOT NULL;

DO $migration$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                    WHERE table_schema = current_schema() AND table_name = 'revision_embeddings'
                      AND column_name = 'embedding') THEN
        RAISE NOTICE 'pgvector is not installed; embedding_bits stays NULL';
        RETURN;
    END IF;

    -- The bits of one revision in the active generation (NULL if none).
    EXECUTE $f$
        CREATE FUNCTION memory_embedding_bits(p_revision uuid) RETURNS varbit
        LANGUAGE sql STABLE
        AS $$
            SELECT binary_quantize(x.embedding)::varbit
              FROM embedding_generations g
              JOIN revision_embeddings x ON x.generation_id = g.id AND x.revision_id = p_revision
             WHERE g.state = 'active'
             LIMIT 1
        $$
    $f$;

    -- A projection row is born with its bits (memory_refresh_searchable stays pgvector-agnostic).
    EXECUTE $f$
        CREATE FUNCTION memory_searchable_fill_bits() RETURNS trigger LANGUAGE plpgsql
        SET plan_cache_mode = force_generic_plan
        AS $$
        BEGIN
            NEW.embedding_bits := memory_embedding_bits(NEW.revision_id);
            RETURN NEW;
        END;
        $$
    $f$;
    CREATE TRIGGER searchable_revisions_fill_bits
        BEFORE INSERT ON searchable_revisions
        FOR EACH ROW EXECUTE FUNCTION memory_searchable_fill_bits();

    -- The indexing worker writes an embedding after the projection row exists.
    EXECUTE $f$
        CREATE FUNCTION memory_searchable_after_embeddings() RETURNS trigger LANGUAGE plpgsql
        SET plan_cache_mode = force_generic_plan
        AS $$
        BEGIN
            UPDATE searchable_revisions p
               SET embedding_bits = binary_quantize(c.embedding)::varbit
              FROM changed_embeddings c
              JOIN embedding_generations g ON g.id = c.generation_id AND g.state = 'active'
             WHERE p.revision_id = c.revision_id
               AND p.embedding_bits IS DISTINCT FROM binary_quantize(c.embedding)::varbit;
            RETURN NULL;
        END;
        $$
    $f$;
    CREATE TRIGGER revision_embeddings_searchable_insert
        AFTER INSERT ON revision_embeddings REFERENCING NEW TABLE AS changed_embeddings
        FOR EACH STATEMENT EXECUTE FUNCTION memory_searchable_after_embeddings();
    CREATE TRIGGER revision_embeddings_searchable_update
        AFTER UPDATE ON revision_embeddings REFERENCING NEW TABLE AS changed_embeddings
        FOR EACH STATEMENT EXECUTE FUNCTION memory_searchable_after_embeddings();

    -- Activating (or retiring) a generation changes every row's bits: recomputed at commit of
    -- the switching transaction (deferred, so a retire-then-activate switch recomputes against
    -- the final state, and the second firing finds nothing left to write), writing only the rows
    -- that change. Rare: the last step of a rebuild.
    EXECUTE $f$
        CREATE FUNCTION memory_searchable_after_generations() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE searchable_revisions p
               SET embedding_bits = fresh.bits
              FROM (SELECT s.revision_id, memory_embedding_bits(s.revision_id) AS bits
                      FROM searchable_revisions s) AS fresh
             WHERE p.revision_id = fresh.revision_id AND p.embedding_bits IS DISTINCT FROM fresh.bits;
            RETURN NULL;
        END;
        $$
    $f$;
    CREATE CONSTRAINT TRIGGER embedding_generations_searchable_insert
        AFTER INSERT ON embedding_generations DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (NEW.state = 'active')
        EXECUTE FUNCTION memory_searchable_after_generations();
    CREATE CONSTRAINT TRIGGER embedding_generations_searchable_update
        AFTER UPDATE OF state ON embedding_generations DEFERRABLE INITIALLY DEFERRED
        FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND (OLD.state = 'active' OR NEW.state = 'active'))
        EXECUTE FUNCTION memory_searchable_after_generations();

    -- Derived data: written by the triggers as the schema owner only.
    ALTER FUNCTION memory_searchable_after_embeddings() SECURITY DEFINER SET search_path FROM CURRENT;
    ALTER FUNCTION memory_searchable_after_generations() SECURITY DEFINER SET search_path FROM CURRENT;

    -- Backfill.
    UPDATE searchable_revisions p SET embedding_bits = memory_embedding_bits(p.revision_id)
     WHERE memory_embedding_bits(p.revision_id) IS NOT NULL;
END;
$migration$;

ANALYZE searchable_revisions;
