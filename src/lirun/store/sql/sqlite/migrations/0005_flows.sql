-- 0005: flows. A flow is one invocation (kind 'flow'; NULL or 'manual' for
-- `li invoke start`) owned by a live process that heartbeats, like a running session, so
-- a reaper can finalize it when its owner dies. The resolved flow (the spec after
-- variables and the expanded leg graph) is stored with it, so resume and the dashboard
-- read it from the database; token and cost sums of its legs land on it when it ends.
-- Every leg is a session with invocation_id set; flow_leg names the leg instance
-- (`review[2]`), and a retry is a new session with attempt = n and retry_of the row it
-- retries (design.md §4.10).

ALTER TABLE invocations ADD COLUMN kind TEXT;
ALTER TABLE invocations ADD COLUMN owner_pid INTEGER;
ALTER TABLE invocations ADD COLUMN owner_start_time REAL;
ALTER TABLE invocations ADD COLUMN owner_host TEXT;
ALTER TABLE invocations ADD COLUMN owner_boot_id TEXT;
ALTER TABLE invocations ADD COLUMN heartbeat_at REAL;
ALTER TABLE invocations ADD COLUMN lease_seconds REAL;
ALTER TABLE invocations ADD COLUMN resumed_from TEXT;
ALTER TABLE invocations ADD COLUMN flow_json TEXT;
ALTER TABLE invocations ADD COLUMN flow_digest TEXT;
ALTER TABLE invocations ADD COLUMN input_tokens INTEGER;
ALTER TABLE invocations ADD COLUMN output_tokens INTEGER;
ALTER TABLE invocations ADD COLUMN cost_usd REAL;
ALTER TABLE invocations ADD COLUMN run_dir TEXT;
ALTER TABLE invocations ADD COLUMN artifacts_path TEXT;

ALTER TABLE sessions ADD COLUMN flow_leg TEXT;
ALTER TABLE sessions ADD COLUMN attempt INTEGER;
ALTER TABLE sessions ADD COLUMN retry_of TEXT;

CREATE INDEX IF NOT EXISTS invocations_running_idx ON invocations (status);
