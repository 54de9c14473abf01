"""Schedule runs whose worker stopped renewing its lease: the run and the executions it
produced end ``failed``. One code path for a worker's reaper (any run whose lease lapsed)
and a lone ``li wait`` (a lapsed lease whose worker is provably dead on this host), so a
waiter with no worker left to reap does not wait forever.

A run ended here is retried as a worker's reaper retries it (attempt n+1 while
``--retries`` allows: ``schedule.failed.lease_lapsed`` is retryable). ``--notify`` is a
worker's to run: a waiter never runs a command it read from the database, and says so
in the run's summary.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from typing import Any

from lirun.errors import LirunError
from lirun.liveness import ORPHANED
from lirun.record.reap import Running, judge, local_facts, reap_sessions
from lirun.store.core import Store
from lirun.store.rows import ScheduleRunRow

LEASE_LAPSED = "schedule.failed.lease_lapsed"
# Its executions, failed with it (the worker that ran them may still record its run).
EXECUTION_LAPSED = "session.failed.lease_lapsed"
START_DEADLINE = "schedule.failed.start_deadline"
DEFAULT_START_DEADLINE = 3600.0  # seconds, as schedules.definition's


def fail_lapsed_run(store: Store, run: ScheduleRunRow, summary: str) -> bool:
    """Fail ``run`` (``running`` → ``failed``, ``schedule.failed.lease_lapsed``) after
    its executions; True for the one writer that won the compare-and-set."""
    # Its executions first: once the run reads failed, nothing it made is running.
    session_ids = store.schedules.running_sessions_of_run(run)
    if session_ids:
        # Those whose owner is provably dead (this host, the process gone) are reaped as
        # li reap does, which also stops the process group they left behind.
        reap_sessions(store, session_ids)
    for session_id in session_ids:
        _fail_execution(store, "session", session_id, summary)
    if run.invocation_id:
        _fail_execution(store, "invocation", run.invocation_id, summary)
    return store.update_status(
        "schedule_run",
        run.id,
        new_status="failed",
        reason_code=LEASE_LAPSED,
        reason_summary=summary,
        source="system",
        expected_statuses={"running"},
    )


def _fail_execution(store: Store, kind: str, entity_id: str, summary: str) -> None:
    with contextlib.suppress(LirunError):  # ended meanwhile by its own writer
        store.update_status(
            kind,
            entity_id,
            new_status="failed",
            reason_code=EXECUTION_LAPSED,
            reason_summary=summary,
            source="system",
            expected_statuses={"running"},
        )


def reap_dead_worker_runs(
    store: Store, rows: Iterable[Running], *, now: float | None = None
) -> list[str]:
    """For a waiter: fail each running schedule run of ``rows`` (``wait_fetch`` rows: its
    worker's process facts, ``heartbeat_at``, ``lease_seconds``) whose lease lapsed and
    whose worker is provably dead, and queue its retry; returns the ids it ended."""
    facts = local_facts(now)
    ended = []
    for row in rows:
        if row.status != "running" or row.heartbeat_at is None:
            continue
        if facts.now <= float(row.heartbeat_at) + float(row.lease_seconds or 0):
            continue  # the lease holds: a live worker may still renew it
        verdict = judge(row, facts)
        if verdict is None or verdict.reason_code != ORPHANED:
            continue  # not provably dead (another host): its lease is a worker's to judge
        run = store.schedules.get_run(row.id)
        expires = float((run.lease_expires_at if run else None) or 0)
        if run is None or run.status != "running" or expires >= facts.now:
            continue  # renewed or ended meanwhile
        summary = (
            f"worker {run.worker_id} is gone ({verdict.summary}) and its lease "
            f"expired {facts.now - expires:.1f}s ago; ended by li wait (pid {os.getpid()}), "
            "which runs no --notify"
        )
        if fail_lapsed_run(store, run, summary):
            ended.append(run.id)
            if int(run.attempt or 1) <= _retries(store, run):
                store.schedules.queue_retry(run)
    return ended


def fail_past_start_deadline(store: Store, run: ScheduleRunRow, now: float) -> bool:
    """Fail a ``queued`` run not started within its start deadline (its schedule's, or an
    ad-hoc run's own ``--start-deadline``, default 1 h); True for the one writer that won
    the compare-and-set. A worker's reaper and a waiter both call it, so a queued run
    ends at its deadline even when no worker is left to claim it."""
    if not _past_deadline(store, run, now):
        return False
    deadline = _deadline(store, run)
    late = now - run.created_at
    return store.update_status(
        "schedule_run",
        run.id,
        new_status="failed",
        reason_code=START_DEADLINE,
        reason_summary=f"queued {late:.0f}s ago; its start deadline is {deadline:.0f}s",
        source="system",
        expected_statuses={"queued"},
    )


def expired_queued_runs(
    store: Store, rows: Iterable[Running], *, now: float
) -> list[ScheduleRunRow]:
    """For a waiter (reads only): the queued schedule runs of ``rows`` past their start
    deadline, to end with ``fail_past_start_deadline``."""
    found = []
    for row in rows:
        run = store.schedules.get_run(row.id)
        if run is not None and run.status == "queued" and _past_deadline(store, run, now):
            found.append(run)
    return found


def start_deadline_of(policies: dict[str, Any]) -> float:
    """A run's start deadline in seconds from its stored policies (``run_policies``)."""
    return float(policies.get("start_deadline") or DEFAULT_START_DEADLINE)


def run_policies(
    schedule_id: str | None,
    schedule_policies: dict[str, Any] | None,
    action: dict[str, Any] | None,
) -> dict[str, Any]:
    """A run's policies as stored: its schedule's, or an ad-hoc run's own (kept in its
    action by ``li submit``)."""
    if schedule_id:
        return dict(schedule_policies or {})
    return dict((action or {}).get("policies") or {})


def _deadline(store: Store, run: ScheduleRunRow) -> float:
    return start_deadline_of(_policies(store, run))


def _past_deadline(store: Store, run: ScheduleRunRow, now: float) -> bool:
    return now - run.created_at > _deadline(store, run)


def _policies(store: Store, run: ScheduleRunRow) -> dict[str, Any]:
    """The run's policies as stored: its schedule's, or an ad-hoc run's own."""
    schedule = store.schedules.get_by_id(run.schedule_id) if run.schedule_id else None
    stored = schedule.policies_json if schedule else None
    return run_policies(run.schedule_id, stored, run.action_json)


def _retries(store: Store, run: ScheduleRunRow) -> int:
    """The run's ``--retries``."""
    return int(_policies(store, run).get("retries") or 0)
