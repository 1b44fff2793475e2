-- Message evidence reads a conversation's members *as of the message* (joined before it, and
-- not yet left), which the partial unique index on open memberships cannot answer: every message
-- source scanned the whole membership table. At a million revisions (18,776 memberships) that
-- sequential scan was 1.1 ms of a 2.5 ms remember, and serialised concurrent writers on the same
-- pages. This index answers the as-of lookup by conversation and join time, and carries the two
-- columns the lookup returns so that it stays an index-only scan.
CREATE INDEX conversation_memberships_history
    ON conversation_memberships (conversation_id, joined_at) INCLUDE (actor_id, left_at);
