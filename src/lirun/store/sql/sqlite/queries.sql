-- Named queries for SQLite. Every name here exists in postgres/queries.sql too.
--
-- Six statements are templates over the entity tables (insert_row, get_row, match_ids,
-- lock_row, cas_update_status, update_fields): one statement per table would repeat each
-- six times. Their {slots} hold identifiers only, never a value and never caller text:
--   {table}        a table of the closed registry lifecycle.POLICIES;
--   {columns}      column names, {values} their :name parameters (insert_row);
--   {assignments}  "col = :col" (update_fields); {extra_set} ", col = :x_col"
--                  (cas_update_status), for columns that records.closed_fields has
--                  checked against the closed field sets of the entity type.
-- Store.sql (check_slots in store/queries.py) refuses any other slot content.

-- name: insert_row
INSERT INTO {table} ({columns}) VALUES ({values})

-- name: get_row
SELECT * FROM {table} WHERE id = :id

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

-- name: update_fields
UPDATE {table} SET {assignments} WHERE id = :id

-- name: append_session_evidence
-- Evidence added to a record after its outcome was written (Sessions.append_evidence,
-- audited in admin_events); the status and its history row are left as they are.
UPDATE sessions SET status_evidence_refs = :evidence_refs, updated_at = :now WHERE id = :id

-- name: heartbeat
-- A beat also gives a row that has no lease the default one, so a silent owner is reaped.
UPDATE sessions
   SET heartbeat_at = :now, lease_seconds = COALESCE(lease_seconds, :lease)
 WHERE id = :id

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

-- name: find_transition
-- A retried status write asks whether its earlier try committed after all.
SELECT id FROM status_transitions WHERE id = :id

-- name: list_transitions
SELECT * FROM status_transitions
 WHERE entity_type = :entity_type AND entity_id = :entity_id
 ORDER BY created_at, rowid

-- name: insert_admin_event
INSERT INTO admin_events
    (id, event_type, target_type, target_id, actor, justification, payload, created_at)
VALUES
    (:id, :event_type, :target_type, :target_id, :actor, :justification, :payload, :created_at)

-- name: list_admin_events
SELECT * FROM admin_events ORDER BY created_at, rowid

-- name: list_admin_events_for_target
SELECT * FROM admin_events WHERE target_id = :target_id ORDER BY created_at, rowid

-- name: next_message_seq
SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM messages WHERE session_id = :session_id

-- name: insert_message
INSERT INTO messages (id, session_id, seq, role, content, created_at)
VALUES (:id, :session_id, :seq, :role, :content, :created_at)

-- name: set_message_bounds
UPDATE sessions
   SET first_msg_id = COALESCE(first_msg_id, :msg_id), last_msg_id = :msg_id
 WHERE id = :session_id

-- name: list_messages
SELECT * FROM messages WHERE session_id = :session_id ORDER BY seq

-- name: has_assistant_text
SELECT 1 AS found FROM messages
 WHERE session_id = :session_id AND role = 'assistant' AND TRIM(content) <> ''
 LIMIT 1

-- name: list_sessions
SELECT * FROM sessions
 WHERE (:status IS NULL OR status = :status)
   AND (:since IS NULL OR created_at >= :since)
 ORDER BY created_at DESC
 LIMIT :limit

-- name: list_running_sessions
SELECT * FROM sessions WHERE status = 'running' ORDER BY created_at

-- name: get_branch
SELECT * FROM branches WHERE id = :id

-- name: upsert_branch
INSERT INTO branches (id, provider, engine_session_uid, first_session_id, last_session_id,
                      created_at, updated_at)
VALUES (:id, :provider, :engine_session_uid, :session_id, :session_id, :now, :now)
ON CONFLICT (id) DO UPDATE
   SET engine_session_uid = COALESCE(excluded.engine_session_uid, branches.engine_session_uid),
       provider = COALESCE(excluded.provider, branches.provider),
       last_session_id = excluded.last_session_id,
       updated_at = excluded.updated_at

-- name: find_session_by_engine_uid
SELECT * FROM sessions WHERE engine_session_uid = :uid AND id <> :exclude_id
 ORDER BY updated_at DESC LIMIT 1

-- name: notify_transition
-- SQLite waiters see commits through PRAGMA data_version; there is nothing to send.
SELECT :channel AS channel, :payload AS payload WHERE 0
