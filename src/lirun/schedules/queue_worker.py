"""One incarnation of a worker on the procrastinate queue, lirun's own loop on the
queue's public operations (``procrastinate_adapter.WorkerQueue``).

It registers, then fetches jobs up to ``concurrency`` at once and runs each job's
``handle(run_id)`` in a thread of the serving pool. Beside it run a heartbeat whose
failure is only logged (a short outage must not stop a worker that is running long jobs),
a listener that wakes the fetch loop and reconnects after an outage (polling keeps it
right meanwhile), and the sweep: stalled jobs put back, queued runs without a job offered
again. A failed fetch ends the incarnation once its running handles return (the caller,
``pgqueue``, opens a new one with backoff). A job that cannot be closed (taken over while
this worker was cut off, or the database gone) is one line on stderr: the job is
stalled, put back and harmlessly delivered again.

``stop`` ends the loop at once, whatever it awaits then (a fetch, the sweep: a database
that does not answer must not hold a stopping worker); the incarnation then waits only
for its running handles, and gives closing their jobs and unregistering
``STOPPING_WRITE_SECONDS`` each. A job fetched as the loop was cancelled is this
worker's until the sweep of another finds it stalled (it has no worker once this one
unregisters), as after a SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from lirun.errors import DatabaseError
from lirun.logs import get_logger
from lirun.schedules.procrastinate_adapter import QueueJob, WorkerQueue, brief

log = get_logger(__name__)

# How long the listener waits before it listens again after losing the server.
LISTEN_RETRY_SECONDS = 0.5
# A handle that raised is tried again, up to JOB_RETRIES times (it is harmless: the
# compare-and-set guards it).
JOB_RETRIES = 5
JOB_RETRY_WAIT = 2.0
# How long a stopping incarnation waits for each of its last queue writes, closing a job
# and unregistering (a job left open is stalled and harmlessly delivered again; a worker
# row left behind is pruned).
STOPPING_WRITE_SECONDS = 3.0


@dataclass(frozen=True)
class Timing:
    heartbeat_seconds: float
    stalled_after: float
    poll_seconds: float
    reconcile_seconds: float


def retry_after(job: QueueJob, failed: bool) -> float | None:
    """Seconds until a job whose handle ended is tried again; None: close it (pure)."""
    if failed and job.attempts < JOB_RETRIES:
        return JOB_RETRY_WAIT
    return None


@dataclass
class QueueWorker:
    queue: WorkerQueue
    handle: Callable[[str], None]
    concurrency: int
    stop: threading.Event
    pool: ThreadPoolExecutor
    timing: Timing
    sweep_extra: Callable[[], Awaitable[None]]

    async def run(self) -> None:
        """Serve until ``stop`` (returns) or a failed fetch (raises ``DatabaseError``)."""
        worker_id = await self.queue.register(self.timing.stalled_after)
        wake = asyncio.Event()
        side = [
            asyncio.create_task(self._beat(worker_id), name="lirun heartbeat"),
            asyncio.create_task(self._listen(wake), name="lirun listener"),
        ]
        running: set[asyncio.Task[None]] = set()
        try:
            await until_stopped(self._loop(worker_id, wake, running), self.stop)
        finally:
            for task in side:
                task.cancel()
            # A cancelled listener may still be closing its connection to a server that
            # is gone: it is not waited on past the bound (its task ends with the loop).
            await asyncio.wait(side, timeout=STOPPING_WRITE_SECONDS)
            if running:  # the handles run in threads: they end on their own
                await asyncio.wait(running)
            with contextlib.suppress(DatabaseError, TimeoutError):
                await asyncio.wait_for(self.queue.unregister(worker_id), STOPPING_WRITE_SECONDS)

    async def _loop(
        self, worker_id: int, wake: asyncio.Event, running: set[asyncio.Task[None]]
    ) -> None:
        next_sweep = time.monotonic() + min(1.0, self.timing.reconcile_seconds)
        while not self.stop.is_set():
            wake.clear()
            while len(running) < self.concurrency and not self.stop.is_set():
                job = await self.queue.fetch(worker_id)
                if job is None:
                    break
                task = asyncio.create_task(self._run_job(job), name=f"queue job {job.id}")
                running.add(task)
                task.add_done_callback(running.discard)
                task.add_done_callback(lambda _: wake.set())
            if time.monotonic() >= next_sweep:
                await self._sweep()
                next_sweep = time.monotonic() + self.timing.reconcile_seconds
            deadline = time.monotonic() + self.timing.poll_seconds
            while not (wake.is_set() or self.stop.is_set()) and time.monotonic() < deadline:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout=0.05)

    async def _run_job(self, job: QueueJob) -> None:
        loop = asyncio.get_running_loop()
        failed = False
        try:
            await loop.run_in_executor(self.pool, self.handle, job.run_id)
        except Exception as exc:
            failed = True
            log.warning(
                f"queue job {job.id} (run {job.run_id}) failed ({brief(exc)})",
                extra={"event": "queue.note"},
            )
        after = retry_after(job, failed)
        if after is None:
            closing = self.queue.finish(job, succeeded=not failed)
        else:
            closing = self.queue.retry(job, after=after)
        try:
            # Also a close begun before the worker was told to stop: once it is, the
            # close has STOPPING_WRITE_SECONDS more (a pool waiting for a server that went
            # in a failover would hold the stopping worker for its own 30 s).
            if not await until_stopped(closing, self.stop, grace=STOPPING_WRITE_SECONDS):
                raise TimeoutError(f"not closed {STOPPING_WRITE_SECONDS:g}s after the stop")
        except Exception as exc:  # a lost pool raises psycopg's own errors too
            log.warning(
                f"queue job {job.id} (run {job.run_id}) could not be closed ({brief(exc)}); "
                "another worker took it over, or the database is gone and it will be "
                "offered again",
                extra={"event": "queue.note"},
            )

    async def _beat(self, worker_id: int) -> None:
        failing = False
        while True:
            await asyncio.sleep(self.timing.heartbeat_seconds)
            try:
                await self.queue.heartbeat(worker_id)
            except Exception as exc:
                if not failing:
                    log.warning(
                        f"queue heartbeat failed ({brief(exc)}); retrying",
                        extra={"event": "queue.note"},
                    )
                failing = True
            else:
                failing = False

    async def _listen(self, wake: asyncio.Event) -> None:
        async def on_job() -> None:
            wake.set()

        failing = False
        while True:
            started = time.monotonic()
            try:
                await self.queue.listen(on_job)
            except Exception as exc:
                if time.monotonic() - started > 5 * LISTEN_RETRY_SECONDS:
                    failing = False  # it was listening: this is a new outage
                if not failing:
                    log.warning(
                        f"queue listener lost its connection ({brief(exc)}); reconnecting",
                        extra={"event": "queue.note"},
                    )
                failing = True
            await asyncio.sleep(LISTEN_RETRY_SECONDS)
            wake.set()  # look for what was queued while it was not listening

    async def _sweep(self) -> None:
        """Put stalled jobs back, and offer queued runs that have no job (best effort)."""
        try:
            await self.queue.retry_stalled(self.timing.stalled_after)
            await self.sweep_extra()
        except Exception as exc:
            log.warning(f"queue sweep skipped ({brief(exc)})", extra={"event": "queue.note"})


async def until_stopped(
    coro: Coroutine[Any, Any, Any], stop: threading.Event, *, grace: float = 0.0
) -> bool:
    """Await ``coro`` unless ``stop`` is set first and ``grace`` seconds pass after it
    (then cancel it); True if it ended (its exception raised here)."""
    task = asyncio.ensure_future(coro)
    stopped_at: float | None = None
    while not task.done():
        if stop.is_set():
            stopped_at = stopped_at if stopped_at is not None else time.monotonic()
            if time.monotonic() - stopped_at >= grace:
                task.cancel()  # not waited on past the bound: it may not give way
                await asyncio.wait([task], timeout=STOPPING_WRITE_SECONDS)
                if task.done() and not task.cancelled():
                    task.exception()  # retrieved: a late error is not "never retrieved"
                return False
        await asyncio.wait([task], timeout=0.05)
    task.result()
    return True
