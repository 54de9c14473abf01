"""Helpers for `li wait` / liveness / reap tests: real waiter processes, real owners."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Any

from lirun.liveness import boot_id, current_owner, host_name, process_start_time
from support.cli import li_command

LINE_TIMEOUT = 20.0


def _plain(env: dict[str, str]) -> dict[str, str]:
    # Without PYTHONUNBUFFERED, so a line reaches the pipe only if the waiter flushes it.
    return {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}


def start_waiter(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """`li wait ARGS` with stdout and stderr on pipes (so nothing is a TTY)."""
    return subprocess.Popen(
        li_command("wait", *args),
        env=_plain(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def wait_until_ready(proc: subprocess.Popen[str], settle: float = 0.3) -> None:
    """Block until the waiter has installed its SIGTERM handler (it opens the database
    right after), then give it ``settle`` seconds to resolve its ids."""
    deadline = time.monotonic() + LINE_TIMEOUT
    sigterm_bit = 1 << (signal.SIGTERM - 1)
    while time.monotonic() < deadline and proc.poll() is None:
        with open(f"/proc/{proc.pid}/status", encoding="ascii") as handle:
            caught = next(line for line in handle if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & sigterm_bit:
            time.sleep(settle)
            return
        time.sleep(0.01)
    raise AssertionError("the waiter never got ready (or exited early)")


def hold_write_lock(db_url: str) -> subprocess.Popen[str]:
    """A process that holds the database's write lock until its stdin gets a line.

    SQLite: an open ``BEGIN IMMEDIATE``; PostgreSQL: an EXCLUSIVE lock on sessions.
    """
    script = (
        "import sys\n"
        "from lirun.store import open_connector\n"
        "c = open_connector(sys.argv[1])\n"
        "with c.write() as tx:\n"
        "    if c.dialect == 'postgres':\n"
        "        tx.execute('LOCK TABLE sessions IN EXCLUSIVE MODE')\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script, db_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    return holder


def read_line(proc: subprocess.Popen[str], timeout: float = LINE_TIMEOUT) -> str:
    """The next stdout line of a still-running process; fails instead of hanging."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(f"no line on the waiter's stdout within {timeout}s")
    return proc.stdout.readline().rstrip("\n")


def finish(proc: subprocess.Popen[str], timeout: float = LINE_TIMEOUT) -> tuple[int, str, str]:
    """Exit code, remaining stdout and stderr of a waiter."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def run_wait(env: dict[str, str], *args: str, timeout: float = 60) -> tuple[int, str, str]:
    result = subprocess.run(
        li_command("wait", *args),
        env=_plain(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return result.returncode, result.stdout, result.stderr


def parse_line(line: str) -> dict[str, str]:
    """``id\\tk=v\\t...`` → {"id": id, k: v, ...}."""
    first, *pairs = line.split("\t")
    return {"id": first, **dict(p.split("=", 1) for p in pairs)}


def complete(store: Any, entity_id: str, *, status: str = "completed", **fields: Any) -> None:
    """A terminal write through the one status writer, as an executor would make it."""
    reasons = {
        "completed": "run.completed.ok",
        "failed": "run.failed.exception",
        "completed_empty": "run.completed_empty.no_evidence",
    }
    store.update_status(
        "session",
        entity_id,
        new_status=status,
        reason_code=reasons[status],
        extra_fields={"exit_code": 0 if status == "completed" else 1, **fields},
    )


def killed_owner() -> dict[str, Any]:
    """The owner identity of a real process that was then killed with SIGKILL."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 10
        started = process_start_time(child.pid)
        while started is None and time.monotonic() < deadline:
            time.sleep(0.01)
            started = process_start_time(child.pid)
        identity = {
            "owner_pid": child.pid,
            "owner_start_time": started,
            "owner_host": host_name(),
            "owner_boot_id": boot_id(),
        }
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    return identity


def live_owner() -> dict[str, Any]:
    """This test process as the owner: alive for as long as the test runs."""
    return current_owner()
