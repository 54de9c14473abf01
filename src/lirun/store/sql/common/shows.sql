-- Named queries of the show engine (store/show_records.py). Written once: both dialects
-- run these as they are; what differs is in sqlite/shows.sql and postgres/shows.sql.

-- name: active_shows_for_topic
SELECT * FROM shows WHERE topic = :topic AND status = 'active' ORDER BY created_at DESC

-- name: list_plays
SELECT * FROM plays WHERE show_id = :show_id ORDER BY position, created_at

-- name: beat_show
UPDATE shows SET heartbeat_at = :now
 WHERE id = :id AND status = 'active' AND owner_pid = :owner_pid AND owner_host = :owner_host

-- name: release_show
UPDATE shows
   SET owner_pid = NULL, owner_start_time = NULL, owner_host = NULL, owner_boot_id = NULL,
       heartbeat_at = NULL
 WHERE id = :id AND owner_pid = :owner_pid AND owner_host = :owner_host

-- name: recent_shows
-- Active shows first, then the newest.
SELECT * FROM shows
 ORDER BY CASE WHEN status = 'active' THEN 0 ELSE 1 END, created_at DESC, id
 LIMIT :limit

-- name: active_show_ids_for_topic
SELECT id FROM shows WHERE topic = :topic AND status = 'active'
