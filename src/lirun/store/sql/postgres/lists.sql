-- Lists of flows and shows, and the facts of the needs-you page (store/list_reads.py).
-- Only what differs from sqlite/lists.sql; the rest is in common/lists.sql.

-- name: list_flows
-- Flow invocations, newest first, before the keyset cursor (:before_at, :before_id), in
-- :status (NULL: any) and created at or after :since (NULL: ever); a pruned one says
-- when and by whom (migration 0010).
SELECT id, status, status_reason_code, status_reason_summary, skill, prompt,
       resumed_from, input_tokens, output_tokens, cost_usd, created_at, updated_at,
       ended_at, heartbeat_at, pruned_at, pruned_by
  FROM invocations
 WHERE kind = 'flow'
   AND (created_at, id) < (CAST(:before_at AS DOUBLE PRECISION), CAST(:before_id AS TEXT))
   AND (CAST(:status AS TEXT) IS NULL OR status = CAST(:status AS TEXT))
   AND (CAST(:since AS DOUBLE PRECISION) IS NULL OR created_at >= CAST(:since AS DOUBLE PRECISION))
 ORDER BY created_at DESC, id DESC
 LIMIT :limit
