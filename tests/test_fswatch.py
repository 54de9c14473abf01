"""The directory watch that lets idle SQLite waiters sleep until a commit."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lirun.store import open_store
from lirun.wait.fswatch import DirectoryWatch
from lirun.wait.wake import ChangeTokenWaker
from support.platforms import linux_only


@linux_only("inotify")
def test_a_write_in_the_directory_wakes_the_watch(tmp_path: Path) -> None:
    watch = DirectoryWatch.open(tmp_path)
    assert watch is not None  # Linux: inotify is available
    try:
        assert watch.wait(0.05) is False  # nothing happened
        (tmp_path / "x").write_text("1")
        assert watch.wait(1.0) is True
        assert watch.wait(0.05) is False  # the events were drained
        (tmp_path / "x").write_text("2")
        assert watch.wait(0.05) is False  # one-shot: writers pay nothing until re-armed
        assert watch.arm()
        (tmp_path / "x").write_text("3")
        assert watch.wait(1.0) is True
    finally:
        watch.close()


def test_a_missing_directory_gives_no_watch(tmp_path: Path) -> None:
    assert DirectoryWatch.open(tmp_path / "absent") is None


_AT_THE_FILE_LIMIT = """
import os, resource, sys
from lirun import platform
from lirun.wait.fswatch import DirectoryWatch
assert platform.has_inotify()  # known before the limit, as in li ui's watcher
assert "ctypes" not in sys.modules
resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
print(DirectoryWatch.open(sys.argv[1]))
"""


@linux_only("inotify")
def test_a_process_out_of_file_descriptors_gets_no_watch_and_no_exception(
    tmp_path: Path,
) -> None:
    # Loading ctypes needs a descriptor for its shared library: at the limit the import
    # fails, and a dashboard's watcher thread died of it where it should have polled.
    done = subprocess.run(
        [sys.executable, "-c", _AT_THE_FILE_LIMIT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "None"


@linux_only("inotify")
def test_ctypes_that_cannot_load_gives_no_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Which import step meets the limit varies: reading ctypes' source is an OSError (as
    # above), loading its shared library an ImportError, as a dashboard in CI met it.
    monkeypatch.delitem(sys.modules, "ctypes", raising=False)
    monkeypatch.setitem(sys.modules, "_ctypes", None)
    assert DirectoryWatch.open(tmp_path) is None


@linux_only("inotify")
def test_a_watched_waker_sleeps_while_idle_and_wakes_on_a_commit(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    writer = open_store(path)
    writer.sessions.create(id="s1")
    reader = open_store(path, readonly=True)
    watch = DirectoryWatch.open(tmp_path)
    looks: list[float] = []
    waker = ChangeTokenWaker(reader.connector, watch=watch, sleep=looks.append)
    try:
        started = time.monotonic()
        assert waker.wait(0.3, lambda: False) is False
        assert time.monotonic() - started >= 0.29
        assert looks == []  # no polling sleeps: it blocked on the watch

        timer = threading.Timer(
            0.1,
            lambda: writer.update_status(
                "session", "s1", new_status="completed", reason_code="run.completed.ok"
            ),
        )
        timer.start()
        started = time.monotonic()
        assert waker.wait(5.0, lambda: False) is True
        assert time.monotonic() - started < 1.0
        timer.join()
    finally:
        waker.close()
        reader.close()
        writer.close()


class _BusyConnector:
    """Another connection commits before every look: the token always moves."""

    def __init__(self) -> None:
        self.token = 0

    def change_token(self) -> object:
        self.token += 1
        return self.token


class _AlwaysFiring:
    def arm(self) -> bool:
        return True

    def wait(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass


def test_a_busy_writer_never_makes_a_watched_waker_spin() -> None:
    """Every wake-up after the first waits out the gap, even the one seen while arming."""
    slept: list[float] = []
    waker = ChangeTokenWaker(
        _BusyConnector(),  # type: ignore[arg-type]  # a stand-in with the calls used
        watch=_AlwaysFiring(),  # type: ignore[arg-type]  # a stand-in with the calls used
        sleep=slept.append,
        check_seconds=0.05,
        max_gap_seconds=0.05,
    )
    for _ in range(20):
        assert waker.wait(10.0, lambda: False) is True
        waker.after_read(useful=False)
        time.sleep(0.002)  # the re-read
    spaced = [s for s in slept if s > 0.04]
    assert len(spaced) >= 18, slept  # at most the first wake-ups are prompt
