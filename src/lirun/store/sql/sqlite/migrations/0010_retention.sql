-- 0010: retention (li gc, docs/retention.md). A pruned record keeps its row as a
-- tombstone: id, status, reason, exit code, times, cost and tokens stay; the bulky
-- columns are cleared and its run directory is removed. pruned_at and pruned_by say when
-- and by whom; files_removed_at is set once its run directory is gone, so a gc killed
-- between the two finishes the removal on its next pass.
ALTER TABLE sessions ADD COLUMN pruned_at REAL;
ALTER TABLE sessions ADD COLUMN pruned_by TEXT;
ALTER TABLE sessions ADD COLUMN files_removed_at REAL;
ALTER TABLE invocations ADD COLUMN pruned_at REAL;
ALTER TABLE invocations ADD COLUMN pruned_by TEXT;
ALTER TABLE invocations ADD COLUMN files_removed_at REAL;
-- No index covers these columns: an index on them would make every tombstone write
-- update every index of the row (no HOT update on PostgreSQL); the one query that looks
-- for unremoved directories runs once per gc pass and may scan.
CREATE INDEX IF NOT EXISTS plays_session_idx ON plays (session_id);
