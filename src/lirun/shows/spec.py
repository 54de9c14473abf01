"""A show as validated values: what ``li show run`` was asked to do.

``shows/load.py`` reads a show file (YAML, ``file:line`` errors) into a ``ShowSpec``;
the engine runs one. A spec is stored with the show (``to_dict``) so ``li show resume``
needs no file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lirun.exec.task import Task
from lirun.teams.membership import TeamSetting

__all__ = ["DEFAULT_ATTEMPTS", "DEFAULT_PARALLEL", "Gate", "PlaySpec", "ShowSpec"]

DEFAULT_ATTEMPTS = 2
DEFAULT_PARALLEL = 4  # plays at once when neither --parallel nor the file says


@dataclass(frozen=True, slots=True)
class Gate:
    """A gate command: a string runs through ``sh -c``, a list is an argv."""

    command: str | tuple[str, ...]
    timeout: float | None = None

    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return ["sh", "-c", self.command]
        return list(self.command)

    def to_dict(self) -> dict[str, Any]:
        command = self.command if isinstance(self.command, str) else list(self.command)
        return {"command": command, "timeout": self.timeout}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Gate | None:
        if data is None:
            return None
        command = data["command"]
        return cls(
            command=command if isinstance(command, str) else tuple(command),
            timeout=data.get("timeout"),
        )


@dataclass(frozen=True, slots=True)
class PlaySpec:
    """One play: a task run in its own worktree, merged through ``gate`` (else the show's)."""

    name: str
    task: Task
    depends_on: tuple[str, ...] = ()
    gate: Gate | None = None
    attempts: int = DEFAULT_ATTEMPTS
    line: int | None = None  # where the play starts in its file, for messages

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task.to_dict(),
            "depends_on": list(self.depends_on),
            "gate": self.gate.to_dict() if self.gate else None,
            "attempts": self.attempts,
            "line": self.line,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlaySpec:
        return cls(
            name=data["name"],
            task=Task.from_dict(data["task"]),
            depends_on=tuple(data.get("depends_on") or ()),
            gate=Gate.from_dict(data.get("gate")),
            attempts=int(data.get("attempts", DEFAULT_ATTEMPTS)),
            line=data.get("line"),
        )


@dataclass(frozen=True, slots=True)
class ShowSpec:
    """A whole show. ``repo`` is an absolute path; ``integration`` may hold ``{id}``
    (the show id, so nightly runs of one topic do not collide)."""

    topic: str
    repo: str
    base: str
    integration: str
    plays: tuple[PlaySpec, ...]
    gate: Gate | None = None
    final_gate: Gate | None = None
    parallel: int | None = None
    path: str | None = None  # the show file, if it came from one
    digest: str | None = None  # sha256 of the file's bytes
    extra: Mapping[str, Any] = field(default_factory=dict)
    team: TeamSetting | None = None  # the file's team: (docs/teams.md)

    def play(self, name: str) -> PlaySpec:
        for play in self.plays:
            if play.name == name:
                return play
        raise KeyError(name)

    def gate_for(self, play: PlaySpec) -> Gate | None:
        return play.gate or self.gate

    def integration_branch(self, show_id: str) -> str:
        return self.integration.replace("{id}", show_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "repo": self.repo,
            "base": self.base,
            "integration": self.integration,
            "plays": [p.to_dict() for p in self.plays],
            "gate": self.gate.to_dict() if self.gate else None,
            "final_gate": self.final_gate.to_dict() if self.final_gate else None,
            "parallel": self.parallel,
            "path": self.path,
            "digest": self.digest,
            "extra": dict(self.extra),
            "team": self.team.to_dict() if self.team else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShowSpec:
        return cls(
            topic=data["topic"],
            repo=data["repo"],
            base=data["base"],
            integration=data["integration"],
            plays=tuple(PlaySpec.from_dict(p) for p in data["plays"]),
            gate=Gate.from_dict(data.get("gate")),
            final_gate=Gate.from_dict(data.get("final_gate")),
            parallel=data.get("parallel"),
            path=data.get("path"),
            digest=data.get("digest"),
            extra=dict(data.get("extra") or {}),
            team=TeamSetting.from_dict(data.get("team")),
        )
