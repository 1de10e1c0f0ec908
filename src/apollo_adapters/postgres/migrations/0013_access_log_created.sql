-- Retention deletes the oldest access-log rows in bounded batches: this index finds them
-- in creation order without scanning the table.

CREATE INDEX access_log_created ON access_log (created_at, id);
