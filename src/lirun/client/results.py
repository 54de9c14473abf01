"""What the client hands back for orchestrations and repairs: a flow's result, a show's
result with its plays, an override that was applied.

Each is frozen and typed; ``as_dict()`` is the document the matching ``li`` command prints
with ``--json`` (``li flow run``: ``lirun.flow_result/1``, ``li show run``:
``lirun.show_report/1``, ``li override``: ``lirun.override/1``), so the command and the
library cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lirun.client.values import Run, RunStatus, as_json
from lirun.lifecycle import policy_for

__all__ = ["FlowResult", "Overridden", "PlayResult", "ShowResult", "ShowStatus"]


@dataclass(frozen=True, slots=True)
class FlowResult:
    """One flow invocation as recorded when the call returned: its status (a run's
    vocabulary: ``completed``, ``failed``…), reason, run directory and ``exit_code`` (the
    one ``li flow run`` exits with), and its legs.

    ``legs`` maps each leg instance that ran (``review``, ``review[2]`` for a fan-out
    instance) to its run, the last attempt's, in graph order; ``not_run`` are the
    instances that never started (a dependency failed, the flow was stopped). A leg
    reused by a resume is its earlier run.
    """

    invocation_id: str
    status: RunStatus
    reason: str | None
    summary: str
    run_dir: str | None
    exit_code: int
    legs: Mapping[str, Run]
    not_run: tuple[str, ...]
    _report: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def success(self) -> bool:
        return self.status.success

    def as_dict(self) -> dict[str, Any]:
        """The report ``li flow run --json`` prints (``lirun.flow_result/1``)."""
        return as_json({"schema": "lirun.flow_result/1", **self._report})


class ShowStatus(StrEnum):
    """A show's status (``lifecycle.py``): ``active`` until it completes or is aborted;
    an active show returned by ``Client.show`` waits for a person (``needs_person``)."""

    ACTIVE = "active"
    COMPLETED = "completed"
    ABORTED = "aborted"

    @property
    def terminal(self) -> bool:
        return self.value in policy_for("show").terminal


@dataclass(frozen=True, slots=True)
class PlayResult:
    """One play of a show: its status (``merged``, ``escalated``, ``gate_failed``…: the
    play vocabulary), reason, attempts, branch and merge commit, and ``runs``: the ids of
    its executions (agent and gates), oldest first, which ``Client.status`` reads."""

    id: str
    name: str
    status: str
    reason: str | None
    summary: str
    attempts: int
    branch: str | None
    merge_sha: str | None
    runs: tuple[str, ...]

    @property
    def merged(self) -> bool:
        return self.status in policy_for("play").success


@dataclass(frozen=True, slots=True)
class ShowResult:
    """One show as recorded when the call returned: its status, reason, ``exit_code``
    (the one ``li show run`` exits with), its plays in order, and ``needs_person``: the
    plays a person must look at before it can go on (``li show resume`` then)."""

    show_id: str
    topic: str
    status: ShowStatus
    reason: str | None
    summary: str
    exit_code: int
    integration: str | None
    plays: tuple[PlayResult, ...]
    needs_person: tuple[str, ...]
    _report: Mapping[str, Any] = field(repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """The board ``li show run --json`` prints (``lirun.show_report/1``)."""
        return as_json({"schema": "lirun.show_report/1", **self._report})


@dataclass(frozen=True, slots=True)
class Overridden:
    """An audited override that was applied: which record, the status it left and the
    one it has now, with the reason, the actor and the justification that were stored."""

    entity: str
    id: str
    previous_status: str | None
    status: str
    reason: str
    actor: str
    justification: str
    _record: Mapping[str, Any] = field(repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """What ``li override --json`` prints (``lirun.override/1``): the updated row."""
        return as_json(
            {
                "schema": "lirun.override/1",
                "entity_type": self.entity,
                "previous_status": self.previous_status,
                **self._record,
            }
        )
