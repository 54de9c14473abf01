-- Named queries of flows (store/flow_records.py). Written once: both dialects run these
-- as they are; what differs is in sqlite/flows.sql and postgres/flows.sql.

-- name: flow_heartbeat
-- The flow's owner is alive now (the version column updated_at is left alone).
UPDATE invocations
   SET heartbeat_at = :now, lease_seconds = COALESCE(lease_seconds, :lease)
 WHERE id = :id

-- name: set_flow_json
UPDATE invocations SET flow_json = :flow_json WHERE id = :id

-- name: sum_flow_usage
-- The legs' tokens and cost (every attempt: each was paid for) onto the invocation.
UPDATE invocations
   SET input_tokens = (SELECT SUM(s.input_tokens) FROM sessions s
                        WHERE s.invocation_id = :id),
       output_tokens = (SELECT SUM(s.output_tokens) FROM sessions s
                         WHERE s.invocation_id = :id),
       cost_usd = (SELECT SUM(s.cost_usd) FROM sessions s WHERE s.invocation_id = :id)
 WHERE id = :id

-- name: list_running_flows
SELECT * FROM invocations WHERE status = 'running' AND kind = 'flow' ORDER BY created_at

-- name: list_running_legs
SELECT * FROM sessions
 WHERE invocation_id = :invocation_id AND status = 'running'
 ORDER BY created_at
