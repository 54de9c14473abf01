"""The PostgreSQL transport for schedule runs: procrastinate, in a schema of its own.

A queued run is one procrastinate job of the task ``lirun.run_schedule_run(run_id)``;
``serve`` runs procrastinate's worker (its own asyncio loop in the serving thread) and
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
- **Reconnects.** Any database error in the worker loop (a server restart, a cut link)
  ends that worker incarnation after its running handles return; ``serve`` opens a new
  one with backoff until ``stop``. A failed heartbeat is only logged, so a short outage
  does not stop a worker that is running long jobs.

procrastinate is imported only here; ``transport_for`` imports this module lazily, never
on ``li wait``'s path.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import procrastinate
import psycopg
import psycopg_pool
from procrastinate import exceptions as pexc
from procrastinate.manager import get_channel_for_queues
from procrastinate.schema import SchemaManager
from procrastinate.worker import Worker
from psycopg import sql

from lirun.errors import DatabaseConnectionLostError, DatabaseError
from lirun.logs import get_logger
from lirun.store import Store
from lirun.store.pg_connect import split_schema

log = get_logger(__name__)

TASK_NAME = "lirun.run_schedule_run"
DEFAULT_QUEUE_SCHEMA = "lirun_queue"
# A worker beats every HEARTBEAT_SECONDS; its jobs are stalled after STALLED_AFTER without
# a beat (well under the 60 s run lease, so a taken-but-unstarted run is re-offered soon).
HEARTBEAT_SECONDS = 5.0
STALLED_AFTER = 20.0
# Fallback poll when a NOTIFY was missed (the listener reconnects after an outage).
POLL_SECONDS = 2.0
# How long the LISTEN connection waits before it reconnects after losing the server, and
# how long it waits for a notification before it checks that its connection is alive.
LISTEN_RETRY_SECONDS = 0.5
LISTEN_CHECK_SECONDS = 5.0
# How often a worker looks for stalled jobs and for queued runs that have no job.
RECONCILE_SECONDS = 10.0
# How long ``enqueue`` waits for its first queue connection (psycopg_pool's default is
# 30 s): a submit whose run is committed must not hang on the queue it only wakes.
DEFER_CONNECT_SECONDS = 5.0
# A handle that raised is tried again (it is harmless: the compare-and-set guards it).
JOB_ATTEMPTS = 5
JOB_RETRY_WAIT = 2
# TCP settings of queue connections: a cut link is noticed in seconds, not minutes.
TCP_SETTINGS = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "connect_timeout": "5",
}


def queue_schema_for(schema: str | None) -> str:
    """The schema of procrastinate's tables for lirun's ``schema`` (None: the default)."""
    if not schema:
        return DEFAULT_QUEUE_SCHEMA
    return f"{schema[: 63 - len('_queue')]}_queue"


def queue_conninfo(url: str) -> tuple[str, str]:
    """(conninfo of the queue's connections, queue schema) for a lirun PostgreSQL URL."""
    rest, schema = split_schema(url)
    queue_schema = queue_schema_for(schema)
    params = psycopg.conninfo.conninfo_to_dict(rest)
    options = f"{params.get('options') or ''} -c search_path={queue_schema}".strip()
    merged: dict[str, Any] = {**TCP_SETTINGS, **params, "options": options}
    return psycopg.conninfo.make_conninfo("", **merged), queue_schema


def procrastinate_version() -> str:
    return importlib.metadata.version("procrastinate")


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def ensure_queue_schema(conninfo: str, queue_schema: str) -> None:
    """Make the queue schema and procrastinate's objects in it, once (advisory lock)."""
    stamp = f"procrastinate {procrastinate_version()}"
    try:
        with psycopg.connect(conninfo) as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"lirun:{queue_schema}"])
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(queue_schema))
            )
            row = conn.execute(
                "SELECT to_regclass(format('%%I.procrastinate_jobs', %s::text)) IS NOT NULL, "
                "obj_description(to_regnamespace(%s)::oid, 'pg_namespace')",
                [queue_schema, queue_schema],
            ).fetchone()
            assert row is not None
            present, comment = bool(row[0]), row[1] or ""
            if not present:
                conn.execute(SchemaManager.get_schema())
                conn.execute(
                    sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
                        sql.Identifier(queue_schema), sql.Literal(stamp)
                    )
                )
                return
    except psycopg.OperationalError as exc:
        raise DatabaseConnectionLostError(
            f"the queue schema {queue_schema} could not be checked: {exc}".strip()
        ) from None
    found = comment.removeprefix("procrastinate ").strip()
    if comment.startswith("procrastinate ") and _minor(found) != _minor(procrastinate_version()):
        raise DatabaseError(
            f"the queue schema {queue_schema} was made by procrastinate {found}, but "
            f"procrastinate {procrastinate_version()} is installed; apply procrastinate's "
            "migrations to it (or install the version that made it)"
        )


