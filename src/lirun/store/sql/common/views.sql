-- Named queries for the human views (li status). Written once: both dialects run these as
-- they are; what differs is in sqlite/views.sql and postgres/views.sql. Ids are resolved
-- by wait.sql (lirun.wait.resolve).

-- name: list_recent_shows
-- The newest shows, one row per (show, play status) with how many plays have it; a show
-- without plays has one row with a NULL play_status (li show status folds them).
SELECT s.id, s.topic, s.status, s.status_reason_code, s.status_reason_summary,
       s.created_at, s.updated_at, s.ended_at, p.status AS play_status,
       COUNT(p.id) AS play_count
  FROM (SELECT * FROM shows ORDER BY created_at DESC, id DESC LIMIT :limit) AS s
  LEFT JOIN plays p ON p.show_id = s.id
 GROUP BY s.id, s.topic, s.status, s.status_reason_code, s.status_reason_summary,
          s.created_at, s.updated_at, s.ended_at, p.status
 ORDER BY s.created_at DESC, s.id DESC, p.status
