-- Memory browser, subject filter: walk one subject's revisions newest entry first, so a page of
-- "entries about X" is an index range scan even when X is the subject of many revisions
-- (measured at 1,000,000 revisions: 14 ms sort per page before, under 1 ms after).
CREATE INDEX memory_entry_revisions_subject_entry
    ON memory_entry_revisions (subject_actor_id, entry_id DESC)
    WHERE subject_actor_id IS NOT NULL;
