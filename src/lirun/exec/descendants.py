"""Every process a run started ends with it: its group, and descendants that left the group.

The child leads its own process group; ``li`` stops the group. A descendant that called
``setsid`` (or whose parent died) has left the group; on Linux ``li`` becomes a *child
subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``) so such orphans are re-parented to ``li``
instead of init, and a scan of ``/proc`` finds them (``li`` enables it for its own process;
a library caller's process is left as it is). What had to be ended is returned as evidence
(pid and command line of each). Without ``/proc`` only the process group is stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterable
from typing import Any

__all__ = [
    "enable_subreaper",
    "end_leftovers",
    "find_leftovers",
    "own_children",
    "register_leader",
    "unregister_leader",
]

_PR_SET_CHILD_SUBREAPER = 36
_subreaper: bool | None = None
# Children that supervisors in this process lead right now: executions that run side by
# side in threads (flows, shows) are never each other's leftovers.
_leaders: set[int] = set()


def register_leader(pid: int) -> None:
    _leaders.add(pid)


def unregister_leader(pid: int) -> None:
    _leaders.discard(pid)


def enable_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux; once). True if it is."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
            except (OSError, AttributeError):
                _subreaper = False
    return _subreaper


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of ``pid`` from /proc, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 3:
        return None
    return fields[0], int(fields[1]), int(fields[2])


def _table() -> dict[int, tuple[str, int, int]]:
    table: dict[int, tuple[str, int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if name.isdigit() and (info := _stat(int(name))) is not None:
            table[int(name)] = info
    return table


def own_children() -> set[int]:
    """This process's children now (a run's leftovers are found among later ones)."""
    me = os.getpid()
    return {pid for pid, (_, ppid, _) in _table().items() if ppid == me}


def find_leftovers(leader: int, exclude: Iterable[int] = ()) -> tuple[list[int], list[int]]:
    """(live, zombie) processes the run started, other than ``leader`` itself.

    Members of the leader's group, the leader's descendants, and, when this process is a
    subreaper, its children that appeared since the run started (orphans re-parented
    here), with theirs. Without the subreaper no orphan comes here, so a new child is
    another thread's (a sibling execution, a git command) and never this run's; the
    leaders of sibling executions are never counted either way.
    """
    table = _table()
    me, skip = os.getpid(), set(exclude) | {leader} | _leaders
    kids: dict[int, list[int]] = {}
    for pid, (_, ppid, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    found = {pid for pid, (_, _, pgrp) in table.items() if pgrp == leader and pid != leader}
    orphans = [pid for pid in kids.get(me, []) if pid not in skip] if _subreaper else []
    stack = [leader, *orphans]
    while stack:
        pid = stack.pop()
        if pid != leader:
            found.add(pid)
        stack.extend(p for p in kids.get(pid, []) if p not in found)
    live = sorted(p for p in found if table.get(p, ("Z",))[0] not in ("Z", "X"))
    zombies = sorted(p for p in found if table.get(p, ("Z",))[0] in ("Z", "X"))
    return live, zombies


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()[:200]


def _alive(pid: int) -> bool:
    info = _stat(pid)
    return info is not None and info[0] not in ("Z", "X")


def _reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those that are our children (others are not ours to wait)."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _send(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def end_leftovers(
    leader: int,
    *,
    exclude: Iterable[int] = (),
    first_signal: signal.Signals = signal.SIGTERM,
    grace: float = 2.0,
) -> dict[str, Any] | None:
    """End what the run left running; the evidence entry, or None when nothing was left.

    ``first_signal``, then SIGKILL for any process still alive after ``grace`` seconds.
    """
    if not os.path.isdir("/proc/self"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)  # stragglers of the group, unlisted
        return None
    exclude = set(exclude)
    live, zombies = find_leftovers(leader, exclude)
    _reap(zombies)
    if not live:
        return None
    processes = [{"pid": pid, "command": _cmdline(pid)} for pid in live]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, first_signal)
    _send(live, first_signal)
    _wait_gone(live, grace)
    survivors = [pid for pid in live if _alive(pid)]
    # New forks while we were stopping them: one more sweep, at once with SIGKILL.
    late = [pid for pid in find_leftovers(leader, exclude)[0] if pid not in live]
    processes += [{"pid": pid, "command": _cmdline(pid)} for pid in late]
    forced = sorted({*survivors, *late})
    if forced:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)
        _send(forced, signal.SIGKILL)
        _wait_gone(forced, 1.0)
    _reap([*live, *late])
    return {
        "kind": "killed_descendants",
        "processes": processes,
        "signal": first_signal.name,
        "sigkill": forced,
    }


def _wait_gone(pids: list[int], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.02)
