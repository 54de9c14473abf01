"""Helpers for end-to-end tests of ``li run`` / ``li agent``: real processes, real repos."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.gitkit import make_repo

TESTS_DIR = Path(__file__).resolve().parents[1]
# Generous: CI machines are shared; a hung li must still fail the test, not the suite.
LI_TIMEOUT = 60.0


def li_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "lirun", *args]


def git_repo(path: Path) -> Path:
    """A clean git repository with one commit on ``main`` and no remote."""
    return make_repo(path)


def run_li(
    *args: str,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float = LI_TIMEOUT,
    stdin: int | None = subprocess.DEVNULL,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_argv(*args),
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=stdin,
    )


def start_li(*args: str, env: Mapping[str, str], cwd: Path) -> subprocess.Popen[str]:
    """``li`` in the background (for signals); its stdio is captured."""
    return subprocess.Popen(
        li_argv(*args),
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def poll(
    check: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Call ``check`` until it returns something truthy; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(interval)


@contextmanager
def opened_store(db_url: str) -> Iterator[Any]:
    from lirun.store import open_store

    store = open_store(db_url)
    try:
        yield store
    finally:
        store.close()


def session_rows(db_url: str) -> list[dict[str, Any]]:
    """The newest executions as the JSON outputs print them (each row's ``as_dict``)."""
    with opened_store(db_url) as store:
        return [row.as_dict() for row in store.sessions.list_recent(limit=100)]


def only_row(db_url: str) -> dict[str, Any]:
    rows = session_rows(db_url)
    assert len(rows) == 1, f"expected one execution row, got {len(rows)}"
    return rows[0]


def get_row(db_url: str, run_id: str) -> dict[str, Any]:
    with opened_store(db_url) as store:
        row = store.get_entity("session", run_id)
    assert row is not None, f"no row {run_id}"
    return row


def wait_line_for(row: Mapping[str, Any]) -> str:
    """The ``li wait`` line the record holds (design.md D6 plus §4.1 and §4.7)."""
    return (
        f"{row['id']}\tstatus={row['status']}\treason={row['status_reason_code']}"
        f"\tartifact_dir={row['artifacts_path']}\texit_code={row['exit_code']}"
    )


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_for_running_row(db_url: str, timeout: float = 20.0) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        rows = [r for r in session_rows(db_url) if r["status"] == "running"]
        return rows[0] if rows else None

    row: dict[str, Any] = poll(check, timeout=timeout, what="a running execution row")
    return row


def send(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=LI_TIMEOUT)
    return proc.returncode, out, err
