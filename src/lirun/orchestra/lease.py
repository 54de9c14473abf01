"""The lease of an orchestration's owner (a flow's, a show's) and the fence that keeps it.

The owner renews its lease in the database (a flow from a heartbeat thread, a show from
its loop, which must learn at once when the show is no longer its own). Each renewal
feeds the owner's fence (``exec/fence.py``): when renewals stop, the owner's guard
process kills its executions before the lease lapses, whatever became of the owner, so
another owner may take the work over safely. An owner whose lease lapsed, even if
renewed since, stops its executions and ends as one that lost its work (``lapsed``).
When a fence already guards this process (``li worker`` running the flow), that outer
fence kills the same work and the owner holds none of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from lirun.exec.fence import Fence, fence_for_owner
from lirun.exec.heartbeat import Heartbeat
from lirun.liveness import DEFAULT_LEASE_SECONDS, HEARTBEAT_INTERVAL

__all__ = ["OwnerLease"]


class OwnerLease:
    """``lease = OwnerLease.take()``; ``lease.renewed(t0)`` after each renewal (or a
    ``heartbeat`` that renews); ``lease.lapsed()`` asked every tick; ``lease.close()``."""

    def __init__(self, fence: Fence | None) -> None:
        self.fence = fence  # None: another fence in this process covers the work

    @classmethod
    def take(cls, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> OwnerLease:
        """The lease with its fence armed now (before the owner's first execution)."""
        return cls(fence_for_owner(lease_seconds))

    def renewed(self, started: float) -> None:
        """A renewal whose write began at monotonic ``started`` succeeded."""
        if self.fence is not None:
            self.fence.renewed(started)

    def lapsed(self) -> bool:
        """Whether the lease lapsed at any moment: the guard killed (or is killing) the
        owner's executions, and another owner may have taken the work over."""
        return self.fence is not None and self.fence.lapsed_since(0.0)

    def heartbeat(
        self, beat: Callable[[], None], interval: float = HEARTBEAT_INTERVAL
    ) -> Heartbeat:
        """A heartbeat thread (not started) whose every successful ``beat`` renews it."""
        return Heartbeat(beat, interval, fence=self.fence)

    def close(self) -> None:
        """The owner ended its work itself: its guard kills nothing."""
        if self.fence is not None:
            self.fence.close()
