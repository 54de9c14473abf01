-- 0006: schedule definitions are an entity kind of their own (lifecycle "schedule":
-- enabled, disabled, deleted), so every change of one goes through the guarded status
-- write and lands in status_transitions. The trigger, action and policies are JSON; the
-- zone is the IANA name resolved at add; next_due_at is integer epoch seconds.
-- A name is unique among schedules that are not deleted: deleting one frees its name.

ALTER TABLE schedules ADD COLUMN status TEXT;
ALTER TABLE schedules ADD COLUMN status_reason_code TEXT;
ALTER TABLE schedules ADD COLUMN status_reason_summary TEXT;
ALTER TABLE schedules ADD COLUMN status_evidence_refs TEXT;
ALTER TABLE schedules ADD COLUMN trigger_json TEXT;
ALTER TABLE schedules ADD COLUMN policies_json TEXT;
ALTER TABLE schedules ADD COLUMN tz TEXT;
ALTER TABLE schedules ADD COLUMN next_due_at INTEGER;
ALTER TABLE schedules ADD COLUMN deleted_at REAL;
CREATE UNIQUE INDEX IF NOT EXISTS schedules_live_name_idx
    ON schedules (name) WHERE status IS NULL OR status <> 'deleted';
CREATE INDEX IF NOT EXISTS schedules_due_idx ON schedules (status, next_due_at);

-- A schedule run exists once per (schedule, due time, attempt): the database, not a
-- worker's memory, refuses the second. Runs of `li schedule fire` and `li submit` have
-- no due time (NULL); both PostgreSQL and SQLite treat NULLs in a UNIQUE index as
-- distinct, so those runs never collide with each other, while every due-time run does.
-- retry_of links attempt n to the run it retries; session_id to the execution it made.
ALTER TABLE schedule_runs ADD COLUMN due_at INTEGER;
ALTER TABLE schedule_runs ADD COLUMN retry_of TEXT;
ALTER TABLE schedule_runs ADD COLUMN session_id TEXT;
CREATE UNIQUE INDEX IF NOT EXISTS schedule_runs_due_key
    ON schedule_runs (schedule_id, due_at, attempt);
CREATE INDEX IF NOT EXISTS schedule_runs_status_idx ON schedule_runs (status, created_at);
