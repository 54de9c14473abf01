"""Workers and the run path of schedule runs as ``Store`` methods (SQL in
``sql/*/workers.sql``).

A worker registers a ``workers`` row and heartbeats it; the same heartbeat renews the
lease (``lease_expires_at``) of every run it holds. The status of a run only ever moves
through the guarded ``update_status`` (``claim_run`` is its compare-and-set ``queued →
running``); the plain writes here are links and leases, never statuses.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from lirun.hints import Any
from lirun.lifecycle import policy_for
from lirun.reasons import validate_reason
from lirun.store.records import new_id, require_text, to_json
from lirun.store.rows import ScheduleRunRow, WorkerRow
from lirun.store.schedule_records import ScheduleRecords
from lirun.store.transitions import HistoryEntry


class WorkerRecords(ScheduleRecords):
    """Mixed into ``Store``; a queued run's retry is a schedule's due run."""

    # -- workers -----------------------------------------------------------------------

    def register_worker(
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

    def beat_worker(self, worker_id: str, *, lease_seconds: float) -> bool:
        """Heartbeat: the worker row and the lease of every run it holds, in one
        transaction. False when the worker row is stopped or gone."""
        now = time.time()
        with self.connector.write() as tx:
            alive = tx.execute(self.sql("beat_worker"), {"id": worker_id, "now": now}) == 1
            if alive:
                tx.execute(
                    self.sql("renew_leases"),
                    {"worker_id": worker_id, "now": now, "expires": now + lease_seconds},
                )
        return alive

    def stop_worker(self, worker_id: str) -> None:
        with self.connector.write() as tx:
            tx.execute(self.sql("stop_worker"), {"id": worker_id, "now": time.time()})

    def list_live_workers(self, *, since: float) -> list[WorkerRow]:
        """Workers not stopped whose heartbeat is at or after ``since``, each with
        ``running``: the ids of the runs it holds."""
        held: dict[str, list[str]] = {}
        for row in self.connector.read(self.sql("list_held_runs")):
            held.setdefault(str(row["worker_id"]), []).append(str(row["id"]))
        rows = self.connector.read(self.sql("list_live_workers"), {"since": since})
        return [WorkerRow.from_row(r, held.get(str(r["id"]), ())) for r in rows]

    # -- the run path ------------------------------------------------------------------

    def insert_queued_run(
        self,
        *,
        action_kind: str,
        action: Mapping[str, Any] | None = None,
        schedule_id: str | None = None,
        attempt: int = 1,
        retry_of: str | None = None,
        due_at: int | None = None,
        reason_summary: str = "",
        source: str = "user",
        actor: str | None = None,
    ) -> ScheduleRunRow:
        """A queued run with its first history row: ``li submit`` (``action``, no
        schedule), ``li schedule fire`` (a schedule, no due time) or a retry. A retry of
        a due-time run goes through ``insert_due_run`` instead (its unique key)."""
        require_text(action_kind=action_kind)
        policy = policy_for("schedule_run")
        reason = "schedule.queued.created"
        validate_reason(reason, policy.entity_type, "queued")
        now = time.time()
        run_id = new_id()
        params = {
            "id": run_id,
            "schedule_id": schedule_id,
            "action_kind": action_kind,
            "action_json": to_json(dict(action), "action") if action is not None else None,
            "attempt": int(attempt),
            "due_at": due_at,
            "retry_of": retry_of,
            "reason_code": reason,
            "reason_summary": reason_summary,
            "now": now,
        }
        with self.connector.write() as tx:
            tx.execute(self.sql("insert_queued_run"), params)
            entry = HistoryEntry(
                run_id, None, "queued", reason, reason_summary, source=source, actor=actor
            )
            self._append_transition(tx, policy, entry, now)
        created = self.get_schedule_run(run_id)
        assert created is not None
        return created

    def queue_retry(self, run: ScheduleRunRow) -> ScheduleRunRow | None:
        """Attempt n+1 of ``run``, linked by ``retry_of``: a due-time run's through the
        unique key (None: another writer queued it already), an ad-hoc run's with its
        action (and so its own policies)."""
        attempt = int(run.attempt or 1) + 1
        if run.due_at is not None and run.schedule_id:
            return self.insert_due_run(
                schedule_id=run.schedule_id,
                due_at=int(run.due_at),
                action_kind=run.action_kind,
                attempt=attempt,
                retry_of=run.id,
            )
        return self.insert_queued_run(
            action_kind=run.action_kind,
            action=run.action_json,
            schedule_id=run.schedule_id,
            attempt=attempt,
            retry_of=run.id,
            source="system",
        )

    def claim_run(self, run_id: str, *, worker_id: str, lease_seconds: float) -> bool:
        """``queued → running`` by compare-and-set, taking the lease: True for exactly
        one caller; the others (a job delivered twice, a second worker) get False."""
        now = time.time()
        return self.update_status(
            "schedule_run",
            run_id,
            new_status="running",
            reason_code="schedule.running.started",
            source="system",
            expected_statuses={"queued"},
            extra_fields={
                "started_at": now,
                "worker_id": worker_id,
                "lease_expires_at": now + lease_seconds,
                "heartbeat_at": now,
            },
        )

    def link_run(
        self,
        run_id: str,
        *,
        session_id: str | None = None,
        invocation_id: str | None = None,
        show_id: str | None = None,
    ) -> None:
        """Link the run to what it produces (set before the action starts)."""
        params = {
            "id": run_id,
            "session_id": session_id,
            "invocation_id": invocation_id,
            "show_id": show_id,
        }
        with self.connector.write() as tx:
            tx.execute(self.sql("link_run"), params)

    def list_queued_runs(self, *, limit: int = 100) -> list[ScheduleRunRow]:
        """Queued runs, oldest first, at most ``limit``."""
        return self._runs(self.sql("list_queued_runs"), {"limit": int(limit)})

    def list_queued_run_ids(self, *, limit: int = 100) -> list[str]:
        """Queued run ids, oldest first (what ``LocalTransport`` offers to ``handle``)."""
        return [r.id for r in self.list_queued_runs(limit=limit)]

    def list_lapsed_runs(self, now: float) -> list[ScheduleRunRow]:
        """Running runs whose lease expired before ``now``."""
        return self._runs(self.sql("list_lapsed_runs"), {"now": now})

    def running_sessions_of_run(self, run: ScheduleRunRow) -> list[str]:
        """Ids of the run's executions still marked running."""
        params = {"session_id": run.session_id, "invocation_id": run.invocation_id}
        return [
            str(r["id"]) for r in self.connector.read(self.sql("running_sessions_of_run"), params)
        ]

    def count_started_runs(self, schedule_id: str) -> int:
        rows = self.connector.read(self.sql("count_started_runs"), {"schedule_id": schedule_id})
        return int(rows[0]["n"])

    def schedule_usage(self, schedule_id: str, *, since: float = 0.0) -> tuple[float | None, int]:
        """(USD spent, or None when no execution recorded a cost; tokens spent) by the
        schedule's executions created at or after ``since``."""
        rows = self.connector.read(
            self.sql("schedule_usage"), {"schedule_id": schedule_id, "since": since}
        )
        row = rows[0]
        usd = float(row["usd"]) if row["usd_runs"] and row["usd"] is not None else None
        return usd, int(row["tokens"] or 0)

    def schedule_signature(self) -> tuple[int, float]:
        """Changes whenever a definition changes (count, latest update)."""
        row = self.connector.read(self.sql("schedule_signature"))[0]
        return int(row["n"]), float(row["at"] or 0.0)
