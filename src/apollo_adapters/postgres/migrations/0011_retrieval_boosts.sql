-- A retrieval boost is earned once per (principal, entry) per boost window: each row holds
-- when that principal last earned one on that entry. It is written in the statement that
-- boosts, and goes with its entry.

CREATE TABLE retrieval_boosts (
    entry_id uuid NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
    earner text NOT NULL,
    boosted_at timestamptz NOT NULL,
    PRIMARY KEY (entry_id, earner)
);
CREATE INDEX retrieval_boosts_earner ON retrieval_boosts (earner);
