"""The plan of a show, as ``li show run --dry-run`` prints it: pure, from a checked spec.

Which plays run in which wave (a play's wave is one after its latest dependency's: plays
of one wave do not depend on each other and may run side by side), the branch each
play's first attempt works on, the gate each play's merge result must pass, and the
final gate. Nothing here reads git or the database; the spec was checked when it was
read (``shows/load.py``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from lirun.orchestra.graph import topo_order
from lirun.shows.spec import DEFAULT_PARALLEL, Gate, PlaySpec, ShowSpec

__all__ = ["PlannedPlay", "ShowPlan", "gate_text", "plan_show", "play_branch"]


def play_branch(integration: str, play: str, attempt: int = 1) -> str:
    """``<integration>--<play>-a<attempt>``: beside the integration branch, never under it
    (git cannot hold ``show/x`` and ``show/x/y`` at once)."""
    return f"{integration}--{play}-a{attempt}"


def gate_text(gate: Gate | None) -> str:
    """A gate as a person would type it: the shell string, or the argv quoted."""
    if gate is None:
        return "-"
    command = gate.command if isinstance(gate.command, str) else shlex.join(gate.command)
    return f"{command} (timeout {gate.timeout:g}s)" if gate.timeout else command


def _work_text(play: PlaySpec) -> str:
    task = play.task
    if task.run is not None:
        run = list(task.run)
        if len(run) == 3 and run[:2] == ["sh", "-c"]:
            return f"run: {run[2]}"
        return f"run: {shlex.join(run)}"
    prompt = (task.prompt or f"(the prompt of playbook {task.playbook})").strip()
    first = prompt.splitlines()[0] if prompt else ""
    more = " ..." if len(prompt.splitlines()) > 1 or len(first) > 72 else ""
    return f"agent {task.agent}: {first[:72]}{more}"


@dataclass(frozen=True, slots=True)
class PlannedPlay:
    """One play in the plan."""

    name: str
    wave: int  # 1-based
    depends_on: tuple[str, ...]
    work: str
    branch: str
    gate: Gate | None
    gate_is_default: bool
    attempts: int
    timeout: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "wave": self.wave,
            "depends_on": list(self.depends_on),
            "work": self.work,
            "branch": self.branch,
            "gate": self.gate.to_dict() if self.gate else None,
            "gate_is_default": self.gate_is_default,
            "attempts": self.attempts,
            "timeout": self.timeout,
        }


@dataclass(frozen=True, slots=True)
class ShowPlan:
    """What ``li show run`` would do, in order; ``integration`` may still hold ``{id}``."""

    topic: str
    repo: str
    base: str
    integration: str
    parallel: int
    plays: tuple[PlannedPlay, ...]
    final_gate: Gate | None
    path: str | None

    @property
    def waves(self) -> list[list[str]]:
        count = max((p.wave for p in self.plays), default=0)
        return [[p.name for p in self.plays if p.wave == n] for n in range(1, count + 1)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "repo": self.repo,
            "base": self.base,
            "integration": self.integration,
            "parallel": self.parallel,
            "waves": self.waves,
            "plays": [p.to_dict() for p in self.plays],
            "final_gate": self.final_gate.to_dict() if self.final_gate else None,
            "path": self.path,
        }

    def lines(self) -> list[str]:
        """The plan as text, one line per item (no colour, no terminal needed)."""
        waves = self.waves
        count = len(self.plays)
        limit = f"at most {self.parallel} at a time"
        out = [
            f"show {self.topic}: {count} play{'s' if count != 1 else ''} in {len(waves)} "
            f"wave{'s' if len(waves) != 1 else ''}, {limit}",
            f"  repo         {self.repo}",
            f"  base         {self.base}",
            f"  integration  {self.integration} (from {self.base} when missing; moved only "
            "to merge results whose gate passed)",
            f"  final gate   {gate_text(self.final_gate)}",
        ]
        by_name = {p.name: p for p in self.plays}
        for number, names in enumerate(waves, start=1):
            out.append("")
            out.append(f"wave {number}")
            for name in names:
                play = by_name[name]
                after = f" (after {', '.join(play.depends_on)})" if play.depends_on else ""
                gate = gate_text(play.gate) + (" (the show's)" if play.gate_is_default else "")
                redo = "1 (a failed gate ends gate_failed)" if play.attempts == 1 else "2"
                out += [
                    f"  {play.name}{after}",
                    f"    does      {play.work}",
                    f"    branch    {play.branch}",
                    f"    gate      {gate}",
                    f"    attempts  {redo}",
                ]
                if play.timeout:
                    out.append(f"    timeout   {play.timeout:g}s")
        return out

    def text(self) -> str:
        return "\n".join(self.lines()) + "\n"


def plan_show(spec: ShowSpec, *, parallel: int | None = None) -> ShowPlan:
    """The plan for ``spec``; ``parallel`` (``--parallel``) overrides the file's, which
    overrides ``DEFAULT_PARALLEL``."""
    deps = {p.name: p.depends_on for p in spec.plays}
    wave: dict[str, int] = {}
    for name in topo_order(deps):
        wave[name] = 1 + max((wave[d] for d in deps[name] if d in wave), default=0)
    plays = []
    for name in sorted(wave, key=lambda n: (wave[n], list(deps).index(n))):
        play = spec.play(name)
        gate = spec.gate_for(play)
        plays.append(
            PlannedPlay(
                name=name,
                wave=wave[name],
                depends_on=play.depends_on,
                work=_work_text(play),
                branch=play_branch(spec.integration, name),
                gate=gate,
                gate_is_default=play.gate is None,
                attempts=play.attempts,
                timeout=play.task.timeout,
            )
        )
    return ShowPlan(
        topic=spec.topic,
        repo=spec.repo,
        base=spec.base,
        integration=spec.integration,
        parallel=parallel or spec.parallel or DEFAULT_PARALLEL,
        plays=tuple(plays),
        final_gate=spec.final_gate,
        path=spec.path,
    )
