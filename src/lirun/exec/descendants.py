"""Without a cgroup, what a run started is found here: its group, its session, and orphans.

The child leads its own process group and session; ``li`` stops the group. A descendant
that called ``setsid`` (or whose parent died) has left the group; on Linux ``li`` becomes a
*child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``) so such orphans are re-parented to
``li`` instead of init, whatever their session or group, and a scan of ``/proc`` finds them
(``li`` enables it for its own process; a library caller's process is left as it is). On
the portable platform (``lirun.platform``) there is no subreaper: such an orphan is found
by the run's mark in its environment instead, unless it cleared it. Leftovers are ended
in two steps, so the run's outcome can be recorded in between: ``signal_leftovers`` at the
child's exit (the first signal, no wait), ``finish_leftovers`` after the grace (SIGKILL).
What had to be ended is returned as evidence (pid and command line of each). Without ``/proc``
only the process group is stopped. A run in a cgroup (``exec.cgroup``) is ended through the
cgroup first; this scan then finds nothing left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from lirun import platform
from lirun.exec.containment import TREE_ENV

__all__ = [
    "Signalled",
    "add_helper",
    "enable_subreaper",
    "find_leftovers",
    "finish_leftovers",
    "own_children",
    "reap",
    "release_leader",
    "signal_leftovers",
    "spawning",
]

_PR_SET_CHILD_SUBREAPER = 36
_RESCANS = 5
_PORTABLE_SECOND_LOOK = 0.05
_subreaper: bool | None = None
# Children supervised right now in this process (flows run legs side by side): another
# run's leader is never this run's leftover. Spawning and registering happen under the
# lock a scan takes, so no scan sees a sibling's child before it is registered.
_leaders: set[int] = set()
_leaders_lock = threading.Lock()
# Long-lived helpers of this process (its guard): never a run's leftover.
_helpers: set[int] = set()


@contextlib.contextmanager
def spawning() -> Iterator[Callable[[int], None]]:
    """``with spawning() as register: proc = Popen(...); register(proc.pid)``."""
    with _leaders_lock:
        yield _leaders.add


def add_helper(pid: int) -> None:
    """``pid`` is a helper this process started for itself (in a session of its own)."""
    with _leaders_lock:
        _helpers.add(pid)


def release_leader(pid: int) -> None:
    """The supervised child ``pid`` is done: it leaves the registry."""
    with _leaders_lock:
        _leaders.discard(pid)


def enable_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux; once). True if it is."""
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        prctl = platform.prctl()
        _subreaper = prctl is not None and prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


def _table() -> dict[int, tuple[str, int, int, int]]:
    return platform.process_table()


def _listed_children() -> set[int] | None:
    """This process's children when the platform lists them cheaply (Linux:
    ``/proc/self/task/*/children``), else None."""
    return platform.listed_children()


def own_children() -> set[int]:
    """This process's children now (a run's leftovers are found among later ones)."""
    listed = _listed_children()
    if listed is not None:
        return listed
    me = os.getpid()
    return {pid for pid, (_, ppid, _, _) in _table().items() if ppid == me}


def _nothing_left(leader: int, exclude: Iterable[int]) -> bool:
    """True when the run can have left nothing: this process is a subreaper, so whatever
    the run started and is still there descends from a child of ours, and no child is new
    but the (exited, unreaped) leader and sibling runs. Saves a scan of all of /proc."""
    if not _subreaper:
        return False
    with _leaders_lock:
        listed = _listed_children()
        others = _leaders | _helpers
    return listed is not None and not (listed - {leader} - others - set(exclude))


def _mark_of(pid: int) -> str | None:
    """The run mark (``containment.TREE_ENV``) in ``pid``'s environment: "" when it has
    none, None when it cannot be read."""

    prefix = f"{TREE_ENV}=".encode()
    entries = platform.environ(pid)
    if entries is None:
        return None
    found = [e[len(prefix) :] for e in entries if e.startswith(prefix)]
    return found[0].decode("utf-8", "replace") if found else ""


def _another_runs(pid: int, mark: str | None) -> bool:
    """True when ``pid`` carries another run's mark (a sibling's, or an outer run's)."""
    if mark is None:
        return False
    theirs = _mark_of(pid)
    return bool(theirs) and theirs != mark


