"""The end of a leg's leftovers, in two steps with the record of its outcome between them.

When a leg's child exits, what it left running gets its first signal at once
(:func:`begin`: SIGTERM, or SIGKILL when ``li`` had stopped the child); the caller then
records the leg's outcome, and only then :meth:`Ending.finish` waits out the rest of the
grace, SIGKILLs what is still alive (and what forked meanwhile) and lets go of the run:
its cgroup, the guard's watch, the unreaped leader that kept its group id reserved. So an
owner killed while a leftover ignores SIGTERM leaves the leg recorded with its real
outcome, and its leftovers are still ended, by the owner's guard, which watches the run
until ``finish`` (docs/containment.md, "The end of a leg").
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lirun.exec.cgroup import RunCgroup
from lirun.exec.containment import finish_cgroup, signal_cgroup
from lirun.exec.descendants import (
    Signalled,
    find_leftovers,
    finish_leftovers,
    reap,
    signal_leftovers,
)

__all__ = ["Ending", "begin"]


@dataclass(slots=True)
class Ending:
    """What a leg's child left running, being ended.

    ``entries``: the evidence at the child's exit (what was found, the first signal): it
    goes into the leg's record. ``finish`` returns the evidence of what needed more (the
    SIGKILL after the grace), which the record gets afterwards.
    """

    deadline: float  # time.monotonic() when the grace is over
    leader: int = 0
    exclude: frozenset[int] = frozenset()
    mark: str | None = None
    entries: list[dict[str, Any]] = field(default_factory=list)
    cgroup: RunCgroup | None = None
    in_cgroup: bool = False  # the cgroup held processes at the exit
    signalled: Signalled | None = None
    release: Callable[[], None] | None = None  # lets go of the run; once, at the end
    done: bool = False

    @property
    def pending(self) -> bool:
        """Processes were left and got their first signal: something to wait for."""
        return bool(self.entries)

    def finish(self) -> list[dict[str, Any]]:
        """End what is left after the grace, then let go of the run; the evidence of what
        needed SIGKILL (empty when the first signal was enough). Once; later calls: []."""
        if self.done:
            return []
        self.done = True
        late: list[dict[str, Any]] = []
        try:
            if self.in_cgroup and self.cgroup is not None:
                entry = finish_cgroup(self.cgroup, self.deadline)
                if entry is not None:
                    late.append(entry)
                # Orphans re-parented to this subreaper wait here as zombies.
                reap(p["pid"] for e in (*self.entries, *late) for p in e["processes"])
                reap(find_leftovers(self.leader, self.exclude, self.mark)[1])
            if self.signalled is not None:
                entry = finish_leftovers(self.signalled, self.deadline)
                if entry is not None:
                    late.append(entry)
        finally:
            if self.release is not None:
                self.release()
        return late


def begin(
    leader: int,
    *,
    cgroup: RunCgroup | None,
    exclude: frozenset[int],
    mark: str | None,
    stopped: bool,
    grace: float,
) -> Ending:
    """The child ``leader`` exited: send what it left its first signal (SIGKILL at once
    when ``stopped``: li had stopped the child, stragglers get no grace), no waiting."""
    first = signal.SIGKILL if stopped else signal.SIGTERM
    ending = Ending(time.monotonic() + grace, leader, exclude, mark, cgroup=cgroup)
    if cgroup is not None:  # it holds everything the run started: no scan needed
        entry = signal_cgroup(cgroup, first)
        ending.in_cgroup = entry is not None
    else:
        entry, ending.signalled = signal_leftovers(
            leader, exclude=exclude, first_signal=first, mark=mark
        )
    if entry is not None:
        ending.entries.append(entry)
    return ending
