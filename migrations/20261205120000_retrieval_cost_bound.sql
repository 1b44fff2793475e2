-- Which count a search's entry costs are in: 'bytes' (UTF-8 length, the contract's conservative
-- bound, and the only one before this migration) or 'tokenizer' (a configured model tokenizer,
-- MESH_PROMPT_TOKENIZER). Adding a column with a constant default rewrites no row, so the audit
-- table's history stays as it was written.
ALTER TABLE memory_retrieval_events
    ADD COLUMN cost_bound text NOT NULL DEFAULT 'bytes' CHECK (cost_bound IN ('bytes', 'tokenizer'));
