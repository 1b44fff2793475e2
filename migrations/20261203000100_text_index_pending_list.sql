-- GIN indexes take inserts into an unsorted "pending list" and merge it into the index later
-- (when the list outgrows gin_pending_list_limit, default 4 MB, or at vacuum). Every search
-- reads the whole pending list: with the full-text index behind each lexical candidate query
-- and each withheld-diagnostics query, a store under steady writes made every search scan up
-- to 4 MB of unmerged rows (each row's lexemes plus its audience members).
--
-- Measured on the 1M benchmark store: with the 0.5-1.2 MB pending list one benchmark run of
-- remembers leaves behind, lexical recall p50 was 11.8-13.7 ms; with the list merged, 7.1-7.8
-- ms; with this limit (256 kB), 7.5-8.5 ms after the same writes, at the same remember rate.
-- Writers merge smaller lists more often; the total merge work is the same.
ALTER INDEX searchable_revisions_text_audience SET (gin_pending_list_limit = 256);
ALTER INDEX searchable_revisions_unknown_text SET (gin_pending_list_limit = 256);
