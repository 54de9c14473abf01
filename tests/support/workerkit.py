"""Real ``li worker`` processes for the tests, and the waits on their records."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.triggers import Trigger, every_trigger
from lirun.store import Store
from lirun.store.rows import ScheduleRow, ScheduleRunRow
from support.cli import li_command

T = TypeVar("T")


def until(check: Callable[[], T | None], timeout: float = 15.0, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy (the records have no event a
    test process could wait on); fail after ``timeout`` seconds. The value returned is
    ``check``'s truthy one, so never None."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class WorkerProcess:
    def __init__(self, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.proc = proc
        self.log = log

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def terminate(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@contextmanager
def workers(
    env: dict[str, str], tmp_path: Path, *options: str, count: int = 1
) -> Iterator[list[WorkerProcess]]:
    """``count`` ``li worker`` processes, started and ready; stopped (SIGTERM, then
    SIGKILL) at the end."""
    started: list[WorkerProcess] = []
    try:
        for _ in range(count):
            log = tmp_path / f"worker-{len(started)}-{os.urandom(3).hex()}.log"
            with open(log, "wb") as sink:
                proc = subprocess.Popen(
                    li_command("worker", *options),
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=sink,
                )
            started.append(WorkerProcess(proc, log))
        for worker in started:
            until(_started(worker), what="the worker to start")
        yield started
    finally:
        for worker in started:
            try:
                worker.terminate(timeout=20)
            except subprocess.TimeoutExpired:
                worker.kill()


def _started(worker: WorkerProcess) -> Callable[[], bool]:
    return lambda: " started: " in worker.text()


def add_schedule(
    store: Store,
    cwd: Path,
    name: str,
    action: list[str],
    *,
    trigger: Trigger | None = None,
    now: int | None = None,
    **policies: Any,
) -> ScheduleRow:
    """A schedule stored as ``li schedule add`` stores it (``now``: the add time)."""
    now = int(time.time()) if now is None else now
    trigger = trigger or every_trigger("1s", now)
    definition = Definition(
        name=name,
        trigger=trigger,
        action=parse_action(action, base=str(cwd)),
        policies=make_policies(policies, trigger),
    )
    return registry.add(store, definition, now=now)


def next_due(schedule: ScheduleRow) -> int:
    """The schedule's next due time, which an enabled schedule has."""
    assert schedule.next_due_at is not None, f"{schedule.name} has no next due time"
    return schedule.next_due_at


def due_at(run: ScheduleRunRow) -> int:
    """The due time a schedule's run was fired for (a ``li submit`` run has none)."""
    assert run.due_at is not None, f"{run.id} has no due time"
    return run.due_at


def run_row(store: Store, run_id: str) -> dict[str, Any]:
    row = store.get_entity("schedule_run", run_id)
    assert row is not None
    return row


def status_is(store: Store, run_id: str, *statuses: str) -> dict[str, Any] | None:
    row = run_row(store, run_id)
    return row if row["status"] in statuses else None
