"""When a record inferred from a lapsed lease is corrected by what its owner saw (pure).

A reaper that finds an owner's lease lapsed ends the owner's executions and runs
``failed`` (``session.failed.lease_lapsed``, ``schedule.failed.lease_lapsed``): it
cannot know how the work ended, only that nobody proved it was still watched. An owner
that was merely frozen or cut off comes back knowing: its child exited by itself, before
anything stopped it. That outcome must reach the record, and since the record is
terminal already it does so as an audited correction (``update_status`` with
``override``, actor ``lirun``): the history keeps the inferred ending and the
correction, and the admin event says why.

Only an ending nobody imposed is a correction: a child stopped by ``li``'s signal, by
the owner's guard or by its lease, or killed by a signal from anyone (the guard may have
left no note), keeps the inferred record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from lirun.record.reap_schedule_runs import EXECUTION_LAPSED, LEASE_LAPSED

__all__ = ["ACTOR", "INFERRED", "Correction", "correction_for"]

ACTOR = "lirun"
# The reasons a reaper writes from a lapsed lease alone.
INFERRED = frozenset({EXECUTION_LAPSED, LEASE_LAPSED})
_STOPPED = frozenset({"cancelled", "aborted"})


class Correction(NamedTuple):
    """The justification and the evidence entry of one correction."""

    justification: str
    evidence: dict[str, Any]


def correction_for(
    recorded_status: str,
    recorded_reason: str | None,
    status: str,
    reason: str,
    *,
    exit_code: int | None = None,
    evidence: Sequence[Mapping[str, Any]] = (),
    recorded_at: float | None = None,
) -> Correction | None:
    """The correction of a record (``recorded_status``/``recorded_reason``) by the
    owner's own ending (``status``/``reason``, the child's ``exit_code`` and the
    ``evidence`` it gathered), or None when the record stands."""
    if recorded_reason not in INFERRED or status in _STOPPED:
        return None
    if exit_code is not None and exit_code < 0:
        return None  # killed by a signal: the guard's, maybe, with its note lost
    if (status, reason) == (recorded_status, recorded_reason):
        return None
    lapse = next((e for e in evidence if e.get("kind") == "lease_lapsed"), None)
    entry: dict[str, Any] = {
        "kind": "correction",
        "corrected_status": recorded_status,
        "corrected_reason": recorded_reason,
        "recorded_at": recorded_at,
        "lease_lapsed_at": lapse.get("lapsed_at") if lapse else None,
        "work_ended_before_lapse": lapse.get("child_ended_before") if lapse else None,
    }
    justification = (
        f"its owner saw the work end by itself ({reason}); {recorded_reason} was inferred "
        "by a reaper from the owner's lapsed lease, not from the work"
    )
    return Correction(justification, entry)
