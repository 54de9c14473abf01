-- Named queries for PostgreSQL that differ from sqlite/queries.sql; the rest is in
-- common/queries.sql, whose header says what the {slots} of the templates here
-- (match_ids, lock_row, cas_update_status) may hold.

-- name: match_ids
-- Ids that start or end with :fragment, newest first, with the count of all matches.
-- LIKE is case-sensitive here.
SELECT id, COUNT(*) OVER () AS total FROM {table}
 WHERE id LIKE :prefix_pattern ESCAPE '\' OR id LIKE :suffix_pattern ESCAPE '\'
 ORDER BY created_at DESC, id
 LIMIT :limit

-- name: lock_row
-- The row lock serializes writers to this row until commit.
SELECT id, status, updated_at FROM {table} WHERE id = :id FOR UPDATE

-- name: cas_update_status
UPDATE {table}
   SET status = :new_status,
       status_reason_code = :reason_code,
       status_reason_summary = :reason_summary,
       status_evidence_refs = :evidence_refs,
       updated_at = :now{extra_set}
 WHERE id = :id AND status IS NOT DISTINCT FROM CAST(:previous_status AS TEXT)

-- name: insert_transition
INSERT INTO status_transitions
    (id, entity_type, entity_id, previous_status, status, reason_code, reason_summary,
     evidence_refs, source, actor, created_at, metadata)
VALUES
    (:id, :entity_type, :entity_id, :previous_status, :status, :reason_code, :reason_summary,
     :evidence_refs, :source, :actor, :created_at, :metadata)

-- name: list_transitions
SELECT * FROM status_transitions
 WHERE entity_type = :entity_type AND entity_id = :entity_id
 ORDER BY created_at, seq

-- name: list_admin_events
SELECT * FROM admin_events ORDER BY created_at, seq

-- name: list_admin_events_for_target
SELECT * FROM admin_events WHERE target_id = :target_id ORDER BY created_at, seq

-- name: notify_transition
-- Sent inside the status transaction (every transition, creation included): delivered
-- only if the write commits.
SELECT pg_notify(:channel, :payload)
