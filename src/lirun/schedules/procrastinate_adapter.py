"""Everything lirun takes from procrastinate, through its public API only.

The one module that imports procrastinate. It uses ``App`` with its two psycopg
connectors, ``App.configure_task(...).defer`` (queueing lock and lock), ``SchemaManager.
get_schema``, and the documented ``JobManager`` methods a worker is made of
(``register_worker``, ``update_heartbeat``, ``fetch_job``, ``finish_job_by_id_async``,
``retry_job_by_id_async``, ``get_stalled_jobs``, ``prune_stalled_workers``,
``listen_for_jobs``). lirun runs its own worker loop on them (``schedules/queue_worker``)
instead of subclassing procrastinate's ``Worker``: no private method is overridden, so a
new procrastinate release that keeps its public API keeps working
(``tests/test_queue_adapter.py`` runs the queue tests against the newest release too).

What crosses out of here is lirun's: a ``QueueJob`` value, ``DatabaseError`` for any
failure of the queue's database (procrastinate's exceptions stop here), and plain
callbacks. Imported lazily by ``transport_for``, never on ``li wait``'s path.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import procrastinate
import psycopg_pool
from procrastinate import exceptions as pexc
from procrastinate.jobs import Status
from procrastinate.schema import SchemaManager

from lirun.errors import DatabaseConnectionLostError, DatabaseError
from lirun.store.pg_bounded import AsyncBoundedConnection, BoundedConnection

TASK_NAME = "lirun.run_schedule_run"


def procrastinate_version() -> str:
    return importlib.metadata.version("procrastinate")


def schema_sql() -> str:
    """procrastinate's whole schema (tables, types, functions), to run in an empty schema."""
    return str(SchemaManager.get_schema())


def brief(exc: BaseException) -> str:
    """``Type: first line`` of an exception (of its cause, for procrastinate's wrappers)."""
    if isinstance(exc, DatabaseError):
        return str(exc)
    if isinstance(exc, pexc.ProcrastinateException) and exc.__cause__ is not None:
        exc = exc.__cause__
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0]}" if first else type(exc).__name__


@contextmanager
def _translated(what: str) -> Iterator[None]:
    try:
        yield
    except pexc.ProcrastinateException as exc:
        raise DatabaseError(f"{what} failed ({brief(exc)})") from None


@dataclass(frozen=True)
class QueueJob:
    """One delivery of a run id: the job's id and how many times it was tried before."""

    id: int
    run_id: str
    attempts: int


_POOL_LOG = logging.getLogger("psycopg.pool")


class _QuietPool(logging.Filter):
    """Drops what the pool named ``pool_name`` logs (a line per failed connection try):
    ``Deferrer`` says in one exception what went wrong."""

    def __init__(self, pool_name: str) -> None:
        super().__init__()
        self.pool_name = pool_name

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.args, tuple) and self.pool_name in record.args)


class Deferrer:
    """Defers jobs of ``TASK_NAME`` on ``queue`` over a small sync pool of its own.

    Every wait for one of the pool's connections ends within ``connect_seconds``
    (psycopg_pool's own 30 s would hold the caller): a connection an outage broke fails
    the pool's check, and while the server is away, or when the pool is closed during the
    pause it takes before looking again, a deferral would otherwise wait all of it, and
    a stopping worker with it."""

    def __init__(self, conninfo: str, queue: str, *, connect_seconds: float) -> None:
        self.queue = queue
        self._quiet = _QuietPool(f"lirun-enqueue-{id(self):x}")
        pool = psycopg_pool.ConnectionPool(
            conninfo, min_size=1, max_size=2, open=False, connection_class=BoundedConnection,
            check=psycopg_pool.ConnectionPool.check_connection, name=self._quiet.pool_name,
            timeout=connect_seconds,
        )  # fmt: skip
        _POOL_LOG.addFilter(self._quiet)
        try:
            pool.open(wait=True, timeout=connect_seconds)  # closes it on timeout
        except psycopg_pool.PoolTimeout:
            _POOL_LOG.removeFilter(self._quiet)
            raise DatabaseConnectionLostError(
                f"no connection to the queue schema {queue} within {connect_seconds:g}s"
            ) from None
        # procrastinate uses a pool it is given as it is, and leaves it to us to close
        self._pool = pool
        self._app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector()).open(pool)

    def defer(self, run_id: str) -> bool:
        """One job for ``run_id``; False if one already waits for it (the queueing lock)."""
        task = self._app.configure_task(
            TASK_NAME, queue=self.queue, queueing_lock=run_id, lock=run_id
        )
        try:
            task.defer(run_id=run_id)
        except pexc.AlreadyEnqueued:
            return False
        except pexc.ProcrastinateException as exc:
            raise DatabaseConnectionLostError(brief(exc)) from None
        return True

    def close(self) -> None:
        self._app.close()
        self._pool.close()
        _POOL_LOG.removeFilter(self._quiet)


