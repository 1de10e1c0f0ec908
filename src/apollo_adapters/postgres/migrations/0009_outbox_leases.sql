-- Outbox retries and claims (docs/architecture.md, "Units of work and concurrency"): a
-- failed item waits until next_attempt_at (capped exponential backoff) before it is due
-- again, and a claim is a lease (leased_until) that commits at once, so the contradiction
-- judge runs outside any transaction while no other claimer sees the item. The
-- corroboration checker takes the least recently checked candidates first
-- (last_checked_at, never checked first), so every candidate is reached however many there
-- are.

ALTER TABLE outbox ADD COLUMN next_attempt_at timestamptz;
ALTER TABLE outbox ADD COLUMN leased_until timestamptz;

ALTER TABLE entries ADD COLUMN last_checked_at timestamptz;

DROP INDEX entries_candidates;
CREATE INDEX entries_candidates ON entries (last_checked_at NULLS FIRST, created_at, id)
    WHERE status = 'candidate';
