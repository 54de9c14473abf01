-- Schedule definitions and their runs (store/schedule_records.py). Written once: both
-- dialects run these as they are; what differs is in sqlite/schedules.sql and
-- postgres/schedules.sql.

-- name: get_live_schedule
-- The schedule named :name that is not deleted (at most one: schedules_live_name_idx).
SELECT * FROM schedules WHERE name = :name AND (status IS NULL OR status <> 'deleted')

-- name: list_live_schedules
SELECT * FROM schedules WHERE status IS NULL OR status <> 'deleted' ORDER BY name

-- name: list_all_schedules
SELECT * FROM schedules ORDER BY name, created_at

-- name: insert_due_run
-- The exactly-once write: a second row for the same (schedule, due time, attempt) is
-- refused by schedule_runs_due_key and inserts nothing (the caller reads 0 rows).
INSERT INTO schedule_runs
    (id, schedule_id, action_kind, attempt, due_at, retry_of, status, status_reason_code,
     status_reason_summary, ended_at, created_at, updated_at, lease_epoch)
VALUES
    (:id, :schedule_id, :action_kind, :attempt, :due_at, :retry_of, :status, :reason_code,
     :reason_summary, :ended_at, :now, :now, :lease_epoch)
ON CONFLICT (schedule_id, due_at, attempt) DO NOTHING

-- name: list_schedule_runs
SELECT * FROM schedule_runs WHERE schedule_id = :schedule_id
 ORDER BY created_at DESC, attempt DESC
 LIMIT :limit

-- name: list_due_schedules
-- Enabled schedules due at or before :now, earliest first (what a worker fires).
SELECT * FROM schedules
 WHERE status = 'enabled' AND next_due_at IS NOT NULL AND next_due_at <= :now
 ORDER BY next_due_at, name

-- name: earliest_due
-- The next time any enabled schedule is due (a worker sleeps until then).
SELECT MIN(next_due_at) AS due FROM schedules
 WHERE status = 'enabled' AND next_due_at IS NOT NULL

-- name: advance_next_due
-- Compare-and-set: only the worker that read :expected moves the schedule on.
UPDATE schedules SET next_due_at = :new
 WHERE id = :id AND status = 'enabled' AND next_due_at = :expected
