-- Schedule definitions and their runs (store/schedule_records.py). Only what differs from
-- postgres/schedules.sql; the rest is in common/schedules.sql.

-- name: count_active_runs
-- Runs of the schedule that have not ended (the overlap policy, checked in the database);
-- :terminal is the lifecycle's terminal set (vocabularies live in lifecycle.py only).
SELECT COUNT(*) AS n FROM schedule_runs
 WHERE schedule_id = :schedule_id AND status NOT IN (SELECT value FROM json_each(:terminal))
