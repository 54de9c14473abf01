"""How queued schedule runs reach a worker: the one seam between the run path and a queue.

``handle(run_id)`` (``lirun.schedules.runner``) is the one code path of what a run does,
whatever the transport; a transport only says *which* run ids a worker should try, and
when. It never claims a run itself: ``handle`` moves the run ``queued → running`` by
compare-and-set, so a run delivered twice (or to two workers) is run once and the loser
does nothing.

- SQLite: :class:`LocalTransport` polls the ``schedule_runs`` table for queued rows,
  woken early by ``enqueue`` in the same process and otherwise by a short poll (one
  machine; several workers on one file are safe through the compare-and-set).
- PostgreSQL: ``lirun.schedules.pgqueue.ProcrastinateTransport`` (procrastinate: row-lock
  claims, LISTEN/NOTIFY wake-ups) when it is importable, else :class:`LocalTransport`
  with a note on stderr.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

from lirun.logs import get_logger

if TYPE_CHECKING:
    from lirun.store.core import Store

# How often LocalTransport looks at the table when nothing woke it (seconds). An idle
# worker in the same process as the submitter is woken at once; another process's submit
# is seen within this time.
log = get_logger(__name__)
POLL_SECONDS = 0.05


class Transport(Protocol):
    """What a worker needs from a queue."""

    def enqueue(self, run_id: str) -> None:
        """Offer ``run_id`` to the workers; called after its queued ``schedule_runs`` row
        is committed."""

    def serve(
        self, handle: Callable[[str], None], *, concurrency: int, stop: threading.Event
    ) -> None:
        """Block until ``stop`` is set, calling ``handle(run_id)`` for each queued run it
        is given, at most ``concurrency`` at once (threads). Returns after the running
        handles finished (the worker's grace policy cancels them through their own
        traps; the transport only waits)."""

    def close(self) -> None:
        """Release what the transport holds; idempotent."""


class LocalTransport:
    """Polls the store for queued runs (SQLite, or PostgreSQL without procrastinate).

    ``list_ids`` returns queued run ids, oldest first; by default the store's
    ``list_queued_run_ids``. Ids already handed to a running ``handle`` are not handed
    again; an id whose ``handle`` returned may come back only if it is still queued (a
    handle that lost the compare-and-set returns at once, so that is cheap)."""

    def __init__(self, store: Store, *, poll_seconds: float = POLL_SECONDS) -> None:
        self._store = store
        self._poll = poll_seconds
        self._wake = threading.Event()

    def enqueue(self, run_id: str) -> None:
        self._wake.set()

    def serve(
        self, handle: Callable[[str], None], *, concurrency: int, stop: threading.Event
    ) -> None:
        busy: dict[str, Future[None]] = {}
        lock = threading.Lock()

        def done(run_id: str) -> Callable[[Future[None]], None]:
            def forget(_future: Future[None]) -> None:
                with lock:
                    busy.pop(run_id, None)
                self._wake.set()

            return forget

        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="lirun-run") as pool:
            while not stop.is_set():
                with lock:
                    free = concurrency - len(busy)
                if free > 0:
                    for run_id in self._store.schedules.list_queued_run_ids(
                        limit=free + len(busy) + 8
                    ):
                        if free <= 0 or stop.is_set():
                            break
                        with lock:
                            if run_id in busy:
                                continue
                            future = pool.submit(handle, run_id)
                            busy[run_id] = future
                        future.add_done_callback(done(run_id))
                        free -= 1
                self._wake.wait(self._poll)
                self._wake.clear()
            # stop is set: claim nothing more; the pool's exit waits for running handles.

    def close(self) -> None:
        self._wake.set()


def transport_for(store: Store) -> Transport:
    """The transport for ``store``'s backend (see the module's docstring)."""
    if store.is_server:
        try:
            from lirun.schedules.pgqueue import ProcrastinateTransport  # the postgres extra
        except ImportError as exc:
            log.warning(
                "procrastinate transport unavailable (%s); polling the schedule_runs table "
                "instead", exc, extra={"event": "queue.unavailable"},
            )  # fmt: skip
        else:
            return ProcrastinateTransport(store)
    return LocalTransport(store)
