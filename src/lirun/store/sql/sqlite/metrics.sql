-- Named queries of the metrics (store/metric_reads.py, `li metrics`, `/metrics`). Only
-- what differs from postgres/metrics.sql; the rest is in common/metrics.sql. Each is one
-- aggregate over a table, so a scrape costs a few index or table scans, never a row per
-- run in Python.

-- name: metrics_durations
-- Ended runs per kind: how many, their total seconds, and how many took at most each
-- bucket bound :b0 .. :b11 (cumulative, as a Prometheus histogram counts them).
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
SELECT kind, COUNT(*) AS n, COALESCE(SUM(MAX(d, 0)), 0) AS total,
       SUM(CASE WHEN d <= :b0 THEN 1 ELSE 0 END) AS le0,
       SUM(CASE WHEN d <= :b1 THEN 1 ELSE 0 END) AS le1,
       SUM(CASE WHEN d <= :b2 THEN 1 ELSE 0 END) AS le2,
       SUM(CASE WHEN d <= :b3 THEN 1 ELSE 0 END) AS le3,
       SUM(CASE WHEN d <= :b4 THEN 1 ELSE 0 END) AS le4,
       SUM(CASE WHEN d <= :b5 THEN 1 ELSE 0 END) AS le5,
       SUM(CASE WHEN d <= :b6 THEN 1 ELSE 0 END) AS le6,
       SUM(CASE WHEN d <= :b7 THEN 1 ELSE 0 END) AS le7,
       SUM(CASE WHEN d <= :b8 THEN 1 ELSE 0 END) AS le8,
       SUM(CASE WHEN d <= :b9 THEN 1 ELSE 0 END) AS le9,
       SUM(CASE WHEN d <= :b10 THEN 1 ELSE 0 END) AS le10,
       SUM(CASE WHEN d <= :b11 THEN 1 ELSE 0 END) AS le11
  FROM ended GROUP BY kind ORDER BY kind
