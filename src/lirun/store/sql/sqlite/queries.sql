-- Named queries for SQLite that differ from postgres/queries.sql; the rest is in
-- common/queries.sql, whose header says what the {slots} of the templates here
-- (match_ids, lock_row, cas_update_status) may hold.

-- name: match_ids
-- Ids that start or end with :fragment, newest first, with the count of all matches.
-- SQLite's LIKE ignores ASCII case; the substr tests keep the match case-sensitive.
SELECT id, COUNT(*) OVER () AS total FROM {table}
 WHERE (id LIKE :prefix_pattern ESCAPE '\' AND substr(id, 1, :length) = :fragment)
    OR (id LIKE :suffix_pattern ESCAPE '\' AND substr(id, -:length) = :fragment)
 ORDER BY created_at DESC, id
 LIMIT :limit

-- name: lock_row
-- BEGIN IMMEDIATE already holds the database write lock.
SELECT id, status, updated_at FROM {table} WHERE id = :id

-- name: cas_update_status
UPDATE {table}
   SET status = :new_status,
       status_reason_code = :reason_code,
       status_reason_summary = :reason_summary,
       status_evidence_refs = :evidence_refs,
       updated_at = :now{extra_set}
 WHERE id = :id AND status IS :previous_status

-- name: insert_transition
-- seq: the next number of the history (0007); the write transaction holds the database
-- write lock, so numbers are taken and committed in the same order.
INSERT INTO status_transitions
    (id, entity_type, entity_id, previous_status, status, reason_code, reason_summary,
     evidence_refs, source, actor, created_at, metadata, seq)
VALUES
    (:id, :entity_type, :entity_id, :previous_status, :status, :reason_code, :reason_summary,
     :evidence_refs, :source, :actor, :created_at, :metadata,
     (SELECT COALESCE(MAX(seq), 0) + 1 FROM status_transitions))

-- name: list_transitions
SELECT * FROM status_transitions
 WHERE entity_type = :entity_type AND entity_id = :entity_id
 ORDER BY created_at, rowid

-- name: list_admin_events
SELECT * FROM admin_events ORDER BY created_at, rowid

-- name: list_admin_events_for_target
SELECT * FROM admin_events WHERE target_id = :target_id ORDER BY created_at, rowid

-- name: notify_transition
-- SQLite waiters see commits through PRAGMA data_version; there is nothing to send.
SELECT :channel AS channel, :payload AS payload WHERE 0
