-- 0013: schedules started by events (docs/schedules.md, "Poll triggers"). An event is
-- stored once per (schedule, key): the unique key, not a worker's memory, decides which
-- of many workers saw it first, and the run it fires is written in the same
-- transaction, so an event is never seen without its run (except the baseline of a
-- schedule's first poll, whose schedule_run_id stays NULL on purpose). source says what
-- delivered it ('poll' now; webhooks and chains store theirs here too).
CREATE TABLE IF NOT EXISTS schedule_events (
    id INTEGER PRIMARY KEY,
    schedule_id TEXT NOT NULL,
    event_key TEXT NOT NULL,
    source TEXT NOT NULL,
    event_json TEXT,
    seen_at REAL NOT NULL,
    baseline INTEGER NOT NULL DEFAULT 0,
    schedule_run_id TEXT,
    UNIQUE (schedule_id, event_key)
);
CREATE INDEX IF NOT EXISTS schedule_events_seen_idx ON schedule_events (schedule_id, seen_at);

-- The event a run is for (NULL for a due-time, fired or submitted run).
ALTER TABLE schedule_runs ADD COLUMN event_key TEXT;
ALTER TABLE schedule_runs ADD COLUMN event_json TEXT;

-- A poll trigger's last poll: when, its reason code (schedule.poll.*) and what it said;
-- last_poll_ok_at: its last good poll (none yet: the next good one is the baseline).
ALTER TABLE schedules ADD COLUMN last_poll_at REAL;
ALTER TABLE schedules ADD COLUMN last_poll_reason TEXT;
ALTER TABLE schedules ADD COLUMN last_poll_detail TEXT;
ALTER TABLE schedules ADD COLUMN last_poll_ok_at REAL;
