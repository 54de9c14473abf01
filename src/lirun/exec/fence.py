"""A lease that fences: the owner's side of the lease watchdog (``exec/watchdog.py``).

An owner renews its lease in the database every so often; another owner may take over
its work once the lease *lapsed* (the database's expiry is older than the taker's clock).
For that takeover to be safe the old copy must already be stopped, whatever happened to
the owner (frozen, stopped, cut off, its database gone). ``Fence`` guarantees it:

- ``renewed(started)`` after each successful renewal whose write began at the monotonic
  time ``started``: the fence's deadline becomes ``started + lease - margin`` (the write
  set the expiry from a wall clock read after ``started``, so the deadline is always at
  least ``margin`` before the expiry any other owner sees, up to clock skew);
- the watchdog process kills the owner's process tree at the deadline when no renewal
  came, without the owner's threads or the database;
- ``lost()`` tells the owner itself: past the deadline it cannot prove the lease is its
  own, so it stops its work and claims nothing until a renewal succeeds again.

``margin_for(lease)`` is a quarter of the lease: the guarantee holds while the clocks of
the hosts sharing a database differ by less than an eighth of the lease (the other eighth
covers the kill and a late wake-up). See docs/queue.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

__all__ = ["Fence", "fence_for_owner", "margin_for"]

# After a lapse, how long a renewal waits before the owner starts work again: the
# watchdog, killing at that moment, reads the renewal within a tick of its own.
SETTLE_SECONDS = 0.5

# Fences whose watchdog runs in this process: an owner inside another (a flow run by
# ``li worker``) is covered by the outer one, whose watchdog kills the same tree.
_active: set[Fence] = set()
_active_lock = threading.Lock()


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
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    # -- the watchdog ------------------------------------------------------------------

    def start(self, *, started: float | None = None) -> Fence:
        """Start the watchdog, armed from ``started`` (the lease's first write; now)."""
        self.deadline = (time.monotonic() if started is None else started) + (
            self.lease - self.margin
        )
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "lirun.exec.watchdog", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the owner's terminal leaves it running
        )
        self._send(f"renew {self.deadline!r}")
        with _active_lock:
            _active.add(self)
        return self

    def _send(self, line: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        try:
            proc.stdin.write(line.encode("ascii") + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError):
            pass  # the watchdog is gone: lost() still stops the owner's own work

    def close(self) -> None:
        """The owner ended its work itself: the watchdog exits without killing."""
        proc, self._proc = self._proc, None
        with _active_lock:
            _active.discard(self)
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.write(b"bye\n")
                proc.stdin.close()
        except (OSError, ValueError):
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> Fence:
        return self.start() if self._proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the owner's side --------------------------------------------------------------

    def renewed(self, started: float) -> None:
        """A renewal whose write began at monotonic ``started`` succeeded."""
        with self._lock:
            now = time.monotonic()
            if now >= self.deadline:
                self.lapses.append(self.deadline)
                # The watchdog may be killing right now: nothing new starts before it
                # has read this renewal.
                self.quiet_until = now + SETTLE_SECONDS
            self.deadline = max(self.deadline, started + self.lease - self.margin)
            deadline = self.deadline
        self._send(f"renew {deadline!r}")

    def lost(self) -> bool:
        """Past the deadline (or just back from it): the owner cannot prove its lease is
        still its own, and starts nothing."""
        now = time.monotonic()
        return now >= self.deadline or now < self.quiet_until

    def expired(self) -> bool:
        """Past the deadline: the watchdog is killing the owner's work."""
        return time.monotonic() >= self.deadline

    def lapsed_since(self, since: float) -> bool:
        """Whether the lease was lost at any moment from monotonic ``since`` on."""
        with self._lock:
            return self.expired() or any(at >= since for at in self.lapses)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


def fence_for_owner(lease_seconds: float) -> Fence | None:
    """A started fence for an owner (a flow, a show) of this process, or None when a
    fence already guards this process's tree (``li worker`` running the flow)."""
    with _active_lock:
        if _active:
            return None
    return Fence(lease_seconds).start()
