-- Each principal's write rate (APOLLO_WRITE_RATE): its token bucket, shared by every process
-- of a fleet. One row per principal that has written over an edge ('' is the anonymous one).
-- Unlogged: a charge writes no WAL and waits for no flush (it is on every edge write); a
-- crash or a failover forgets the buckets, which then start full again, as new ones do.

CREATE UNLOGGED TABLE write_budgets (
    principal text PRIMARY KEY,
    tokens    double precision NOT NULL,
    at        timestamptz NOT NULL,
    -- whether the last charge was granted (what the charging statement returns)
    granted   boolean NOT NULL
);
