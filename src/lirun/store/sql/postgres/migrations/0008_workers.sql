-- 0008: the workers that fire schedules and run queued schedule runs (li worker).
-- A worker registers itself (host, pid, the process's start time and the machine's boot
-- id, like a session's owner) and heartbeats; `li worker status` lists the live ones.
-- The runs a worker holds are the schedule runs whose worker_id is its id: derived, not
-- a list kept in the worker row.
CREATE TABLE IF NOT EXISTS workers (
    id                  TEXT PRIMARY KEY,
    host                TEXT NOT NULL,
    pid                 INTEGER NOT NULL,
    process_start_time  DOUBLE PRECISION,
    boot_id             TEXT,
    started_at          DOUBLE PRECISION NOT NULL,
    heartbeat_at        DOUBLE PRECISION NOT NULL,
    stopped_at          DOUBLE PRECISION,
    concurrency         INTEGER NOT NULL,
    transport           TEXT NOT NULL,
    lease_seconds       DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS workers_heartbeat_idx ON workers (stopped_at, heartbeat_at);

-- A running schedule run is leased to one worker until lease_expires_at (renewed by its
-- heartbeat): a lapsed lease means the worker died or lost its database link, and the
-- reaper of any other worker fails the run. invocation_id (on the table since 0001)
-- links a flow run to its invocation, session_id (0006) an agent/run run to its
-- session, show_id a show run to its show. action_json holds the action of a run with
-- no schedule (li submit); a schedule's runs read their schedule's.
ALTER TABLE schedule_runs ADD COLUMN worker_id TEXT;
ALTER TABLE schedule_runs ADD COLUMN lease_expires_at DOUBLE PRECISION;
ALTER TABLE schedule_runs ADD COLUMN heartbeat_at DOUBLE PRECISION;
ALTER TABLE schedule_runs ADD COLUMN show_id TEXT;
ALTER TABLE schedule_runs ADD COLUMN action_json TEXT;
CREATE INDEX IF NOT EXISTS schedule_runs_lease_idx ON schedule_runs (status, lease_expires_at);
CREATE INDEX IF NOT EXISTS schedule_runs_worker_idx ON schedule_runs (worker_id);
