-- Named queries of the show engine (store/show_records.py). Only what differs from
-- sqlite/shows.sql; the rest is in common/shows.sql.

-- name: list_play_sessions
-- Every execution of a play (its agent runs and its gate runs), oldest first.
SELECT * FROM sessions
 WHERE (CAST(metadata_json AS jsonb) ->> 'play_id') = :play_id
 ORDER BY created_at, id

-- name: list_show_gate_sessions
-- The gate runs on a show's integration head (final and after a person moved it).
SELECT * FROM sessions
 WHERE (CAST(metadata_json AS jsonb) ->> 'show_id') = :show_id
   AND (CAST(metadata_json AS jsonb) ->> 'role') IN ('final_gate', 'head_gate')
 ORDER BY created_at, id

-- name: claim_show
-- The show row is the lock: take it only from the owner the caller judged (NULL-safe).
UPDATE shows
   SET owner_pid = :owner_pid, owner_start_time = :owner_start_time,
       owner_host = :owner_host, owner_boot_id = :owner_boot_id,
       heartbeat_at = :now, lease_seconds = :lease_seconds
 WHERE id = :id AND status = 'active'
   AND owner_pid IS NOT DISTINCT FROM :old_pid AND owner_host IS NOT DISTINCT FROM :old_host
   AND owner_start_time IS NOT DISTINCT FROM :old_start_time

-- name: lock_topic
-- Serializes the starts of shows of one topic until commit (no row to lock yet).
SELECT pg_advisory_xact_lock(hashtext(:topic)) IS NULL AS locked
