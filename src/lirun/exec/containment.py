"""What contains one run's processes, and the one way to kill all of them.

A run's child leads its own session and process group, and on Linux is started inside a
cgroup of its own when ``li`` can create one (``exec.cgroup``): nothing it starts can leave
that. The child also gets a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGKILL)``): when
the thread of ``li`` that supervises it dies, so does the child. Its descendants are ended
by the owner's guard process (``exec.guard``) with :func:`kill_run_tree`.

:func:`kill_run_tree` takes plain values (a pid and a path), so a process other than the
owner (its guard) can call it for a run it was told about.

Without a cgroup, a process that left the run's group and session (a double-forked
daemon) is still found after its owner died by the mark every process of the run
inherits in its environment (``LIRUN_TREE``), unless it cleared its environment.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lirun import platform
from lirun.exec.cgroup import RunCgroup

__all__ = [
    "TREE_ENV",
    "RunTree",
    "child_setup",
    "finish_cgroup",
    "kill_run_tree",
    "marked",
    "new_mark",
    "running_trees",
    "session_members",
    "signal_cgroup",
    "strike_run",
]

# Set in every supervised child's environment (inherited by what it starts): the run's mark.
TREE_ENV = "LIRUN_TREE"
_PR_SET_PDEATHSIG = 1
_marks = itertools.count(1)
# The runs this process supervises right now, by the child's pid.
_trees: dict[int, RunTree] = {}
_trees_lock = threading.Lock()


@dataclass(slots=True)
class RunTree:
    """Where one run's processes are: the child's group (its pid), its cgroup if any, and
    the mark in their environment."""

    leader: int
    cgroup: RunCgroup | None = None
    mark: str | None = None


def new_mark() -> str:
    """A mark for one run, unique on this machine while its owner lives."""
    return f"{os.getpid()}.{next(_marks)}.{time.monotonic_ns()}"


def marked(mark: str) -> list[int]:
    """Live processes whose environment carries ``TREE_ENV=mark`` (those this process
    may read: its own user's, or all for root)."""
    needle = f"{TREE_ENV}={mark}".encode()
    found = []
    for pid in platform.process_table():
        if pid == os.getpid() or needle not in (platform.environ(pid) or ()):
            continue
        if platform.alive(pid):
            found.append(pid)
    return sorted(found)


def track(leader: int, cgroup: RunCgroup | None, mark: str | None = None) -> None:
    with _trees_lock:
        _trees[leader] = RunTree(leader, cgroup, mark)


def untrack(leader: int) -> None:
    with _trees_lock:
        _trees.pop(leader, None)


def running_trees() -> list[RunTree]:
    """The runs this process supervises now (for :func:`kill_run_tree`)."""
    with _trees_lock:
        return list(_trees.values())


def child_setup(cgroup: RunCgroup | None) -> Callable[[], None] | None:
    """The ``preexec_fn`` of a supervised child: join the run's cgroup, then die with the
    thread that started it. Runs between fork and exec, so it only writes to descriptors
    and calls libc functions resolved beforehand."""
    prctl = platform.prctl()
    join_fd = cgroup.join_fd if cgroup is not None else None
    if prctl is None and join_fd is None:
        return None
    owner = os.getpid()

    def setup() -> None:
        if join_fd is not None:
            # Not joined: the parent sees the child outside and falls back (no raise here).
            with contextlib.suppress(OSError):
                os.write(join_fd, b"0")
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != owner:  # the owner died before the signal was armed
                os.kill(os.getpid(), signal.SIGKILL)

    return setup


def session_members(leader: int) -> list[int]:
    """Live processes in the group or the session ``leader`` started."""
    return sorted(
        pid
        for pid, (state, _, pgrp, sid) in platform.process_table().items()
        if pid != leader and state not in platform.GONE and leader in (pgrp, sid)
    )


def _kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def strike_run(leader: int | None, cgroup: str | os.PathLike[str] | None) -> None:
    """SIGKILL one run's cgroup and process group at once, before anything is listed
    (:func:`kill_run_tree` then finds and kills the rest, with the evidence)."""
    if cgroup is not None and Path(cgroup).is_dir():
        RunCgroup(Path(cgroup)).kill()
    if leader is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)


