"""The note the owner's guard leaves in a run's state directory when the owner's lease
lapsed while the run was watched: whether the run's child was still running then (the
guard stopped it) or had already ended by itself (the guard stopped nothing of it).

The guard looks at the child before it sends anything, so the note is the one witness
that does not depend on the owner: a frozen owner wakes to its child's exit and to its
own lease check at once, and only the note tells which came first. The execution takes
the note when its leg ends; the record then says who ended the work (design.md §5).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: the guard process imports this module, and must start light
    from lirun.exec.legs import LegOutcome

__all__ = ["NOTE_NAME", "LeaseNote", "judged", "take", "write"]

NOTE_NAME = "lease_lapsed.json"


@dataclass(frozen=True, slots=True)
class LeaseNote:
    """``at``: when the guard acted (wall clock); ``lapsed_at``: when the lease's deadline
    passed (wall clock); ``leader_ended``: the child had ended by itself before that. The
    guard writes it before it sends anything."""

    at: float
    lapsed_at: float
    leader_ended: bool

    def evidence(self) -> dict[str, Any]:
        return {
            "kind": "lease_lapsed",
            "lapsed_at": round(self.lapsed_at, 3),
            "guard_acted_at": round(self.at, 3),
            "child_ended_before": self.leader_ended,
        }


def write(note_dir: str, note: LeaseNote) -> None:
    """Leave ``note`` (the guard: never raises, a full disk only loses the note)."""
    payload = {
        "kind": "lease_lapsed",
        "at": note.at,
        "lapsed_at": note.lapsed_at,
        "leader_ended": note.leader_ended,
    }
    path = os.path.join(note_dir, NOTE_NAME)
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle)


def take(note_dir: str | os.PathLike[str], since: float) -> LeaseNote | None:
    """The note left for a leg that started at wall time ``since`` (removed once read), or
    None when there is none, it is older, or it cannot be read."""
    path = Path(note_dir) / NOTE_NAME
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        note = LeaseNote(
            at=float(raw["at"]),
            lapsed_at=float(raw["lapsed_at"]),
            leader_ended=bool(raw["leader_ended"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
    return note if note.at >= since else None


def judged(outcome: LegOutcome, note: LeaseNote | None) -> LegOutcome:
    """The leg's verdict with the guard's part in it: a child the guard stopped was
    cancelled by its owner's lapsed lease (whatever its exit looked like); one that had
    ended by itself keeps its own verdict, with the lapse as evidence."""
    if note is None:
        return outcome
    extras = outcome.extras
    evidence = (*extras.evidence, note.evidence())
    if note.leader_ended or outcome.status in ("cancelled", "aborted"):
        return replace(outcome, extras=replace(extras, evidence=evidence))
    cause = "its owner's lease lapsed and the owner's guard stopped it"
    stopped = replace(extras, evidence=evidence, cancel_cause=cause, signal=None)
    return replace(outcome, status="cancelled", extras=stopped, killed_by="lease")
