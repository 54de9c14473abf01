-- 0007: what the dashboard reads. A monotonic sequence on the status history, so a
-- browser that reconnects catches up from the last event it saw (the transition ids are
-- random). Here the column exists since 0001 (a bigserial, so every row already has its
-- number, in insertion order); only its index is new. A bigserial number is taken at
-- insert, not at commit, so two writers can commit out of order: the dashboard's watcher
-- waits briefly at a gap (ui/events.py).
-- Indexes for the runs page: every kind newest first, and the common filters.

CREATE UNIQUE INDEX IF NOT EXISTS status_transitions_seq_idx ON status_transitions (seq);

CREATE INDEX IF NOT EXISTS sessions_created_id_idx ON sessions (created_at, id);
CREATE INDEX IF NOT EXISTS sessions_status_created_idx ON sessions (status, created_at);
CREATE INDEX IF NOT EXISTS sessions_provider_created_idx ON sessions (provider, created_at);
CREATE INDEX IF NOT EXISTS sessions_resumed_from_idx ON sessions (resumed_from);
CREATE INDEX IF NOT EXISTS invocations_created_idx ON invocations (created_at, id);
CREATE INDEX IF NOT EXISTS plays_created_idx ON plays (created_at, id);
CREATE INDEX IF NOT EXISTS schedule_runs_created_idx ON schedule_runs (created_at, id);
