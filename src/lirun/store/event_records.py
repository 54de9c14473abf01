"""Events that start schedule runs, ``store.events`` (SQL in ``sql/common/events.sql``).

An event (a polled item, a webhook delivery, a chain's parent run: ``source``) is
stored once per (schedule, key) by the unique key of ``schedule_events``: of any number
of workers that see it, exactly one inserts it. The run it fires is inserted in the same
transaction, so a worker that dies between seeing an event and firing it leaves neither
(the next poll finds it new again), and never one without the other, except the
baseline of a schedule's first poll, stored as seen on purpose with no run.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lirun.hints import TYPE_CHECKING, Any, NamedTuple
from lirun.lifecycle import policy_for
from lirun.reasons import validate_reason
from lirun.store.records import decode_row, new_id, require_text
from lirun.store.repository import Repository
from lirun.store.rows import EventRow, ScheduleRunRow
from lirun.store.transitions import HistoryEntry

if TYPE_CHECKING:
    from typing import NotRequired, TypedDict, Unpack

    from lirun.store.connector import Tx

    class EventFields(TypedDict):
        """``EventBatch.record``'s arguments, which ``Events.record`` passes on."""

        schedule_id: str
        event_key: str
        event_json: str
        source: NotRequired[str]
        action_kind: NotRequired[str | None]
        status: NotRequired[str]
        reason_code: NotRequired[str]
        reason_summary: NotRequired[str]
        chain_parent_id: NotRequired[str | None]
        chain_depth: NotRequired[int]
        subject_key: NotRequired[str | None]
        overlap: NotRequired[OverlapRule | None]


SOURCES = ("poll", "webhook", "chain")
OK_REASON = "schedule.poll.ok"
MAX_DETAIL = 2000
CHAIN_SLACK = 60.0  # seconds: a parent's end may commit after a later one's


class Recorded(NamedTuple):
    """What ``record`` did: ``stored`` False when the event was seen before (then
    nothing else); the run it fired (None for a baseline) and that run's ``status``."""

    stored: bool
    run_id: str | None
    status: str | None = None


# Given the oldest active run about the same subject, the (reason code, summary) that
# skips the new run, or None to queue it anyway: the schedule's --overlap decision.
OverlapRule = Callable[[str], tuple[str, str] | None]


class Events(Repository):
    """``store.events``: the events schedules saw and the runs they fired."""

    def record(self, **event: Unpack[EventFields]) -> Recorded:
        """Store the event if it is new: stored, the run it fired and its status when
        this call stored it, ``Recorded(False, None)`` when it was seen before.
        ``action_kind`` None stores it as a baseline (seen, nothing fired); otherwise its
        run (``status`` queued, or skipped with ``reason_code`` when a policy refused it)
        is inserted in the same transaction; a chain's names the parent run and its
        depth. The run is about ``subject_key`` (default: the event key); with
        ``overlap``, a run that would be queued while another run of the schedule about
        the same subject is active is stored as ``overlap`` decides, the check and the
        insert serialized per subject, so of two concurrent events one sees the other."""
        with self.batch() as batch:
            return batch.record(**event)

    @contextmanager
    def batch(self) -> Iterator[EventBatch]:
        """Several ``record`` calls in one transaction (a poll's many new items): all of
        them are committed when the block ends, or none (an error, the worker dying), and
        their runs are to be offered only after the block."""
        with self.connector.write() as tx:
            yield EventBatch(self, tx)

    def _overlapping(
        self, tx: Tx, schedule_id: str, subject: str, overlap: OverlapRule
    ) -> tuple[str, str] | None:
        """``overlap``'s decision on the oldest active run about ``subject``, read under
        the subject's lock (PostgreSQL; SQLite's write lock is the database's)."""
        params = {"schedule_id": schedule_id, "subject_key": subject}
        tx.query(self.sql("event_subject_lock"), params)
        terminal = self.connector.bind_list(sorted(policy_for("schedule_run").terminal))
        active = tx.query(self.sql("active_subject_run"), {**params, "terminal": terminal})
        return overlap(str(active[0]["id"])) if active else None

    def queue_retry(self, run: ScheduleRunRow, *, attempt: int) -> ScheduleRunRow:
        """Attempt ``attempt`` of ``run``, an event's run (``store.schedules.queue_retry``
        calls it): queued, linked by ``retry_of``, with the event (key and JSON), chain
        parent and depth of ``run``, its claims counting on from ``run``'s."""
        policy = policy_for("schedule_run")
        reason = "schedule.queued.created"
        now = time.time()
        retry_id = new_id()
        params: dict[str, Any] = {
            "id": retry_id,
            "schedule_id": run.schedule_id,
            "action_kind": run.action_kind,
            "attempt": int(attempt),
            "retry_of": run.id,
            "reason_code": reason,
            "event_key": run.event_key,
            "event_json": run.event_json,
            "now": now,
            "lease_epoch": int(run.lease_epoch or 0),
            "chain_parent_id": run.chain_parent_id,
            "chain_depth": int(run.chain_depth or 0),
            "subject_key": run.subject_key,
        }
        with self.connector.write() as tx:
            tx.execute(self.sql("insert_event_retry"), params)
            entry = HistoryEntry(retry_id, None, "queued", reason, "", source="system")
            self.store.append_transition(tx, policy, entry, now)
            made = tx.query(self.sql("get_row", table=policy.table), {"id": retry_id})
        return ScheduleRunRow.from_row(decode_row(made[0]))

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


class EventBatch:
    """``Events.record`` inside one open write transaction (``Events.batch``)."""

    def __init__(self, events: Events, tx: Tx) -> None:
        self.events, self.tx = events, tx

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
        subject_key: str | None = None,
        overlap: OverlapRule | None = None,
    ) -> Recorded:
        """``Events.record``, committed with the batch."""
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
        subject = subject_key if subject_key is not None else event_key
        tx = self.tx
        if tx.execute(self.events.sql("insert_event"), event) != 1:
            return Recorded(False, None)
        if run_id is None or action_kind is None:
            return Recorded(True, None)
        if overlap is not None and status == "queued":
            refused = self.events._overlapping(tx, schedule_id, subject, overlap)
            if refused is not None:
                status, (reason_code, reason_summary) = "skipped", refused
                validate_reason(reason_code, policy.entity_type, status)
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
            "subject_key": subject,
        }
        tx.execute(self.events.sql("insert_event_run"), run)
        entry = HistoryEntry(run_id, None, status, reason_code, reason_summary, source="system")
        self.events.store.append_transition(tx, policy, entry, now)
        return Recorded(True, run_id, status)
