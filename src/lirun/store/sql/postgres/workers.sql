-- Workers and the run path of schedule runs (store/worker_records.py). Only what differs
-- from sqlite/workers.sql; the rest is in common/workers.sql.

-- name: lease_of_run
-- What `li lease check` judges a fence by: the run's status, its claim's epoch and its
-- lease, with the database's own clock (db_now, epoch seconds) to judge the expiry by.
SELECT status, status_reason_code, lease_epoch, lease_expires_at, worker_id,
       EXTRACT(EPOCH FROM clock_timestamp())::DOUBLE PRECISION AS db_now
  FROM schedule_runs WHERE id = :id

-- name: renew_leases
-- The worker's heartbeat renews the lease of the runs it has in hand (:ids), each only
-- while it is still running under this worker; a row that only carries the worker's id
-- (its ending lost in a failover) is left to lapse.
UPDATE schedule_runs SET lease_expires_at = :expires, heartbeat_at = :now
 WHERE id = ANY(CAST(:ids AS TEXT[])) AND worker_id = :worker_id AND status = 'running'
