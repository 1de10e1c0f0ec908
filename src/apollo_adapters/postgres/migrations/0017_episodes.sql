-- Texts and episodes (store_text): each text as it was given, and the place in it of every
-- entry stored from one of its statements.

CREATE TABLE episodes (
    id           uuid PRIMARY KEY,
    agent_id     text NOT NULL,
    access_scope text NOT NULL CHECK (access_scope IN ('global', 'team', 'private')),
    owner_id     text,
    created_at   timestamptz NOT NULL,
    conversation boolean NOT NULL,
    turns        jsonb NOT NULL,
    statements   integer NOT NULL CHECK (statements >= 0)
);
CREATE INDEX episodes_agent ON episodes (agent_id);

ALTER TABLE entries
    ADD COLUMN episode_id uuid,
    ADD COLUMN episode_position integer CHECK (episode_position >= 0),
    ADD CONSTRAINT entries_episode_whole
        CHECK ((episode_id IS NULL) = (episode_position IS NULL));
-- An episode's statements in order (get_episode, a query's neighbours).
CREATE INDEX entries_episode ON entries (episode_id, episode_position)
    WHERE episode_id IS NOT NULL;
