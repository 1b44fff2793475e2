-- Short entry ids (issue 23): models see and type the last 12 hex digits of an entry's UUID
-- instead of the whole UUID, which cost about 30 prompt tokens per mention. Tool calls resolve a
-- short id through this index, within one runtime agent and only among the entries the asker may
-- see (Store::current_revisions_by_reference). uuid's text form is immutable, so the expression
-- is indexable; nothing is stored twice.
CREATE INDEX memory_entries_short_id ON memory_entries (right(id::text, 12));
