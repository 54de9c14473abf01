"""What the client hands back: a run's record and a wait's outcome, as typed values.

``Run`` is one supervised execution as the store holds it (its ``sessions`` row, read
through ``SessionRow``) together with the document ``li status ID --json`` prints for it,
which ``Run.as_dict()`` returns exactly: the command and the library cannot disagree
about a run. ``WaitOutcome`` is one line of ``li wait``: how one target ended (or where it
stood when the wait stopped). ``Started`` is what a detached start knows: the run's id and
where its files go.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lirun.lifecycle import policy_for
from lirun.store.rows import SessionRow

__all__ = [
    "RECORD_SCHEMA",
    "WAIT_SCHEMA",
    "Run",
    "RunStatus",
    "Started",
    "Usage",
    "WaitOutcome",
    "as_json",
]

# The shape ``li status ID --json`` names (docs/json.md).
RECORD_SCHEMA = "lirun.record/2"
# The shape of one ``li wait --json`` line (``lirun.cli.wait.WAIT_SCHEMA``).
WAIT_SCHEMA = "lirun.wait/2"


class RunStatus(StrEnum):
    """A run's status: lirun's session vocabulary (``lifecycle.py``); ``running`` until it
    ends, then exactly one of the others. A ``StrEnum``: it compares equal to its text."""

    RUNNING = "running"
    COMPLETED = "completed"
    COMPLETED_EMPTY = "completed_empty"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ABORTED = "aborted"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """True once the run has ended (every status but ``running``)."""
        return self.value in policy_for("session").terminal

    @property
    def success(self) -> bool:
        """True for the statuses that count as success (``completed``)."""
        return self.value in policy_for("session").success


@dataclass(frozen=True, slots=True)
class Usage:
    """What an agent run consumed, as its provider reported it (None: not reported)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    num_turns: int | None = None


