"""A preview of what a flow would run (``li flow run --dry-run``): the expanded graph, its waves and
each leg's isolation, as text and as a dict for ``--json``. Nothing runs, nothing is
written.

A fan-out leg over a literal list shows one node per item (``review[0]``, …), each with
its prompt and command rendered for its item (``render_instance``; a template that reads
another leg's outputs is rendered only at run time); one over an artifact shows a single
``review[*]`` node whose items are read at run time. Waves
are the legs grouped by depth: a leg's wave is one more than its deepest dependency's.
The isolation decision (``decide_isolation``) is pure and the engine's rule: an agent leg
that may run beside another gets its own worktree when its cwd is in a git repository,
unless the file says ``isolation: shared``; a leg that never runs beside another shares
its cwd. ``DEFAULT_PARALLEL`` is the engine's default too.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lirun.exec.worktrees import GitError, Repo
from lirun.flows.fanout import instance_id
from lirun.flows.spec import FlowSpec, LegSpec
from lirun.flows.templates import TemplateError, referenced_legs, render
from lirun.orchestra.graph import comparable_to_all, topo_order

__all__ = [
    "DEFAULT_PARALLEL",
    "FlowPreview",
    "PreviewNode",
    "can_branch",
    "concurrent_legs",
    "decide_isolation",
    "preview_flow",
    "render_instance",
]

DEFAULT_PARALLEL = 4  # legs at once when neither --parallel nor the file says


@dataclass(frozen=True, slots=True)
class PreviewNode:
    """One node of the expanded graph: a leg, or one instance of a fan-out leg
    (``item`` set), or all instances of an artifact-driven one (``id`` ends ``[*]``)."""

    id: str
    leg: str
    kind: str  # "agent" | "command"
    does: str  # "claude/sonnet" or the command line
    wave: int
    isolation: str  # "worktree" | "shared"
    depends_on: tuple[str, ...]  # expanded node ids
    item: str | None = None
    items_from: str | None = None  # where a ``[*]`` node's items come from
    retries: int = 0
    may_be_empty: bool = False
    # A fan-out instance: its prompt and command rendered for its item, or why not
    prompt: str | None = None
    run: tuple[str, ...] | None = None
    unrendered: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "leg": self.leg,
            "kind": self.kind,
            "does": self.does,
            "wave": self.wave,
            "isolation": self.isolation,
            "depends_on": list(self.depends_on),
            "item": self.item,
            "items_from": self.items_from,
            "retries": self.retries,
            "may_be_empty": self.may_be_empty,
            "prompt": self.prompt,
            "run": None if self.run is None else list(self.run),
            "unrendered": self.unrendered,
        }


@dataclass(frozen=True, slots=True)
class FlowPreview:
    """The whole plan; ``waves`` hold node ids, first wave first."""

    spec: FlowSpec
    parallel: int
    nodes: tuple[PreviewNode, ...]
    waves: tuple[tuple[str, ...], ...]
    in_git: Mapping[str, bool]  # cwd → is it in a git repository with a commit

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.spec.path,
            "digest": self.spec.digest,
            "cwd": self.spec.cwd,
            "vars": dict(self.spec.vars),
            "parallel": self.parallel,
            "fail_fast": self.spec.fail_fast,
            "legs": len(self.spec.legs),
            "nodes": [node.to_dict() for node in self.nodes],
            "waves": [list(wave) for wave in self.waves],
            "git": dict(self.in_git),
        }

    def text_lines(self) -> list[str]:
        spec = self.spec
        git = (
            "a git repository"
            if self.in_git.get(spec.cwd)
            else "not a git repository with a commit: no worktrees"
        )
        lines = [
            f"flow {spec.path or '-'} (sha256 {(spec.digest or '-')[:12]})",
            f"cwd {spec.cwd} ({git}); parallel {self.parallel}; fail_fast "
            f"{str(spec.fail_fast).lower()}",
        ]
        if spec.vars:
            lines.append("vars: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.vars.items()))
        by_id = {node.id: node for node in self.nodes}
        width = min(32, max(len(node.id) for node in self.nodes))
        for number, wave in enumerate(self.waves, 1):
            lines.append(f"wave {number}:")
            lines.extend(_node_line(by_id[node_id], width) for node_id in wave)
        lines.append(f"{len(self.nodes)} node(s) from {len(spec.legs)} leg(s); nothing was run")
        return lines


def _node_line(node: PreviewNode, width: int) -> str:
    does = typed_command(node.run) if node.run is not None else node.does
    parts = [f"  {node.id.ljust(width)}  {node.kind} {does}", f"[{node.isolation}]"]
    if node.item is not None:
        parts.append(f"item={node.item!r}")
    if node.prompt is not None:
        parts.append(f"prompt={_excerpt(node.prompt)!r}")
    if node.unrendered is not None:
        parts.append(f"({node.unrendered})")
    if node.items_from is not None:
        parts.append(f"items: {node.items_from}")
    if node.retries:
        parts.append(f"retries={node.retries}")
    if node.may_be_empty:
        parts.append("may_be_empty")
    if node.depends_on:
        more = len(node.depends_on) - 6
        shown = [*node.depends_on[:6], *([f"and {more} more"] if more > 0 else [])]
        parts.append("<- " + ", ".join(shown))
    return "  ".join(parts)


PROMPT_SHOWN = 80  # characters of a rendered prompt on the plan's one line per node


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PROMPT_SHOWN else flat[: PROMPT_SHOWN - 1] + "…"


def render_instance(spec: FlowSpec, leg: LegSpec, item: str) -> dict[str, Any]:
    """A fan-out instance's ``prompt`` and ``run`` rendered over the flow's vars and
    ``item`` as the engine renders them, or ``unrendered``: why they are shown as written
    (a template that reads another leg's outputs, known only at run time). TemplateError
    for a template the run would fail on."""
    task = leg.task
    texts = [t for t in (task.prompt, *(task.run or ())) if t is not None and "{" in t]
    reads = sorted({name for text in texts for name in referenced_legs(text)})
    if reads:
        return {"unrendered": f"reads legs.{reads[0]}: rendered at run time"}
    context = {"vars": dict(spec.vars), "legs": {}, "item": item}

    def one(text: str) -> str:
        return render(text, context) if "{" in text else text

    prompt = one(task.prompt) if task.prompt is not None else None
    run = tuple(one(arg) for arg in task.run) if task.run is not None else None
    return {"prompt": prompt, "run": run}


def _instances(spec: FlowSpec, leg: LegSpec, common: dict[str, Any]) -> list[PreviewNode]:
    """One node per item of a literal list, rendered; after a template error the other
    items are not rendered (each render may take seconds)."""
    items = leg.for_each.items if leg.for_each is not None else None
    assert items is not None
    made, failed = [], False
    for index, item in enumerate(items):
        if failed:
            shown: dict[str, Any] = {"unrendered": "not rendered: an earlier item's failed"}
        else:
            try:
                shown = render_instance(spec, leg, item)
            except TemplateError as exc:
                shown, failed = {"unrendered": f"the run would fail: {exc}"}, True
        made.append(PreviewNode(id=instance_id(leg.id, index), item=item, **common, **shown))
    return made


def _does(leg: LegSpec) -> tuple[str, str]:
    if leg.task.agent is not None:
        return "agent", leg.task.agent
    return "command", typed_command(leg.task.run or ())


def typed_command(argv: tuple[str, ...] | list[str]) -> str:
    """A command as a person would type it, on one line: a ``run:`` string (which runs
    through ``sh -c``) as written, a list as ``shlex.join`` quotes it; a word of several
    lines in bash's ``$'...'`` quoting, so the plan keeps one line per leg."""
    words = list(argv)
    if len(words) == 3 and words[:2] == ["sh", "-c"]:
        script = words[2].strip("\n")  # a YAML block's last newline changes nothing
        if "\n" not in script:
            return script
        words = [*words[:2], script]
    return " ".join(_one_line_word(word) for word in words)


def _one_line_word(word: str) -> str:
    if "\n" not in word:
        return shlex.quote(word)
    escaped = word.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"$'{escaped}'"


def _deps(spec: FlowSpec) -> dict[str, tuple[str, ...]]:
    return {leg.id: leg.depends_on for leg in spec.legs}


def _waves(spec: FlowSpec) -> dict[str, int]:
    deps = _deps(spec)
    wave: dict[str, int] = {}
    for leg_id in topo_order(deps):
        wave[leg_id] = 1 + max((wave[d] for d in deps[leg_id] if d in wave), default=0)
    return wave


def concurrent_legs(spec: FlowSpec, parallel: int) -> set[str]:
    """The legs that may run beside another leg (or another instance of themselves)."""
    if parallel < 2:
        return set()
    alone = comparable_to_all(_deps(spec))
    out: set[str] = set()
    for leg in spec.legs:
        items = leg.for_each.items if leg.for_each is not None else None
        fans_out = leg.for_each is not None and (items is None or len(items) > 1)
        if fans_out or leg.id not in alone:
            out.add(leg.id)
    return out


def decide_isolation(leg: LegSpec, *, concurrent: bool, in_git: bool) -> str:
    """``worktree`` or ``shared`` for one leg (pure): an explicit ``isolation:`` wins (the
    loader refuses ``worktree`` outside git); else an agent leg that may run beside
    another gets a worktree in a git repository, and everything else shares its cwd."""
    if leg.isolation is not None:
        return leg.isolation
    return "worktree" if concurrent and in_git and leg.task.is_agent else "shared"


def can_branch(path: str) -> bool:
    """Whether a leg running in ``path`` can get a worktree: ``path`` is in a git
    repository with a commit to branch from (a fresh ``git init`` has none)."""

    try:
        repo = Repo(path)
        return repo.is_repo() and repo.resolve("HEAD") is not None
    except GitError:
        return False


def preview_flow(
    spec: FlowSpec, *, parallel: int | None = None, is_git: Callable[[str], bool] = can_branch
) -> FlowPreview:
    """The plan of ``spec``; ``parallel`` overrides the file's (``--parallel``)."""
    width = parallel or spec.parallel or DEFAULT_PARALLEL
    waves = _waves(spec)
    concurrent = concurrent_legs(spec, width)
    in_git: dict[str, bool] = {spec.cwd: is_git(spec.cwd)}  # the header says what it is
    expanded: dict[str, list[str]] = {}
    nodes: list[PreviewNode] = []
    by_id = {leg.id: leg for leg in spec.legs}  # not spec.leg(): a scan per leg
    for leg_id in sorted(waves, key=lambda leg_id: waves[leg_id]):
        leg = by_id[leg_id]
        cwd = leg.cwd or spec.cwd
        if cwd not in in_git:
            in_git[cwd] = is_git(cwd)
        isolation = decide_isolation(leg, concurrent=leg.id in concurrent, in_git=in_git[cwd])
        kind, does = _does(leg)
        depends = tuple(node for dep in leg.depends_on for node in expanded.get(dep, [dep]))
        common: dict[str, Any] = {
            "leg": leg.id,
            "kind": kind,
            "does": does,
            "wave": waves[leg_id],
            "isolation": isolation,
            "depends_on": depends,
            "retries": leg.retries,
            "may_be_empty": leg.may_be_empty,
        }
        if leg.for_each is None:
            made = [PreviewNode(id=leg.id, **common)]
        elif leg.for_each.items is not None:
            made = _instances(spec, leg, common)
        else:
            source = f"the {leg.for_each.split} of {leg.for_each.artifact}, read at run time"
            made = [PreviewNode(id=f"{leg.id}[*]", items_from=source, **common)]
        if not made:  # an empty literal list: recorded as zero items, dependents still run
            made = [PreviewNode(id=f"{leg.id}[*]", items_from="none (an empty list)", **common)]
        expanded[leg.id] = [node.id for node in made]
        nodes.extend(made)
    by_wave: dict[int, list[str]] = {}
    for node in nodes:
        by_wave.setdefault(node.wave, []).append(node.id)
    return FlowPreview(
        spec=spec,
        parallel=width,
        nodes=tuple(nodes),
        waves=tuple(tuple(by_wave[w]) for w in sorted(by_wave)),
        in_git=in_git,
    )
