-- Named queries of the metrics (store/metric_reads.py, `li metrics`, `/metrics`). Written
-- once: both dialects run these as they are; what differs is in sqlite/metrics.sql and
-- postgres/metrics.sql. Each is one aggregate over a table, so a scrape costs a few index
-- or table scans, never a row per run in Python.

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
