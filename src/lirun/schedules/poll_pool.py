"""A worker's poll threads: ``--poll`` commands run off the firing thread.

A poll command may run up to its timeout (60 s by default); run on the firing thread it
would hold back every other schedule's due times and the chain sweep. So the firing
thread only claims a poll's due time (``polling.claim_poll``, the compare-and-set: of any
number of workers exactly one polls each due time) and hands the poll to this pool:

- at most ``threads`` polls run at once; more wait in the pool's queue;
- one schedule is polled by one thread at a time on this worker: a due time claimed
  while its previous poll still runs is polled once right after it (several such claims
  make one poll, as a poll sees everything new at once);
- each poll opens a store of its own (its own connections) and closes it after, as a
  run does (``Runner.handle``): an idle worker holds no connection for its polls;
- ``close`` (the worker stopping) kills the running poll commands' process groups and
  waits for the threads: no poll command outlives the worker. A poll stopped that way
  records nothing; the next due time, on any worker, polls again. What a poll stored
  is stored with its run in one transaction per item (``store.events.record``), so
  exactly once holds wherever the worker stops.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from lirun.logs import get_logger
from lirun.schedules.definition import Definition
from lirun.schedules.polling import PollChildren, PollStopped, claim_poll, run_poll
from lirun.store import Store, open_store
from lirun.store.rows import ScheduleRow

log = get_logger(__name__)

# Poll threads per worker: polls wait on their commands, not on this machine's cores.
POLL_THREADS = 4


class PollPool:
    """Runs the polls a worker claims on ``threads`` threads of their own."""

    def __init__(
        self, db_url: str, enqueue: Callable[[str], None], *, threads: int = POLL_THREADS
    ) -> None:
        self._db_url = db_url
        self._enqueue = enqueue
        self._children = PollChildren()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lirun-poll")
        self._lock = threading.Lock()
        self._busy: dict[str, Definition | None] = {}  # schedule id: its next poll, if any
        self._closed = False

    def submit(self, store: Store, row: ScheduleRow, definition: Definition, now: int) -> bool:
        """Claim ``row``'s due time (on the caller's ``store``) and poll it on a pool
        thread; False when another worker claimed it or the pool is closed."""
        if self._closed or not claim_poll(store, row, definition, now):
            return False
        with self._lock:
            if self._closed:
                return False
            if row.id in self._busy:
                self._busy[row.id] = definition  # polled again when this one ends
                return True
            self._busy[row.id] = None
        self._pool.submit(self._poll, row.id, definition)
        return True

    def busy(self) -> int:
        """How many schedules are being polled (or wait for a thread) now."""
        with self._lock:
            return len(self._busy)

    def close(self) -> None:
        """Claim nothing more, kill the running poll commands and wait for the threads."""
        with self._lock:
            self._closed = True
        killed = self._children.kill_all()
        if killed:
            log.info(f"stopped {killed} running poll command(s)")
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _poll(self, schedule_id: str, definition: Definition) -> None:
        while True:
            self._poll_once(schedule_id, definition)
            with self._lock:
                pending = self._busy.get(schedule_id)
                if pending is None or self._closed:
                    self._busy.pop(schedule_id, None)
                    return
                self._busy[schedule_id] = None
            definition = pending

    def _poll_once(self, schedule_id: str, definition: Definition) -> None:
        try:
            store = open_store(self._db_url)
        except Exception as exc:  # the database is away: the next due time polls again
            log.warning(f"poll {definition.name}: cannot open the database: {exc}")
            return
        try:
            run_poll(store, schedule_id, definition, self._enqueue, self._children)
        except PollStopped:
            log.info(f"poll {definition.name}: stopped with the worker")
        except Exception as exc:  # a poll thread must never die silently
            log.warning(f"poll {definition.name}: {type(exc).__name__}: {exc}")
        finally:
            store.close()
