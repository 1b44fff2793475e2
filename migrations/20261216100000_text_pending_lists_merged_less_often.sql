-- The projection's two full-text pending lists may hold 4 MB again (PostgreSQL's default), and
-- the store merges them every 2,048 committed writes instead of every 256 (`store::maintenance`).
--
-- Why: since `20261210100000` the merges run on the store's maintenance task, off the writers'
-- transactions, but on the same two cores. A merge descends once into the posting tree of every
-- distinct key of its list (lexemes and audience members), so its cost grows much more slowly
-- than the list: at a million revisions, durable, 50-65 ms for 256 writes of the benchmark's
-- rows and 190 ms for 3,700. Merging every 256 writes, the merges took 0.28 ms of CPU per write
-- (`track_functions`), a quarter of what a write costs the machine; every 2,048, 0.16 ms. In
-- alternating write-only runs on one 1M store, 8 writers wrote 1,987 remembers a second (means
-- of six runs) against 1,760 (docs/benchmarks-history.md, "2026-12-16").
--
-- What it trades: every search that uses these indexes reads their whole pending list. A list of
-- 2,048 writes of the benchmark's rows is about 1.5 MB, 0.75 MB on average between merges; a
-- 3 MB list added 0.2-0.5 ms to a search's mean. The 4 MB limit is only the backstop for a
-- maintenance task that falls behind: a writer that finds a list over it merges it in its own
-- transaction, as before `20261210100000`.
ALTER INDEX searchable_revisions_text_audience SET (gin_pending_list_limit = 4096);
ALTER INDEX searchable_revisions_unknown_text SET (gin_pending_list_limit = 4096);
