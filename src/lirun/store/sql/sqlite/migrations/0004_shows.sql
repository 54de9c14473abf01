-- 0004: shows and plays as the show engine runs them (issue "shows and plays").
-- The show row is the show's lock: its owner identity and heartbeat say which process
-- runs it, so a second `li show run` refuses and `li show resume` takes over a dead
-- owner's show. integration_head is the last commit the engine put on (or verified on)
-- the integration branch; every such commit passed its gate. A play records its
-- candidate merge commit before the compare-and-swap ref move, so a crash between the
-- two neither repeats nor loses the merge. Executions link to their play through
-- sessions.metadata_json ({"play_id": …, "role": "agent" | "gate" | "final_gate"}).

ALTER TABLE shows ADD COLUMN spec_json TEXT;
ALTER TABLE shows ADD COLUMN repo TEXT;
ALTER TABLE shows ADD COLUMN base TEXT;
ALTER TABLE shows ADD COLUMN base_sha TEXT;
ALTER TABLE shows ADD COLUMN integration TEXT;
ALTER TABLE shows ADD COLUMN integration_head TEXT;
ALTER TABLE shows ADD COLUMN final_gate_json TEXT;
ALTER TABLE shows ADD COLUMN owner_pid INTEGER;
ALTER TABLE shows ADD COLUMN owner_start_time REAL;
ALTER TABLE shows ADD COLUMN owner_host TEXT;
ALTER TABLE shows ADD COLUMN owner_boot_id TEXT;
ALTER TABLE shows ADD COLUMN heartbeat_at REAL;
ALTER TABLE shows ADD COLUMN lease_seconds REAL;
CREATE INDEX IF NOT EXISTS shows_topic_idx ON shows (topic, status);

ALTER TABLE plays ADD COLUMN position INTEGER;
ALTER TABLE plays ADD COLUMN attempt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE plays ADD COLUMN attempts INTEGER;
ALTER TABLE plays ADD COLUMN branch TEXT;
ALTER TABLE plays ADD COLUMN worktree TEXT;
ALTER TABLE plays ADD COLUMN depends_on_json TEXT;
ALTER TABLE plays ADD COLUMN candidate_sha TEXT;
ALTER TABLE plays ADD COLUMN candidate_base TEXT;
ALTER TABLE plays ADD COLUMN merge_sha TEXT;
ALTER TABLE plays ADD COLUMN merged_at REAL;
ALTER TABLE plays ADD COLUMN gate_json TEXT;
ALTER TABLE plays ADD COLUMN feedback TEXT;
CREATE INDEX IF NOT EXISTS plays_show_position_idx ON plays (show_id, position);
