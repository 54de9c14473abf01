-- 0012: the fence of a run's lease (docs/queue.md). lease_epoch counts the claims of a
-- schedule run: each claim (queued -> running) sets it one higher, and a retry starts
-- from the epoch of the run it retries, so along a run and its retries the number only
-- grows. The work a worker starts gets LIRUN_FENCE=<run id>:<epoch>; `li lease check`
-- answers 0 only while the run is running under that epoch with its lease unexpired.
ALTER TABLE schedule_runs ADD COLUMN lease_epoch INTEGER NOT NULL DEFAULT 0;
