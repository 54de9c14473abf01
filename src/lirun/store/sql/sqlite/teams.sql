-- Named queries of teams (store/team_records.py, docs/teams.md). Only what differs from
-- postgres/teams.sql; the rest is in common/teams.sql.

-- name: team_lock_name
-- BEGIN IMMEDIATE already holds the database write lock: no other team is made meanwhile.
SELECT 1 AS locked

-- name: team_mark_read
-- WHERE true: SQLite needs it between INSERT ... SELECT and ON CONFLICT.
INSERT INTO team_reads (message_id, member, read_at)
SELECT value, :member, :now FROM json_each(:ids) WHERE true
ON CONFLICT (message_id, member) DO NOTHING

-- name: team_reads
SELECT message_id, member, read_at FROM team_reads
 WHERE message_id IN (SELECT value FROM json_each(:ids))
 ORDER BY read_at, member
