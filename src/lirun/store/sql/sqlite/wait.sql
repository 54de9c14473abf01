-- Named queries for `li wait` (design.md D6). Every query here differs from its namesake
-- in postgres/wait.sql. Ids arrive as one JSON array per parameter, so any number of ids
-- costs one query.

-- name: wait_resolve_exact
-- Every exact reading of each input; the caller keeps the lowest tier, then the newest row.
SELECT 0 AS tier, 'session' AS kind, id, id AS input, created_at FROM sessions
 WHERE id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT 1, 'invocation', id, id, created_at FROM invocations
 WHERE id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT 2, 'play', id, id, created_at FROM plays
 WHERE id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT 3, 'session', id, branch_id, created_at FROM sessions
 WHERE branch_id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT 4, 'session', id, run_id, created_at FROM sessions
 WHERE run_id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT 5, 'schedule_run', id, id, created_at FROM schedule_runs
 WHERE id IN (SELECT value FROM json_each(:ids))
UNION ALL
SELECT 6, 'show', id, id, created_at FROM shows
 WHERE id IN (SELECT value FROM json_each(:ids))

-- name: wait_resolve_partial
-- Ids of the wait kinds that start or end with :fragment (a prefix, or a run id's
-- random suffix), newest first, with the count of all matches.
-- SQLite's LIKE ignores ASCII case; the substr tests keep the match case-sensitive.
SELECT kind, id, COUNT(*) OVER () AS total FROM (
  SELECT 'session' AS kind, id, created_at FROM sessions
   WHERE (id LIKE :prefix_pattern ESCAPE '\' AND substr(id, 1, :length) = :fragment)
      OR (id LIKE :suffix_pattern ESCAPE '\' AND substr(id, -:length) = :fragment)
  UNION ALL
  SELECT 'invocation' AS kind, id, created_at FROM invocations
   WHERE (id LIKE :prefix_pattern ESCAPE '\' AND substr(id, 1, :length) = :fragment)
      OR (id LIKE :suffix_pattern ESCAPE '\' AND substr(id, -:length) = :fragment)
  UNION ALL
  SELECT 'play' AS kind, id, created_at FROM plays
   WHERE (id LIKE :prefix_pattern ESCAPE '\' AND substr(id, 1, :length) = :fragment)
      OR (id LIKE :suffix_pattern ESCAPE '\' AND substr(id, -:length) = :fragment)
  UNION ALL
  SELECT 'schedule_run' AS kind, id, created_at FROM schedule_runs
   WHERE (id LIKE :prefix_pattern ESCAPE '\' AND substr(id, 1, :length) = :fragment)
      OR (id LIKE :suffix_pattern ESCAPE '\' AND substr(id, -:length) = :fragment)
  UNION ALL
  SELECT 'show' AS kind, id, created_at FROM shows
   WHERE (id LIKE :prefix_pattern ESCAPE '\' AND substr(id, 1, :length) = :fragment)
      OR (id LIKE :suffix_pattern ESCAPE '\' AND substr(id, -:length) = :fragment)
) AS m
 ORDER BY created_at DESC, kind, id
 LIMIT :limit

-- name: wait_fetch
-- One tick: every pending target with its backing session's run_dir (design.md §4.1) and,
-- for sessions, the liveness facts the waiter judges. A flow invocation (kind 'flow') is
-- its own answer: its run directory and its owner's liveness facts, not a leg's. A
-- running schedule run carries its worker's process facts and its lease (heartbeat_at +
-- lease_seconds = lease_expires_at), so a lone waiter can tell its worker died.
SELECT 'session' AS kind, s.id, s.status, s.status_reason_code AS reason_code,
       s.status_reason_summary AS reason_summary, s.run_dir, s.artifacts_path AS artifact_dir,
       s.exit_code,
       s.owner_pid, s.owner_start_time, s.owner_host, s.owner_boot_id, s.heartbeat_at,
       s.lease_seconds
  FROM sessions s
 WHERE s.id IN (SELECT value FROM json_each(:session_ids))
UNION ALL
SELECT 'invocation', i.id, i.status, i.status_reason_code, i.status_reason_summary,
       CASE WHEN i.kind = 'flow' THEN i.run_dir ELSE b.run_dir END,
       CASE WHEN i.kind = 'flow' THEN i.artifacts_path ELSE b.artifacts_path END,
       i.exit_code, i.owner_pid, i.owner_start_time, i.owner_host, i.owner_boot_id,
       i.heartbeat_at, i.lease_seconds
  FROM invocations i
  LEFT JOIN sessions b ON COALESCE(i.kind, '') <> 'flow'
                      AND b.id = (SELECT x.id FROM sessions x WHERE x.invocation_id = i.id
                                   ORDER BY x.updated_at DESC LIMIT 1)
 WHERE i.id IN (SELECT value FROM json_each(:invocation_ids))
UNION ALL
SELECT 'play', p.id, p.status, p.status_reason_code, p.status_reason_summary,
       b.run_dir, b.artifacts_path, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM plays p
  LEFT JOIN sessions b ON b.id = p.session_id
 WHERE p.id IN (SELECT value FROM json_each(:play_ids))
UNION ALL
SELECT 'schedule_run', r.id, r.status, r.status_reason_code, r.status_reason_summary,
       b.run_dir, b.artifacts_path, r.exit_code, k.pid, k.process_start_time, k.host,
       k.boot_id, r.heartbeat_at, r.lease_expires_at - r.heartbeat_at
  FROM schedule_runs r
  LEFT JOIN workers k ON k.id = r.worker_id AND r.status = 'running'
  LEFT JOIN sessions b ON b.id = COALESCE(r.session_id,
                                          (SELECT x.id FROM sessions x
                                            WHERE x.invocation_id = r.invocation_id
                                            ORDER BY x.updated_at DESC LIMIT 1))
 WHERE r.id IN (SELECT value FROM json_each(:schedule_run_ids))
UNION ALL
SELECT 'show', w.id, w.status, w.status_reason_code, w.status_reason_summary,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM shows w
 WHERE w.id IN (SELECT value FROM json_each(:show_ids))