def kill_run_tree(
    leader: int | None,
    cgroup: str | os.PathLike[str] | None = None,
    *,
    known: Iterable[int] = (),
    mark: str | None = None,
    wait: float = 2.0,
) -> dict[str, Any] | None:
    """SIGKILL every process of one run now; the evidence entry, or None if none was alive.

    ``leader``: the supervised child's pid (its group and session id), None when the
    owner died before it knew it; ``cgroup``: the run's cgroup directory when it has one,
    which holds everything the run started; ``known``: other pids known to be the run's
    (the subreaper's orphans); ``mark``: the run's ``TREE_ENV`` mark. Without a cgroup a
    process that left both the group and the session is found only through ``known`` or
    its mark. The cgroup is frozen before its processes are listed, and the group, the
    session and the mark are looked at again after each kill until none is left (or
    ``wait`` seconds passed), so the entry names every process killed, also one forked
    while the kill was under way. Safe to call from any process with the right to signal
    them (the owner, its guard).
    """
    group = RunCgroup(Path(cgroup)) if cgroup is not None else None
    if group is not None and not group.path.is_dir():
        group = None
    seen: dict[int, str] = {}
    deadline = time.monotonic() + wait
    first = True
    while True:
        found: set[int] = set()
        if group is not None:  # frozen at first; its kill then also ends what forks later
            listed = group.frozen_pids() if first else group.pids()
            found = {p for p in listed if platform.alive(p)}
        first = False
        if leader is not None:
            found |= {p for p in (leader, *session_members(leader)) if platform.alive(p)}
        found |= {p for p in known if platform.alive(p)}
        if mark is not None:
            found |= set(marked(mark))
        for pid in sorted(found - seen.keys()):
            seen[pid] = platform.command_line(pid)
        if group is not None:
            group.kill()
        if leader is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(leader, signal.SIGKILL)
        _kill_all(found)
        if not found and (group is None or not group.populated()):
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    if not seen:
        return None
    processes = [{"pid": pid, "command": command} for pid, command in sorted(seen.items())]
    entry: dict[str, Any] = {"kind": "killed_descendants", "processes": processes}
    entry["signal"] = "SIGKILL"
    if group is not None:
        entry["cgroup"] = str(group.path)
    return entry


def signal_cgroup(group: RunCgroup, first: signal.Signals) -> dict[str, Any] | None:
    """The child exited: send ``first`` to what is left in its cgroup, without waiting (a
    SIGKILL is the cgroup's own, at once); the evidence entry, or None if it was empty.
    ``finish_cgroup`` ends them."""
    pids = group.pids()
    if not pids:
        return None
    processes = [{"pid": pid, "command": platform.command_line(pid)} for pid in pids]
    if first == signal.SIGKILL:
        group.kill()
    else:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, first)
    entry = {
        "kind": "killed_descendants",
        "processes": processes,
        "signal": first.name,
        "cgroup": str(group.path),
    }
    return entry


def finish_cgroup(group: RunCgroup, deadline: float) -> dict[str, Any] | None:
    """Wait until ``deadline`` (``time.monotonic``) for the cgroup to empty, then kill what
    is in it (``cgroup.kill``); the evidence entry of those, or None when none was left."""
    group.wait_empty(max(0.0, deadline - time.monotonic()))
    forced = group.pids()
    if not forced:
        return None
    processes = [{"pid": p, "command": platform.command_line(p)} for p in forced]
    group.kill()
    group.wait_empty(2.0)
    return {
        "kind": "killed_descendants",
        "processes": processes,
        "signal": "SIGKILL",
        "cgroup": str(group.path),
    }
