-- 0009: teams talk (docs/teams.md). The teams table exists since 0001; a team now has
-- members, messages and read receipts. A message's seq is its place in its team's
-- conversation, given under the team row's lock, so the order every reader sees is the
-- order of the commits. owner_type/owner_id name the show or flow invocation that made
-- the team for its agents (NULL for one made with `li team create`).
ALTER TABLE teams ADD COLUMN owner_type TEXT;
ALTER TABLE teams ADD COLUMN owner_id TEXT;
ALTER TABLE teams ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE teams ADD COLUMN last_message_at DOUBLE PRECISION;
CREATE INDEX IF NOT EXISTS teams_name_idx ON teams (name, status);
CREATE INDEX IF NOT EXISTS teams_owner_idx ON teams (owner_type, owner_id);

CREATE TABLE IF NOT EXISTS team_members (
    team_id    TEXT NOT NULL,
    member     TEXT NOT NULL,
    joined_at  DOUBLE PRECISION NOT NULL,
    run_id     TEXT,
    PRIMARY KEY (team_id, member)
);

CREATE TABLE IF NOT EXISTS team_messages (
    id          TEXT PRIMARY KEY,
    team_id     TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    sender      TEXT NOT NULL,
    recipient   TEXT NOT NULL,
    body        TEXT NOT NULL,
    run_id      TEXT,
    created_at  DOUBLE PRECISION NOT NULL,
    UNIQUE (team_id, seq)
);
CREATE INDEX IF NOT EXISTS team_messages_run_idx ON team_messages (run_id);

-- One row per (message, member) that has read it: the read receipts.
CREATE TABLE IF NOT EXISTS team_reads (
    message_id  TEXT NOT NULL,
    member      TEXT NOT NULL,
    read_at     DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (message_id, member)
);
