"""Wait for executions to finish: the machine completion surface (design.md D6, §4-6).

``wait_for_terminal`` is the async library API; ``drive`` is the synchronous loop that
`li wait` (``lirun.cli.wait``) runs over the same ``Watcher``, so the command starts
without asyncio; ``format_wait_line`` is the one stable line per finished target.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from lirun.errors import DatabaseConnectionLostError
from lirun.hints import Any
from lirun.logs import get_logger
from lirun.paths import resolve_db_url
from lirun.store import StateDB, Store, open_store
from lirun.store.bounds import answer_by
from lirun.wait.outcome import format_wait_line
from lirun.wait.resolve import split_ids
from lirun.wait.watch import Watcher

__all__ = ["drive", "format_wait_line", "wait_for_terminal"]


log = get_logger(__name__)
WaitResult = dict[str, Any]
WaitDb = StateDB | Store | str | os.PathLike[str] | None


# The longest interval or timeout (about three years; as li run's --timeout): a longer
# one is a typo, and past it a sleep overflows. No timeout at all is None.
MAX_WAIT_SECONDS = 100_000_000.0


def check_interval(interval: float) -> float:
    """A polling interval must be a positive, finite number of seconds."""
    value = float(interval)
    if not 0 < value <= MAX_WAIT_SECONDS:  # nan compares false
        raise ValueError(
            f"interval must be a positive number of seconds, at most "
            f"{MAX_WAIT_SECONDS:,.0f}, not {interval!r}"
        )
    return value


def check_timeout(timeout: float | None) -> float | None:
    """None (wait as long as it takes), or zero to MAX_WAIT_SECONDS seconds."""
    if timeout is None:
        return None
    value = float(timeout)
    if not 0 <= value <= MAX_WAIT_SECONDS:  # nan compares false; 1e400 is inf
        raise ValueError(
            f"timeout must be zero or a positive number of seconds, at most "
            f"{MAX_WAIT_SECONDS:,.0f} (none: wait as long as it takes), not {timeout!r}"
        )
    return value


def _open(db: WaitDb) -> tuple[Store, bool]:
    """The store to read, and whether we opened it (and so must close it)."""
    if isinstance(db, StateDB):
        return db.sync, False
    if isinstance(db, Store):
        return db, False
    return open_store(resolve_db_url(db), readonly=True), True


def start_watching(
    db: WaitDb,
    ids: list[str],
    *,
    timeout: float | None = None,
    stop: Callable[[], bool] = lambda: False,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Store, bool, Watcher]:
    """Open the database and resolve ``ids``: the store, whether we opened it (and so must
    close it), and the Watcher.

    A waiter opens the database read-only: it never creates or migrates it. A server
    that does not answer yet (DatabaseConnectionLostError, at connect or at the first
    read) is retried with capped backoff until ``timeout`` or ``stop()``, said once
    once on the ``lirun.wait.api`` logger; then the error is raised.
    """
    from lirun.store.retry import backoff

    deadline = None if timeout is None else clock() + timeout
    delay: float | None = None
    while True:
        store: Store | None = None
        owned = False
        try:
            with answer_by(deadline):  # a server that does not answer: not past the timeout
                store, owned = _open(db)
                watcher = Watcher(store, ids, writable=writable_opener(store))
        except DatabaseConnectionLostError as exc:
            if store is not None and owned:
                store.close()
            delay = backoff(delay)
            if stop() or (deadline is not None and clock() + delay > deadline):
                raise
            if delay == backoff(None):
                log.warning(
                    "%s; retrying until the database answers", exc, extra={"event": "db.lost"}
                )
            sleep(delay)
            continue
        if delay is not None:
            log.info("the database answers again", extra={"event": "db.back"})
        return store, owned, watcher


def writable_opener(store: Store) -> Callable[[], Store]:
    """Opens the same database for writing, for the rare reap of a dead owner's row."""
    return lambda: open_store(store.url)


def next_sleep(interval: float, deadline: float | None, now: float) -> float:
    """How long to wait before the next read; <= 0 means the deadline has passed."""
    return interval if deadline is None else min(interval, deadline - now)


def drive(
    watcher: Watcher,
    *,
    interval: float,
    timeout: float | None,
    emit: Callable[[WaitResult], None],
    stop: Callable[[], bool],
    idle: Callable[[Watcher], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> list[WaitResult]:
    """The synchronous wait loop: read, report, sleep until a change or the interval."""
    deadline = None if timeout is None else clock() + timeout
    with answer_by(deadline):  # every read ends by the deadline, whatever the server does
        while True:
            for outcome in watcher.tick():
                emit(outcome)
            if watcher.done or stop():
                break
            left = next_sleep(interval, deadline, clock())
            if left <= 0:
                break
            if idle is not None:
                idle(watcher)
            watcher.wait(left, stop)
    return watcher.results()


async def wait_for_terminal(
    ids: Iterable[str],
    *,
    interval: float = 1.0,
    on_result: Callable[[WaitResult], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    timeout: float | None = None,
    db: WaitDb = None,
) -> list[WaitResult]:
    """Wait until every target is terminal (or gone); outcomes in input order.

    ``on_result`` is called once per target as it becomes final (terminal, deleted,
    not found or ambiguous); ``should_stop`` is checked between ticks; ``timeout``
    bounds the whole wait. Diagnostics (a lost database connection, a row it cannot
    reap) go to the ``lirun.wait`` loggers; nothing is written to stderr. Targets still
    running at a stop or timeout are returned with their last status and
    ``terminal=False``. Database reads run in a worker
    thread, so a busy database never blocks the event loop.
    """
    import asyncio
    import threading

    period, limit = check_interval(interval), check_timeout(timeout)
    stop = should_stop or (lambda: False)
    store, owned, watcher = await asyncio.to_thread(
        lambda: start_watching(db, split_ids(list(ids)), timeout=limit, stop=stop)
    )
    cancelled = threading.Event()
    deadline = None if limit is None else time.monotonic() + limit
    try:
        try:
            with answer_by(deadline):  # the reads' threads get a copy of this context
                while True:
                    for outcome in await asyncio.to_thread(watcher.tick):
                        if on_result is not None:
                            on_result(outcome)
                    if watcher.done or (should_stop is not None and should_stop()):
                        break
                    left = next_sleep(period, deadline, time.monotonic())
                    if left <= 0:
                        break
                    await asyncio.to_thread(watcher.wait, left, cancelled.is_set)
            return watcher.results()
        finally:
            cancelled.set()  # a worker thread still sleeping returns within milliseconds
            await asyncio.to_thread(watcher.close)
    finally:
        if owned:
            await asyncio.to_thread(store.close)
