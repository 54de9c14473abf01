-- Named queries of teams (store/team_records.py, docs/teams.md). Only what differs from
-- sqlite/teams.sql; the rest is in common/teams.sql.

-- name: team_lock_name
-- Serializes the creation of teams of one name until commit (no row to lock yet).
SELECT pg_advisory_xact_lock(hashtext('lirun.team:' || :name)) IS NULL AS locked

-- name: team_mark_read
INSERT INTO team_reads (message_id, member, read_at)
SELECT value, :member, :now FROM jsonb_array_elements_text(CAST(:ids AS jsonb)) AS value
ON CONFLICT (message_id, member) DO NOTHING

-- name: team_reads
SELECT message_id, member, read_at FROM team_reads
 WHERE message_id IN (SELECT value FROM jsonb_array_elements_text(CAST(:ids AS jsonb)) AS value)
 ORDER BY read_at, member
