-- The entity graph (docs/entity-graph.md, "The entity graph"): nodes resolved by their
-- normalized name, the entries that mention them, and edges kept with the entries that
-- support them. Typed edges are bi-temporal: a retired edge keeps its row (valid_to,
-- superseded_by). Rendered with psycopg.sql: literal braces are doubled.

CREATE TABLE entities (
    id         uuid PRIMARY KEY,
    name       text NOT NULL,
    key        text NOT NULL UNIQUE,
    kind       text,
    created_at timestamptz NOT NULL
);

CREATE INDEX entities_key_prefix ON entities (key text_pattern_ops);

CREATE TABLE entity_mentions (
    entry_id  uuid NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
    entity_id uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    position  integer NOT NULL,
    PRIMARY KEY (entry_id, entity_id)
);

CREATE INDEX entity_mentions_entity ON entity_mentions (entity_id);

CREATE TABLE entity_edges (
    id            uuid PRIMARY KEY,
    src_id        uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    dst_id        uuid NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    relation      text NOT NULL,
    valid_from    timestamptz NOT NULL,
    valid_to      timestamptz,
    superseded_by uuid REFERENCES entity_edges (id) ON DELETE SET NULL,
    CHECK (relation <> 'co_occurs' OR src_id < dst_id)
);

-- One live edge per (src, dst, relation): the idempotence of edge writes.
CREATE UNIQUE INDEX entity_edges_live ON entity_edges (src_id, dst_id, relation)
    WHERE valid_to IS NULL;
CREATE INDEX entity_edges_src ON entity_edges (src_id);
CREATE INDEX entity_edges_dst ON entity_edges (dst_id);

CREATE TABLE entity_edge_entries (
    edge_id  uuid NOT NULL REFERENCES entity_edges (id) ON DELETE CASCADE,
    entry_id uuid NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
    position bigserial,
    PRIMARY KEY (edge_id, entry_id)
);

CREATE INDEX entity_edge_entries_entry ON entity_edge_entries (entry_id);
