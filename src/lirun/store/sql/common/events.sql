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
     lease_epoch, chain_parent_id, chain_depth, subject_key)
VALUES
    (:id, :schedule_id, :action_kind, 1, :status, :reason_code, :reason_summary,
     :event_key, :event_json, :ended_at, :now, :now, 0, :chain_parent_id, :chain_depth,
     :subject_key)

-- name: insert_event_retry
-- Attempt n+1 of an event's run: the same event, subject, chain parent and depth as the
-- attempt it retries (its run says which event it is for, its action sees that event
-- again, and --overlap counts it as active for its subject).
INSERT INTO schedule_runs
    (id, schedule_id, action_kind, attempt, retry_of, status, status_reason_code,
     status_reason_summary, event_key, event_json, subject_key, created_at, updated_at,
     lease_epoch, chain_parent_id, chain_depth)
VALUES
    (:id, :schedule_id, :action_kind, :attempt, :retry_of, 'queued', :reason_code, '',
     :event_key, :event_json, :subject_key, :now, :now, :lease_epoch, :chain_parent_id,
     :chain_depth)

-- name: count_events
SELECT COUNT(*) AS n FROM schedule_events WHERE schedule_id = :schedule_id

-- name: count_event_runs
-- Events that fired a run: stored with a run a policy did not refuse (a skipped run is
-- written skipped with its event and never changes), as lirun_schedule_events_fired
-- counts them (metrics_schedule_events less metrics_schedule_events_skipped).
SELECT COUNT(*) AS n FROM schedule_events e
 WHERE e.schedule_id = :schedule_id AND e.schedule_run_id IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM schedule_runs r
                    WHERE r.id = e.schedule_run_id AND r.status = 'skipped'
                      AND r.schedule_id = e.schedule_id AND r.event_key = e.event_key)

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

-- name: count_poll
-- One more poll of the schedule with this outcome (schedule_poll_counts, for the
-- metrics), in record_poll's transaction.
INSERT INTO schedule_poll_counts (schedule_id, reason, n, last_at)
VALUES (:id, :reason, 1, :now)
ON CONFLICT (schedule_id, reason)
DO UPDATE SET n = schedule_poll_counts.n + 1, last_at = excluded.last_at

-- name: get_event
-- One event of a schedule by its key (a webhook's redelivery answers with its run).
SELECT * FROM schedule_events
 WHERE schedule_id = :schedule_id AND event_key = :event_key

-- name: chain_parents
-- The chain sweep (schedules/chaining.py): runs of the parent schedule that ended in
-- the wanted way at or after :since (index schedule_runs_ended_idx) and that this
-- chain schedule holds no event for yet, oldest end first.
SELECT r.id, r.status, r.status_reason_code, r.exit_code, r.event_json, r.ended_at,
       r.chain_depth, s.artifacts_path AS artifact_dir
  FROM schedule_runs r
  LEFT JOIN sessions s ON s.id = r.session_id
 WHERE r.schedule_id = :parent_id
   AND r.ended_at IS NOT NULL AND r.ended_at >= :since AND r.created_at >= :created
   AND ((:completed = 1 AND r.status = 'completed')
        OR (:failed = 1 AND r.status IN ('failed', 'timed_out'))
        OR (:cancelled = 1 AND r.status = 'cancelled'))
   AND NOT EXISTS (SELECT 1 FROM schedule_events e
                    WHERE e.schedule_id = :schedule_id AND e.event_key = r.id)
 ORDER BY r.ended_at, r.id
 LIMIT :limit

-- name: newest_chained_end
-- When the newest parent this chain schedule already fired for ended (NULL: none yet).
SELECT MAX(r.ended_at) AS t
  FROM schedule_events e
  JOIN schedule_runs r ON r.id = e.event_key
 WHERE e.schedule_id = :schedule_id AND e.source = 'chain'

-- name: chain_event_parents
-- The parent runs of a chain schedule's newest :limit events (a chain event's key is
-- its parent run's id), for the dashboard's schedule page: one read, not one per event.
SELECT p.*
  FROM schedule_events e
  JOIN schedule_runs p ON p.id = e.event_key
 WHERE e.schedule_id = :schedule_id AND e.source = 'chain'
 ORDER BY e.seen_at DESC, e.id DESC
 LIMIT :limit
