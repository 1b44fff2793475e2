-- Access tokens of the MCP server's HTTP transport (`mesh-memory mcp --http`): each binds one
-- runtime agent, one conversation and one connector identity (the speaker), as a stdio server is
-- bound by its launch arguments. Only a SHA-256 hash of the token is stored (the token is 256
-- random bits, shown once when an operator issues it), so this table cannot be used to
-- authenticate. A revoked token stays listed with its revocation time.
CREATE TABLE mcp_access_tokens (
    id               uuid        PRIMARY KEY,
    token_hash       bytea       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    runtime_agent_id uuid        NOT NULL REFERENCES runtime_agents (id),
    conversation_id  uuid        NOT NULL REFERENCES conversations (id),
    identity_id      uuid        NOT NULL REFERENCES connector_identities (id),
    label            text        NOT NULL DEFAULT '' CHECK (length(label) <= 200),
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_used_at     timestamptz NULL,
    revoked_at       timestamptz NULL,
    CHECK (revoked_at IS NULL OR revoked_at >= created_at)
);
CREATE INDEX mcp_access_tokens_agent ON mcp_access_tokens (runtime_agent_id, created_at);

-- The runtime authenticates requests and records their use; issuing and revoking tokens is for
-- operators and the schema owner (the CLI on the embedded cluster), never the runtime role.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mesh_runtime') THEN
        REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON mcp_access_tokens FROM mesh_runtime;
        GRANT UPDATE (last_used_at) ON mcp_access_tokens TO mesh_runtime;
    END IF;
END;
$$;