class _Worker(Worker):
    """procrastinate's worker, whose failed heartbeat is logged instead of stopping it (a
    short outage must not stop a worker that is running long jobs), and whose job that
    cannot be closed (taken over while this worker was cut off, or the database gone) is
    one line on stderr: the job is stalled, put back and harmlessly delivered again."""

    def __init__(self, *args: Any, conninfo: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lirun_conninfo = conninfo

    def _start_side_tasks(self) -> list[asyncio.Task[Any]]:
        # procrastinate's own listener is off (listen_notify=False): with no periodic task
        # its side-task monitor ends at once, and its listener does not come back from an
        # outage, so wake-ups would fall back to polling for good. This one reconnects.
        tasks = super()._start_side_tasks()
        tasks.append(asyncio.create_task(self._listen_forever(), name="lirun listener"))
        return tasks

    async def _listen_forever(self) -> None:
        channels = list(get_channel_for_queues(self.queues))
        failing = False
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self.lirun_conninfo, autocommit=True)
                async with conn:
                    for channel in channels:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    if failing:
                        log.info("queue listener reconnected", extra={"event": "queue.note"})
                        self._new_job_event.set()  # look for what was queued meanwhile
                    failing = False
                    while True:
                        async for note in conn.notifies(timeout=LISTEN_CHECK_SECONDS):
                            await self._handle_notification(
                                channel=note.channel, notification=json.loads(note.payload)
                            )
                        await conn.execute("SELECT 1")  # a dead connection raises here
            except (psycopg.Error, OSError, ValueError) as exc:
                if not failing:
                    log.warning(
                        f"queue listener lost its connection ({_brief(exc)}); reconnecting",
                        extra={"event": "queue.note"},
                    )
                failing = True
            await asyncio.sleep(LISTEN_RETRY_SECONDS)

    async def _persist_job_status(self, job: Any, *args: Any, **kwargs: Any) -> None:
        try:
            await super()._persist_job_status(job, *args, **kwargs)
        except pexc.ConnectorException as exc:
            run_id = job.task_kwargs.get("run_id")
            log.warning(
                f"queue job {job.id} (run {run_id}) could not be closed "
                f"({_brief(exc.__cause__ or exc)}); another worker took it over, or the "
                "database is gone and it will be offered again",
                extra={"event": "queue.note"},
            )

    async def _update_heartbeat(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(self.update_heartbeat_interval)
            try:
                assert self.worker_id is not None
                await self.app.job_manager.update_heartbeat(self.worker_id)
            except Exception as exc:
                if not failing:
                    log.warning(
                        f"queue heartbeat failed ({_brief(exc)}); retrying",
                        extra={"event": "queue.note"},
                    )
                failing = True
            else:
                failing = False


def _brief(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0]}" if first else type(exc).__name__


_POOL_LOG = logging.getLogger("psycopg.pool")


