"""A cgroup v2 per run: whatever the run starts is in it, and the whole cgroup ends with it.

A process cannot leave its cgroup by forking, ``setsid`` or re-parenting, so killing the
cgroup (``cgroup.kill``, Linux 5.14+) ends a double-forked daemon as surely as the child
itself. ``li`` creates the run's cgroup under its own (from ``/proc/self/cgroup``) in the
v2 hierarchy (found in ``/proc/self/mounts``: ``/sys/fs/cgroup`` on unified hosts,
``/sys/fs/cgroup/unified`` on hybrid ones). That needs write access to its own cgroup:
root, or a subtree delegated to the user (docs/containment.md says how under systemd).
When it cannot (no v2 hierarchy, no permission, ``LIRUN_CGROUP=off``, the portable
platform), :func:`create`
returns None and the caller falls back to the process group and the child subreaper.

Parsing is pure (:func:`v2_mount`, :func:`own_path`); the rest is file I/O on cgroupfs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from lirun import platform
from lirun.settings import CGROUP_ENV, Settings

__all__ = [
    "CGROUP_ENV",
    "RunCgroup",
    "create",
    "enabled",
    "own_path",
    "sweep_stale",
    "v2_mount",
]

# ``LIRUN_CGROUP=off`` (or 0, no, false): no cgroup, the fallback path (documented).
_counter = itertools.count(1)
_sweeps = itertools.count()


def enabled(settings: Settings) -> bool:
    """Run cgroups are tried: the Linux platform (``lirun.platform``), unless
    ``settings.cgroup`` (``$LIRUN_CGROUP``, as the run's settings read it) switches them off."""
    return settings.cgroup and platform.has_cgroups()


def v2_mount(mounts: str) -> str | None:
    """The mount point of the cgroup v2 hierarchy in ``/proc/self/mounts`` text, or None."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return fields[1].replace("\\040", " ")
    return None


def own_path(cgroup: str) -> str | None:
    """This process's v2 cgroup (the ``0::/path`` line of ``/proc/self/cgroup``), or None."""
    for line in cgroup.splitlines():
        if line.startswith("0::"):
            path = line[3:].strip()
            # "(deleted)" or a path outside our namespace's view cannot be joined.
            return path if path.startswith("/") and not path.endswith(" (deleted)") else None
    return None


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def parent_dir() -> Path | None:
    """The directory of this process's own cgroup, where run cgroups are created."""
    try:
        mount = v2_mount(_read("/proc/self/mounts"))
        mine = own_path(_read("/proc/self/cgroup"))
    except OSError:
        return None
    if mount is None or mine is None:
        return None
    path = Path(mount) / mine.lstrip("/")
    return path if (path / "cgroup.procs").exists() else None


@dataclass(slots=True)
class RunCgroup:
    """One run's cgroup. ``join_fd`` is its ``cgroup.procs`` open for writing: the child
    writes ``0`` to it between fork and exec, so it is inside before it runs anything."""

    path: Path
    join_fd: int | None = None

    def close_join(self) -> None:
        if self.join_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.join_fd)
            self.join_fd = None

    def pids(self) -> list[int]:
        """Every process in the cgroup and the cgroups its processes made under it."""
        found: list[int] = []
        for root, _dirs, _files in os.walk(self.path):
            with contextlib.suppress(OSError, ValueError):
                found += [int(p) for p in _read(os.path.join(root, "cgroup.procs")).split()]
        return sorted(set(found))

    def contains(self, pid: int) -> bool:
        return pid in self.pids()

    def populated(self) -> bool:
        try:
            events = _read(str(self.path / "cgroup.events"))
        except OSError:
            return bool(self.pids())
        return "populated 1" in events

    def kill(self) -> None:
        """SIGKILL every process in it (``cgroup.kill``; before Linux 5.14, freeze and
        kill one by one, so nothing forks meanwhile)."""
        kill_file = self.path / "cgroup.kill"
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
                self._freeze(False)  # a frozen process dies of SIGKILL all the same
                return
        self._freeze(True)
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self._freeze(False)

    def frozen_pids(self, seconds: float = 0.5) -> list[int]:
        """Freeze the cgroup (nothing in it forks any more) and list its processes: the
        exact set a following :meth:`kill` ends. Unfrozen by the kill."""
        self._freeze(True)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if "frozen 1" in _read(str(self.path / "cgroup.events")):
                    break
            except OSError:
                break
            time.sleep(0.005)
        return self.pids()

    def _freeze(self, on: bool) -> None:
        with contextlib.suppress(OSError):
            (self.path / "cgroup.freeze").write_text("1" if on else "0")

    def wait_empty(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.populated():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def remove(self) -> None:
        """Remove the (empty) cgroup and any it holds, deepest first."""
        self.close_join()
        for root, _dirs, _files in sorted(os.walk(self.path), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                os.rmdir(root)


def _owner_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def sweep_stale(parent: Path, prefix: str = "lirun") -> None:
    """Remove the empty run cgroups of owners that are gone (an owner and its guard both
    killed leave theirs behind; a cgroup holding processes is never removed)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            parts = entry.name.split(".")
            ours = len(parts) == 3 and parts[0] == prefix and parts[1].isdigit()
            group = RunCgroup(Path(entry.path))
            if ours and _owner_gone(int(parts[1])) and not group.populated():
                group.remove()


def prime(settings: Settings) -> None:
    """Start the kernel's wait for a cgroup move now, beside the run's setup, so the
    child's join into its run cgroup (its ``preexec_fn``) does not wait for it.

    The first move into any cgroup after a quiet spell waits for an RCU grace period (the
    kernel's cgroup_threadgroup_rwsem; measured 8 to 18 ms here, unless the hierarchy is
    mounted with ``favordynmods``); a move made while another is under way, or just after
    one, does not. So a daemon thread moves this process into the cgroup it is already in
    (a no-op), and that wait passes while ``li`` opens the database and writes the record.
    Best effort: where the write is refused nothing is lost but the head start."""
    if not enabled(settings):
        return
    parent = parent_dir()
    if parent is not None:
        threading.Thread(
            target=_move_self, args=(parent,), name="lirun-cgroup-prime", daemon=True
        ).start()


def _move_self(into: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(into / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)


def create(prefix: str = "lirun", *, settings: Settings) -> RunCgroup | None:
    """A new, empty cgroup for one run under this process's own; None when that cannot be
    done here or the run's ``settings`` switch cgroups off (then the caller contains the
    run without one)."""
    if not enabled(settings):
        return None
    parent = parent_dir()
    if parent is None:
        return None
    if next(_sweeps) == 0:  # once per process
        sweep_stale(parent, prefix)
    path = parent / f"{prefix}.{os.getpid()}.{next(_counter)}"
    try:
        path.mkdir(mode=0o755)
    except FileExistsError:
        path = parent / f"{prefix}.{os.getpid()}.{time.monotonic_ns()}"
        try:
            path.mkdir(mode=0o755)
        except OSError:
            return None
    except OSError:
        return None
    try:
        fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        with contextlib.suppress(OSError):
            path.rmdir()
        return None
    return RunCgroup(path, fd)
