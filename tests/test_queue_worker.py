"""lirun's worker loop on the queue (``schedules/queue_worker``), against a fake queue:
what an outage of each of its parts does, without a database or a real sleep of note."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from lirun.errors import DatabaseError
from lirun.schedules.procrastinate_adapter import QueueJob
from lirun.schedules.queue_worker import QueueWorker, Timing

FAST = Timing(heartbeat_seconds=0.01, stalled_after=1.0, poll_seconds=0.02, reconcile_seconds=0.05)


class FakeQueue:
    """Jobs to hand out; each operation can be made to fail."""

    def __init__(self, run_ids: list[str]) -> None:
        self.todo = [QueueJob(id=i, run_id=r, attempts=0) for i, r in enumerate(run_ids)]
        self.finished: list[tuple[int, bool]] = []
        self.retried: list[int] = []
        self.beats = 0
        self.listens = 0
        self.sweeps = 0
        self.fail: set[str] = set()
        self.hang: set[str] = set()  # operations that never answer (a silent database)
        self.hanging: set[str] = set()  # and those awaited now
        self.unregistered = False

    def _maybe_fail(self, what: str) -> None:
        if what in self.fail:
            raise DatabaseError(f"{what} failed (OperationalError: server closed)")

    async def _maybe_hang(self, what: str) -> None:
        if what in self.hang:
            self.hanging.add(what)
            await asyncio.Event().wait()

    async def register(self, stalled_after: float) -> int:
        return 7

    async def unregister(self, worker_id: int) -> None:
        await self._maybe_hang("unregister")
        self.unregistered = True

    async def heartbeat(self, worker_id: int) -> None:
        self.beats += 1
        self._maybe_fail("heartbeat")

    async def fetch(self, worker_id: int) -> QueueJob | None:
        await self._maybe_hang("fetch")
        self._maybe_fail("fetch")
        return self.todo.pop(0) if self.todo else None

    async def finish(self, job: QueueJob, *, succeeded: bool) -> None:
        await self._maybe_hang("finish")
        self._maybe_fail("finish")
        self.finished.append((job.id, succeeded))

    async def retry(self, job: QueueJob, *, after: float) -> None:
        self.retried.append(job.id)

    async def retry_stalled(self, stalled_after: float) -> int:
        self.sweeps += 1
        await self._maybe_hang("sweep")
        return 0

    async def listen(self, on_job: Callable[[], Awaitable[None]]) -> None:
        self.listens += 1
        self._maybe_fail("listen")
        await asyncio.Event().wait()


def serve(
    queue: FakeQueue,
    handle: Callable[[str], None],
    until: Callable[[], bool],
    *,
    limit: float = 5.0,
) -> BaseException | None:
    """Run a QueueWorker until ``until()`` (then stop) or it raises; what it raised.
    Fails if neither happens within ``limit`` seconds."""
    stop = threading.Event()

    async def extra() -> None:
        return None

    async def main() -> BaseException | None:
        with ThreadPoolExecutor(2) as pool:
            worker = QueueWorker(queue, handle, 2, stop, pool, FAST, extra)  # type: ignore[arg-type]
            task = asyncio.create_task(worker.run())
            loop = asyncio.get_running_loop()
            deadline = loop.time() + limit
            while not task.done() and not until() and loop.time() < deadline:
                await asyncio.sleep(0.01)
            reached = task.done() or until()
            stop.set()
            try:
                await asyncio.wait_for(task, timeout=limit)
            except Exception as exc:
                return exc
            assert reached, "what the test waits for did not happen"
            return None

    return asyncio.run(main())


def test_each_job_is_handled_and_closed_and_the_worker_unregisters_on_stop() -> None:
    queue, seen = FakeQueue(["a", "b", "c"]), list[str]()
    assert serve(queue, seen.append, lambda: len(queue.finished) == 3) is None
    assert sorted(seen) == ["a", "b", "c"]
    assert sorted(queue.finished) == [(0, True), (1, True), (2, True)]
    assert queue.unregistered


def test_a_failed_heartbeat_is_one_warning_and_the_worker_keeps_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue, seen = FakeQueue([]), []
    queue.fail.add("heartbeat")
    started = threading.Event()

    def handle(run_id: str) -> None:
        seen.append(run_id)
        started.set()

    def later() -> bool:
        if queue.beats >= 5 and not queue.todo and not seen:
            queue.todo.append(QueueJob(id=9, run_id="late", attempts=0))
        return started.is_set() and bool(queue.finished)

    with caplog.at_level(logging.WARNING, logger="lirun.schedules.queue_worker"):
        assert serve(queue, handle, later) is None
    assert seen == ["late"]  # still fetching while its heartbeat fails
    beats = [r for r in caplog.records if "heartbeat failed" in r.getMessage()]
    assert len(beats) == 1, [r.getMessage() for r in caplog.records]


def test_a_listener_that_cannot_connect_is_started_again() -> None:
    queue = FakeQueue([])
    queue.fail.add("listen")
    assert serve(queue, lambda _: None, lambda: queue.listens >= 2) is None


def test_a_job_that_cannot_be_closed_is_one_line_and_the_worker_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue, seen = FakeQueue(["a", "b"]), list[str]()
    queue.fail.add("finish")
    with caplog.at_level(logging.WARNING, logger="lirun.schedules.queue_worker"):
        assert serve(queue, seen.append, lambda: len(seen) == 2) is None
    closing = [r.getMessage() for r in caplog.records if "could not be closed" in r.getMessage()]
    assert len(closing) == 2
    assert "server closed" in closing[0]


def test_a_failed_fetch_ends_the_incarnation_after_running_handles_return() -> None:
    queue, release, ended = FakeQueue(["long"]), threading.Event(), []

    def handle(run_id: str) -> None:
        release.wait(5)
        ended.append(run_id)

    def cut() -> bool:
        if not queue.todo and "fetch" not in queue.fail:
            queue.fail.add("fetch")
            threading.Timer(0.2, release.set).start()
        return False

    raised = serve(queue, handle, cut)
    assert isinstance(raised, DatabaseError)
    assert ended == ["long"]  # its handle returned before run() raised
    assert queue.finished == [(0, True)]


def test_a_handle_that_raises_is_retried() -> None:
    queue = FakeQueue(["boom"])

    def handle(run_id: str) -> None:
        raise RuntimeError("no")

    assert serve(queue, handle, lambda: bool(queue.retried)) is None
    assert queue.retried == [0]
    assert queue.finished == []


@pytest.mark.parametrize("silent", ["fetch", "sweep"])
def test_stop_ends_the_loop_while_the_database_does_not_answer(
    silent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopping worker does not wait for a database that does not answer (after a
    failover, issue 33): ``stop`` cancels the fetch or sweep under way, and unregistering
    gets its bound."""
    from lirun.schedules import queue_worker

    monkeypatch.setattr(queue_worker, "STOPPING_WRITE_SECONDS", 0.2)
    queue = FakeQueue([])
    queue.hang |= {silent, "unregister"}
    began, result = time.monotonic(), list[BaseException | None]()

    def serving() -> None:
        result.append(serve(queue, lambda _: None, lambda: silent in queue.hanging))

    thread = threading.Thread(target=serving, daemon=True)  # a hang fails, not hangs, it
    thread.start()
    thread.join(10)
    assert result == [None], "the worker loop did not end after stop"
    assert "unregister" in queue.hanging
    assert time.monotonic() - began < 3


def test_stop_ends_a_job_close_begun_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's close that began before the stop (its pool waiting for a server gone in a
    failover) gets ``STOPPING_WRITE_SECONDS`` once the stop comes, not its own 30 s: a
    worker hung 20 s after SIGTERM in a failover-and-back round on this."""
    from lirun.schedules import queue_worker

    monkeypatch.setattr(queue_worker, "STOPPING_WRITE_SECONDS", 0.2)
    queue = FakeQueue(["a"])
    queue.hang.add("finish")
    began, result = time.monotonic(), list[BaseException | None]()

    def serving() -> None:
        result.append(serve(queue, lambda _: None, lambda: "finish" in queue.hanging))

    thread = threading.Thread(target=serving, daemon=True)
    thread.start()
    thread.join(10)
    assert result == [None], "the worker loop did not end after stop"
    assert queue.finished == []  # left open: stalled, and delivered again elsewhere
    assert time.monotonic() - began < 3
