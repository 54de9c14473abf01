-- Named queries of the metrics (store/metric_reads.py, `li metrics`, `/metrics`), written
-- once: both dialects run them as they are. Each is one aggregate over a table, so a
-- scrape costs a few index or table scans, never a row per run in Python.

-- name: metrics_status_counts
-- Rows per kind, status and reason: every row is a started run; the terminal ones
-- (lifecycle.POLICIES) are the ended runs.
SELECT 'session' AS kind, status, status_reason_code AS reason, COUNT(*) AS n
  FROM sessions GROUP BY status, status_reason_code
UNION ALL
SELECT 'invocation', status, status_reason_code, COUNT(*)
  FROM invocations GROUP BY status, status_reason_code
UNION ALL
SELECT 'play', status, status_reason_code, COUNT(*)
  FROM plays GROUP BY status, status_reason_code
UNION ALL
SELECT 'schedule_run', status, status_reason_code, COUNT(*)
  FROM schedule_runs GROUP BY status, status_reason_code

-- name: metrics_usage
-- Cost and tokens of the executions that name a provider, per provider and model.
SELECT provider, COALESCE(model, '') AS model, COUNT(*) AS n,
       COALESCE(SUM(cost_usd), 0) AS cost_usd,
       COALESCE(SUM(input_tokens), 0) AS input_tokens,
       COALESCE(SUM(output_tokens), 0) AS output_tokens,
       COALESCE(SUM(cache_read_tokens), 0) AS cache_read_tokens,
       COALESCE(SUM(cache_write_tokens), 0) AS cache_write_tokens
  FROM sessions WHERE provider IS NOT NULL
 GROUP BY provider, COALESCE(model, '') ORDER BY provider, model

-- name: metrics_schedule_backlog
-- Queued schedule runs; those still queued past :overdue_before (their due time, or when
-- they were queued); enabled schedules whose next due time passed :overdue_before and
-- that no worker fired.
SELECT (SELECT COUNT(*) FROM schedule_runs WHERE status = 'queued') AS queued,
       (SELECT COUNT(*) FROM schedule_runs
         WHERE status = 'queued' AND COALESCE(due_at, created_at) < CAST(:overdue_before AS DOUBLE PRECISION))
           AS overdue_runs,
       (SELECT COUNT(*) FROM schedules
         WHERE status = 'enabled' AND next_due_at IS NOT NULL
           AND next_due_at < CAST(:overdue_before AS DOUBLE PRECISION)) AS overdue_schedules

-- name: metrics_durations
-- Ended runs per kind: how many, their total seconds, and how many took at most each
-- bucket bound :b0 .. :b11 (cumulative, as a Prometheus histogram counts them). A
-- negative d (a clock step) adds 0 seconds: CASE, as GREATEST is PostgreSQL's, MAX SQLite's.
WITH ended AS (
  SELECT 'session' AS kind, ended_at - COALESCE(started_at, created_at) AS d
    FROM sessions WHERE ended_at IS NOT NULL
  UNION ALL
  SELECT 'invocation', ended_at - created_at FROM invocations WHERE ended_at IS NOT NULL
  UNION ALL
  SELECT 'play', ended_at - created_at FROM plays WHERE ended_at IS NOT NULL
  UNION ALL
  SELECT 'schedule_run', ended_at - COALESCE(started_at, created_at)
    FROM schedule_runs WHERE ended_at IS NOT NULL
)
SELECT kind, COUNT(*) AS n, COALESCE(SUM(CASE WHEN d > 0 THEN d ELSE 0 END), 0) AS total,
       SUM(CASE WHEN d <= CAST(:b0 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le0,
       SUM(CASE WHEN d <= CAST(:b1 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le1,
       SUM(CASE WHEN d <= CAST(:b2 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le2,
       SUM(CASE WHEN d <= CAST(:b3 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le3,
       SUM(CASE WHEN d <= CAST(:b4 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le4,
       SUM(CASE WHEN d <= CAST(:b5 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le5,
       SUM(CASE WHEN d <= CAST(:b6 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le6,
       SUM(CASE WHEN d <= CAST(:b7 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le7,
       SUM(CASE WHEN d <= CAST(:b8 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le8,
       SUM(CASE WHEN d <= CAST(:b9 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le9,
       SUM(CASE WHEN d <= CAST(:b10 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le10,
       SUM(CASE WHEN d <= CAST(:b11 AS DOUBLE PRECISION) THEN 1 ELSE 0 END) AS le11
  FROM ended GROUP BY kind ORDER BY kind

-- name: metrics_schedule_events
-- Events (schedule_events) of each schedule not deleted, by source: all of them (a first
-- poll's baseline included) and those stored with a run (queued, or skipped by a
-- policy: metrics_schedule_events_skipped). One pass over the table, no join per event.
SELECT s.name AS schedule, a.source, a.seen, a.with_run
  FROM (SELECT schedule_id, source, COUNT(*) AS seen, COUNT(schedule_run_id) AS with_run
          FROM schedule_events GROUP BY schedule_id, source) a
  JOIN schedules s ON s.id = a.schedule_id
 WHERE s.status IS NULL OR s.status <> 'deleted'
 ORDER BY s.name, a.source

-- name: metrics_schedule_events_skipped
-- Events whose run a policy refused when the event was stored (the run is written
-- skipped with its code, with the event, and never changes), by schedule, source and
-- code: the few skipped runs (schedule_runs_status_idx) that are an event's run.
SELECT s.name AS schedule, e.source, r.status_reason_code AS reason, COUNT(*) AS n
  FROM schedule_runs r
  JOIN schedule_events e
    ON e.schedule_id = r.schedule_id AND e.event_key = r.event_key
   AND e.schedule_run_id = r.id
  JOIN schedules s ON s.id = r.schedule_id
 WHERE r.status = 'skipped' AND r.event_key IS NOT NULL
   AND (s.status IS NULL OR s.status <> 'deleted')
 GROUP BY s.name, e.source, r.status_reason_code
 ORDER BY s.name, e.source, r.status_reason_code

-- name: metrics_schedule_polls
-- Polls of each poll schedule not deleted, by outcome (schedule_poll_counts), with the
-- outcome of its last poll (a failure stays the last until a good poll follows).
SELECT s.name AS schedule, c.reason, c.n, s.last_poll_reason AS last_reason
  FROM schedule_poll_counts c
  JOIN schedules s ON s.id = c.schedule_id
 WHERE s.status IS NULL OR s.status <> 'deleted'
 ORDER BY s.name, c.reason
