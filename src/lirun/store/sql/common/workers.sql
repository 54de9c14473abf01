-- Workers and the run path of schedule runs (store/worker_records.py). Written once: both
-- dialects run these as they are; what differs is in sqlite/workers.sql and
-- postgres/workers.sql.

-- name: insert_worker
INSERT INTO workers
    (id, host, pid, process_start_time, boot_id, started_at, heartbeat_at, concurrency,
     transport, lease_seconds)
VALUES
    (:id, :host, :pid, :process_start_time, :boot_id, :now, :now, :concurrency,
     :transport, :lease_seconds)

-- name: beat_worker
UPDATE workers SET heartbeat_at = :now WHERE id = :id AND stopped_at IS NULL

-- name: stop_worker
UPDATE workers SET stopped_at = :now, heartbeat_at = :now WHERE id = :id

-- name: list_live_workers
SELECT * FROM workers WHERE stopped_at IS NULL AND heartbeat_at >= :since
 ORDER BY started_at, id

-- name: list_held_runs
-- Running schedule runs and the worker holding each (li worker status).
SELECT id, worker_id FROM schedule_runs
 WHERE status = 'running' AND worker_id IS NOT NULL ORDER BY started_at, id

-- name: list_queued_runs
-- Queued runs, oldest first: what a worker may try to claim (and check deadlines of).
SELECT * FROM schedule_runs WHERE status = 'queued' ORDER BY created_at, id LIMIT :limit

-- name: list_lapsed_runs
-- Running runs whose lease lapsed: their worker died or lost its database link.
SELECT * FROM schedule_runs
 WHERE status = 'running' AND lease_expires_at IS NOT NULL AND lease_expires_at < :now
 ORDER BY lease_expires_at, id

-- name: retries_of_run
-- The attempts queued to retry a run (retry_of), oldest first.
SELECT * FROM schedule_runs WHERE retry_of = :id ORDER BY created_at, id

-- name: insert_queued_run
-- A run with no due time (li submit, li schedule fire, a retry of one): unique by its id.
-- A `li submit --key` run is unique by its key too: a second insert with the key (a
-- retried submit, or one racing it) inserts nothing, waiting for the first to commit or
-- roll back, and the caller reads the run that holds the key (run_with_key).
INSERT INTO schedule_runs
    (id, schedule_id, action_kind, action_json, attempt, due_at, retry_of, status,
     status_reason_code, status_reason_summary, idempotency_key, created_at, updated_at,
     lease_epoch)
VALUES
    (:id, :schedule_id, :action_kind, :action_json, :attempt, :due_at, :retry_of, 'queued',
     :reason_code, :reason_summary, :idempotency_key, :now, :now, :lease_epoch)
ON CONFLICT (idempotency_key) DO NOTHING

-- name: run_with_key
SELECT * FROM schedule_runs WHERE idempotency_key = :idempotency_key

-- name: link_run
-- What the run produced, linked before the action starts so a reaper can find it.
UPDATE schedule_runs
   SET session_id = COALESCE(:session_id, session_id),
       invocation_id = COALESCE(:invocation_id, invocation_id),
       show_id = COALESCE(:show_id, show_id)
 WHERE id = :id

-- name: count_started_runs
-- Runs of the schedule that started (--max-runs).
SELECT COUNT(*) AS n FROM schedule_runs
 WHERE schedule_id = :schedule_id AND started_at IS NOT NULL

-- name: schedule_usage
-- The recorded usage of the schedule's executions since :since (its budget). usd_runs
-- counts the executions that recorded a cost at all (Codex records none).
SELECT SUM(s.cost_usd) AS usd, COUNT(s.cost_usd) AS usd_runs,
       SUM(COALESCE(s.input_tokens, 0) + COALESCE(s.output_tokens, 0)) AS tokens
  FROM sessions s
 WHERE s.created_at >= :since
   AND (s.id IN (SELECT session_id FROM schedule_runs WHERE schedule_id = :schedule_id)
        OR s.invocation_id IN
           (SELECT invocation_id FROM schedule_runs WHERE schedule_id = :schedule_id))

-- name: running_sessions_of_run
-- The executions of a run still marked running (the reaper fails them with the run).
SELECT id FROM sessions
 WHERE status = 'running'
   AND (id = :session_id OR invocation_id = :invocation_id)

-- name: schedule_signature
-- Changes when any definition changes: the firing loop wakes early on it.
SELECT COUNT(*) AS n, MAX(updated_at) AS at FROM schedules
