"""The store's rows for schedules, their runs and the workers that take them (see
``lirun.store.rows``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lirun.hints import Any
from lirun.store.rows.base import TypedRow

__all__ = [
    "AttentionQueuedRunRow",
    "EventRow",
    "RunLeaseRow",
    "ScheduleRow",
    "ScheduleRunRow",
    "WorkerRow",
]


class WorkerRow(TypedRow):
    """A ``workers`` row (a process that fires schedules and runs queued runs), with
    ``running``: the ids of the schedule runs it holds (derived, not a column)."""

    id: str
    host: str
    pid: int
    process_start_time: float | None
    boot_id: str | None
    started_at: float
    heartbeat_at: float
    stopped_at: float | None
    concurrency: int
    transport: str
    lease_seconds: float
    running: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, row: Mapping[str, Any], running: Sequence[str] = ()) -> WorkerRow:
        """The worker of one ``workers`` row and the runs it holds."""
        return cls(
            id=str(row["id"]),
            host=str(row["host"]),
            pid=int(row["pid"]),
            process_start_time=row["process_start_time"],
            boot_id=row["boot_id"],
            started_at=float(row["started_at"]),
            heartbeat_at=float(row["heartbeat_at"]),
            stopped_at=row["stopped_at"],
            concurrency=int(row["concurrency"]),
            transport=str(row["transport"]),
            lease_seconds=float(row["lease_seconds"]),
            running=tuple(running),
        )

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict (``running`` a list), as JSON outputs show it."""
        return {**self._asdict(), "running": list(self.running)}


class ScheduleRow(TypedRow):
    """A ``schedules`` row: one definition (its JSON columns decoded) and its status."""

    id: str
    name: str
    spec: str | None
    action_kind: str
    action_json: Any
    enabled: int
    created_at: float
    updated_at: float
    status: str | None
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    trigger_json: Any
    policies_json: Any
    tz: str | None
    next_due_at: int | None
    deleted_at: float | None
    last_poll_at: float | None  # a poll trigger's last poll (migration 0013)
    last_poll_reason: str | None
    last_poll_detail: str | None
    last_poll_ok_at: float | None


class ScheduleRunRow(TypedRow):
    """A ``schedule_runs`` row: one run of a schedule (or of ``li submit``), the lease of
    the worker running it and what it produced (its action JSON decoded)."""

    id: str
    schedule_id: str | None
    invocation_id: str | None
    action_kind: str
    attempt: int
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    created_at: float
    updated_at: float
    due_at: int | None
    retry_of: str | None
    session_id: str | None
    worker_id: str | None
    lease_expires_at: float | None
    heartbeat_at: float | None
    show_id: str | None
    action_json: Any
    idempotency_key: str | None  # li submit --key (migration 0011)
    lease_epoch: int  # how many times it was claimed, counted on from the run it retries
    event_key: str | None  # the event it is for (migration 0013)
    event_json: str | None
    chain_parent_id: str | None  # the run whose end fired it (migration 0014)
    chain_depth: int  # its parent's + 1; 0 for a run no chain fired
    subject_key: str | None  # what its event is about, for --overlap (migration 0016)


class EventRow(TypedRow):
    """A ``schedule_events`` row (migration 0013): an event a schedule saw, and the run
    it fired (``schedule_run_id`` None for the baseline of a first poll)."""

    schedule_id: str
    event_key: str
    source: str
    event_json: str | None
    seen_at: float
    baseline: bool
    schedule_run_id: str | None


class RunLeaseRow(TypedRow):
    """A run's lease as ``li lease check`` judges a fence by it: the run's status, the
    epoch of its claim, its expiry and the database's clock when it was read
    (``db_now``, epoch seconds), with the run that retries it, if any."""

    status: str
    status_reason_code: str | None
    lease_epoch: int
    lease_expires_at: float | None
    worker_id: str | None
    db_now: float
    retried_by: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], retried_by: str | None = None) -> RunLeaseRow:
        expires = row["lease_expires_at"]
        return cls(
            status=str(row["status"]),
            status_reason_code=row["status_reason_code"],
            lease_epoch=int(row["lease_epoch"] or 0),
            lease_expires_at=None if expires is None else float(expires),
            worker_id=row["worker_id"],
            db_now=float(row["db_now"]),
            retried_by=retried_by,
        )


class AttentionQueuedRunRow(TypedRow):
    """A queued run no worker has claimed, with its schedule's name and policies
    (``policies_json``) and its action (``attention_rows``)."""

    id: str
    schedule_id: str | None
    schedule_name: str | None
    created_at: float
    action_json: dict[str, Any] | None
    policies_json: dict[str, Any] | None
