"""Workers, ``store.workers`` (SQL in ``sql/*/workers.sql``).

A worker registers a ``workers`` row and heartbeats it; the same heartbeat renews the
lease (``lease_expires_at``) of every run it has in hand (the runs themselves are
``store.schedules``'). The writes here are the worker's row and leases, never statuses.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from lirun.hints import Any
from lirun.store.records import new_id
from lirun.store.repository import Repository
from lirun.store.rows import RunLeaseRow, WorkerRow


class Workers(Repository):
    """``store.workers``: the workers' rows and their heartbeats."""

    # -- workers -----------------------------------------------------------------------

    def register(
        self,
        *,
        owner: Mapping[str, Any],
        concurrency: int,
        transport: str,
        lease_seconds: float,
    ) -> str:
        """A new ``workers`` row for this process (``owner``: ``liveness.current_owner()``);
        returns its id."""
        worker_id = new_id()
        params = {
            "id": worker_id,
            "host": owner.get("owner_host") or "",
            "pid": int(owner.get("owner_pid") or 0),
            "process_start_time": owner.get("owner_start_time"),
            "boot_id": owner.get("owner_boot_id"),
            "concurrency": int(concurrency),
            "transport": transport,
            "lease_seconds": float(lease_seconds),
            "now": time.time(),
        }
        with self.connector.write() as tx:
            tx.execute(self.sql("insert_worker"), params)
        return worker_id

    def beat(self, worker_id: str, *, lease_seconds: float, runs: Sequence[str]) -> bool:
        """Heartbeat: the worker row and the lease of each of ``runs`` (the ids of the
        runs the worker has in hand) that is still ``running`` under its id, in one
        transaction. A row that carries its id but is not in hand (its ending was lost in
        a failover) is not renewed: it lapses and the reaper ends it. False when the
        worker row is stopped or gone."""
        now = time.time()
        with self.connector.write() as tx:
            alive = tx.execute(self.sql("beat_worker"), {"id": worker_id, "now": now}) == 1
            if alive and runs:
                params = {"worker_id": worker_id, "now": now, "expires": now + lease_seconds}
                tx.execute(
                    self.sql("renew_leases"),
                    {**params, "ids": self.connector.bind_list(list(runs))},
                )
        return alive

    def lease_of(self, run_id: str) -> RunLeaseRow | None:
        """The lease of schedule run ``run_id`` as the database holds it now, with the
        database's clock; None when there is no such run."""
        rows = self.connector.read(self.sql("lease_of_run"), {"id": run_id})
        if not rows:
            return None
        retry = None
        if rows[0]["status"] != "running":
            found = self.connector.read(self.sql("retries_of_run"), {"id": run_id})
            retry = str(found[0]["id"]) if found else None
        return RunLeaseRow.from_row(rows[0], retry)

    def stop(self, worker_id: str) -> None:
        with self.connector.write() as tx:
            tx.execute(self.sql("stop_worker"), {"id": worker_id, "now": time.time()})

    def list_live(self, *, since: float) -> list[WorkerRow]:
        """Workers not stopped whose heartbeat is at or after ``since``, each with
        ``running``: the ids of the runs it holds."""
        held: dict[str, list[str]] = {}
        for row in self.connector.read(self.sql("list_held_runs")):
            held.setdefault(str(row["worker_id"]), []).append(str(row["id"]))
        rows = self.connector.read(self.sql("list_live_workers"), {"since": since})
        return [WorkerRow.from_row(r, held.get(str(r["id"]), ())) for r in rows]

    # -- the run path ------------------------------------------------------------------
