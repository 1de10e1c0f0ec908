-- Idempotency keys and GAS request ids are now their sender's: the domain records
-- '<kind>:["<principal>","<key>"]' (JSON, so no principal and key can pose as another
-- pair), and one principal's message id never suppresses another's command. A key recorded
-- before carries no sender and cannot be given one; it is set aside under 'legacy:', where
-- no new key can ever match it (a message id crafted to look like a scoped key included).
-- A message in flight across the upgrade is therefore applied by its next delivery: ingest
-- still deduplicates its text, and one source never counts twice for one entry.

UPDATE processed_keys SET key = 'legacy:' || key;
