"""A flow as validated values: legs, their dependencies, fan-out and isolation.

``flows/load.py`` reads a flow file (YAML, ``file:line`` errors) into a ``FlowSpec``;
the engine runs one. The resolved spec (after ``--var``) is stored with the invocation
(``to_dict``), so ``li flow resume`` and the dashboard read it from the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lirun.exec.task import Task
from lirun.teams.membership import TeamSetting

__all__ = ["MAX_FAN_OUT", "FlowSpec", "ForEach", "LegSpec"]

MAX_FAN_OUT = 1000  # items one for_each may expand to


@dataclass(frozen=True, slots=True)
class ForEach:
    """Fan-out: a literal list (``items``), or the lines / JSON array of a dependency's
    artifact (``artifact`` = ``LEG.ARTIFACT_ID``, ``split`` = ``lines`` or ``json``)."""

    items: tuple[str, ...] | None = None
    artifact: str | None = None
    split: str = "lines"

    def to_dict(self) -> dict[str, Any]:
        items = list(self.items) if self.items is not None else None
        return {"items": items, "artifact": self.artifact, "split": self.split}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ForEach | None:
        if data is None:
            return None
        items = data.get("items")
        return cls(
            items=tuple(items) if items is not None else None,
            artifact=data.get("artifact"),
            split=data.get("split", "lines"),
        )


@dataclass(frozen=True, slots=True)
class LegSpec:
    """One leg. ``task.prompt`` (and a command's arguments) are templates over ``vars``,
    ``legs.<ancestor>`` (``reply``, ``artifacts.<id>``, ``status``, ``session_id``) and,
    in a fan-out leg, ``item``. ``isolation`` None means: a worktree when legs run side
    by side in a git repository, else shared."""

    id: str
    task: Task
    depends_on: tuple[str, ...] = ()
    for_each: ForEach | None = None
    cwd: str | None = None
    retries: int = 0
    isolation: str | None = None  # "worktree" | "shared" | None (decide at run time)
    may_be_empty: bool = False
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task.to_dict(),
            "depends_on": list(self.depends_on),
            "for_each": self.for_each.to_dict() if self.for_each else None,
            "cwd": self.cwd,
            "retries": self.retries,
            "isolation": self.isolation,
            "may_be_empty": self.may_be_empty,
            "line": self.line,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LegSpec:
        return cls(
            id=data["id"],
            task=Task.from_dict(data["task"]),
            depends_on=tuple(data.get("depends_on") or ()),
            for_each=ForEach.from_dict(data.get("for_each")),
            cwd=data.get("cwd"),
            retries=int(data.get("retries") or 0),
            isolation=data.get("isolation"),
            may_be_empty=bool(data.get("may_be_empty")),
            line=data.get("line"),
        )


@dataclass(frozen=True, slots=True)
class FlowSpec:
    """A whole flow; ``vars`` already hold ``--var`` overrides; ``cwd`` is absolute."""

    legs: tuple[LegSpec, ...]
    vars: Mapping[str, Any] = field(default_factory=dict)
    parallel: int | None = None
    fail_fast: bool = False
    cwd: str = "."
    path: str | None = None
    digest: str | None = None  # sha256 of the flow file's bytes
    team: TeamSetting | None = None  # the file's team: (docs/teams.md)

    def leg(self, leg_id: str) -> LegSpec:
        for leg in self.legs:
            if leg.id == leg_id:
                return leg
        raise KeyError(leg_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "legs": [leg.to_dict() for leg in self.legs],
            "vars": dict(self.vars),
            "parallel": self.parallel,
            "fail_fast": self.fail_fast,
            "cwd": self.cwd,
            "path": self.path,
            "digest": self.digest,
            "team": self.team.to_dict() if self.team else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlowSpec:
        return cls(
            legs=tuple(LegSpec.from_dict(leg) for leg in data["legs"]),
            vars=dict(data.get("vars") or {}),
            parallel=data.get("parallel"),
            fail_fast=bool(data.get("fail_fast")),
            cwd=data.get("cwd") or ".",
            path=data.get("path"),
            digest=data.get("digest"),
            team=TeamSetting.from_dict(data.get("team")),
        )