def find_leftovers(
    leader: int, exclude: Iterable[int] = (), mark: str | None = None
) -> tuple[list[int], list[int]]:
    """(live, zombie) processes the run started, other than ``leader`` itself.

    Members of the leader's group and session, the leader's descendants, and this
    process's children that appeared since the run started (orphans re-parented here),
    with theirs. ``mark``: the run's mark; an orphan carrying another is not this run's.
    """
    if _nothing_left(leader, exclude):
        return [], []
    with _leaders_lock:
        table = _table()
        others = _leaders - {leader}
        skip = set(exclude) | {leader} | others | _helpers
    me, mine = os.getpid(), os.getsid(0)
    kids: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    found = {
        pid for pid, (_, _, pgrp, sid) in table.items() if leader in (pgrp, sid) and pid != leader
    }
    # Without the subreaper no orphan is re-parented here: a new child of this process is
    # then something else it started (a sibling run, a git probe), never this run's. With
    # it, every child outside this process's own session is an orphan some run left (what
    # this process starts itself stays in its session; its runs' leaders and its guard
    # are registered): this run's, unless its group or session is a sibling run's or it
    # carries a sibling's mark. One that left its run's session and cleared its
    # environment cannot be told apart: it is ended with the first run to end (a run in
    # a cgroup is exact).
    orphans = [
        pid
        for pid in (kids.get(me, []) if _subreaper else [])
        if table[pid][3] != mine
        and not {table[pid][2], table[pid][3]} & others
        and not _another_runs(pid, mark)
    ]
    if mark and platform.name() == platform.PORTABLE:
        # No subreaper on the portable platform: an orphan that left the run's group and
        # session is found by the run's mark in its environment (unless it cleared it).
        orphans += [p for p in table if p not in (me, *skip) and _mark_of(p) == mark]
    stack = [leader, *(pid for pid in orphans if pid not in skip)]
    while stack:
        pid = stack.pop()
        if pid != leader:
            found.add(pid)
        stack.extend(p for p in kids.get(pid, []) if p not in found)
    live = sorted(p for p in found if table.get(p, ("Z",))[0] not in ("Z", "X"))
    zombies = sorted(p for p in found if table.get(p, ("Z",))[0] in ("Z", "X"))
    return live, zombies


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those that are our children (others are not ours to
    wait): an orphan re-parented to this subreaper stays a zombie until then."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _send(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


@dataclass(frozen=True, slots=True)
class Signalled:
    """Leftovers that got their first signal at the child's exit (``signal_leftovers``);
    ``finish_leftovers`` ends them."""

    leader: int
    exclude: frozenset[int]
    mark: str | None
    live: tuple[int, ...]


def signal_leftovers(
    leader: int,
    *,
    exclude: Iterable[int] = (),
    first_signal: signal.Signals = signal.SIGTERM,
    mark: str | None = None,
) -> tuple[dict[str, Any] | None, Signalled | None]:
    """Find what the run left running and send it ``first_signal``, without waiting: the
    evidence entry (what was found and the signal) and the handle to finish them with, or
    (None, None) when nothing was left."""
    exclude = set(exclude)
    live, zombies = find_leftovers(leader, exclude, mark)
    if not live and not zombies and mark and platform.name() == platform.PORTABLE:
        # Without a subreaper a double-forking daemon's middle process is reaped by init,
        # not left here as a zombie: a scan between its exit and its child's appearing in
        # the process list sees nothing. Look once more when the fork has landed.
        time.sleep(_PORTABLE_SECOND_LOOK)
        live, zombies = find_leftovers(leader, exclude, mark)
    for _ in range(_RESCANS):
        # An orphan that exited meanwhile may have forked after the scan listed /proc
        # (a double-forking daemon): reap it, and look again.
        if not zombies:
            break
        reap(zombies)
        more, zombies = find_leftovers(leader, exclude, mark)
        live = sorted({*live, *more})
    reap(zombies)
    if not live:
        return None, None
    processes = [{"pid": pid, "command": platform.command_line(pid)} for pid in live]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, first_signal)
    _send(live, first_signal)
    entry = {"kind": "killed_descendants", "processes": processes, "signal": first_signal.name}
    return entry, Signalled(leader, frozenset(exclude), mark, tuple(live))


def finish_leftovers(sent: Signalled, deadline: float) -> dict[str, Any] | None:
    """Wait until ``deadline`` (``time.monotonic``) for the signalled leftovers to go, then
    SIGKILL those still alive and what forked since; the evidence entry of those, or None
    when the first signal was enough."""
    live = list(sent.live)
    _wait_gone(live, deadline - time.monotonic())
    survivors = [pid for pid in live if platform.alive(pid)]
    # New forks while we were stopping them: one more sweep, at once with SIGKILL.
    late = [p for p in find_leftovers(sent.leader, sent.exclude, sent.mark)[0] if p not in live]
    forced = sorted({*survivors, *late})
    processes = [{"pid": pid, "command": platform.command_line(pid)} for pid in forced]
    if forced:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(sent.leader, signal.SIGKILL)
        _send(forced, signal.SIGKILL)
        _wait_gone(forced, 1.0)
    reap([*live, *late])
    if not forced:
        return None
    return {"kind": "killed_descendants", "processes": processes, "signal": "SIGKILL"}


def _wait_gone(pids: list[int], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(platform.alive(pid) for pid in pids):
        time.sleep(0.02)
