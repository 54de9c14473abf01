-- 0015: --overlap per event (docs/schedules.md, "Overlap per event"). What an event's run
-- is about: the value at the schedule's --key (a pull request's number, while a
-- webhook's event key is its delivery id), else its event key; NULL for a run no event
-- started. A second event about the same subject while a run for it is active is
-- skipped under --overlap skip; the index finds those runs.
ALTER TABLE schedule_runs ADD COLUMN subject_key TEXT;
CREATE INDEX IF NOT EXISTS schedule_runs_subject_idx ON schedule_runs (schedule_id, subject_key)
    WHERE subject_key IS NOT NULL;
