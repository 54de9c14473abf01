-- Events that start schedule runs (store/event_records.py). Only what differs from
-- postgres/events.sql; the rest is in common/events.sql.

-- name: event_subject_lock
-- BEGIN IMMEDIATE already holds the database write lock: no other event is stored
-- meanwhile.
SELECT 1 AS locked

-- name: active_subject_run
-- The oldest run of the schedule about this subject that has not ended (--overlap per
-- event); :terminal is the lifecycle's terminal set (vocabularies live in lifecycle.py).
SELECT id FROM schedule_runs
 WHERE schedule_id = :schedule_id AND subject_key = :subject_key
   AND status NOT IN (SELECT value FROM json_each(:terminal))
 ORDER BY created_at, id
 LIMIT 1
