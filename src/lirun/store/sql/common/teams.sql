-- Named queries of teams (store/team_records.py, docs/teams.md). Written once: both
-- dialects run these as they are; what differs is in sqlite/teams.sql and
-- postgres/teams.sql.

-- name: team_insert_member
INSERT INTO team_members (team_id, member, joined_at, run_id)
VALUES (:team_id, :member, :now, :run_id)
ON CONFLICT (team_id, member) DO NOTHING

-- name: team_members
SELECT member, joined_at, run_id FROM team_members
 WHERE team_id = :team_id ORDER BY joined_at, member

-- name: team_count_message
-- Under the team row's lock: the new message's seq is the new count.
UPDATE teams SET message_count = message_count + 1, last_message_at = :now
 WHERE id = :team_id

-- name: team_message_count
SELECT message_count FROM teams WHERE id = :team_id

-- name: team_insert_message
INSERT INTO team_messages (id, team_id, seq, sender, recipient, body, run_id, created_at)
VALUES (:id, :team_id, :seq, :sender, :recipient, :body, :run_id, :created_at)

-- name: team_message
SELECT * FROM team_messages WHERE team_id = :team_id AND id = :id

-- name: team_inbox
-- What :member receives (sent to it or to all, by someone else) after :since, oldest
-- first, with its own read time; :unread_only = 1 leaves out what it has read.
SELECT m.*, r.read_at FROM team_messages m
  LEFT JOIN team_reads r ON r.message_id = m.id AND r.member = :member
 WHERE m.team_id = :team_id AND m.seq > :since AND m.sender <> :member
   AND m.recipient IN ('all', :member)
   AND (CAST(:unread_only AS INTEGER) = 0 OR r.read_at IS NULL)
 ORDER BY m.seq
 LIMIT :limit

-- name: team_conversation
-- The whole conversation after :since (oldest first), or one member's part of it (what
-- it sent and what it received) when :member is not ''.
SELECT * FROM team_messages
 WHERE team_id = :team_id AND seq > :since
   AND (CAST(:member AS TEXT) = '' OR sender = :member OR (recipient IN ('all', :member)))
 ORDER BY seq
 LIMIT :limit

-- name: team_recent
-- The newest :limit messages, returned newest first (the caller reverses them).
SELECT * FROM team_messages WHERE team_id = :team_id ORDER BY seq DESC LIMIT :limit

-- name: team_unread_counts
SELECT mb.member, COUNT(m.id) AS unread FROM team_members mb
  LEFT JOIN team_messages m
    ON m.team_id = mb.team_id AND m.sender <> mb.member
   AND m.recipient IN ('all', mb.member)
   AND NOT EXISTS (SELECT 1 FROM team_reads r WHERE r.message_id = m.id AND r.member = mb.member)
 WHERE mb.team_id = :team_id
 GROUP BY mb.member

-- name: team_sent_counts
-- last_run_id: the run that sent the sender's newest message that names one
SELECT s.sender, COUNT(*) AS sent, MAX(s.created_at) AS last_at,
       (SELECT r.run_id FROM team_messages r
         WHERE r.team_id = :team_id AND r.sender = s.sender AND r.run_id IS NOT NULL
         ORDER BY r.seq DESC LIMIT 1) AS last_run_id
  FROM team_messages s
 WHERE s.team_id = :team_id GROUP BY s.sender

-- name: team_active_by_name
SELECT * FROM teams WHERE name = :name AND status = 'active' ORDER BY created_at DESC, id

-- name: team_newest_by_name
SELECT * FROM teams WHERE name = :name ORDER BY created_at DESC, id LIMIT 1

-- name: team_by_owner
SELECT * FROM teams WHERE owner_type = :owner_type AND owner_id = :owner_id
 ORDER BY created_at DESC, id

-- name: team_set_owner
UPDATE teams SET owner_type = :owner_type, owner_id = :owner_id WHERE id = :id

-- name: team_list
-- Active teams first, then the newest.
SELECT * FROM teams
 WHERE (CAST(:status AS TEXT) IS NULL OR status = :status)
 ORDER BY CASE WHEN status = 'active' THEN 0 ELSE 1 END, created_at DESC, id
 LIMIT :limit

-- name: team_memberships_of_run
-- The teams (and member names) a run joined as, for `li status`.
SELECT team_id, member FROM team_members WHERE run_id = :run_id ORDER BY joined_at

-- name: team_message_counts
-- What the dashboard's watcher compares to tell browsers which teams have new messages.
SELECT id, message_count FROM teams ORDER BY id

-- name: team_member_counts
SELECT team_id, COUNT(*) AS members FROM team_members GROUP BY team_id
