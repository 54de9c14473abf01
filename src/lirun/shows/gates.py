"""A gate run: the gate command executed on a commit, recorded as an execution of its own.

A gate is an ordinary supervised execution (``execute`` with a command program, so its
exit code is its verdict; a string gate runs through ``sh -c``) in the gate worktree,
linked to its play (or, for the final gate, to its show) through the session's metadata.
Its verdict is the decision ``decide.gate_verdict``; the tail of its output becomes the
play's feedback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lirun.exec.execution import execute
from lirun.exec.task import Task, build_request
from lirun.settings import Settings
from lirun.shows.decide import gate_verdict
from lirun.shows.spec import Gate
from lirun.signals import SignalTrap

__all__ = ["GateRun", "output_tail", "run_gate"]

OUTPUT_TAIL_CHARS = 4000


@dataclass(frozen=True, slots=True)
class GateRun:
    """One gate's verdict on ``commit``: ``pass``, ``fail`` or ``interrupted``."""

    verdict: str
    commit: str
    session_id: str | None
    status: str | None
    reason: str | None
    output: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "verdict": self.verdict,
            "commit": self.commit,
            "reason": self.reason,
        }


def output_tail(run_dir: str | Path, limit: int = OUTPUT_TAIL_CHARS) -> str:
    """The end of a command execution's stdout and stderr, as a person would read it."""
    parts = []
    for name in ("stdout.log", "stderr.log"):
        path = Path(run_dir) / "stream" / name
        try:
            data = path.read_bytes()[-limit:].decode("utf-8", "replace").strip()
        except OSError:
            continue
        if data:
            parts.append(data)
    return "\n".join(parts)[-limit:]


def run_gate(
    gate: Gate | None,
    *,
    cwd: str | Path,
    commit: str,
    db_url: str | None,
    metadata: Mapping[str, Any],
    trap: SignalTrap,
    stopping: bool = False,
    settings: Settings | None = None,
) -> GateRun:
    """Run ``gate`` in ``cwd`` (where ``commit`` is checked out), on ``settings`` (None:
    the environment's). No gate passes at once."""
    if gate is None:
        return GateRun("pass", commit, None, None, "no gate configured")
    task = Task(run=tuple(gate.argv()), timeout=gate.timeout)
    request = build_request(
        task,
        cwd=str(cwd),
        db_url=db_url,
        metadata={**metadata, "commit": commit},
        settings=settings,
    )
    result = execute(request, trap=trap)
    verdict = gate_verdict(result.status, stopping=stopping or trap.received is not None)
    return GateRun(
        verdict,
        commit,
        result.run_id,
        result.status,
        result.reason,
        output_tail(result.run_dir) if verdict == "fail" else "",
    )