class WorkerQueue:
    """The queue as one worker sees it: async, over procrastinate's connection pool."""

    def __init__(self, conninfo: str, queue: str, *, max_connections: int) -> None:
        self.queue = queue
        # Every wait for the server is bounded on the client (a frozen server), the
        # listener's idle wait for notifications excepted (``pg_bounded``).
        connector = procrastinate.PsycopgConnector(
            conninfo=conninfo,
            min_size=1,
            max_size=max_connections,
            connection_class=AsyncBoundedConnection,
        )
        self._app = procrastinate.App(connector=connector)
        self._jobs = self._app.job_manager

    async def open(self) -> None:
        with _translated("opening the queue"):
            await self._app.open_async()

    async def close(self) -> None:
        with _translated("closing the queue"):
            await self._app.close_async()

    async def register(self, stalled_after: float) -> int:
        """Forget workers silent for ``stalled_after`` seconds, then register this one."""
        with _translated("registering the worker"):
            await self._jobs.prune_stalled_workers(stalled_after)
            return int(await self._jobs.register_worker())

    async def unregister(self, worker_id: int) -> None:
        with _translated("unregistering the worker"):
            await self._jobs.unregister_worker(worker_id)

    async def heartbeat(self, worker_id: int) -> None:
        with _translated("the heartbeat"):
            await self._jobs.update_heartbeat(worker_id)

    async def fetch(self, worker_id: int) -> QueueJob | None:
        """The next job of this queue, now ``doing`` for ``worker_id``; None if none."""
        with _translated("fetching a job"):
            job = await self._jobs.fetch_job(queues=[self.queue], worker_id=worker_id)
        if job is None:
            return None
        assert job.id is not None
        return QueueJob(id=job.id, run_id=str(job.task_kwargs.get("run_id")), attempts=job.attempts)

    async def finish(self, job: QueueJob, *, succeeded: bool) -> None:
        """Close a job: a succeeded one is deleted, a failed one kept for inspection."""
        status = Status.SUCCEEDED if succeeded else Status.FAILED
        with _translated(f"closing job {job.id}"):
            await self._jobs.finish_job_by_id_async(
                job_id=job.id, status=status, delete_job=succeeded
            )

    async def retry(self, job: QueueJob, *, after: float) -> None:
        at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=after)
        with _translated(f"retrying job {job.id}"):
            await self._jobs.retry_job_by_id_async(job_id=job.id, retry_at=at)

    async def retry_stalled(self, stalled_after: float) -> int:
        """Put back to ``todo`` the jobs whose worker has not beaten for ``stalled_after``
        seconds; how many were put back (another worker's sweep may take one first).

        A stalled job whose run has another job waiting already (the sweep offered its
        still-queued run again meanwhile) cannot go back to ``todo`` (the queueing lock
        allows one waiting job per run) and, still ``doing``, holds the run's lock, so the
        waiting job is never fetched either: it is deleted instead, and the waiting job
        delivers the run."""
        with _translated("looking for stalled jobs"):
            stalled = await self._jobs.get_stalled_jobs(
                queue=self.queue, task_name=TASK_NAME, seconds_since_heartbeat=stalled_after
            )
        now, retried = datetime.datetime.now(datetime.UTC), 0
        for job in stalled:
            assert job.id is not None
            try:
                await self._jobs.retry_job_by_id_async(job_id=job.id, retry_at=now)
                retried += 1
            except pexc.UniqueViolation:
                retried += await self._drop_stalled(job.id)
            except pexc.ProcrastinateException:
                continue  # taken by another sweep, or it just finished
        return retried

    async def _drop_stalled(self, job_id: int) -> int:
        """Delete a stalled job that another job of its run replaces; 1 if this did."""
        try:
            await self._jobs.finish_job_by_id_async(
                job_id=job_id, status=Status.FAILED, delete_job=True
            )
        except pexc.ProcrastinateException:
            return 0  # its worker came back and closed it, or another sweep deleted it
        return 1

    async def listen(self, on_job: Callable[[], Awaitable[None]]) -> None:
        """Call ``on_job`` for each job deferred on this queue; returns or raises
        ``DatabaseError`` only when the listening connection cannot be (re)made."""

        async def note(*, channel: str, notification: Any) -> None:
            if notification.get("type") == "job_inserted":
                await on_job()

        with _translated("listening"):
            await self._jobs.listen_for_jobs(on_notification=note, queues=[self.queue])
