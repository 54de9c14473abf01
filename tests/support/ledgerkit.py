"""A ledger that proves no two copies of one piece of work ran at the same instant.

The work is ``python3 LEDGER_PROGRAM LEDGER SECONDS``: it appends ``start <copy> <time>``
(``<copy>``: its pid and a random suffix), then ``tick <copy> <time>`` every ``TICK``
seconds, then ``end <copy> <time>`` (wall clock: simulated hosts share this machine's). A
copy killed midway has no ``end``; its last line bounds when it last ran (to within one
tick). ``copies`` reads the ledger; ``check_no_overlap`` raises ``Overlap`` when two
copies' spans intersect.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

from support.faultkit import Overlap

TICK = 0.1
PROGRAM = f"""\
import os, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
pid = f"{{os.getpid()}}.{{os.urandom(4).hex()}}"  # unique across PID namespaces too

def line(word):
    with open(path, "a") as handle:
        handle.write(f"{{word}} {{pid}} {{time.time():.3f}}\\n")

line("start")
until = time.monotonic() + seconds
while time.monotonic() < until:
    time.sleep({TICK})
    line("tick")
line("end")
"""


# The same work with side effects: after each tick an ``effect`` line, and the ``end``,
# the things that must not happen after another copy took over. ``fenced``: each only
# after `li lease check` said 0 (its fence is current) and within ``bound`` seconds of
# when the check began (CLOCK_MONOTONIC runs on through a freeze, so a copy frozen
# between the check and the commit checks again, after a ``late`` line); a copy told 1
# writes ``fenced`` and stops. ``unfenced``: each at once.
FENCED_PROGRAM = f"""\
import os, subprocess, sys, time
path, seconds, mode, bound = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4])
pid = f"{{os.getpid()}}.{{os.urandom(4).hex()}}"
check = [sys.executable, "-m", "lirun", "lease", "check", "--quiet"]

def line(word):
    with open(path, "a") as handle:
        handle.write(f"{{word}} {{pid}} {{time.time():.3f}}\\n")

def commit(word):
    while mode == "fenced":
        began = time.monotonic()
        code = subprocess.call(check)
        if code == 1:
            line("fenced")
            sys.exit(3)
        if code == 0 and time.monotonic() - began <= bound:
            break
        line("late")
        time.sleep({TICK})
    line(word)

line("start")
until = time.monotonic() + seconds
while time.monotonic() < until:
    time.sleep({TICK})
    line("tick")
    commit("effect")
commit("end")
"""


@dataclass
class Copy:
    pid: str  # the copy's pid and a random suffix (two hosts may reuse a pid)
    first: float
    last: float
    ended: bool


def write_program(where: Path) -> Path:
    path = where / "ledger_work.py"
    path.write_text(PROGRAM)
    return path


def write_fenced_program(where: Path) -> Path:
    path = where / "ledger_work_fenced.py"
    path.write_text(FENCED_PROGRAM)
    return path


def entries(ledger: Path) -> list[tuple[str, str, float]]:
    """Every whole line of the ledger: (word, copy, time); a line cut short by a kill is
    passed over."""
    found = []
    for raw in ledger.read_text().splitlines() if ledger.exists() else []:
        parts = raw.split()
        if len(parts) == 3:
            found.append((parts[0], parts[1], float(parts[2])))
    return found


def work_argv(program: Path, ledger: Path, seconds: float) -> list[str]:
    """The action words of ``run``: the ledger's work for ``seconds``."""
    return [sys.executable, str(program), str(ledger), f"{seconds:g}"]


def copies(ledger: Path) -> list[Copy]:
    """Every copy that wrote to the ledger, in the order they started."""
    found: dict[str, Copy] = {}
    for word, pid, at in entries(ledger):
        copy = found.setdefault(pid, Copy(pid, at, at, False))
        copy.first, copy.last = min(copy.first, at), max(copy.last, at)
        copy.ended = copy.ended or word == "end"
    return sorted(found.values(), key=lambda c: c.first)


def check_no_overlap(ledger: Path) -> list[Copy]:
    """The copies, or Overlap when one started before the one before it last ran."""
    found = copies(ledger)
    for before, after in itertools.pairwise(found):
        if after.first <= before.last:
            raise Overlap(
                f"{ledger.name}: copy {after.pid} started at {after.first:.3f} while copy "
                f"{before.pid} still ran (last seen {before.last:.3f}, "
                f"{before.last - after.first:.2f}s after)"
            )
    return found
