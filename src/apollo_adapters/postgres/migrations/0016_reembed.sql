-- A move to another embedder in progress (`apollo reembed`): its target, so a killed run
-- resumes toward the same model and a run toward another one starts over.

CREATE TABLE apollo_reembed (
    id         smallint PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    model_id   text NOT NULL,
    dimension  integer NOT NULL CHECK (dimension > 0),
    started_at timestamptz NOT NULL
);
