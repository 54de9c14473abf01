-- Named queries of `li gc` (store/retention_records.py, docs/retention.md). Written once:
-- both dialects run these as they are; what differs is in sqlite/retention.sql and
-- postgres/retention.sql.

-- name: gc_unremoved_files
-- Tombstones whose run directory is not yet removed (a gc stopped between the two, or
-- the directory is on another host): those of this :host, or of no recorded host.
SELECT kind, id, run_dir, artifacts_path, owner_host FROM (
  SELECT 'session' AS kind, id, run_dir, artifacts_path, owner_host FROM sessions
   WHERE pruned_at IS NOT NULL AND files_removed_at IS NULL
  UNION ALL
  SELECT 'invocation' AS kind, id, run_dir, artifacts_path, owner_host FROM invocations
   WHERE pruned_at IS NOT NULL AND files_removed_at IS NULL
) AS t
 WHERE owner_host IS NULL OR owner_host = '' OR owner_host = :host
 ORDER BY kind, id
 LIMIT :limit
