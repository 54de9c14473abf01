-- Named queries of the dashboard (store/ui_reads.py). Written once: both dialects run
-- these as they are; what differs is in sqlite/ui.sql and postgres/ui.sql. Pages read by
-- keyset (created_at, id), never by OFFSET and never with an exact COUNT over a large
-- table.

-- name: ui_transitions_since
-- The history after sequence number :after, in order (the dashboard's event stream), each
-- with the record it belongs to (parent_id: a session's invocation, a play's show), so a
-- flow's page hears about a leg that started after it was drawn.
SELECT t.seq, t.entity_type, t.entity_id, t.previous_status, t.status, t.reason_code,
       t.created_at, COALESCE(s.invocation_id, p.show_id) AS parent_id
  FROM status_transitions AS t
  LEFT JOIN sessions AS s ON t.entity_type = 'session' AND s.id = t.entity_id
  LEFT JOIN plays AS p ON t.entity_type = 'play' AND p.id = t.entity_id
 WHERE t.seq > :after
 ORDER BY t.seq
 LIMIT :limit

-- name: ui_last_seq
SELECT COALESCE(MAX(seq), 0) AS seq FROM status_transitions

-- name: ui_show_plays
-- Every column: the shows engine adds its own (attempt, merge commit, gate verdict).
SELECT * FROM plays WHERE show_id = :show_id ORDER BY created_at, id

-- name: ui_recent_schedule_runs
-- The newest :per_schedule runs of every schedule, newest first within each, with the
-- cost it recorded: its invocation's (a flow) or its session's (an agent or a command).
SELECT * FROM (
  SELECT schedule_runs.*, COALESCE(invocations.cost_usd, sessions.cost_usd) AS cost_usd,
         ROW_NUMBER() OVER (PARTITION BY schedule_runs.schedule_id
                            ORDER BY schedule_runs.created_at DESC, schedule_runs.id DESC) AS rn
    FROM schedule_runs
    LEFT JOIN invocations ON invocations.id = schedule_runs.invocation_id
    LEFT JOIN sessions ON sessions.id = schedule_runs.session_id
   WHERE schedule_runs.schedule_id IS NOT NULL
) AS recent
WHERE rn <= :per_schedule
ORDER BY schedule_id, created_at DESC, id DESC

-- name: ui_resumed_as
-- The executions that resumed this one.
SELECT id, status, created_at FROM sessions WHERE resumed_from = :id ORDER BY created_at, id

-- name: ui_plays_of_session
SELECT id, show_id, name, status FROM plays WHERE session_id = :id ORDER BY created_at, id

-- name: ui_schedule_runs_of_run
-- The schedule runs that made this execution: an agent or command action names its
-- session, a flow action its invocation. With the schedule's name (none for li submit).
SELECT r.id, r.schedule_id, r.status, d.name AS schedule_name
  FROM schedule_runs AS r
  LEFT JOIN schedules AS d ON d.id = r.schedule_id
 WHERE r.session_id = CAST(:id AS TEXT) OR r.invocation_id = CAST(:invocation_id AS TEXT)
 ORDER BY r.created_at, r.id
