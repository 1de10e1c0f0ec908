-- Entity listings walk the keys in byte order (the "C" collation, which is also the order
-- the in-memory store sorts them in): one index serves the prefix match and the order, so
-- a listing stops once it has found `limit` visible entities. It replaces the
-- text_pattern_ops index, which could serve the match but not the order.
CREATE INDEX entities_key_c ON entities (key COLLATE "C");
DROP INDEX entities_key_prefix;
