"""Poll commands run on a worker's poll threads, not its firing thread (schedules/
poll_pool.py), with real ``li worker`` processes on SQLite and PostgreSQL: an ``--every 1s``
schedule keeps firing on time while a poll command of another schedule sleeps, and a
SIGTERM'd worker leaves no poll command (nor what it started) behind."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

from lirun.schedules.triggers import every_trigger, poll_trigger
from lirun.store import Store
from support.workerkit import add_schedule, until, workers

# A poll command that starts a grandchild, writes both pids, then sleeps.
SLOW_POLL = """\
import os, subprocess, sys, time
here = sys.argv[1]
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.path.join(here, "poll-pids.tmp"), "w") as file:
    file.write(f"{os.getpid()} {grandchild.pid}")
os.replace(os.path.join(here, "poll-pids.tmp"), os.path.join(here, "poll-pids"))
time.sleep(float(sys.argv[2]))
print("[]")
"""


def add_slow_poll(store: Store, tmp_path: Path, seconds: float) -> None:
    script = tmp_path / "slow_poll.py"
    script.write_text(SLOW_POLL)
    command = f"{sys.executable} {script} {tmp_path} {seconds:g}"
    trigger = poll_trigger(command, int(time.time()), every="1s", timeout="60s")
    add_schedule(store, tmp_path, "slow", ["run", "true"], trigger=trigger)


def poll_pids(tmp_path: Path) -> list[int] | None:
    path = tmp_path / "poll-pids"
    return [int(x) for x in path.read_text().split()] if path.exists() else None


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_an_every_schedule_fires_on_time_while_a_poll_command_sleeps(
    li_env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    add_slow_poll(store, tmp_path, 40)
    with workers(li_env, tmp_path):
        pids = until(lambda: poll_pids(tmp_path), what="the slow poll command to start")
        tick = add_schedule(
            store, tmp_path, "tick", ["run", "true"], trigger=every_trigger("1s", int(time.time()))
        )
        began = time.time()
        time.sleep(8)
        ended = time.time()
        assert all(alive(pid) for pid in pids), "the poll command ended before the window"
        runs = [
            r
            for r in store.schedules.list_runs(tick.id, limit=100)
            if r.due_at is not None and began + 1 <= r.due_at <= ended - 1
        ]
    # The due seconds of the window fired, each soon after its due time (a loaded test
    # machine may be late by a second or two; a firing thread waiting for the poll
    # command would fire none of them).
    assert len(runs) >= 4, [r.due_at for r in runs]
    late = [r.created_at - float(r.due_at or 0) for r in runs]
    assert max(late) < 3.0, late
    slow = store.schedules.get("slow")
    assert slow is not None
    assert slow.last_poll_at is None  # the poll was still running all along


def test_a_stopped_worker_leaves_no_poll_command_behind(
    li_env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    add_slow_poll(store, tmp_path, 600)
    with workers(li_env, tmp_path, "--grace", "30s") as procs:
        pids = until(lambda: poll_pids(tmp_path), what="the slow poll command to start")
        assert all(alive(pid) for pid in pids)
        began = time.monotonic()
        code = procs[0].terminate(timeout=20)
        took = time.monotonic() - began
        log = procs[0].text()
    assert code == 0, log
    assert took < 10, f"the worker took {took:.1f}s to stop"
    assert not [pid for pid in pids if alive(pid)], "a poll command outlived its worker"
    assert "stopped 1 running poll command" in log
    slow = store.schedules.get("slow")
    assert slow is not None
    assert slow.last_poll_reason is None  # a poll the worker stopped records nothing
