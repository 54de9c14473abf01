"""The lease watchdog: a small process that stops an owner's work when its lease runs out.

An owner that holds a lease (``li worker`` on its schedule runs, ``li flow run`` and
``li show run`` on their rows) starts one watchdog (``fence.Fence``) and feeds it over a
pipe each time it renewed its lease: ``renew <deadline>``, the ``CLOCK_MONOTONIC`` time
(system-wide on Linux, so the owner's ``time.monotonic()``) by which the next renewal
must arrive. The watchdog depends on nothing of the owner's: not its threads (a frozen
or stopped owner), not the database (an outage, a cut link). It

- kills the owner's process tree (every descendant of the owner, and every member of the
  process groups it saw them lead) once the deadline passes with no renewal, and again on
  every tick until a renewal arrives (nothing runs under a lapsed lease);
- kills the tree at once when the pipe closes without ``bye`` (the owner died: nothing
  supervises its work any more);
- exits without killing on ``bye`` (the owner ended its work itself).

It remembers what it saw (pids with their start times, process groups) every
``SNAPSHOT_SECONDS``, so descendants re-parented away from a dead owner are still found.
``kill_tree`` is the one place that kills: a containment (a cgroup per run) plugs in here.

Run as ``python -m lirun.exec.watchdog OWNER_PID``; it imports only the standard library.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

SNAPSHOT_SECONDS = 0.5
KILL_PASSES = 3
KILL_TICK_SECONDS = 0.1

Seen = dict[int, str]  # pid -> its start time field (pid reuse check)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, pgrp, start time) of every live (non-zombie) process."""
    table: dict[int, tuple[int, int, str]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
            continue
        table[int(name)] = (int(fields[1]), int(fields[2]), fields[19])
    return table


# The owner's guard (lirun.exec.guard) is its descendant too, but not its work: when the
# owner dies, the guard kills the runs itself and leaves the note that says so.
_HELPER_MARK = b"lirun.exec.guard"


def is_helper(pid: int) -> bool:
    """True for one of lirun's own helper processes, which the watchdog never kills."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return _HELPER_MARK in handle.read()
    except OSError:
        return False


def tree_of(root: int, table: dict[int, tuple[int, int, str]], groups: set[int]) -> Seen:
    """Descendants of ``root`` and members of ``groups`` (never ``root``, this process or
    one of lirun's helpers)."""
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
    return {pid: start for pid, start in found.items() if not is_helper(pid)}


def kill_tree(root: int, remembered: Seen, groups: set[int]) -> int:
    """SIGKILL the owner's process tree: its descendants now, the members of the groups
    they led, and the processes seen before that are still the same processes. A few
    passes (a fork racing the kill); the watchdog's next tick kills again while the lease
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


def _say(text: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"lirun lease watchdog: {text}\n".encode())


def watch(owner: int, source: int) -> int:
    """The watchdog's loop over the owner's pipe ``source`` (see the module)."""
    deadline: float | None = None
    fired = False
    remembered: Seen = {}
    groups: set[int] = set()
    own_group = os.getpgid(owner) if owner > 0 else -1
    buffer = b""
    while True:
        now = time.monotonic()
        wait = SNAPSHOT_SECONDS
        if deadline is not None and not fired:
            wait = max(0.0, min(wait, deadline - now))
        elif fired:
            wait = KILL_TICK_SECONDS  # the lease stays lapsed: kill again, without spinning
        ready, _, _ = select.select([source], [], [], wait)
        if ready:
            chunk = os.read(source, 4096)
            if not chunk:
                count = kill_tree(owner, remembered, groups)
                if count:
                    _say(f"owner {owner} is gone: killed {count} processes it left running")
                return 0
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                word, _, value = line.decode("ascii", "replace").partition(" ")
                if word == "bye":
                    return 0
                if word == "renew":
                    deadline, fired = float(value), False
        if deadline is not None and time.monotonic() >= deadline and not ready:
            # About to kill: a renewal written meanwhile must win over a stale deadline.
            pending, _, _ = select.select([source], [], [], 0)
            if pending:
                continue
        table = process_table()
        seen = tree_of(owner, table, groups)
        remembered = seen
        # A group id is never reused while the group has a member: one with none is gone.
        alive = {pgrp for _, pgrp, _ in table.values()}
        groups = (groups | {table[pid][1] for pid in seen}) & alive
        groups -= {own_group, os.getpgid(0)}
        if deadline is not None and time.monotonic() >= deadline:
            count = kill_tree(owner, remembered, groups)
            if count and not fired:
                late = time.monotonic() - deadline
                _say(f"owner {owner} did not renew its lease: killed {count} processes "
                     f"({late:.2f}s after its deadline)")  # fmt: skip
            fired = True


def main(argv: list[str]) -> int:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    owner = int(argv[1])
    return watch(owner, sys.stdin.fileno())


if __name__ == "__main__":
    sys.exit(main(sys.argv))
