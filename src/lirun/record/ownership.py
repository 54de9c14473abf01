"""Whether a running record's owner still runs it, and the command that reaps it.

Every ``li status`` of a running session or flow, and of an active show, says which of
three things is true, from ``liveness.judge_owner`` (the same judgment ``li reap`` and
``li show resume`` act on): its owner is **alive**, it is **dead** (a vanished or
replaced pid, a changed boot id, a lapsed lease), or **no owner** is recorded (a show
waiting for a person, a writer that records no liveness). A dead or missing owner comes
with the command that finalizes or takes over the record. ``judge`` is pure: the caller
passes the record's typed row, the clock, host, boot id and process probe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from lirun.liveness import judge_owner
from lirun.store.rows import InvocationRow, SessionRow, ShowRow

__all__ = ["OwnedRecord", "Ownership", "judge", "reap_command", "running_status"]

# The records an owner runs: a session, an invocation (a flow's has an owner), a show.
OwnedRecord = SessionRow | InvocationRow | ShowRow


@dataclass(frozen=True, slots=True)
class Ownership:
    """``verdict``: alive, dead or none; ``summary``: one sentence; ``reap``: the command
    that finalizes (or takes over) the record when it needs one, ``advice`` the sentence
    that says so."""

    verdict: Literal["alive", "dead", "none"]
    summary: str
    reap: str | None = None
    advice: str | None = None
    reason_code: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "summary": self.summary,
            "reap": self.reap,
            "advice": self.advice,
            "reason_code": self.reason_code,
        }


def running_status(kind: str) -> str:
    """The status in which a record of ``kind`` has an owner running it."""
    return "active" if kind == "show" else "running"


def reap_command(kind: str, record_id: str, *, flow: bool = False) -> tuple[str, str]:
    """(command, sentence): what finalizes or takes over a record whose owner is gone."""
    if kind == "show":
        command = f"li show resume {record_id}"
        return command, f"`{command}` takes it over, `li show abort {record_id}` ends it"
    if kind == "invocation" and flow:
        return "li reap", (
            f"`li reap` marks it failed; `li flow resume {record_id}` reruns what did not complete"
        )
    return "li reap", "`li reap` finalizes it"


def _age(now: float, then: object) -> str:
    if then is None:
        return ""
    seconds = max(0, int(now - float(then)))  # type: ignore[arg-type]
    return f", last heartbeat {seconds}s ago"


def judge(
    kind: str,
    row: OwnedRecord,
    *,
    now: float,
    host: str,
    boot_id: str,
    process_start_time_of: Callable[[int], float | None],
) -> Ownership | None:
    """The ownership of a running ``row`` of ``kind``; None when it is not running."""
    if row.status != running_status(kind):
        return None
    flow = kind == "invocation" and isinstance(row, InvocationRow) and row.kind == "flow"
    command, advice = reap_command(kind, row.id, flow=flow)
    pid, where = row.owner_pid, row.owner_host or "?"
    if not pid and row.heartbeat_at is None:
        if kind == "show":
            return Ownership(
                "none",
                f"no process runs show {row.id} (it waits for a person, or li show "
                "run was stopped)",
                command,
                advice,
            )
        return Ownership("none", "its writer records no owner; nothing can tell if it runs")
    verdict = judge_owner(
        row, now=now, host=host, boot_id=boot_id, process_start_time_of=process_start_time_of
    )
    if verdict is not None:
        return Ownership("dead", verdict.summary, command, advice, verdict.reason_code)
    beat = _age(now, row.heartbeat_at)
    if pid and where == host:
        return Ownership("alive", f"pid {pid} on {where} is running{beat}")
    return Ownership("alive", f"pid {pid} on {where}: its lease holds{beat}")
