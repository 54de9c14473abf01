-- Named queries for the human views (li status). Only what differs from
-- sqlite/views.sql; the rest is in common/views.sql. Ids are resolved by wait.sql
-- (lirun.wait.resolve).

-- name: list_invocation_sessions
SELECT * FROM sessions WHERE invocation_id = :invocation_id ORDER BY created_at, id
