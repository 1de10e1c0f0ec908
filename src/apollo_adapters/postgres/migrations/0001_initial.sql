-- Apollo's initial schema. Rendered with psycopg.sql: {dimension} is the embedding
-- dimension of the store; literal braces are doubled.

CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE apollo_store_meta (
    id                  smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    embedding_model_id  text NOT NULL,
    embedding_dimension integer NOT NULL CHECK (embedding_dimension > 0)
);

CREATE TABLE entries (
    id               uuid PRIMARY KEY,
    content          text NOT NULL,
    content_hash     text NOT NULL,
    content_type     text NOT NULL
        CHECK (content_type IN ('fact', 'concept', 'procedure', 'association', 'observation')),
    knowledge_domain text NOT NULL,
    tags             text[] NOT NULL DEFAULT '{{}}',
    confidence       double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
    status           text NOT NULL
        CHECK (status IN ('candidate', 'confirmed', 'disputed', 'archived')),
    source_agent     text NOT NULL,
    source_provider  text NOT NULL,
    source_channel   text,
    submitted_by     text,
    submitted_from   text,
    access_scope     text NOT NULL CHECK (access_scope IN ('global', 'team', 'private')),
    owner_id         text,
    source_context   jsonb NOT NULL DEFAULT '{{}}',
    embedding        vector({dimension}),
    access_count     integer NOT NULL DEFAULT 0,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    confirmed_at     timestamptz,
    decayed_at       timestamptz,
    lexical          tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED
) WITH (fillfactor = 80);  -- room on each page for the in-place versions of hot updates

CREATE INDEX entries_embedding_hnsw ON entries
    USING hnsw (embedding vector_cosine_ops) WHERE status <> 'archived';
-- The dedup partition: every global entry shares one, whoever owns it.
CREATE UNIQUE INDEX entries_dedup ON entries
    (content_hash, access_scope,
     (CASE WHEN access_scope = 'global' THEN '' ELSE COALESCE(owner_id, '') END))
    WHERE status <> 'archived';
CREATE INDEX entries_tags ON entries USING gin (tags);
CREATE INDEX entries_lexical ON entries USING gin (lexical);
-- Decay targets: the active entries. Indexed by status alone, which neither a query's
-- retrieval boost (confidence, access_count, updated_at) nor the decay cycle (confidence,
-- decayed_at) changes: those hot updates then stay heap-only and write nothing into any
-- index, the HNSW index above all. archive_stale is periodic maintenance and scans.
CREATE INDEX entries_decay_targets ON entries (status) WHERE status <> 'archived';
CREATE INDEX entries_browse ON entries (created_at DESC, id DESC);
CREATE INDEX entries_candidates ON entries (created_at, id) WHERE status = 'candidate';
CREATE INDEX entries_source_agent ON entries (source_agent, knowledge_domain);
CREATE INDEX entries_owner ON entries (owner_id) WHERE owner_id IS NOT NULL;

CREATE TABLE evidence (
    id             bigserial PRIMARY KEY,
    entry_id       uuid NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
    agent_id       text NOT NULL,
    provider       text NOT NULL,
    channel        text,
    submitted_by   text,
    submitted_from text,
    similarity     double precision NOT NULL,
    kind           text NOT NULL,
    created_at     timestamptz NOT NULL
);

CREATE UNIQUE INDEX evidence_source ON evidence
    (entry_id, agent_id, provider, (COALESCE(channel, '')));

CREATE TABLE relations (
    id             bigserial PRIMARY KEY,
    from_id        uuid NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
    to_id          uuid NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
    relation_type  text NOT NULL CHECK (relation_type IN (
        'is_a', 'has_a', 'part_of', 'causes', 'similar_to', 'contradicts',
        'supersedes', 'depends_on', 'supports_by', 'extends')),
    weight         double precision NOT NULL DEFAULT 1.0,
    source_context jsonb NOT NULL DEFAULT '{{}}',
    created_at     timestamptz,
    UNIQUE (from_id, to_id, relation_type)
);

CREATE INDEX relations_to ON relations (to_id);

CREATE TABLE expertise (
    agent_id         text NOT NULL,
    knowledge_domain text NOT NULL,
    entry_count      integer NOT NULL DEFAULT 0,
    proficiency      double precision NOT NULL DEFAULT 0,
    last_active_at   timestamptz,
    PRIMARY KEY (agent_id, knowledge_domain)
);

CREATE INDEX expertise_domain ON expertise (knowledge_domain, proficiency DESC);

CREATE TABLE access_log (
    id         bigserial PRIMARY KEY,
    action     text NOT NULL,
    agent_id   text NOT NULL,
    entry_id   uuid,
    detail     jsonb NOT NULL DEFAULT '{{}}',
    created_at timestamptz NOT NULL
);

CREATE INDEX access_log_action ON access_log (action);

CREATE TABLE source_credibility (
    agent_id text PRIMARY KEY,
    alpha    double precision NOT NULL,
    beta     double precision NOT NULL,
    label    text
);

CREATE TABLE identity_memberships (
    principal_id text NOT NULL,
    group_name   text NOT NULL,
    PRIMARY KEY (principal_id, group_name)
);

CREATE INDEX identity_memberships_group ON identity_memberships (group_name);

CREATE TABLE outbox (
    id         bigserial PRIMARY KEY,
    kind       text NOT NULL,
    payload    jsonb NOT NULL,
    attempts   integer NOT NULL DEFAULT 0,
    last_error text,
    status     text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'dead')),
    created_at timestamptz NOT NULL,
    claimed_at timestamptz
);

CREATE INDEX outbox_pending ON outbox (id) WHERE status = 'pending';

CREATE TABLE processed_keys (
    key        text PRIMARY KEY,
    created_at timestamptz NOT NULL
);
