-- Events that start schedule runs (store/event_records.py): one row per (schedule, key).
-- Written once: both dialects run these as they are.

-- name: insert_event
-- The exactly-once write of an event: a second row for the same (schedule, key) is
-- refused by the unique key and inserts nothing (the caller reads 0 rows).
INSERT INTO schedule_events
    (schedule_id, event_key, source, event_json, seen_at, baseline, schedule_run_id)
VALUES
    (:schedule_id, :event_key, :source, :event_json, :now, :baseline, :schedule_run_id)
ON CONFLICT (schedule_id, event_key) DO NOTHING

-- name: insert_event_run
-- The run an event fires, written in the transaction that stored the event.
INSERT INTO schedule_runs
    (id, schedule_id, action_kind, attempt, status, status_reason_code,
     status_reason_summary, event_key, event_json, ended_at, created_at, updated_at,
     lease_epoch)
VALUES
    (:id, :schedule_id, :action_kind, 1, :status, :reason_code, :reason_summary,
     :event_key, :event_json, :ended_at, :now, :now, 0)

-- name: count_events
SELECT COUNT(*) AS n FROM schedule_events WHERE schedule_id = :schedule_id

-- name: count_event_runs
SELECT COUNT(*) AS n FROM schedule_events
 WHERE schedule_id = :schedule_id AND schedule_run_id IS NOT NULL

-- name: list_events
SELECT * FROM schedule_events WHERE schedule_id = :schedule_id
 ORDER BY seen_at DESC, id DESC
 LIMIT :limit

-- name: record_poll
-- A poll's outcome on its schedule (last_poll_*): plain columns, not the definition.
UPDATE schedules SET last_poll_at = :now, last_poll_reason = :reason,
       last_poll_detail = :detail,
       last_poll_ok_at = CASE WHEN :ok = 1 THEN :now ELSE last_poll_ok_at END
 WHERE id = :id

-- name: get_event
-- One event of a schedule by its key (a webhook's redelivery answers with its run).
SELECT * FROM schedule_events
 WHERE schedule_id = :schedule_id AND event_key = :event_key
