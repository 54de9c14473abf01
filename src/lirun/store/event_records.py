"""Events that start schedule runs, ``store.events`` (SQL in ``sql/common/events.sql``).

An event (a polled item, a webhook delivery; chains later, told apart by ``source``) is
stored once per (schedule, key) by the unique key of ``schedule_events``: of any number
of workers that see it, exactly one inserts it. The run it fires is inserted in the same
transaction, so a worker that dies between seeing an event and firing it leaves neither
(the next poll finds it new again), and never one without the other, except the
baseline of a schedule's first poll, stored as seen on purpose with no run.
"""

from __future__ import annotations

import builtins
import time

from lirun.hints import Any
from lirun.lifecycle import policy_for
from lirun.reasons import validate_reason
from lirun.store.records import decode_row, new_id, require_text
from lirun.store.repository import Repository
from lirun.store.rows import EventRow, ScheduleRunRow
from lirun.store.transitions import HistoryEntry

SOURCES = ("poll", "webhook", "chain")
OK_REASON = "schedule.poll.ok"
MAX_DETAIL = 2000
CHAIN_SLACK = 60.0  # seconds: a parent's end may commit after a later one's


class Events(Repository):
    """``store.events``: the events schedules saw and the runs they fired."""

    def record(
        self,
        *,
        schedule_id: str,
        event_key: str,
        event_json: str,
        source: str = "poll",
        action_kind: str | None = None,
        status: str = "queued",
        reason_code: str = "schedule.queued.created",
        reason_summary: str = "",
        chain_parent_id: str | None = None,
        chain_depth: int = 0,
    ) -> tuple[bool, str | None]:
        """Store the event if it is new: (True, the run it fired) when this call stored
        it, (False, None) when it was seen before. ``action_kind`` None stores it as a
        baseline (seen, nothing fired); otherwise its run (``status`` queued, or skipped
        with ``reason_code`` when a policy refused it) is inserted in the same
        transaction; a chain's names the parent run and its depth."""
        require_text(schedule_id=schedule_id, event_key=event_key)
        if source not in SOURCES:
            raise ValueError(f"event source {source!r}: expected one of {SOURCES}")
        now = time.time()
        run_id = new_id() if action_kind is not None else None
        policy = policy_for("schedule_run")
        if action_kind is not None:
            validate_reason(reason_code, policy.entity_type, status)
        event = {
            "schedule_id": schedule_id,
            "event_key": event_key,
            "source": source,
            "event_json": event_json,
            "now": now,
            "baseline": 1 if action_kind is None else 0,
            "schedule_run_id": run_id,
        }
        with self.connector.write() as tx:
            if tx.execute(self.sql("insert_event"), event) != 1:
                return False, None
            if run_id is None or action_kind is None:
                return True, None
            run = {
                "id": run_id,
                "schedule_id": schedule_id,
                "action_kind": action_kind,
                "status": status,
                "reason_code": reason_code,
                "reason_summary": reason_summary,
                "event_key": event_key,
                "event_json": event_json,
                "ended_at": now if status in policy.terminal else None,
                "now": now,
                "chain_parent_id": chain_parent_id,
                "chain_depth": int(chain_depth),
            }
            tx.execute(self.sql("insert_event_run"), run)
            entry = HistoryEntry(run_id, None, status, reason_code, reason_summary, source="system")
            self.store.append_transition(tx, policy, entry, now)
        return True, run_id

    def record_poll(self, schedule_id: str, *, reason: str, detail: str = "") -> None:
        """A poll's outcome (a ``schedule.poll.*`` code) as the schedule's last poll,
        and one more poll with that outcome in its counts (the metrics read them)."""
        validate_reason(reason)
        params = {"id": schedule_id, "now": time.time(), "reason": reason}
        params["detail"] = detail[:MAX_DETAIL]
        params["ok"] = 1 if reason == OK_REASON else 0
        with self.connector.write() as tx:
            tx.execute(self.sql("record_poll"), params)
            tx.execute(self.sql("count_poll"), params)

    def count(self, schedule_id: str) -> tuple[int, int]:
        """(events seen, events that fired a run) of the schedule: fired is queued a
        run, as ``lirun_schedule_events_fired`` counts, so neither a first poll's baseline
        nor an event whose run a policy skipped counts."""
        params = {"schedule_id": schedule_id}
        seen = self.connector.read(self.sql("count_events"), params)
        fired = self.connector.read(self.sql("count_event_runs"), params)
        return int(seen[0]["n"]), int(fired[0]["n"])

    def list(self, schedule_id: str, *, limit: int = 100) -> list[EventRow]:
        """The schedule's events, newest first."""
        params: dict[str, Any] = {"schedule_id": schedule_id, "limit": int(limit)}
        rows = self.connector.read(self.sql("list_events"), params)
        return [EventRow.from_row({**r, "baseline": bool(r["baseline"])}) for r in rows]

    def get(self, schedule_id: str, event_key: str) -> EventRow | None:
        """The schedule's event with this key, or None when it was never seen."""
        params = {"schedule_id": schedule_id, "event_key": event_key}
        rows = self.connector.read(self.sql("get_event"), params)
        return (
            EventRow.from_row({**rows[0], "baseline": bool(rows[0]["baseline"])}) if rows else None
        )

    def chain_event_parents(
        self, schedule_id: str, *, limit: int = 50
    ) -> builtins.list[ScheduleRunRow]:
        """The parent runs of the chain schedule's newest ``limit`` events (those still
        recorded), newest event first."""
        params: dict[str, Any] = {"schedule_id": schedule_id, "limit": int(limit)}
        rows = self.connector.read(self.sql("chain_event_parents"), params)
        return [ScheduleRunRow.from_row(decode_row(r)) for r in rows]

    def chain_parents(
        self,
        *,
        schedule_id: str,
        parent_id: str,
        statuses: tuple[str, ...],
        created: float,
        limit: int = 100,
    ) -> builtins.list[dict[str, Any]]:
        """The parent schedule's runs that ended in one of ``statuses``, were created at
        or after ``created`` (the chain schedule's creation) and fired no event of
        ``schedule_id`` yet, oldest end first: only those that ended since the newest
        parent already fired for (less a minute, for ends committed out of order)."""
        params: dict[str, Any] = {"schedule_id": schedule_id}
        newest = self.connector.read(self.sql("newest_chained_end"), params)[0]["t"]
        since = float(newest) - CHAIN_SLACK if newest is not None else 0.0
        params |= {
            "parent_id": parent_id,
            "since": since,
            "created": float(created),
            "completed": int("completed" in statuses),
            "failed": int("failed" in statuses),
            "cancelled": int("cancelled" in statuses),
            "limit": int(limit),
        }
        return [dict(r) for r in self.connector.read(self.sql("chain_parents"), params)]
