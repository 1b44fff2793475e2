-- Agent turns: one row per turn the engine ran, so that operators can print what a turn did
-- (`mesh-memory turns`, `mesh-memory turn ID`) and why a reply was or was not delivered.
-- The ledger is exactly the store's committed return values; tool calls are recorded by name and
-- status only (never their arguments), and no prompt or query text is kept here.

CREATE TYPE agent_turn_outcome AS ENUM ('delivered', 'claim_guard_failed', 'withheld', 'failed');

CREATE TABLE agent_turns (
    id                  uuid               PRIMARY KEY,
    runtime_agent_id    uuid               NOT NULL REFERENCES runtime_agents (id),
    conversation_id     uuid               NOT NULL,
    inbound_message_id  uuid               NOT NULL,
    outbound_message_id uuid               NULL,
    -- Model requests made (at most three: the last permitted one carries no tools).
    rounds              integer            NOT NULL CHECK (rounds BETWEEN 0 AND 3),
    tool_calls          jsonb              NOT NULL DEFAULT '[]'::jsonb,
    ledger              jsonb              NOT NULL,
    outcome             agent_turn_outcome NOT NULL,
    failure_reason      text               NULL CHECK (failure_reason IS NULL OR length(failure_reason) BETWEEN 1 AND 2000),
    unbacked_claims     jsonb              NOT NULL DEFAULT '[]'::jsonb,
    withheld            jsonb              NULL,
    retrieval_event_ids uuid[]             NOT NULL DEFAULT '{}',
    used_revision_ids   uuid[]             NOT NULL DEFAULT '{}',
    started_at          timestamptz        NOT NULL,
    created_at          timestamptz        NOT NULL DEFAULT now(),
    CHECK ((outcome = 'delivered') = (outbound_message_id IS NOT NULL)),
    CHECK ((outcome = 'withheld') = (withheld IS NOT NULL)),
    FOREIGN KEY (conversation_id, runtime_agent_id) REFERENCES conversations (id, runtime_agent_id),
    FOREIGN KEY (inbound_message_id, runtime_agent_id) REFERENCES messages (id, runtime_agent_id),
    FOREIGN KEY (outbound_message_id, runtime_agent_id) REFERENCES messages (id, runtime_agent_id)
);
CREATE INDEX agent_turns_agent_time ON agent_turns (runtime_agent_id, created_at DESC);
CREATE INDEX agent_turns_conversation ON agent_turns (conversation_id, created_at DESC);

CREATE TRIGGER agent_turns_append_only
    BEFORE UPDATE OR DELETE ON agent_turns
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();
CREATE TRIGGER agent_turns_no_truncate
    BEFORE TRUNCATE ON agent_turns
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_rewrite();