def as_json(value: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` as ``li``'s JSON printer writes it (``default=str``) and a reader parses
    it back: the form ``as_dict`` promises, whatever Python types the record held."""
    parsed: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return parsed


@dataclass(frozen=True, slots=True)
class Run:
    """One supervised execution: how it ended (or that it still runs), with what evidence,
    what it produced and where its files are. Times are Unix seconds.

    ``exit_code`` is the one ``li`` exits with for this status (0 completed, 124 timed
    out, …); ``child_exit_code`` is the program's own. ``reply`` is an agent's final text,
    ``output`` the tail of a command's stdout (a command has no reply). ``evidence`` are
    the references the status rests on; ``artifacts`` the artifact contract's
    verification. Lineage: ``invocation_id`` groups runs of one skill call,
    ``branch_id`` one conversation resumed across runs, ``resumed_from`` / ``retry_of``
    the run this one continues or retries.
    """

    id: str
    status: RunStatus
    reason: str | None
    summary: str
    provider: str | None
    model: str | None
    exit_code: int | None
    child_exit_code: int | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    cwd: str | None
    command: tuple[str, ...]
    run_dir: str | None
    artifact_dir: str | None
    evidence: tuple[Any, ...]
    artifacts: Mapping[str, Any] | None
    usage: Usage
    reply: str | None
    output: str | None
    engine_session_uid: str | None
    invocation_id: str | None
    branch_id: str | None
    resumed_from: str | None
    retry_of: str | None
    _record: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def kind(self) -> str:
        """``command`` for a program run with ``run``, else ``agent``."""
        return "command" if self.provider == "command" else "agent"

    @property
    def terminal(self) -> bool:
        return self.status.terminal

    @property
    def success(self) -> bool:
        return self.status.success

    @property
    def duration(self) -> float | None:
        """Seconds from start to end; None while it runs or if it never started."""
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    def as_dict(self) -> dict[str, Any]:
        """The record exactly as ``li status ID --json`` prints it (``lirun.record/2``),
        read when this value was made: a new dict on each call."""
        return as_json(self._record)

    @classmethod
    def from_record(cls, row: SessionRow, detail: Mapping[str, Any]) -> Run:
        """Internal: the run of a session row and the ``li status`` document built from it."""
        is_command = row.provider == "command"
        command = row.command_json if isinstance(row.command_json, list) else []
        evidence = row.status_evidence_refs if isinstance(row.status_evidence_refs, list) else []
        verification = row.artifact_verification_json
        return cls(
            id=row.id,
            status=RunStatus(row.status),
            reason=row.status_reason_code,
            summary=row.status_reason_summary or "",
            provider=row.provider,
            model=row.model,
            exit_code=row.exit_code,
            child_exit_code=row.child_exit_code,
            created_at=row.created_at,
            started_at=row.started_at,
            ended_at=row.ended_at,
            cwd=row.cwd,
            command=tuple(str(part) for part in command),
            run_dir=row.run_dir,
            artifact_dir=detail.get("artifact_dir"),
            evidence=tuple(evidence),
            artifacts=verification if isinstance(verification, dict) else None,
            usage=Usage(
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                cache_read_tokens=row.cache_read_tokens,
                cache_write_tokens=row.cache_write_tokens,
                cost_usd=row.cost_usd,
                num_turns=row.num_turns,
            ),
            reply=None if is_command else row.reply_text,
            output=row.reply_text if is_command else None,
            engine_session_uid=row.engine_session_uid,
            invocation_id=row.invocation_id,
            branch_id=row.branch_id,
            resumed_from=row.resumed_from,
            retry_of=row.retry_of,
            _record=as_json({"schema": RECORD_SCHEMA, **detail}),
        )


@dataclass(frozen=True, slots=True)
class WaitOutcome:
    """How one waited-for target ended: the fields of its ``li wait`` line.

    ``status`` is the record's (a run's, an invocation's, a play's…), or ``not_found`` /
    ``ambiguous`` for an id that names no single record, ``unknown`` for a record deleted
    while waited for; ``terminal`` is False for a target still running when the wait's
    timeout came (its last seen status, or ``pending``).
    """

    run_id: str
    kind: str | None
    status: str
    terminal: bool
    success: bool
    reason: str
    reason_summary: str
    run_dir: str | None
    artifact_dir: str | None
    exit_code: int | None
    _outcome: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_outcome(cls, outcome: Mapping[str, Any]) -> WaitOutcome:
        """Internal: the typed form of one outcome dict of ``lirun.wait``."""
        return cls(
            run_id=str(outcome["run_id"]),
            kind=outcome.get("kind"),
            status=str(outcome["status"]),
            terminal=bool(outcome["terminal"]),
            success=bool(outcome["success"]),
            reason=str(outcome.get("reason") or ""),
            reason_summary=str(outcome.get("reason_summary") or ""),
            run_dir=outcome.get("run_dir"),
            artifact_dir=outcome.get("artifact_dir"),
            exit_code=outcome.get("exit_code"),
            _outcome=dict(outcome),
        )

    @property
    def line(self) -> str:
        """The tab-separated line ``li wait`` prints for it (design.md D6)."""
        from lirun.wait.outcome import format_wait_line

        return format_wait_line(self._outcome)

    def as_dict(self) -> dict[str, Any]:
        """The object ``li wait --json`` prints for it (``lirun.wait/2``)."""
        from lirun.wait.outcome import json_record

        return as_json({"schema": WAIT_SCHEMA, **json_record(self._outcome)})


@dataclass(frozen=True, slots=True)
class Started:
    """A detached run, just started: its id (``Client.wait`` / ``status`` take it) and
    where its files go. The background ``li`` that supervises it records how it ends."""

    run_id: str
    run_dir: str
    artifact_dir: str


@dataclass(frozen=True, slots=True)
class Queued:
    """A run queued for a worker (``li submit``): its schedule-run id (``Client.wait``
    takes it), its status when read (``queued`` until a worker claims it), and whether
    this call queued it (False: a submit with the same ``key`` did before)."""

    run_id: str
    status: str
    created: bool
    _row: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The schedule run ``li submit --json`` prints (``lirun.schedule_run/1``)."""
        return as_json({"schema": "lirun.schedule_run/1", **self._row})
