"""Prompt wake-ups for a waiter (design.md §4.5, §7.8).

A waker only makes a sleep shorter; the waiter always re-reads its rows afterwards,
so a missed or spurious wake-up costs latency, never correctness.

- PostgreSQL: LISTEN on a separate connection, opened before the waiter's first read,
  so a terminal commit between that read and the sleep is not missed.
- SQLite: ``PRAGMA data_version`` on the reading connection changes when any other
  connection commits; checking it costs microseconds, a full query does not.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection

from lirun.hints import Any, Protocol
from lirun.store.connector import NOTIFY_CHANNEL, Connector
from lirun.wait.fswatch import DirectoryWatch

# Shortest gap between two looks at data_version. With a directory watch the first look
# after a quiet spell is immediate (commit-to-line is about a millisecond) and this only
# spaces the looks that follow while a writer is busy; without a watch it is the polling
# period (latency about half of it). Each look wakes the process, so fifty waiters
# beside a busy writer steal its CPU when this is small (bench/bench_wait.py).
SQLITE_CHECK_SECONDS = 0.05
# data_version moves on every commit, relevant or not. Each re-read that finishes
# nothing doubles the gap between looks up to this cap, so many waiters beside a busy
# writer do not steal its CPU; the first quiet look restores the base period.
SQLITE_MAX_GAP_SECONDS = 0.25
# Longest blocking step while listening, so a stop request is seen this fast.
STOP_CHECK_SECONDS = 0.05
# Longest blocking step on a directory watch: an idle waiter wakes this often only.
WATCH_BLOCK_SECONDS = 0.1
# After a write event, keep looking this long before blocking on the watch again.
WATCH_SETTLE_SECONDS = 0.1


class Waker(Protocol):
    def wait(self, timeout: float, stop: Callable[[], bool]) -> bool:
        """Block up to ``timeout`` seconds; True if something may have changed."""
        ...

    def after_read(self, useful: bool) -> None:
        """Feedback from the re-read that followed a wake-up: did it finish a target?"""
        ...

    def close(self) -> None: ...


class SleepWaker:
    """No change signal: sleep out the interval (checking ``stop`` now and then)."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        self._sleep = sleep

    def wait(self, timeout: float, stop: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + timeout
        while not stop():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._sleep(min(left, STOP_CHECK_SECONDS))
        return False

    def after_read(self, useful: bool) -> None:
        pass

    def close(self) -> None:
        pass


class ChangeTokenWaker:
    """SQLite: wake when ``connector.change_token()`` differs from the last look.

    With a ``watch`` on the database's directory, a look happens only after a file there
    was written (and never more often than the current gap); without one, it polls.
    """

    def __init__(
        self,
        connector: Connector,
        *,
        check_seconds: float = SQLITE_CHECK_SECONDS,
        max_gap_seconds: float = SQLITE_MAX_GAP_SECONDS,
        sleep: Callable[[float], None] = time.sleep,
        watch: DirectoryWatch | None = None,
        watch_dir: str | None = None,
    ) -> None:
        self._connector = connector
        self._base = self._gap = check_seconds
        self._max_gap = max(max_gap_seconds, check_seconds)
        self._sleep = sleep
        self._watch = watch
        self._watch_dir = watch_dir  # opened on the first sleep: a finished target needs none
        self._woken = False
        self._token = connector.change_token()
        self._last_look = time.monotonic()
        self._armed_until = 0.0

    @property
    def gap(self) -> float:
        return self._gap

    def wait(self, timeout: float, stop: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + timeout
        self._woken = False
        while not stop():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            seen = False
            if self._should_block():
                # Armed before this look, so a commit between the two still wakes the watch.
                # It does not count for spacing: the first look after a quiet spell is prompt.
                seen = self._changed(spaced=False)
                if not seen and not self._watch.wait(min(left, WATCH_BLOCK_SECONDS)):  # type: ignore[union-attr]
                    self._gap = self._base  # quiet: writers paused, be prompt again
                    continue
                # The write event can precede the commit becoming visible: keep looking,
                # spaced by the gap, until the settle window is over.
                self._armed_until = time.monotonic() + WATCH_SETTLE_SECONDS
            since = time.monotonic() - self._last_look
            self._sleep(max(0.0, min(self._gap - since, left)))
            if self._changed() or seen:
                self._woken = True
                return True
            self._gap = self._base
        return False

    def _should_block(self) -> bool:
        """True when a watch exists, the settle window is over, and it could be armed."""
        if self._watch is None and self._watch_dir is not None:
            self._watch, self._watch_dir = DirectoryWatch.open(self._watch_dir), None
        if self._watch is None or time.monotonic() < self._armed_until:
            return False
        return self._watch.arm()

    def _changed(self, *, spaced: bool = True) -> bool:
        """Look at the change token; True (and remember it) if another commit happened."""
        if spaced:
            self._last_look = time.monotonic()
        token = self._token_or_none()
        if token is None or token == self._token:
            return False
        self._token = token
        return True

    def after_read(self, useful: bool) -> None:
        if useful:
            self._gap = self._base
        elif self._woken:
            self._gap = min(self._gap * 2, self._max_gap)
        self._woken = False

    def _token_or_none(self) -> object:
        from lirun.errors import DatabaseError

        try:
            return self._connector.change_token()
        except DatabaseError:
            return None  # a transient error: the interval's full read will retry

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()


class ListenWaker:
    """PostgreSQL: LISTEN on the transition channel, on its own connection.

    It sleeps in ``select`` on that connection and, when ``stop`` has a ``fileno()`` (the
    signal trap's wake-up pipe in `li wait`), on the stop pipe too: an idle waiter wakes
    only for a notification or a stop request. Without a stop pipe it looks at ``stop``
    every ``STOP_CHECK_SECONDS``. A lost connection (a server restart, a typed
    ``DatabaseError`` from the store) is replaced with capped backoff; LISTEN is issued
    again before the waiter's next read, so no commit after it is missed.
    """

    def __init__(
        self,
        connector: Any,
        interest: Callable[[], Collection[str]],
        *,
        terminal_only: bool = True,
    ) -> None:
        self._connector = connector
        self._listener: Any = connector.listen(NOTIFY_CHANNEL)
        self._interest = interest
        self._terminal_only = terminal_only
        self._delay: float | None = None

    def _relevant(self, payload: str) -> bool:
        try:
            import json

            note = json.loads(payload)
            target = note.get("id")
        except (ValueError, AttributeError):
            return True  # unreadable payload: re-reading is always safe
        # Every transition is announced; a waiter for endings skips the others.
        if self._terminal_only and note.get("terminal") is False:
            return False
        return target in self._interest()

    def wait(self, timeout: float, stop: Callable[[], bool]) -> bool:
        from lirun.errors import DatabaseError

        if self._listener is None:
            return self._reconnect(timeout, stop)
        try:
            return self._listen(timeout, stop)
        except DatabaseError:  # the server went away: re-read now, reconnect on the next wait
            self.close()
            self._listener = None
            return True

    def _reconnect(self, timeout: float, stop: Callable[[], bool]) -> bool:
        """Sleep the next backoff step, then listen again; True: the waiter re-reads."""
        from lirun.errors import DatabaseError
        from lirun.store.retry import backoff

        self._delay = backoff(self._delay)
        SleepWaker().wait(min(self._delay, timeout), stop)
        try:
            self._listener = self._connector.listen(NOTIFY_CHANNEL)
        except DatabaseError:
            return True  # still down: the re-read reports it, the next wait tries again
        self._delay = None
        return True

    def _listen(self, timeout: float, stop: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + timeout
        stop_fd = _stop_fileno(stop)
        look = True
        while not (look and stop()):
            if any(self._relevant(payload) for payload in self._listener.take()):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            step = left if stop_fd is not None else min(left, STOP_CHECK_SECONDS)
            ready = self._listener.wait_readable(stop_fd, step)
            # With a stop pipe, only a byte on it is worth a look at stop(): notifications
            # about other ids (every transition is announced) do not make a waiter look.
            look = stop_fd is None or stop_fd in ready
            if stop_fd is not None and stop_fd in ready:
                if stop():
                    return False
                stop_fd = None  # a byte that is not a stop request: look at stop() instead
        return False

    def after_read(self, useful: bool) -> None:
        pass  # notifications name terminal transitions only: nothing to tune

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()


def _stop_fileno(stop: Callable[[], bool]) -> int | None:
    """The pipe that becomes readable when ``stop`` turns true, if ``stop`` offers one."""
    fileno = getattr(stop, "fileno", None)
    return int(fileno()) if fileno is not None else None


def make_waker(
    connector: Connector,
    interest: Callable[[], Collection[str]],
    *,
    terminal_only: bool = True,
    check_seconds: float = SQLITE_CHECK_SECONDS,
) -> Waker:
    """The best waker for this backend; call it before the waiter's first read.

    ``terminal_only``: on PostgreSQL, wake for terminal transitions only (a waiter for
    endings); False wakes for every transition of an id in ``interest`` (the dashboard).
    ``check_seconds``: on SQLite, the shortest gap between looks at the change token (one
    watcher for a whole dashboard can afford a shorter one than many waiters can).
    """
    if connector.supports_notify and hasattr(connector, "listen"):
        return ListenWaker(connector, interest, terminal_only=terminal_only)
    if connector.change_token() is not None:
        # Only SQLite has a change token, and its url is the database file's path.
        return ChangeTokenWaker(
            connector,
            check_seconds=check_seconds,
            watch_dir=os.path.dirname(connector.url) or ".",
        )
    return SleepWaker()
