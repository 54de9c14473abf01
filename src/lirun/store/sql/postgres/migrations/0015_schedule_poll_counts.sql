-- 0015: how many polls each poll schedule made, per outcome (its schedule.poll.* code),
-- for the metrics (docs/ui.md): schedules.last_poll_* keeps only the last poll, and a
-- failure a good poll followed would otherwise leave no trace a scrape could count.
-- record_poll adds one in the transaction that writes last_poll_*.
CREATE TABLE IF NOT EXISTS schedule_poll_counts (
    schedule_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    n BIGINT NOT NULL DEFAULT 0,
    last_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (schedule_id, reason)
);
