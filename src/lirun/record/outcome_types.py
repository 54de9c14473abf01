"""The values of the teardown decision: the facts it is fed and the outcome it returns.

``OutcomeFacts`` and ``Outcome`` live apart from the steps so each step module
(``outcome.py``, ``completion.py``) can use them; ``lirun.record.outcome`` re-exports both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lirun.store.rows import SessionRow

__all__ = ["Outcome", "OutcomeFacts"]


@dataclass(frozen=True, slots=True)
class OutcomeFacts:
    """Everything teardown knows about one execution when it ends.

    ``completion_evidence`` None means "not checked"; ``linked_row`` None means "no linked
    engine row was found" (the caller fetched it only when ``needs_linked_engine``).
    ``start_snapshot``: the cwd when the run started (``take_start_snapshot``), which the
    completion evidence was measured against; ``started_at``: when this execution began.
    ``tool_calls`` / ``permission_denials``: an agent's own counts from its stream (None
    for a command); ``require_change``: a reply alone is not evidence of work;
    ``command``: the execution is a command, not an agent (marked explicitly by whoever
    started it): its exit code is its verdict, and its stdout is output, never a reply.
    """

    status: str = "completed"
    exception: BaseException | None = None
    signal_name: str | None = None
    cancel_cause: str | None = None
    exit_code: int | None = None
    idle_timeout: bool = False
    verification: Mapping[str, Any] | None = None
    completion_evidence: Mapping[str, Any] | None = None
    has_assistant_output: bool = False
    linked_row: SessionRow | None = None
    escalated_evidence: Sequence[Mapping[str, Any]] = ()
    engine_session_uid: str | None = None
    extra_evidence: Sequence[Mapping[str, Any]] = ()
    extra_metadata: Mapping[str, Any] = field(default_factory=dict)
    # What the provider was doing when li stopped it ("... retried the API 7 times").
    summary_note: str | None = None
    # li's timer fired while the provider was retrying an API call.
    provider_retrying: bool = False
    start_snapshot: Mapping[str, Any] | None = None
    started_at: float | None = None
    tool_calls: int | None = None
    permission_denials: int | None = None
    require_change: bool = False
    command: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """What teardown writes: status, reason code, summary, evidence and transition metadata."""

    status: str
    reason_code: str
    summary: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
