-- 0011: `li submit --key KEY` stores KEY with the run it queued, so a submit tried again
-- (its answer lost, or a failure after the row was committed) returns that run instead of
-- queueing a second. The key is unique across all schedule runs, ended ones included:
-- the database, not the submitter, decides which of two racing submits made the run.
-- Runs without a key (NULL: every run but a keyed submit's first attempt) never collide,
-- as NULLs in a unique index are distinct on both backends.
ALTER TABLE schedule_runs ADD COLUMN idempotency_key TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS schedule_runs_key_idx ON schedule_runs (idempotency_key);
