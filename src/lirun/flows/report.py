"""What a flow run returns and ``li status`` / ``li flow`` render: the invocation and its legs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from lirun.lifecycle import EXIT_CODE_BY_STATUS

__all__ = ["FlowReport", "LegReport"]


@dataclass(frozen=True, slots=True)
class LegReport:
    """One leg instance. ``id`` is ``review[2]`` for a fan-out instance, ``leg`` the
    flow file's id (``review``) and ``item`` its item; ``status`` is the session's, or
    ``not_run``; ``reused``: completed in the invocation this one resumed, not run again
    (``session_id`` is that earlier session); ``attempts`` counts sessions (retries);
    ``error``: why a leg that has no session failed (its items, its template, its setup)."""

    id: str
    leg: str
    item: str | None
    status: str
    reason_code: str | None
    session_id: str | None
    attempts: int
    reused: bool
    duration_s: float | None
    cost_usd: float | None
    depends_on: tuple[str, ...]
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["depends_on"] = list(self.depends_on)
        return data


@dataclass(frozen=True, slots=True)
class FlowReport:
    """The flow invocation as recorded: status and reason, its run directory, the legs in
    graph order, the legs not run because a dependency failed (``stopped``), the signal
    that interrupted it (``interrupted``) and the summed tokens and cost of its legs."""

    invocation_id: str
    status: str
    reason_code: str | None
    reason_summary: str | None
    run_dir: str | None
    resumed_from: str | None
    legs: tuple[LegReport, ...]
    stopped: tuple[str, ...]
    interrupted: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None

    @property
    def exit_code(self) -> int:
        """``li``'s exit code for the invocation's status (0, 1, 124, 130, 143)."""
        return EXIT_CODE_BY_STATUS.get(self.status, 1)

    def to_dict(self) -> dict[str, Any]:
        data = {
            key: getattr(self, key)
            for key in (
                "invocation_id",
                "status",
                "reason_code",
                "reason_summary",
                "run_dir",
                "resumed_from",
                "interrupted",
                "input_tokens",
                "output_tokens",
                "cost_usd",
            )
        }
        data["exit_code"] = self.exit_code
        data["stopped"] = list(self.stopped)
        data["legs"] = [leg.to_dict() for leg in self.legs]
        return data
