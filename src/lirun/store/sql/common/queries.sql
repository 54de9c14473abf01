-- Named queries of the entity tables and their history, written once for both dialects;
-- what differs is in sqlite/queries.sql and postgres/queries.sql.
--
-- Six statements are templates over the entity tables (insert_row, get_row, match_ids,
-- lock_row, cas_update_status, update_fields): one statement per table would repeat each
-- six times (match_ids, lock_row and cas_update_status are in the dialect files). Their
-- {slots} hold identifiers only, never a value and never caller text:
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

-- name: find_transition
-- A retried status write asks whether its earlier try committed after all.
SELECT id FROM status_transitions WHERE id = :id

-- name: insert_admin_event
INSERT INTO admin_events
    (id, event_type, target_type, target_id, actor, justification, payload, created_at)
VALUES
    (:id, :event_type, :target_type, :target_id, :actor, :justification, :payload, :created_at)

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
 WHERE (CAST(:status AS TEXT) IS NULL OR status = :status)
   AND (CAST(:since AS DOUBLE PRECISION) IS NULL OR created_at >= :since)
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
