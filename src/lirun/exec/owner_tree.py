"""An owner's process tree, read through ``lirun.platform`` without the owner's help, and
killed.

The owner's guard (``exec/guard.py``) uses it when the owner's lease lapses (and when an
owner that held a lease dies): every descendant of the owner, every member of the process
groups they were seen to lead, and the processes it remembered from its last look
(``SNAPSHOT_SECONDS`` ago) that are still the same processes, so work re-parented away
from a dead owner is still found. It imports only the standard library and the platform layer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from lirun import platform

SNAPSHOT_SECONDS = 0.5
KILL_PASSES = 3
KILL_TICK_SECONDS = 0.1

Seen = dict[int, str]  # pid -> its start time field (pid reuse check)


def process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, pgrp, start time) of every live (non-zombie) process."""
    return platform.owner_table()


def tree_of(root: int, table: dict[int, tuple[int, int, str]], groups: set[int]) -> Seen:
    """Descendants of ``root`` and members of ``groups`` (never ``root`` or this process,
    the owner's guard)."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: Seen = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found[pid] = table[pid][2]
        todo.extend(children.get(pid, []))
    for pid, (_, pgrp, start) in table.items():
        if pgrp in groups:
            found[pid] = start
    found.pop(root, None)
    found.pop(os.getpid(), None)
    return found


def kill_tree(root: int, remembered: Seen, groups: set[int]) -> int:
    """SIGKILL the owner's process tree: its descendants now, the members of the groups
    they led, and the processes seen before that are still the same processes. A few
    passes (a fork racing the kill); the guard's next tick kills again while the lease
    stays lapsed, after reading the owner's pipe. Returns how many were signalled."""
    killed: set[int] = set()
    for _ in range(KILL_PASSES):
        table = process_table()
        targets = tree_of(root, table, groups)
        for pid, start in remembered.items():
            if pid in table and table[pid][2] == start and pid not in (root, os.getpid()):
                targets[pid] = start
        if not targets:
            break
        for pid in targets:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        for group in groups:
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        time.sleep(0.02)
    return len(killed)


def strike(groups: set[int]) -> None:
    """SIGKILL the process groups the owner's descendants were seen to lead, before the
    process table is read again (``kill_tree`` then finds the rest)."""
    for group in groups:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