class _QuietPool(logging.Filter):
    """Drops what the pool named ``pool_name`` logs (a line per failed connection try):
    ``enqueue`` says in one exception what went wrong."""

    def __init__(self, pool_name: str) -> None:
        super().__init__()
        self.pool_name = pool_name

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.args, tuple) and self.pool_name in record.args)


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
        self.heartbeat_seconds = heartbeat_seconds
        self.stalled_after = stalled_after
        self.poll_seconds = poll_seconds
        self.reconcile_seconds = reconcile_seconds
        self._schema_ready = False
        self._lock = threading.Lock()
        self._defer_app: procrastinate.App | None = None
        self._defer_pool: psycopg_pool.ConnectionPool | None = None
        self._quiet = _QuietPool(f"lirun-enqueue-{id(self):x}")
        self._closed = False

    # -- enqueue ----------------------------------------------------------------------

    def _ensure_schema(self) -> None:
        with self._lock:
            if not self._schema_ready:
                ensure_queue_schema(self.conninfo, self.queue_schema)
                self._schema_ready = True

    def _deferrer(self) -> procrastinate.App:
        self._ensure_schema()
        with self._lock:
            if self._defer_app is None:
                pool = psycopg_pool.ConnectionPool(
                    self.conninfo, min_size=1, max_size=2, open=False,
                    check=psycopg_pool.ConnectionPool.check_connection,
                    name=self._quiet.pool_name,
                )  # fmt: skip
                _POOL_LOG.addFilter(self._quiet)
                try:
                    pool.open(wait=True, timeout=DEFER_CONNECT_SECONDS)  # closes it on timeout
                except psycopg_pool.PoolTimeout:
                    _POOL_LOG.removeFilter(self._quiet)
                    raise DatabaseConnectionLostError(
                        f"no connection to the queue schema {self.queue_schema} within "
                        f"{DEFER_CONNECT_SECONDS:g}s"
                    ) from None
                # procrastinate uses a pool it is given as it is, and leaves it to us to close
                app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector())
                self._defer_app, self._defer_pool = app.open(pool), pool
            return self._defer_app

    def enqueue(self, run_id: str) -> None:
        """Defer one job for ``run_id`` (a no-op while one already waits for it)."""
        app = self._deferrer()
        try:
            app.configure_task(
                TASK_NAME, queue=self.queue, queueing_lock=run_id, lock=run_id
            ).defer(run_id=run_id)
        except pexc.AlreadyEnqueued:
            pass
        except pexc.ConnectorException as exc:
            raise DatabaseConnectionLostError(
                f"run {run_id} is queued but its queue job could not be made ({_brief(exc)}); "
                "a worker offers it again when the database answers"
            ) from None

    # -- serve ------------------------------------------------------------------------

    def serve(
        self, handle: Callable[[str], None], *, concurrency: int, stop: threading.Event
    ) -> None:
        """Run procrastinate's worker until ``stop``; returns after running handles end."""
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

    def _app(
        self, handle: Callable[[str], None], concurrency: int, pool: ThreadPoolExecutor
    ) -> procrastinate.App:
        connector = procrastinate.PsycopgConnector(
            conninfo=self.conninfo, min_size=1, max_size=concurrency + 4
        )
        app = procrastinate.App(connector=connector)

        async def run_schedule_run(run_id: str) -> None:
            await asyncio.get_running_loop().run_in_executor(pool, handle, run_id)

        app.task(
            name=TASK_NAME,
            queue=self.queue,
            retry=procrastinate.RetryStrategy(max_attempts=JOB_ATTEMPTS, wait=JOB_RETRY_WAIT),
        )(run_schedule_run)
        return app

    async def _serve(
        self,
        handle: Callable[[str], None],
        concurrency: int,
        stop: threading.Event,
        pool: ThreadPoolExecutor,
    ) -> None:
        app = self._app(handle, concurrency, pool)
        queue_db = app.connector  # procrastinate's connection pool, not a lirun connector
        backoff = 0.5
        while not stop.is_set():
            started = time.monotonic()
            try:
                if not await _until(queue_db.open_async(), stop):
                    return
                try:
                    await self._run_worker(app, concurrency, stop)
                finally:
                    await app.close_async()
                if not stop.is_set():  # a side task (the listener) lost the database
                    log.info(
                        "queue worker stopped on its own; restarting it",
                        extra={"event": "queue.note"},
                    )
                    await _sleep_unless(stop, backoff)
            except Exception as exc:
                if stop.is_set():
                    return
                if time.monotonic() - started > 30:
                    backoff = 0.5
                log.warning(
                    f"queue worker lost its database ({_brief(exc)}); reconnecting",
                    extra={"event": "queue.note"},
                )
                await _sleep_unless(stop, backoff)
                backoff = min(backoff * 2, 5.0)

    async def _run_worker(
        self, app: procrastinate.App, concurrency: int, stop: threading.Event
    ) -> None:
        worker = _Worker(
            app=app,
            queues=[self.queue],
            name=f"{socket.gethostname()}:{os.getpid()}",
            concurrency=concurrency,
            install_signal_handlers=False,
            update_heartbeat_interval=self.heartbeat_seconds,
            stalled_worker_timeout=self.stalled_after,
            fetch_job_polling_interval=self.poll_seconds,
            listen_notify=False,  # _Worker listens itself (and reconnects)
            conninfo=self.conninfo,
            delete_jobs="successful",
        )
        app.perform_import_paths()
        run = asyncio.create_task(worker.run(), name="lirun queue worker")
        next_sweep = time.monotonic() + min(1.0, self.reconcile_seconds)
        while not run.done():
            if stop.is_set():
                worker.stop()
                break
            if time.monotonic() >= next_sweep:
                await self._sweep(app)
                next_sweep = time.monotonic() + self.reconcile_seconds
            await asyncio.wait([run], timeout=0.05)
        await run  # raises what ended the worker (then serve reconnects)

    async def _sweep(self, app: procrastinate.App) -> None:
        """Put stalled jobs back, and offer queued runs that have no job (best effort)."""
        try:
            stalled = await app.job_manager.get_stalled_jobs(
                queue=self.queue, task_name=TASK_NAME, seconds_since_heartbeat=self.stalled_after
            )
            for job in stalled:
                # another worker's sweep may take it first, or it may just have finished
                with contextlib.suppress(pexc.ProcrastinateException):
                    await app.job_manager.retry_job(job)
            if self._store is not None:
                ids = await asyncio.to_thread(self._store.schedules.list_queued_run_ids, limit=1000)
                for run_id in ids:
                    await asyncio.to_thread(self.enqueue, run_id)
        except Exception as exc:
            log.warning(f"queue sweep skipped ({_brief(exc)})", extra={"event": "queue.note"})

    def close(self) -> None:
        with self._lock:
            app, self._defer_app = self._defer_app, None
            pool, self._defer_pool = self._defer_pool, None
            self._closed = True
        if app is not None:
            app.close()
        if pool is not None:
            pool.close()
            _POOL_LOG.removeFilter(self._quiet)


async def _until(coro: Coroutine[Any, Any, Any], stop: threading.Event) -> bool:
    """Await ``coro`` unless ``stop`` is set first (then cancel it); True if it ended."""
    task = asyncio.ensure_future(coro)
    while not task.done():
        if stop.is_set():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            return False
        await asyncio.wait([task], timeout=0.05)
    task.result()
    return True


async def _sleep_unless(stop: threading.Event, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
