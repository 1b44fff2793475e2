-- Canonical memory store: identities, conversations, transcript evidence, append-only memory
-- revisions with lineage and audience evidence, sharing, index outbox, embedding generations and
-- retrieval audit. Later behaviour adds migrations; this file is never edited once landed.

-- ---------------------------------------------------------------------------------------------
-- Identities
-- ---------------------------------------------------------------------------------------------

CREATE TYPE actor_kind AS ENUM ('human', 'agent', 'service');

-- An actor is a stable identity. Its display name is mutable presentation data; memory bodies
-- never embed it, so a rename changes future rendering without rewriting history.
CREATE TABLE actors (
    id           uuid        PRIMARY KEY,
    kind         actor_kind  NOT NULL,
    display_name text        NOT NULL CHECK (length(btrim(display_name)) BETWEEN 1 AND 200),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- A RuntimeAgent is one memory perspective. Every memory row belongs to exactly one.
CREATE TABLE runtime_agents (
    id         uuid        PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (length(btrim(name)) BETWEEN 1 AND 200),
    actor_id   uuid        NOT NULL UNIQUE REFERENCES actors (id),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- How a connector (slack, discord, email...) names an actor. Unique per connector, so an
-- authenticated external id resolves to exactly one actor.
CREATE TABLE connector_identities (
    id          uuid        PRIMARY KEY,
    connector   text        NOT NULL CHECK (length(connector) BETWEEN 1 AND 100),
    external_id text        NOT NULL CHECK (length(external_id) BETWEEN 1 AND 200),
    actor_id    uuid        NOT NULL REFERENCES actors (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (connector, external_id)
);
CREATE INDEX connector_identities_actor ON connector_identities (actor_id);

-- ---------------------------------------------------------------------------------------------
-- Conversations and transcript evidence
-- ---------------------------------------------------------------------------------------------

CREATE TYPE conversation_topology AS ENUM ('direct', 'group', 'channel', 'unknown');

CREATE TABLE conversations (
    id                  uuid                  PRIMARY KEY,
    runtime_agent_id    uuid                  NOT NULL REFERENCES runtime_agents (id),
    connector           text                  NOT NULL CHECK (length(connector) BETWEEN 1 AND 100),
    external_channel_id text                  NOT NULL CHECK (length(external_channel_id) BETWEEN 1 AND 200),
    topology            conversation_topology NOT NULL,
    title               text                  NOT NULL DEFAULT '',
    created_at          timestamptz           NOT NULL DEFAULT now(),
    UNIQUE (runtime_agent_id, connector, external_channel_id),
    UNIQUE (id, runtime_agent_id)
);

-- Membership over time. The audience of a conversation at time t is every actor whose
-- membership interval contains t (the runtime agent's own actor is not part of an audience).
CREATE TABLE conversation_memberships (
    id              bigserial   PRIMARY KEY,
    conversation_id uuid        NOT NULL REFERENCES conversations (id),
    actor_id        uuid        NOT NULL REFERENCES actors (id),
    joined_at       timestamptz NOT NULL DEFAULT now(),
    left_at         timestamptz NULL,
    CHECK (left_at IS NULL OR left_at >= joined_at)
);
CREATE UNIQUE INDEX conversation_memberships_open
    ON conversation_memberships (conversation_id, actor_id) WHERE left_at IS NULL;
CREATE INDEX conversation_memberships_actor ON conversation_memberships (actor_id);

CREATE TYPE message_direction AS ENUM ('inbound', 'outbound');

-- Messages are transcript evidence: who said what, where, when, and whether the connector
-- authenticated the sender. sender_identity_id is NULL when no connector identity was proven.
CREATE TABLE messages (
    id                  uuid              PRIMARY KEY,
    runtime_agent_id    uuid              NOT NULL,
    conversation_id     uuid              NOT NULL,
    direction           message_direction NOT NULL,
    sender_actor_id     uuid              NOT NULL REFERENCES actors (id),
    sender_identity_id  uuid              NULL REFERENCES connector_identities (id),
    external_message_id text              NULL,
    body                text              NOT NULL,
    sent_at             timestamptz       NOT NULL,
    recorded_at         timestamptz       NOT NULL DEFAULT now(),
    FOREIGN KEY (conversation_id, runtime_agent_id) REFERENCES conversations (id, runtime_agent_id),
    UNIQUE (id, runtime_agent_id)
);
CREATE INDEX messages_conversation_time ON messages (conversation_id, sent_at);

-- ---------------------------------------------------------------------------------------------
-- Memory: mutable entry state, immutable revisions
-- ---------------------------------------------------------------------------------------------

CREATE TYPE memory_entry_state AS ENUM ('live', 'forgotten');
CREATE TYPE memory_restriction AS ENUM ('none', 'conversation_only');

-- The entry is the mutable handle: state, flags and a pointer to its current revision. The
-- pointer is NOT NULL and must name a revision of this very entry (composite, deferred FK), so
-- every live entry has exactly one current revision.
CREATE TABLE memory_entries (
    id                          uuid               PRIMARY KEY,
    runtime_agent_id            uuid               NOT NULL REFERENCES runtime_agents (id),
    state                       memory_entry_state NOT NULL DEFAULT 'live',
    always_on                   boolean            NOT NULL DEFAULT false,
    restriction                 memory_restriction NOT NULL DEFAULT 'none',
    restricted_conversation_id  uuid               NULL,
    origin_conversation_id      uuid               NULL,
    current_revision_id         uuid               NOT NULL,
    created_at                  timestamptz        NOT NULL DEFAULT now(),
    updated_at                  timestamptz        NOT NULL DEFAULT now(),
    forgotten_at                timestamptz        NULL,
    CHECK ((restriction = 'conversation_only') = (restricted_conversation_id IS NOT NULL)),
    CHECK ((state = 'forgotten') = (forgotten_at IS NOT NULL)),
    FOREIGN KEY (restricted_conversation_id, runtime_agent_id) REFERENCES conversations (id, runtime_agent_id),
    FOREIGN KEY (origin_conversation_id, runtime_agent_id) REFERENCES conversations (id, runtime_agent_id),
    UNIQUE (id, runtime_agent_id),
    UNIQUE (current_revision_id)
);
CREATE INDEX memory_entries_agent_state ON memory_entries (runtime_agent_id, state);
CREATE INDEX memory_entries_origin_conversation ON memory_entries (origin_conversation_id) WHERE state = 'live';
CREATE INDEX memory_entries_always_on ON memory_entries (runtime_agent_id) WHERE always_on AND state = 'live';

CREATE TYPE revision_operation AS ENUM ('create', 'amend');

-- Immutable revisions. subject_actor_id NULL means "subject not resolved yet".
-- source_actor_id is the connector-authenticated actor who supplied the claim (NULL only for
-- system-supplied memories); it is the only actor whose confirmation can release the revision.
CREATE TABLE memory_entry_revisions (
    id               uuid               PRIMARY KEY,
    entry_id         uuid               NOT NULL,
    runtime_agent_id uuid               NOT NULL,
    revision_number  integer            NOT NULL CHECK (revision_number >= 1),
    operation        revision_operation NOT NULL,
    body             text               NOT NULL CHECK (length(btrim(body)) BETWEEN 1 AND 4000),
    subject_actor_id uuid               NULL REFERENCES actors (id),
    source_actor_id  uuid               NULL REFERENCES actors (id),
    created_at       timestamptz        NOT NULL DEFAULT now(),
    body_tsv         tsvector           GENERATED ALWAYS AS (to_tsvector('english'::regconfig, body)) STORED,
    CHECK ((operation = 'create') = (revision_number = 1)),
    FOREIGN KEY (entry_id, runtime_agent_id) REFERENCES memory_entries (id, runtime_agent_id),
    UNIQUE (entry_id, revision_number),
    UNIQUE (id, entry_id),
    UNIQUE (id, runtime_agent_id)
);
CREATE INDEX memory_entry_revisions_tsv ON memory_entry_revisions USING gin (body_tsv);
CREATE INDEX memory_entry_revisions_subject ON memory_entry_revisions (subject_actor_id);
CREATE INDEX memory_entry_revisions_agent_created ON memory_entry_revisions (runtime_agent_id, created_at DESC);

ALTER TABLE memory_entries
    ADD CONSTRAINT memory_entries_current_revision_fk
    FOREIGN KEY (current_revision_id, id) REFERENCES memory_entry_revisions (id, entry_id)
    DEFERRABLE INITIALLY DEFERRED;

-- Revisions are history: no UPDATE, no DELETE, no TRUNCATE, whoever asks.
CREATE FUNCTION refuse_history_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE TRIGGER memory_entry_revisions_immutable
    BEFORE UPDATE OR DELETE ON memory_entry_revisions
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();
CREATE TRIGGER memory_entry_revisions_no_truncate
    BEFORE TRUNCATE ON memory_entry_revisions
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_rewrite();

-- ---------------------------------------------------------------------------------------------
-- Lineage and source-audience evidence
-- ---------------------------------------------------------------------------------------------

CREATE TYPE revision_source_kind AS ENUM (
    'message',            -- the authenticated inbound message of the turn
    'history_message',    -- a transcript message loaded into the turn
    'parent_revision',    -- the revision an amendment replaced
    'retrieved_revision'  -- a memory retrieved in the turn
);
CREATE TYPE audience_evidence_state AS ENUM ('known', 'unknown');

-- One row per source of a revision. Composite foreign keys make a source from another runtime
-- agent impossible at the database level. Evidence is the audience that could read the source:
-- 'known' with its actors in revision_source_audience, or 'unknown' (withheld from retrieval).
CREATE TABLE revision_sources (
    id                 uuid                    PRIMARY KEY,
    revision_id        uuid                    NOT NULL,
    runtime_agent_id   uuid                    NOT NULL,
    kind               revision_source_kind    NOT NULL,
    message_id         uuid                    NULL,
    parent_revision_id uuid                    NULL,
    evidence           audience_evidence_state NOT NULL,
    evidence_basis     text                    NOT NULL CHECK (length(evidence_basis) BETWEEN 1 AND 500),
    created_at         timestamptz             NOT NULL DEFAULT now(),
    CHECK ((kind IN ('message', 'history_message')) = (message_id IS NOT NULL)),
    CHECK ((kind IN ('parent_revision', 'retrieved_revision')) = (parent_revision_id IS NOT NULL)),
    FOREIGN KEY (revision_id, runtime_agent_id) REFERENCES memory_entry_revisions (id, runtime_agent_id),
    FOREIGN KEY (message_id, runtime_agent_id) REFERENCES messages (id, runtime_agent_id),
    FOREIGN KEY (parent_revision_id, runtime_agent_id) REFERENCES memory_entry_revisions (id, runtime_agent_id)
);
CREATE INDEX revision_sources_revision ON revision_sources (revision_id);
CREATE INDEX revision_sources_message ON revision_sources (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX revision_sources_parent ON revision_sources (parent_revision_id) WHERE parent_revision_id IS NOT NULL;
CREATE INDEX revision_sources_unknown ON revision_sources (revision_id) WHERE evidence = 'unknown';

CREATE TABLE revision_source_audience (
    source_id uuid NOT NULL REFERENCES revision_sources (id),
    actor_id  uuid NOT NULL REFERENCES actors (id),
    PRIMARY KEY (source_id, actor_id)
);

-- ---------------------------------------------------------------------------------------------
-- Sharing: requests, revision-scoped grants, operator log
-- ---------------------------------------------------------------------------------------------

CREATE TYPE sharing_request_state AS ENUM ('pending', 'approved', 'denied', 'expired');

CREATE TABLE sharing_requests (
    id                     uuid                  PRIMARY KEY,
    runtime_agent_id       uuid                  NOT NULL,
    revision_id            uuid                  NOT NULL,
    requested_in_conversation_id uuid            NOT NULL,
    requested_by_actor_id  uuid                  NOT NULL REFERENCES actors (id),
    target_conversation_id uuid                  NULL,
    rationale              text                  NOT NULL CHECK (length(rationale) BETWEEN 1 AND 2000),
    state                  sharing_request_state NOT NULL DEFAULT 'pending',
    created_at             timestamptz           NOT NULL DEFAULT now(),
    expires_at             timestamptz           NOT NULL,
    decided_at             timestamptz           NULL,
    decided_by             text                  NULL,
    decision_reason        text                  NULL,
    CHECK ((state = 'pending') = (decided_at IS NULL)),
    FOREIGN KEY (revision_id, runtime_agent_id) REFERENCES memory_entry_revisions (id, runtime_agent_id),
    FOREIGN KEY (requested_in_conversation_id, runtime_agent_id) REFERENCES conversations (id, runtime_agent_id),
    FOREIGN KEY (target_conversation_id, runtime_agent_id) REFERENCES conversations (id, runtime_agent_id)
);
CREATE INDEX sharing_requests_pending ON sharing_requests (created_at) WHERE state = 'pending';

-- The proposed audience of a request: the actors the revision would be released to.
CREATE TABLE sharing_request_audience (
    request_id uuid NOT NULL REFERENCES sharing_requests (id),
    actor_id   uuid NOT NULL REFERENCES actors (id),
    PRIMARY KEY (request_id, actor_id)
);

CREATE TYPE grant_authority AS ENUM ('source_actor_confirmation', 'operator_approval');

-- A grant releases exactly one revision to an audience. An amendment makes a new revision that
-- no earlier grant covers.
CREATE TABLE sharing_grants (
    id                    uuid            PRIMARY KEY,
    runtime_agent_id      uuid            NOT NULL,
    revision_id           uuid            NOT NULL,
    request_id            uuid            NULL REFERENCES sharing_requests (id),
    authority             grant_authority NOT NULL,
    confirmed_by_actor_id uuid            NULL REFERENCES actors (id),
    confirmed_by_message_id uuid          NULL,
    approved_by_role      text            NULL,
    reason                text            NOT NULL CHECK (length(reason) BETWEEN 1 AND 2000),
    created_at            timestamptz     NOT NULL DEFAULT now(),
    revoked_at            timestamptz     NULL,
    revoked_by            text            NULL,
    CHECK ((authority = 'source_actor_confirmation') = (confirmed_by_actor_id IS NOT NULL AND confirmed_by_message_id IS NOT NULL)),
    CHECK ((authority = 'operator_approval') = (approved_by_role IS NOT NULL)),
    CHECK ((revoked_at IS NULL) = (revoked_by IS NULL)),
    FOREIGN KEY (revision_id, runtime_agent_id) REFERENCES memory_entry_revisions (id, runtime_agent_id),
    FOREIGN KEY (confirmed_by_message_id, runtime_agent_id) REFERENCES messages (id, runtime_agent_id)
);
CREATE INDEX sharing_grants_revision_live ON sharing_grants (revision_id) WHERE revoked_at IS NULL;

CREATE TABLE sharing_grant_audience (
    grant_id uuid NOT NULL REFERENCES sharing_grants (id),
    actor_id uuid NOT NULL REFERENCES actors (id),
    PRIMARY KEY (grant_id, actor_id)
);

-- Append-only log of every operator decision: who (the PostgreSQL session_user), when, why.
CREATE TABLE operator_actions (
    id          bigserial   PRIMARY KEY,
    acted_at    timestamptz NOT NULL DEFAULT now(),
    role_name   text        NOT NULL DEFAULT session_user,
    action      text        NOT NULL CHECK (length(action) BETWEEN 1 AND 100),
    target_kind text        NOT NULL CHECK (length(target_kind) BETWEEN 1 AND 100),
    target_id   uuid        NOT NULL,
    reason      text        NOT NULL CHECK (length(btrim(reason)) BETWEEN 1 AND 2000),
    details     jsonb       NOT NULL DEFAULT '{}'::jsonb
);
CREATE TRIGGER operator_actions_append_only
    BEFORE UPDATE OR DELETE ON operator_actions
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();
CREATE TRIGGER operator_actions_no_truncate
    BEFORE TRUNCATE ON operator_actions
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_history_rewrite();

-- ---------------------------------------------------------------------------------------------
-- Derived indexes: outbox, embedding generations, embeddings
-- ---------------------------------------------------------------------------------------------

CREATE TYPE index_work_kind AS ENUM ('index_revision', 'retire_entry');

-- Written in the same transaction as every revision write, so no committed revision can miss
-- its index work; a worker claims rows with SKIP LOCKED and marks them done.
CREATE TABLE index_outbox (
    id               bigserial       PRIMARY KEY,
    runtime_agent_id uuid            NOT NULL REFERENCES runtime_agents (id),
    revision_id      uuid            NOT NULL REFERENCES memory_entry_revisions (id),
    work             index_work_kind NOT NULL,
    enqueued_at      timestamptz     NOT NULL DEFAULT now(),
    attempts         integer         NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at  timestamptz     NOT NULL DEFAULT now(),
    completed_at     timestamptz     NULL,
    last_error_category text         NULL
);
CREATE INDEX index_outbox_pending ON index_outbox (next_attempt_at) WHERE completed_at IS NULL;

CREATE TYPE embedding_generation_state AS ENUM ('building', 'active', 'retired', 'failed');

CREATE TABLE embedding_generations (
    id           bigserial                  PRIMARY KEY,
    provider     text                       NOT NULL CHECK (length(provider) BETWEEN 1 AND 100),
    model        text                       NOT NULL CHECK (length(model) BETWEEN 1 AND 200),
    dimension    integer                    NOT NULL CHECK (dimension BETWEEN 1 AND 16000),
    state        embedding_generation_state NOT NULL DEFAULT 'building',
    created_at   timestamptz                NOT NULL DEFAULT now(),
    activated_at timestamptz                NULL,
    retired_at   timestamptz                NULL
);
-- At most one generation serves queries at a time; a rebuild switches atomically.
CREATE UNIQUE INDEX embedding_generations_one_active ON embedding_generations ((true)) WHERE state = 'active';

-- Embeddings attach to immutable revisions, never to the mutable entry. The vector itself is
-- added by a later migration only where the pgvector extension is installed.
CREATE TABLE revision_embeddings (
    generation_id bigint      NOT NULL REFERENCES embedding_generations (id),
    revision_id   uuid        NOT NULL REFERENCES memory_entry_revisions (id),
    model         text        NOT NULL,
    dimension     integer     NOT NULL CHECK (dimension >= 1),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (generation_id, revision_id)
);

-- ---------------------------------------------------------------------------------------------
-- Retrieval audit (no query text column, by design)
-- ---------------------------------------------------------------------------------------------

CREATE TYPE retrieval_mode AS ENUM ('prompt', 'recall');

CREATE TABLE memory_retrieval_events (
    id                     uuid           PRIMARY KEY,
    runtime_agent_id       uuid           NOT NULL REFERENCES runtime_agents (id),
    conversation_id        uuid           NOT NULL,
    current_actor_id       uuid           NULL REFERENCES actors (id),
    mode                   retrieval_mode NOT NULL,
    -- HMAC-SHA256 under an HKDF subkey of MESH_AGENT_MASTER_KEY; NULL when no key is configured.
    query_digest           bytea          NULL CHECK (query_digest IS NULL OR length(query_digest) = 32),
    query_was_empty        boolean        NOT NULL,
    destination_audience   uuid[]         NOT NULL,
    selected_revision_ids  uuid[]         NOT NULL,
    components             jsonb          NOT NULL,
    skipped_oversized      jsonb          NOT NULL DEFAULT '[]'::jsonb,
    withheld               jsonb          NOT NULL DEFAULT '{}'::jsonb,
    candidate_count        integer        NOT NULL CHECK (candidate_count >= 0),
    cost_tokens            integer        NOT NULL CHECK (cost_tokens >= 0),
    token_budget           integer        NOT NULL CHECK (token_budget >= 0),
    count_budget           integer        NOT NULL CHECK (count_budget >= 0),
    elapsed_micros         bigint         NOT NULL CHECK (elapsed_micros >= 0),
    degradation_category   text           NULL,
    degradation_categories text[]         NOT NULL DEFAULT '{}',
    created_at             timestamptz    NOT NULL DEFAULT now(),
    FOREIGN KEY (conversation_id, runtime_agent_id) REFERENCES conversations (id, runtime_agent_id)
);
CREATE INDEX memory_retrieval_events_agent_time ON memory_retrieval_events (runtime_agent_id, created_at DESC);
CREATE TRIGGER memory_retrieval_events_append_only
    BEFORE UPDATE OR DELETE ON memory_retrieval_events
    FOR EACH ROW EXECUTE FUNCTION refuse_history_rewrite();
