-- 0007: what the dashboard reads. A monotonic sequence on the status history, so a
-- browser that reconnects catches up from the last event it saw (the transition ids are
-- random). Existing rows are numbered in the order they were written (rowid: SQLite
-- commits one writer at a time), as PostgreSQL's bigserial numbered them. New rows take
-- MAX(seq) + 1 inside their write transaction, which holds SQLite's write lock: commits
-- and sequence numbers come in the same order.
-- Indexes for the runs page: every kind newest first, and the common filters.

ALTER TABLE status_transitions ADD COLUMN seq INTEGER;
UPDATE status_transitions SET seq = ordered.n
  FROM (SELECT rowid AS r, ROW_NUMBER() OVER (ORDER BY rowid) AS n
          FROM status_transitions) AS ordered
 WHERE ordered.r = status_transitions.rowid;
CREATE UNIQUE INDEX IF NOT EXISTS status_transitions_seq_idx ON status_transitions (seq);

CREATE INDEX IF NOT EXISTS sessions_created_id_idx ON sessions (created_at, id);
CREATE INDEX IF NOT EXISTS sessions_status_created_idx ON sessions (status, created_at);
CREATE INDEX IF NOT EXISTS sessions_provider_created_idx ON sessions (provider, created_at);
CREATE INDEX IF NOT EXISTS sessions_resumed_from_idx ON sessions (resumed_from);
CREATE INDEX IF NOT EXISTS invocations_created_idx ON invocations (created_at, id);
CREATE INDEX IF NOT EXISTS plays_created_idx ON plays (created_at, id);
CREATE INDEX IF NOT EXISTS schedule_runs_created_idx ON schedule_runs (created_at, id);
