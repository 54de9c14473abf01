"""The PostgreSQL transport for schedule runs: procrastinate, in a schema of its own.

A queued run is one procrastinate job of the task ``lirun.run_schedule_run(run_id)``;
``serve`` runs a worker on the queue (its own asyncio loop in the serving thread) and
calls the worker's ``handle(run_id)`` in a thread per job. The job is only a wake-up with
a run id: ``handle`` moves the run ``queued → running`` by compare-and-set, so a job the
queue delivers twice (a retry, a stalled job taken over, the reconciler's second offer)
runs nothing twice.

- **Schema.** procrastinate's tables, types and functions live in their own schema of the
  same database: ``lirun_queue`` for a URL without ``schema=``, ``<schema>_queue`` for
  ``?schema=<schema>`` (cut to 63 characters). Every queue connection has that schema as
  its ``search_path``. It is made on first use, once, under an advisory lock (workers
  starting together do not race), and stamped with the procrastinate version; a schema
  stamped by another minor version is refused until its migrations are applied.
- **Queue.** Jobs go to the queue named like the schema, and the worker listens only to
  it, so two lirun databases in one PostgreSQL database do not wake each other.
- **Once per run id.** ``enqueue`` defers with the run id as queueing lock (while a job
  for the run waits, a second ``enqueue`` is a no-op) and as lock (two jobs of one run
  never run at once in the queue's view). A job already taken does not stop a new one:
  the second is delivered after the first and its ``handle`` does nothing.
- **Stalled jobs.** A worker's heartbeat is refreshed every ``heartbeat_seconds``; a job
  in ``doing`` whose worker has not beaten for ``stalled_after`` seconds (SIGKILL, a cut
  link, a frozen host) is put back to ``todo`` by whichever worker sweeps first, and is
  delivered again. The new delivery's ``handle`` finds the run no longer ``queued`` and
  does nothing; the run itself is failed by its lease (the worker's business, not the
  queue's). A run whose job was taken but never started (killed between claim and
  compare-and-set) is started by the retried job.
- **Reconnects.** A failed fetch (a server restart, a cut link) ends that worker
  incarnation after its running handles return; ``serve`` opens a new one with backoff
  until ``stop``. A failed heartbeat is only logged, so a short outage does not stop a
  worker that is running long jobs; the listener reconnects on its own.
- **Stopping.** ``stop`` ends the loop at once, whatever it awaits (a fetch, the sweep),
  and ``serve`` returns when the running handles have; ``close`` refuses any later
  ``enqueue`` (the run stays queued, and a serving worker's sweep offers it again), and a
  deferral or sweep under way ends within ``DEFER_CONNECT_SECONDS``, whatever the database
  does: so a worker ends promptly after SIGTERM (issue 33).

The worker loop is lirun's (``queue_worker``), on procrastinate's public API through
``procrastinate_adapter``, the only module that imports procrastinate; the queue schema's
SQL is the store's (``store/queue_records``). ``transport_for`` imports this module
lazily, never on ``li wait``'s path.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from lirun.errors import DatabaseConnectionLostError, DatabaseError
from lirun.logs import get_logger
from lirun.schedules.procrastinate_adapter import (
    TASK_NAME,
    Deferrer,
    WorkerQueue,
    brief,
    procrastinate_version,
    schema_sql,
)
from lirun.schedules.queue_worker import QueueWorker, Timing, until_stopped
from lirun.store import Store
from lirun.store.bounds import answer_by
from lirun.store.queue_records import ensure_queue_schema, queue_conninfo

log = get_logger(__name__)

__all__ = ["TASK_NAME", "ProcrastinateTransport", "prepare_queue_schema"]

# A worker beats every HEARTBEAT_SECONDS; its jobs are stalled after STALLED_AFTER without
# a beat (well under the 60 s run lease, so a taken-but-unstarted run is re-offered soon).
HEARTBEAT_SECONDS = 5.0
STALLED_AFTER = 20.0
# Fallback poll when a NOTIFY was missed (the listener reconnects after an outage).
POLL_SECONDS = 2.0
# How often a worker looks for stalled jobs and for queued runs that have no job.
RECONCILE_SECONDS = 10.0
# How long ``enqueue`` waits for a queue connection (psycopg_pool's default is 30 s): a
# submit whose run is committed must not hang on the queue it only wakes, nor a stopping
# worker on a deferral. The sweep's read of the queued runs is bounded the same.
DEFER_CONNECT_SECONDS = 5.0


def prepare_queue_schema(conninfo: str, queue_schema: str) -> None:
    """Make the queue schema with the installed procrastinate's objects, once."""
    ensure_queue_schema(conninfo, queue_schema, schema_sql(), procrastinate_version())


