-- Named queries for the human views (li status). Every name here exists in
-- postgres/views.sql too. Ids are resolved by wait.sql (lirun.wait.resolve).

-- name: list_invocation_sessions
SELECT * FROM sessions WHERE invocation_id = :invocation_id ORDER BY created_at, rowid
