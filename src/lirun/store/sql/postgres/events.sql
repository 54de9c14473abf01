-- Events that start schedule runs (store/event_records.py). Only what differs from
-- sqlite/events.sql; the rest is in common/events.sql.

-- name: event_subject_lock
-- Serializes the intake of one schedule's events about one subject until commit: under
-- READ COMMITTED the overlap check of the second then sees the run the first stored.
SELECT pg_advisory_xact_lock(
           hashtext('lirun.event_subject:' || :schedule_id || ':' || :subject_key)
       ) IS NULL AS locked

-- name: active_subject_run
-- The oldest run of the schedule about this subject that has not ended (--overlap per
-- event); :terminal is the lifecycle's terminal set (vocabularies live in lifecycle.py).
SELECT id FROM schedule_runs
 WHERE schedule_id = :schedule_id AND subject_key = :subject_key
   AND NOT (status = ANY(CAST(:terminal AS TEXT[])))
 ORDER BY created_at, id
 LIMIT 1
