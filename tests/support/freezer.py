"""A cgroup v2 freezer for the tests: a process tree started in a cgroup of its own and
frozen whole (``cgroup.freeze``), as ``docker pause``, a frozen pod or a stalled VM
freezes a worker together with its guard and its work.

``unavailable()`` says why it cannot be done here (no cgroup v2 hierarchy, not allowed
to make a cgroup in it, no ``cgroup.freeze``: Linux before 5.2), else None.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lirun.exec.cgroup import parent_dir


def unavailable() -> str | None:
    """Why a test cannot freeze a cgroup here, or None when it can."""
    parent = parent_dir()
    if parent is None:
        return "no cgroup v2 hierarchy this process may use (/proc/self/mounts, /proc/self/cgroup)"
    probe = parent / f"lirun-freeze-probe-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        probe.mkdir()
    except OSError as exc:
        return f"cannot make a cgroup under {parent}: {exc} (root or a delegated subtree)"
    try:
        if not (probe / "cgroup.freeze").exists():
            return "no cgroup.freeze (the cgroup v2 freezer needs Linux 5.2 or newer)"
        return None
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


class Freezer:
    """One cgroup: ``argv(...)`` starts a command inside it (before it runs anything),
    ``freeze()`` / ``thaw()`` stop and resume everything in it and below it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def argv(self, argv: list[str]) -> list[str]:
        """``argv`` run inside this cgroup: a shell joins it, then execs the command."""
        join = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
        return ["sh", "-c", join, str(self.path), *argv]

    def freeze(self, timeout: float = 5.0) -> float:
        """Freeze the tree; returns the wall-clock time once the kernel says it is frozen."""
        (self.path / "cgroup.freeze").write_text("1")
        deadline = time.monotonic() + timeout
        while "frozen 1" not in (self.path / "cgroup.events").read_text():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.path} did not freeze in {timeout:.0f}s")
            time.sleep(0.002)
        return time.time()

    def thaw(self) -> float:
        """Thaw the tree; returns the wall-clock time just before the write."""
        at = time.time()
        (self.path / "cgroup.freeze").write_text("0")
        return at

    def pids(self) -> list[int]:
        found: list[int] = []
        for root, _dirs, _files in os.walk(self.path):
            with contextlib.suppress(OSError, ValueError):
                found += [int(p) for p in Path(root, "cgroup.procs").read_text().split()]
        return found

    def destroy(self) -> None:
        """Thaw, kill whatever is left, and remove the cgroup and those below it."""
        with contextlib.suppress(OSError):
            (self.path / "cgroup.freeze").write_text("0")
        kill = self.path / "cgroup.kill"
        for _ in range(100):
            if not self.pids():
                break
            if kill.exists():
                with contextlib.suppress(OSError):
                    kill.write_text("1")
            else:
                for pid in self.pids():
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
        for root, _dirs, _files in sorted(os.walk(self.path), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                os.rmdir(root)


@contextmanager
def freezer(name: str) -> Iterator[Freezer]:
    """A new cgroup named after ``name`` under this process's own; destroyed at the end."""
    parent = parent_dir()
    assert parent is not None, unavailable()
    path = parent / f"lirun-test-{name}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    path.mkdir()
    group = Freezer(path)
    try:
        yield group
    finally:
        group.destroy()