class ProcrastinateTransport:
    """The transport of the ``Transport`` protocol on procrastinate (see the module)."""

    def __init__(
        self,
        store_or_url: Store | str,
        *,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        stalled_after: float = STALLED_AFTER,
        poll_seconds: float = POLL_SECONDS,
        reconcile_seconds: float = RECONCILE_SECONDS,
    ) -> None:
        if isinstance(store_or_url, str):
            url, self._store = store_or_url, None
        else:
            url, self._store = store_or_url.url, store_or_url
        self.conninfo, self.queue_schema = queue_conninfo(url)
        self.queue = self.queue_schema
        self.timing = Timing(heartbeat_seconds, stalled_after, poll_seconds, reconcile_seconds)
        self._schema_ready = False
        self._lock = threading.Lock()
        self._deferrer: Deferrer | None = None
        self._closed = False  # closed by its owner: defers nothing more

    # -- enqueue ----------------------------------------------------------------------

    def _ensure_schema(self) -> None:
        with self._lock:
            if not self._schema_ready:
                prepare_queue_schema(self.conninfo, self.queue_schema)
                self._schema_ready = True

    def _opened_deferrer(self) -> Deferrer:
        self._check_open()
        self._ensure_schema()
        with self._lock:
            self._check_open()
            if self._deferrer is None:
                self._deferrer = Deferrer(
                    self.conninfo, self.queue, connect_seconds=DEFER_CONNECT_SECONDS
                )
            return self._deferrer

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseConnectionLostError(
                "the queue transport is closed: its worker is stopping"
            )

    def enqueue(self, run_id: str) -> None:
        """Defer one job for ``run_id`` (a no-op while one already waits for it); after
        ``close``, DatabaseConnectionLostError."""
        deferrer = self._opened_deferrer()
        try:
            deferrer.defer(run_id)
        except DatabaseConnectionLostError as exc:
            raise DatabaseConnectionLostError(
                f"run {run_id} is queued but its queue job could not be made ({exc}); "
                "a worker offers it again when the database answers"
            ) from None

    # -- serve ------------------------------------------------------------------------

    def serve(
        self, handle: Callable[[str], None], *, concurrency: int, stop: threading.Event
    ) -> None:
        """Run a queue worker until ``stop``; returns after running handles end."""
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        while not stop.is_set():
            try:
                self._ensure_schema()
                break
            except DatabaseError as exc:
                if isinstance(exc, DatabaseConnectionLostError):
                    log.warning(f"{exc}; retrying", extra={"event": "queue.note"})
                    stop.wait(1.0)
                    continue
                raise
        if stop.is_set():
            return
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="lirun-run") as pool:
            asyncio.run(self._serve(handle, concurrency, stop, pool))

    async def _serve(
        self,
        handle: Callable[[str], None],
        concurrency: int,
        stop: threading.Event,
        pool: ThreadPoolExecutor,
    ) -> None:
        backoff = 0.5
        while not stop.is_set():
            started = time.monotonic()
            queue = WorkerQueue(self.conninfo, self.queue, max_connections=concurrency + 4)
            worker = QueueWorker(
                queue, handle, concurrency, stop, pool, self.timing, self._offer_queued
            )
            try:
                if not await until_stopped(queue.open(), stop):
                    return
                try:
                    await worker.run()
                finally:
                    with contextlib.suppress(Exception):
                        await queue.close()
            except Exception as exc:
                if stop.is_set():
                    return
                if time.monotonic() - started > 30:
                    backoff = 0.5
                log.warning(
                    f"queue worker lost its database ({brief(exc)}); reconnecting",
                    extra={"event": "queue.note"},
                )
                await _sleep_unless(stop, backoff)
                backoff = min(backoff * 2, 5.0)

    async def _offer_queued(self) -> None:
        """Offer again the queued runs that have no job (a submit that could not defer)."""
        if self._store is not None:
            await asyncio.to_thread(self._offer_queued_now, self._store)

    def _offer_queued_now(self, store: Store) -> None:
        """In one thread, which a stopping worker waits for: every wait bounded, and none
        begun after ``close``."""
        with answer_by(time.monotonic() + DEFER_CONNECT_SECONDS):
            ids = store.schedules.list_queued_run_ids(limit=1000)
        for run_id in ids:
            self.enqueue(run_id)  # after close: raises, and the sweep is skipped

    def close(self) -> None:
        with self._lock:
            self._closed = True
            deferrer, self._deferrer = self._deferrer, None
        if deferrer is not None:
            deferrer.close()


async def _sleep_unless(stop: threading.Event, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
