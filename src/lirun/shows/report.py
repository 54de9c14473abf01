"""What a show looks like to a person or a script: the board, built from the records only.

``ShowReport`` and ``PlayReport`` are plain values (``to_dict`` is JSON-ready); the
sentences in ``needs_person`` say which play needs a person, why, and what to do.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lirun.provider_errors import failure_class_for_reason
from lirun.shows.decide import play_needs_person
from lirun.store.rows import PlayRow, SessionRow, ShowRow

__all__ = ["PlayReport", "ShowReport", "build_report", "provider_failure"]

# A gate execution's status as a verdict (a gate passes when its command exits 0).
_GATE_VERDICTS = {
    "completed": "pass",
    "completed_empty": "pass",
    "running": "running",
    "aborted": "interrupted",
    "cancelled": "interrupted",
}


@dataclass(frozen=True, slots=True)
class PlayReport:
    id: str
    name: str
    status: str
    reason_code: str | None
    reason_summary: str | None
    attempt: int
    attempts: int
    branch: str | None
    worktree: str | None
    depends_on: tuple[str, ...]
    session_ids: tuple[str, ...]
    gates: tuple[dict[str, Any], ...]
    merge_sha: str | None
    merged_at: float | None
    # The last agent execution's provider failure, when the provider said which class
    # (its words and what a person does about it); None otherwise.
    provider_failure: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "reason_code": self.reason_code,
            "reason_summary": self.reason_summary,
            "attempt": self.attempt,
            "attempts": self.attempts,
            "branch": self.branch,
            "worktree": self.worktree,
            "depends_on": list(self.depends_on),
            "session_ids": list(self.session_ids),
            "gates": [dict(g) for g in self.gates],
            "merge_sha": self.merge_sha,
            "merged_at": self.merged_at,
            "provider_failure": self.provider_failure,
        }


@dataclass(frozen=True, slots=True)
class ShowReport:
    show_id: str
    topic: str
    status: str
    reason_code: str | None
    reason_summary: str | None
    integration: str | None
    integration_head: str | None
    base: str | None
    plays: tuple[PlayReport, ...]
    needs_person: tuple[str, ...] = ()
    interrupted: str | None = None
    final_gate: dict[str, Any] | None = None
    has_final_gate: bool = False
    # ``integration_head`` is where git has the branch now (a person may have moved it);
    # ``recorded_head`` is the head lirun last recorded (merged, or verified by a gate).
    recorded_head: str | None = None

    @property
    def exit_code(self) -> int:
        """0 completed; 130 / 143 (128 + signal) interrupted; 1 anything else."""
        if self.interrupted:
            try:
                return 128 + int(signal.Signals[self.interrupted])
            except KeyError:
                return 130
        return 0 if self.status == "completed" else 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "show_id": self.show_id,
            "topic": self.topic,
            "status": self.status,
            "reason_code": self.reason_code,
            "reason_summary": self.reason_summary,
            "integration": self.integration,
            "integration_head": self.integration_head,
            "recorded_head": self.recorded_head,
            "base": self.base,
            "plays": [p.to_dict() for p in self.plays],
            "needs_person": list(self.needs_person),
            "interrupted": self.interrupted,
            "final_gate": self.final_gate,
            "has_final_gate": self.has_final_gate,
            "exit_code": self.exit_code,
        }


def provider_failure(session: SessionRow | None) -> dict[str, Any] | None:
    """What the provider said when ``session`` (an agent execution) failed with a known
    class, and what a person does about it; None for anything else."""

    code = session.status_reason_code if session else None
    failure = failure_class_for_reason(code)
    if session is None or failure is None:
        return None
    return {
        "session_id": session.id,
        "reason_code": code,
        "class": failure.name,
        "retryable": failure.retryable,
        "message": session.provider_error or session.status_reason_summary,
        "advice": failure.advice,
    }


def _play_report(row: PlayRow, sessions: Sequence[SessionRow]) -> PlayReport:
    gates, agents = [], []
    last_agent: SessionRow | None = None
    for s in sessions:
        meta = s.meta
        if meta.get("role") == "gate":
            verdict = _GATE_VERDICTS.get(s.status, "fail")
            gates.append(
                {
                    "session_id": s.id,
                    "verdict": verdict,
                    "commit": meta.get("commit"),
                    "reason": s.status_reason_code,
                }
            )
        else:
            agents.append(s.id)
            last_agent = s
    return PlayReport(
        id=row.id,
        name=row.name,
        status=row.status,
        reason_code=row.status_reason_code,
        reason_summary=row.status_reason_summary,
        attempt=int(row.attempt or 0),
        attempts=int(row.attempts or 0),
        branch=row.branch,
        worktree=row.worktree,
        depends_on=tuple(row.depends_on_json or ()),
        session_ids=tuple(agents),
        gates=tuple(gates),
        merge_sha=row.merge_sha,
        merged_at=row.merged_at,
        provider_failure=provider_failure(last_agent),
    )


def _waiting_on(plays: Sequence[PlayReport], name: str) -> list[str]:
    return [p.name for p in plays if p.status == "pending" and name in p.depends_on]


_PERSON_REASONS = (
    "show.blocked.no_ready_plays",
    "show.active.final_gate_failed",
    "show.active.integration_unverified",
)


def needs_person(
    show: ShowRow, plays: Sequence[PlayReport], *, unowned: bool = False
) -> tuple[str, ...]:
    """One sentence per play a person must look at (and one for a failed final gate, and
    one when no process runs a show that has work left: ``unowned``)."""
    if show.status != "active":
        return ()
    sid, integration = show.id, show.integration
    lines = []
    if unowned and show.status_reason_code not in _PERSON_REASONS:
        lines.append(
            f"no process runs show {sid} (li show run was stopped or died); plays shown as "
            f"running are not: `li show resume {sid}` continues it (what was left running "
            "is stopped and run again)."
        )
    for p in plays:
        if not play_needs_person(p.status, show.status):
            continue
        waiting = _waiting_on(plays, p.name)
        held = f"; {', '.join(waiting)} wait(s) on it" if waiting else ""
        if p.reason_code == "play.escalated.provider":
            lines.append(_provider_sentence(p, sid, held))
            continue
        where = f" in {p.worktree} (branch {p.branch})" if p.worktree else ""
        again = ""
        if str(p.reason_code).endswith((".session_failed", ".no_changes")):
            again = (  # nothing to merge: running it again is the likelier fix
                f"run it again from the start with `li override play {p.id} --to pending "
                f"--reason play.pending.created --actor YOU --justification WHY`, or "
            )
        lines.append(
            f"play {p.name} ({p.id}) is {p.status} after attempt {p.attempt} of {p.attempts}: "
            f"{p.reason_summary or p.reason_code}{held}. Look at its work{where}; {again}merge "
            f"it into {integration} yourself and run `li override play {p.id} --to merged "
            f"--reason play.merged.admin --actor YOU --justification WHY`, then "
            f"`li show resume {sid}` (or `li show abort {sid}`)."
        )
    code, gate = show.status_reason_code, show.final_gate_json or {}
    if code in ("show.active.final_gate_failed", "show.active.integration_unverified"):
        moved = code == "show.active.integration_unverified" and gate.get("role") == "head_gate"
        at = gate.get("commit") if moved else show.integration_head  # the recorded head
        lines.append(
            f"the integration branch {integration} at {at} failed "
            f"its gate ({show.status_reason_summary or 'see li show status'}); fix it "
            f"on {integration}, then `li show resume {sid}`."
        )
    return tuple(lines)


def _provider_sentence(p: PlayReport, sid: str, held: str) -> str:
    """A play its provider refused: the provider's words, what to do, how to go on."""
    failure = p.provider_failure or {}
    said = " ".join(str(failure.get("message") or "").split())
    words = f" ({failure.get('reason_code')}): {said}" if said else ""
    advice = failure.get("advice") or p.reason_summary or "see its execution's record"
    return (
        f"play {p.name} ({p.id}) stopped on attempt {p.attempt}: its agent's provider refused "
        f"the run{words}{held}. What to do: {advice}. To run it again from the start: "
        f"`li override play {p.id} --to pending --reason play.pending.created --actor YOU "
        f"--justification WHY`, then `li show resume {sid}`."
    )


def build_report(
    show: ShowRow,
    plays: Sequence[PlayRow],
    sessions: Mapping[str, Sequence[SessionRow]],
    *,
    head: str | None,
    interrupted: str | None = None,
    unowned: bool = False,
) -> ShowReport:
    """The board from the show row, its play rows and each play's linked sessions;
    ``head``: the commit git says the integration branch is at (the row records the
    last one lirun put there); ``unowned``: no live process holds the show."""
    reports = tuple(_play_report(p, sessions.get(p.id, ())) for p in plays)
    return ShowReport(
        show_id=show.id,
        topic=show.topic,
        status=show.status,
        reason_code=show.status_reason_code,
        reason_summary=show.status_reason_summary,
        integration=show.integration,
        integration_head=head,
        recorded_head=show.integration_head,
        base=show.base,
        plays=reports,
        needs_person=needs_person(show, reports, unowned=unowned and not interrupted),
        interrupted=interrupted,
        final_gate=show.final_gate_json,
        has_final_gate=(show.spec_json or {}).get("final_gate") is not None,
    )
