"""Pure decisions of the run path (table-tested without a database).

- ``run_outcome``: the schedule run's status and reason from its execution's.
- ``start_refusal``: why a queued run must not start (start deadline, --allow-root, a
  missing or changed file), from facts the runner gathered.
- ``should_retry``: whether an ended run gets a new attempt.
- ``notify_env``: the environment ``--notify CMD`` runs with (the wait line's fields).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from lirun.exec.lease_note import LeaseNote
from lirun.reasons import RETRYABLE_RUN_REASONS, reason_fits_status
from lirun.record.reap_schedule_runs import EXECUTION_LAPSED, LEASE_LAPSED
from lirun.store.rows import ScheduleRunRow

START_DEADLINE = "schedule.failed.start_deadline"
CWD_REFUSED = "schedule.failed.cwd_not_allowed"
FILE_CHANGED = "schedule.failed.file_changed"
FILE_MISSING = "schedule.failed.file_missing"
WORKER_STOPPED = "schedule.cancelled.worker_stopped"
LEASE_LOST = "schedule.cancelled.lease_lost"
SUPERSEDED = "schedule.cancelled.superseded"
# Reasons that say "the same run may succeed if tried again": transient provider failures
# and a worker that lost its lease (lapsed: failed by another; lost: stopped by its own).
RETRYABLE = RETRYABLE_RUN_REASONS | {LEASE_LAPSED, LEASE_LOST}


class Outcome(NamedTuple):
    status: str
    reason_code: str
    summary: str
    exit_code: int | None = None  # the execution's, as ``li`` would exit
    # time.monotonic() when the execution's child was last watched (None: when the call
    # returned): whether a lost lease stopped the work, or it ended before the lapse
    work_ended: float | None = None
    # The owner's guard's note when the lease lapsed while the work was watched
    lapse: LeaseNote | None = None


def run_outcome(
    status: str, reason: str | None, summary: str = "", *, stopped_by: str | None = None
) -> Outcome:
    """completed → completed; completed_empty and failed → failed (keeping the
    execution's reason where it fits ``failed``; an execution a reaper failed because the
    worker's lease lapsed: ``schedule.failed.lease_lapsed``, as the reaper fails the run);
    timed_out → timed_out; aborted and cancelled → cancelled (``stopped_by``: the worker's
    own reason when it stopped the execution, its grace run out or its lease lost)."""
    if status == "completed":
        return Outcome("completed", "schedule.completed.ok", summary)
    if status == "timed_out":
        code = reason if reason and reason_fits_status(reason, "timed_out") else None
        return Outcome("timed_out", code or "schedule.timed_out.deadline", summary)
    if status in ("aborted", "cancelled"):
        if stopped_by is not None:
            return Outcome("cancelled", stopped_by, summary or f"execution {reason}")
        code = reason if reason and reason_fits_status(reason, "cancelled") else None
        return Outcome("cancelled", code or "schedule.cancelled.user", summary)
    if status == "completed_empty":
        return Outcome("failed", "schedule.failed.completed_empty", summary or str(reason))
    if reason == EXECUTION_LAPSED:  # the run is failed for the same cause as its execution
        return Outcome("failed", LEASE_LAPSED, summary or "its worker's lease lapsed")
    code = reason if reason and reason_fits_status(reason, "failed") else None
    if code is None or not (code.startswith("run.") or code.startswith("schedule.")):
        text = f"execution ended {status} ({reason})"
        return Outcome("failed", "schedule.failed.action", summary or text)
    return Outcome("failed", code, summary)


def inside(path: str, roots: tuple[str, ...]) -> bool:
    """True when ``path`` is one of ``roots`` or below one (real paths compared)."""
    real = os.path.realpath(path)
    for root in roots:
        top = os.path.realpath(root)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return True
    return False


class StartFacts(NamedTuple):
    now: float
    queued_at: float
    start_deadline: float
    cwd: str
    cwd_exists: bool
    allow_roots: tuple[str, ...]  # empty: any directory
    file: str | None = None
    file_sha256: str | None = None  # the digest now; None when the file cannot be read
    snapshot_sha256: str | None = None


def start_refusal(facts: StartFacts) -> tuple[str, str] | None:
    """(reason code, summary) when the run must fail instead of starting, else None."""
    late = facts.now - facts.queued_at
    if late > facts.start_deadline:
        return START_DEADLINE, (
            f"queued {late:.0f}s ago; its start deadline is {facts.start_deadline:.0f}s"
        )
    if facts.allow_roots and not inside(facts.cwd, facts.allow_roots):
        return CWD_REFUSED, (
            f"cwd {facts.cwd} is outside this worker's --allow-root "
            f"({', '.join(facts.allow_roots)})"
        )
    if not facts.cwd_exists:
        return FILE_MISSING, f"cwd {facts.cwd} does not exist on this worker"
    if facts.file is not None:
        if facts.file_sha256 is None:
            return FILE_MISSING, f"{facts.file} does not exist or cannot be read on this worker"
        if facts.snapshot_sha256 and facts.file_sha256 != facts.snapshot_sha256:
            return FILE_CHANGED, (
                f"{facts.file} changed since the schedule was added "
                f"(sha256 {facts.snapshot_sha256[:12]}… → {facts.file_sha256[:12]}…); "
                "add or apply it again"
            )
    return None


def should_retry(status: str, reason: str, attempt: int, retries: int) -> bool:
    """A new attempt for a run that ended with a reason a retry may fix (a rate limit, an
    overload, a server or network error, a stall, a timeout while the provider was
    retrying, a lapsed lease, or a run its worker stopped when it lost its lease), while
    attempts remain (attempt 1 is the first run; ``retries`` new attempts follow at most).
    A refused login or a rejected request is never retried: it would fail the same way."""
    stopped = status == "cancelled" and reason == LEASE_LOST  # its work did not finish
    ended = status in ("failed", "timed_out") or stopped
    return ended and reason in RETRYABLE and attempt <= retries


def notify_env(
    run: ScheduleRunRow, *, schedule: str | None, artifact_dir: str | None
) -> dict[str, str]:
    """The wait line's fields (and the schedule's name) as ``LIRUN_*`` variables."""
    exit_code = run.exit_code
    status = str(run.status)
    reason = str(run.status_reason_code or "unknown")
    line = (
        f"{run.id}\tstatus={status}\treason={reason}\tartifact_dir={artifact_dir or '-'}"
        f"\texit_code={'-' if exit_code is None else int(exit_code)}"
    )
    return {
        "LIRUN_RUN_ID": run.id,
        "LIRUN_STATUS": status,
        "LIRUN_REASON": reason,
        "LIRUN_REASON_SUMMARY": str(run.status_reason_summary or ""),
        "LIRUN_ARTIFACT_DIR": artifact_dir or "",
        "LIRUN_EXIT_CODE": "" if exit_code is None else str(int(exit_code)),
        "LIRUN_SUCCESS": "1" if status == "completed" else "0",
        "LIRUN_SCHEDULE": schedule or "",
        "LIRUN_WAIT_LINE": line,
    }
