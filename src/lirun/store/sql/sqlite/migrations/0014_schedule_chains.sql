-- 0014: chains (docs/schedules.md, "Chains"). A run a chain fired names the parent run
-- whose end fired it and its depth (parent's + 1; NULL / 0 for a run no chain fired):
-- a run at depth 10 fires no children, so a chain cannot run away.
ALTER TABLE schedule_runs ADD COLUMN chain_parent_id TEXT;
ALTER TABLE schedule_runs ADD COLUMN chain_depth INTEGER NOT NULL DEFAULT 0;
-- The chain sweep reads a parent schedule's runs that ended after a time.
CREATE INDEX IF NOT EXISTS schedule_runs_ended_idx ON schedule_runs (schedule_id, ended_at);
