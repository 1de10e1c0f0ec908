-- The graph fill reads the newest entries that mention any of a few entities. Each mention
-- keeps its entry's creation time (which never changes), and one index holds an entity's
-- mentions with it: the candidates come from the index alone, in order, and an entry is
-- read only while fewer than the wanted number have passed the search filter, instead of
-- reading every entry that mentions one of the entities. It replaces the index on
-- entity_id alone.

ALTER TABLE entity_mentions ADD COLUMN entry_created_at timestamptz;
UPDATE entity_mentions m SET entry_created_at = e.created_at FROM entries e
    WHERE e.id = m.entry_id;
ALTER TABLE entity_mentions ALTER COLUMN entry_created_at SET NOT NULL;
CREATE INDEX entity_mentions_newest
    ON entity_mentions (entity_id, entry_created_at DESC, entry_id DESC);
DROP INDEX entity_mentions_entity;
