-- Which text of a memory a generation's vectors embed (src/semantic/document.rs). Generations
-- written before this migration embedded the body alone ('body'); vectors of different forms are
-- not comparable, so such a generation no longer serves queries (semantic search reports
-- semantic_unavailable, `index status` a model mismatch) until `mesh-memory index rebuild` builds
-- one of the current form. Every writer names the form explicitly: no lasting default.
ALTER TABLE embedding_generations ADD COLUMN document_form text NOT NULL DEFAULT 'body'
    CHECK (length(document_form) BETWEEN 1 AND 100);
ALTER TABLE embedding_generations ALTER COLUMN document_form DROP DEFAULT;
