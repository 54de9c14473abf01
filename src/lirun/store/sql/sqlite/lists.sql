-- Lists of flows and shows, and the facts of the needs-you page (store/list_reads.py).
-- Only what differs from postgres/lists.sql; the rest is in common/lists.sql.

-- name: list_flows
-- Flow invocations, newest first, before the keyset cursor (:before_at, :before_id), in
-- :status (NULL: any) and created at or after :since (NULL: ever); a pruned one says
-- when and by whom (migration 0010). Not in common/: with the CASTs of PostgreSQL's copy
-- in its row value, SQLite bounds the (created_at, id) index by created_at alone.
SELECT id, status, status_reason_code, status_reason_summary, skill, prompt,
       resumed_from, input_tokens, output_tokens, cost_usd, created_at, updated_at,
       ended_at, heartbeat_at, pruned_at, pruned_by
  FROM invocations
 WHERE kind = 'flow'
   AND (created_at, id) < (:before_at, :before_id)
   AND (:status IS NULL OR status = :status)
   AND (:since IS NULL OR created_at >= :since)
 ORDER BY created_at DESC, id DESC
 LIMIT :limit
