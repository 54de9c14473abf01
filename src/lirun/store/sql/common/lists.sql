-- Lists of flows and shows, and the facts of the needs-you page (store/list_reads.py).
-- Written once: both dialects run these as they are; what differs is in sqlite/lists.sql
-- and postgres/lists.sql.

-- name: list_shows
-- Shows, newest first, one row per (show, play status) with how many plays have it (a
-- show without plays: one row with a NULL play_status), filtered as list_flows.
SELECT s.id, s.topic, s.status, s.status_reason_code, s.status_reason_summary,
       s.created_at, s.updated_at, s.ended_at, p.status AS play_status,
       COUNT(p.id) AS play_count
  FROM (SELECT * FROM shows
         WHERE (created_at, id) < (CAST(:before_at AS DOUBLE PRECISION), CAST(:before_id AS TEXT))
           AND (CAST(:status AS TEXT) IS NULL OR status = CAST(:status AS TEXT))
           AND (CAST(:since AS DOUBLE PRECISION) IS NULL OR created_at >= CAST(:since AS DOUBLE PRECISION))
         ORDER BY created_at DESC, id DESC LIMIT :limit) AS s
  LEFT JOIN plays p ON p.show_id = s.id
 GROUP BY s.id, s.topic, s.status, s.status_reason_code, s.status_reason_summary,
          s.created_at, s.updated_at, s.ended_at, p.status
 ORDER BY s.created_at DESC, s.id DESC, p.status

-- name: attention_plays
-- Plays that may need a person (escalated or gate-failed), with their show's status:
-- shows.decide.play_needs_person decides, as it does for the shows list.
SELECT p.id, p.show_id, p.name, p.status, p.status_reason_code, p.status_reason_summary,
       p.updated_at, s.topic, s.status AS show_status
  FROM plays AS p
  JOIN shows AS s ON s.id = p.show_id
 WHERE p.status IN ('escalated', 'gate_failed')
 ORDER BY p.updated_at DESC, p.id

-- name: attention_flows
-- Flows that failed or timed out since :since and were not resumed.
SELECT i.id, i.status, i.status_reason_code, i.status_reason_summary, i.skill,
       i.updated_at, i.created_at
  FROM invocations AS i
 WHERE i.kind = 'flow'
   AND i.status IN ('failed', 'timed_out')
   AND i.created_at >= CAST(:since AS DOUBLE PRECISION)
   AND i.id NOT IN (SELECT r.resumed_from FROM invocations AS r
                     WHERE r.resumed_from IS NOT NULL)
 ORDER BY i.updated_at DESC, i.id

-- name: attention_schedule_runs
-- Schedule runs that failed or timed out since :since with no completed run of their
-- schedule after them (a schedule that has run well again needs nobody): one pass for
-- each schedule's last success, not one look per failed run. An ad-hoc run (li submit:
-- no schedule) stands alone: it needs a person unless it was retried (its retry, if it
-- failed too, is listed instead).
SELECT r.id, r.schedule_id, d.name AS schedule_name, r.status, r.status_reason_code,
       r.status_reason_summary, r.updated_at, r.created_at, r.action_json, r.session_id,
       r.invocation_id, r.show_id
  FROM schedule_runs AS r
  LEFT JOIN schedules AS d ON d.id = r.schedule_id
  LEFT JOIN (SELECT schedule_id, MAX(created_at) AS last_ok FROM schedule_runs
              WHERE status = 'completed' GROUP BY schedule_id) AS ok
         ON ok.schedule_id = r.schedule_id
  LEFT JOIN (SELECT DISTINCT retry_of FROM schedule_runs  -- a retry is newer than its run
              WHERE retry_of IS NOT NULL AND created_at >= CAST(:since AS DOUBLE PRECISION)) AS again
         ON again.retry_of = r.id
 WHERE r.status IN ('failed', 'timed_out')
   AND r.created_at >= CAST(:since AS DOUBLE PRECISION)
   AND (ok.last_ok IS NULL OR r.created_at > ok.last_ok)
   AND (r.schedule_id IS NOT NULL OR again.retry_of IS NULL)
 ORDER BY r.updated_at DESC, r.id

-- name: attention_queued_runs
-- Runs queued and not claimed by a worker (a claim makes a run running), oldest first,
-- with what their start deadline is read from: the schedule's policies, or an ad-hoc
-- run's own action (policies kept in it).
SELECT r.id, r.schedule_id, d.name AS schedule_name, r.created_at,
       COALESCE(r.action_json, d.action_json) AS action_json, d.policies_json
  FROM schedule_runs AS r
  LEFT JOIN schedules AS d ON d.id = r.schedule_id
 WHERE r.status = 'queued' AND r.worker_id IS NULL
 ORDER BY r.created_at, r.id

-- name: attention_running_shows
-- Shows still active, with their owner columns (what a reaper would judge).
SELECT * FROM shows WHERE status = 'active' ORDER BY created_at

-- name: schedule_runs_with_usage
-- One schedule's newest :limit runs, newest first, with what its session or flow
-- recorded (cost and tokens).
SELECT r.*, COALESCE(i.cost_usd, s.cost_usd) AS cost_usd,
       COALESCE(i.input_tokens, s.input_tokens) AS input_tokens,
       COALESCE(i.output_tokens, s.output_tokens) AS output_tokens
  FROM schedule_runs AS r
  LEFT JOIN invocations AS i ON i.id = r.invocation_id
  LEFT JOIN sessions AS s ON s.id = r.session_id
 WHERE r.schedule_id = CAST(:schedule_id AS TEXT)
 ORDER BY r.created_at DESC, r.id DESC
 LIMIT :limit
