"""The fence of a run's lease: a token the work a worker starts can check before it
commits a side effect (docs/queue.md, "At most one copy running").

A worker claims a schedule run by compare-and-set; the claim's epoch (``lease_epoch``)
is one higher than the run's before it, and a retry counts on from the run it retries.
The work gets ``LIRUN_FENCE=<run id>:<epoch>:<worker id>`` in its environment (opaque
to it). ``li lease check`` asks the database whether that lease is still the current
one: the run still ``running`` under that epoch and that worker, its expiry in the
future by the database's own clock. A copy of the work that outlived its lease (its
whole worker was frozen, guard and all, and another worker took the run over) learns it
there and commits nothing. The worker id tells two claims of one epoch apart: a failover
that lost a claim leaves the run ``queued`` under the epoch before it, so the next claim
gets the lost one's epoch again (from another worker: a worker never claims a run it
has in hand). A token without a worker id (``<run id>:<epoch>``, as workers before it
set) is judged by its epoch alone.

``parse`` reads a token, ``judge`` is the pure decision over what the database holds,
``check`` gathers that and judges.
"""

from __future__ import annotations

from dataclasses import dataclass

from lirun.errors import DatabaseError, UsageError
from lirun.settings import FENCE_ENV
from lirun.store import Store
from lirun.store.rows import RunLeaseRow

__all__ = [
    "CANNOT_TELL",
    "CURRENT",
    "NOT_CURRENT",
    "Fence",
    "Verdict",
    "check",
    "judge",
    "parse",
    "token",
]

# What `li lease check` exits with for each verdict (2 is a usage error: no or a bad token).
CURRENT = 0
NOT_CURRENT = 1
CANNOT_TELL = 3  # the database did not answer: never 0


@dataclass(frozen=True, slots=True)
class Fence:
    """A parsed token: the run, the epoch and the worker of the claim that started the
    work (``worker``: None in a token that names none)."""

    run_id: str
    epoch: int
    worker: str | None = None

    def __str__(self) -> str:
        return token(self.run_id, self.epoch, self.worker)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the lease is current (``code``: ``CURRENT``, ``NOT_CURRENT`` or
    ``CANNOT_TELL``), with the one line that says why."""

    code: int
    line: str

    @property
    def current(self) -> bool:
        return self.code == CURRENT


def token(run_id: str, epoch: int, worker: str | None = None) -> str:
    """The ``LIRUN_FENCE`` value of run ``run_id`` claimed at ``epoch`` by ``worker``."""
    return f"{run_id}:{int(epoch)}" + (f":{worker}" if worker else "")


def parse(text: str | None) -> Fence:
    """The fence ``text`` names; UsageError (exit 2) when there is none or it is not one.
    The last field is the worker id unless it is all digits (a worker id never is: then
    it is the epoch of a token that names no worker)."""
    if text is None or not text.strip():
        raise UsageError(
            f"no fence: {FENCE_ENV} is not set (only work a worker runs has one, a plain "
            "li run has none); give --fence TOKEN"
        )
    head, sep, last = text.strip().rpartition(":")
    worker = None
    if sep and last and not last.isdigit():
        worker = last
        head, sep, last = head.rpartition(":")
    if not sep or not head or not last.isdigit() or int(last) < 1:
        raise UsageError(
            f"not a fence: {text.strip()!r}; a fence is RUN_ID:EPOCH:WORKER_ID as a worker "
            f"sets it in {FENCE_ENV}"
        )
    return Fence(head, int(last), worker)


def judge(fence: Fence, lease: RunLeaseRow | None) -> Verdict:
    """Whether ``fence`` is the current lease of its run, given what the database holds
    (``lease``: None when it has no such run)."""
    run = fence.run_id
    if lease is None:
        return Verdict(NOT_CURRENT, f"not current: no run {run} in this database")
    if lease.status == "queued":  # a failover lost the claim this fence names
        return Verdict(NOT_CURRENT, f"taken over: run {run} is queued again, its claim lost")
    if lease.status != "running":
        reason = f"{lease.status} ({lease.status_reason_code})"
        retry = f"; retried as {lease.retried_by}" if lease.retried_by else ""
        if lease.status_reason_code == "schedule.failed.lease_lapsed":
            return Verdict(
                NOT_CURRENT,
                f"taken over: another worker ended run {run} once its lease lapsed: "
                f"{reason}{retry}",
            )
        return Verdict(NOT_CURRENT, f"run ended: run {run} is {reason}{retry}")
    if lease.lease_epoch != fence.epoch:
        return Verdict(
            NOT_CURRENT,
            f"taken over: run {run} runs under epoch {lease.lease_epoch} now, not {fence.epoch}",
        )
    if fence.worker is not None and lease.worker_id != fence.worker:
        # The claim of this epoch was lost in a failover and the run claimed again.
        return Verdict(
            NOT_CURRENT,
            f"taken over: run {run} epoch {fence.epoch} is worker {lease.worker_id}'s claim "
            f"now, not worker {fence.worker}'s",
        )
    expires = lease.lease_expires_at
    if expires is None or expires <= lease.db_now:
        ago = f" {lease.db_now - expires:.1f}s ago" if expires is not None else ""
        return Verdict(
            NOT_CURRENT,
            f"lapsed: the lease of run {run} expired{ago} by the database's clock and "
            "was not renewed",
        )
    return Verdict(
        CURRENT,
        f"current: run {run} epoch {fence.epoch}, its lease expires in "
        f"{expires - lease.db_now:.1f}s",
    )


def check(store: Store, fence: Fence) -> Verdict:
    """Ask ``store`` about ``fence``; ``CANNOT_TELL`` when the database does not answer."""
    try:
        lease = store.workers.lease_of(fence.run_id)
    except DatabaseError as exc:
        return cannot_tell(exc)
    return judge(fence, lease)


def cannot_tell(exc: Exception) -> Verdict:
    """The verdict when the database could not be opened or read."""
    return Verdict(CANNOT_TELL, f"cannot tell: the database did not answer ({exc})")
