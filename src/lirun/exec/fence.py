"""A lease that fences: the owner's side of a lease its guard keeps (``exec/guard.py``).

An owner renews its lease in the database every so often; another owner may take over
its work once the lease *lapsed* (the database's expiry is older than the taker's clock).
For that takeover to be safe the old copy must already be stopped, whatever happened to
the owner (frozen, stopped, cut off, its database gone). ``Fence`` guarantees it:

- ``renewed(started)`` after each successful renewal whose write began at the monotonic
  time ``started``: the fence's deadline becomes ``started + lease - margin`` (the write
  set the expiry from a wall clock read after ``started``, so the deadline is always at
  least ``margin`` before the expiry any other owner sees, up to clock skew);
- the owner's guard process kills the owner's work (its runs' trees and its process
  tree) at the deadline when no renewal came, without the owner's threads or the
  database;
- ``lost()`` tells the owner itself: past the deadline it cannot prove the lease is its
  own, so it stops its work and claims nothing until a renewal succeeds again.

``margin_for(lease)`` is a quarter of the lease: the guarantee holds while the clocks of
the hosts sharing a database differ by less than an eighth of the lease (the other eighth
covers the kill and a late wake-up). See docs/queue.md.
"""

from __future__ import annotations

import itertools
import threading
import time

from lirun.exec import guard

__all__ = ["Fence", "fence_for_owner", "margin_for"]

# After a lapse, how long a renewal waits before the owner starts work again: the
# guard, killing at that moment, reads the renewal within a tick of its own.
SETTLE_SECONDS = 0.5

# Fences held in this process: an owner inside another (a flow run by ``li worker``) is
# covered by the outer one, whose deadline kills the same work.
_active: set[Fence] = set()
_active_lock = threading.Lock()
_ids = itertools.count(1)


def margin_for(lease_seconds: float) -> float:
    """How long before the lease's expiry the owner's work is stopped."""
    return lease_seconds / 4


class Fence:
    """``fence = Fence(lease); fence.start(); ... fence.renewed(t0) ...; fence.close()``."""

    def __init__(self, lease_seconds: float, *, margin: float | None = None) -> None:
        if lease_seconds <= 0:
            raise ValueError(f"a lease must be positive, got {lease_seconds!r}")
        self.lease = float(lease_seconds)
        self.margin = margin_for(self.lease) if margin is None else float(margin)
        self.deadline = time.monotonic() + self.lease - self.margin
        self.lapses: list[float] = []  # deadlines that passed with no renewal
        self.quiet_until = 0.0
        self.id = next(_ids)
        self.armed = False
        self._lock = threading.Lock()

    # -- the guard ---------------------------------------------------------------------

    def start(self, *, started: float | None = None) -> Fence:
        """Arm the guard's deadline from ``started`` (the lease's first write; now)."""
        self.deadline = (time.monotonic() if started is None else started) + (
            self.lease - self.margin
        )
        self.armed = True
        began = self.deadline - (self.lease - self.margin)
        # A guard that cannot start: lost() still stops the work.
        guard.renew(self.id, self.deadline, began)
        with _active_lock:
            _active.add(self)
        return self

    def close(self) -> None:
        """The owner ended its work itself: the guard forgets the deadline, kills nothing."""
        with _active_lock:
            _active.discard(self)
        if self.armed:
            self.armed = False
            guard.release(self.id)

    def __enter__(self) -> Fence:
        return self if self.armed else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the owner's side --------------------------------------------------------------

    def renewed(self, started: float) -> None:
        """A renewal whose write began at monotonic ``started`` succeeded."""
        with self._lock:
            now = time.monotonic()
            if now >= self.deadline:
                self.lapses.append(self.deadline)
                # The guard may be killing right now: nothing new starts before it has
                # read this renewal.
                self.quiet_until = now + SETTLE_SECONDS
            self.deadline = max(self.deadline, started + self.lease - self.margin)
            deadline = self.deadline
        if self.armed:
            guard.renew(self.id, deadline, started)

    def lost(self) -> bool:
        """Past the deadline (or just back from it): the owner cannot prove its lease is
        still its own, and starts nothing."""
        now = time.monotonic()
        return now >= self.deadline or now < self.quiet_until

    def expired(self) -> bool:
        """Past the deadline: the guard is killing the owner's work."""
        return time.monotonic() >= self.deadline

    def lapsed_since(self, since: float, *, until: float | None = None) -> bool:
        """Whether the lease was lost at any moment from monotonic ``since`` on (up to
        ``until``, when given)."""
        end = time.monotonic() if until is None else until
        with self._lock:
            now_lost = self.expired() and self.deadline <= end
            return now_lost or any(since <= at <= end for at in self.lapses)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


def fence_for_owner(lease_seconds: float) -> Fence | None:
    """A started fence for an owner (a flow, a show) of this process, or None when a
    fence already guards this process's tree (``li worker`` running the flow)."""
    with _active_lock:
        if _active:
            return None
    return Fence(lease_seconds).start()
