"""Chains: a schedule fired by the end of another's runs (docs/schedules.md, "Chains").
Pure: no I/O.

``li schedule add NAME --after OTHER[:completed|failed|any]`` fires NAME once for each
run of OTHER that ends in that way. The event is the parent run's record
(``parent_event``), keyed by the parent run's id, so the unique key of
``schedule_events`` fires each parent at most once whichever worker sweeps it first.
A run at ``MAX_DEPTH`` fires no children (its event is stored with a skipped run,
``schedule.skipped.chain_depth``), and a
cycle of ``after`` links is refused when a schedule is added (``find_cycle``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from lirun.errors import UsageError

OUTCOMES = ("completed", "failed", "any")
DEFAULT_OUTCOME = "completed"
MAX_DEPTH = 10
DEPTH_EXCEEDED = "schedule.skipped.chain_depth"
# The parent statuses each outcome matches: a skipped run never ran, so it fires nothing.
STATUSES: dict[str, tuple[str, ...]] = {
    "completed": ("completed",),
    "failed": ("failed", "timed_out"),
    "any": ("completed", "failed", "timed_out", "cancelled"),
}
_VERBS = {"completed": "completes", "failed": "fails", "any": "ends"}


def parse_after(text: str) -> tuple[str, str]:
    """``OTHER`` or ``OTHER:OUTCOME`` → (OTHER, OUTCOME); UsageError naming the outcomes."""
    name, sep, outcome = str(text).partition(":")
    name = name.strip()
    outcome = outcome.strip() if sep else DEFAULT_OUTCOME
    if not name:
        raise UsageError(f"--after {text!r} names no schedule; give --after OTHER[:completed]")
    if outcome not in OUTCOMES:
        raise UsageError(
            f"--after {text!r}: outcome {outcome!r} is not one of {', '.join(OUTCOMES)}"
        )
    return name, outcome


def describe(parent: str, outcome: str) -> str:
    """``after nightly completes``, ``after nightly fails``, ``after nightly ends``."""
    return f"after {parent} {verb(outcome)}"


def verb(outcome: str) -> str:
    """The words for an outcome after the parent's name: ``completes``, ``fails``, ``ends``."""
    return _VERBS.get(outcome, outcome)


def matches(outcome: str, status: str) -> bool:
    """Whether a parent run that ended ``status`` fires a child waiting for ``outcome``."""
    return status in STATUSES.get(outcome, ())


def find_cycle(name: str, parent: str, after_of: Mapping[str, str | None]) -> list[str] | None:
    """The cycle ``name`` → ``parent`` → … → ``name`` that adding ``name --after parent``
    would close, as the names along it (``[a, b, a]``); None when the links end.
    ``after_of`` maps each existing schedule to the one it runs after (or None)."""
    path = [name]
    current: str | None = parent
    while current is not None:
        path.append(current)
        if current == name:
            return path
        if current in path[:-1]:
            return None  # an older cycle not through name (refused when it was made)
        current = after_of.get(current)
    return None


def cycle_error(cycle: list[str]) -> UsageError:
    return UsageError(
        f"--after would make a cycle: {' → '.join(cycle)}; a chain must end somewhere"
    )


def child_depth(parent_depth: int | None) -> int:
    """The depth of a run a parent at ``parent_depth`` fires (a run no chain fired: 0)."""
    return int(parent_depth or 0) + 1


def fires_children(parent_depth: int | None) -> bool:
    """Whether a run at ``parent_depth`` may fire its children (below MAX_DEPTH)."""
    return int(parent_depth or 0) < MAX_DEPTH


def parent_event(parent: Mapping[str, Any], schedule: str) -> dict[str, Any]:
    """The event a child sees (``{{ event.status }}``): the parent run's record, with
    the parent's own event when it had one."""
    own = parent.get("event_json")
    event: dict[str, Any] = {
        "id": parent["id"],
        "schedule": schedule,
        "status": parent["status"],
        "reason": parent.get("status_reason_code"),
        "artifact_dir": parent.get("artifact_dir"),
        "exit_code": parent.get("exit_code"),
    }
    if own:
        try:
            event["event"] = json.loads(own)
        except ValueError:
            event["event"] = None
    return event


def link_problem(links: Mapping[str, str | None], names: Iterable[str]) -> tuple[str, str] | None:
    """The first of ``names`` whose ``after`` link is wrong, with why: its parent is
    not a schedule, or following the links from it comes back to it. ``links`` maps
    every schedule (stored, and as wanted) to its parent (None: no ``--after``)."""
    for name in names:
        parent = links.get(name)
        if parent is None:
            continue
        if parent not in links:
            return name, (
                f"--after {parent}: no schedule named {parent!r}; add it first "
                "(`li schedule list` shows them)"
            )
        cycle = find_cycle(name, parent, links)
        if cycle is not None:
            return name, str(cycle_error(cycle))
    return None
