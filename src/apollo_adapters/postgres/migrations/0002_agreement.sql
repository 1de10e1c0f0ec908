-- Credibility over time and dispute verdicts: each evidence row keeps the credibility its
-- source had when it was recorded (NULL for rows recorded before), and each source counts
-- its validated and refuted evidence.

ALTER TABLE evidence ADD COLUMN credibility double precision
    CHECK (credibility >= 0 AND credibility <= 1);

ALTER TABLE source_credibility
    ADD COLUMN validated integer NOT NULL DEFAULT 0,
    ADD COLUMN refuted   integer NOT NULL DEFAULT 0;
