"""The checks of a flow file that need every leg: ids, the graph, templates, fan-out,
and what only the machine can say (profiles, providers). Each problem is one
``file:line`` line in the loader's ``Problems``; nothing stops at the first.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from shutil import which
from typing import TYPE_CHECKING, Any

from lirun.errors import LirunError
from lirun.exec.profile_files import load_playbook, load_profile
from lirun.exec.profiles import resolve_contract_for
from lirun.exec.provider_options import ProviderOptions
from lirun.exec.task import check_task
from lirun.exec.worktrees import GitError, Repo
from lirun.flows.templates import CONTEXT_NAMES, TemplateError, references
from lirun.orchestra.graph import Reach, find_cycle
from lirun.providers.registry import parse_provider_spec

if TYPE_CHECKING:
    from lirun.flows.load import Problems
    from lirun.flows.spec import LegSpec

__all__ = ["LEG_ID_PATTERN", "check_graph", "declared_artifacts"]

# Letters, digits, _ and -: ``[`` and ``]`` mark fan-out instances (``review[3]``), ``.``
# separates a leg from its artifact in ``for_each: {artifact: LEG.ARTIFACT}``.
LEG_ID_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")

Legs = Sequence[tuple["LegSpec", Mapping[str, Any]]]


def check_graph(p: Problems, legs: Legs, variables: Collection[str], base: str) -> None:
    """Add every graph, template, fan-out and task problem of ``legs`` to ``p``;
    ``variables``: the names ``vars:`` declares (with a value or not: a missing value is
    its own problem); ``base`` is the flow's cwd (a leg without its own runs there)."""
    _missing_program.cache_clear()  # a program may have appeared since the last check
    unique = _check_ids(p, legs)
    deps = {leg.id: leg.depends_on for leg, _ in unique}
    for leg, raw in unique:
        for dep in leg.depends_on:
            if dep == leg.id:
                p.at(raw, "depends_on", f"leg {leg.id!r} depends on itself")
            elif dep not in deps:
                p.at(
                    raw,
                    "depends_on",
                    f"leg {leg.id!r} depends on unknown leg {dep!r}{_known(deps)}",
                )
    cycle = find_cycle({k: [d for d in v if d != k] for k, v in deps.items()})
    if cycle is not None:
        first = next(raw for leg, raw in unique if leg.id == cycle[0])
        p.at(first, "depends_on", "dependency cycle: " + " -> ".join(cycle))
    by_id = {leg.id: leg for leg, _ in unique}
    reach = Reach(deps)  # never every leg's ancestor set: a long chain checks in linear time
    for leg, raw in unique:

        def above(other: str, leg_id: str = leg.id) -> bool:
            return other != leg_id and reach.above(other, leg_id)

        _check_templates(p, leg, raw, above, by_id, variables)
        _check_fan_out(p, leg, raw, above, by_id)
        _check_task(p, leg, raw, base)
        _check_isolation(p, leg, raw, base)


def _known(deps: Mapping[str, object]) -> str:
    return f" (legs: {', '.join(deps)})" if len(deps) <= 20 else ""


def _check_ids(p: Problems, legs: Legs) -> list[tuple[LegSpec, Mapping[str, Any]]]:
    seen: dict[str, Mapping[str, Any]] = {}
    unique = []
    for leg, raw in legs:
        if not LEG_ID_PATTERN.fullmatch(leg.id):
            p.at(
                raw,
                "id",
                f"leg id {leg.id!r}: use up to 64 letters, digits, _ and - "
                "(starting with a letter or _); [ ] mark fan-out instances, "
                "and . separates LEG.ARTIFACT",
            )
        if leg.id in seen:
            p.at(
                raw,
                "id",
                f"leg id {leg.id!r} is used twice (first at line "
                f"{getattr(seen[leg.id], 'line', '?')}); give each leg its own id",
            )
            continue
        seen[leg.id] = raw
        unique.append((leg, raw))
    return unique


def _texts(leg: LegSpec) -> list[tuple[str, str]]:
    """(key, template) pairs: the prompt and each argument of a command."""
    out = [("prompt", leg.task.prompt)] if leg.task.prompt is not None else []
    out += [("run", arg) for arg in leg.task.run or ()]
    return out


def _check_templates(
    p: Problems,
    leg: LegSpec,
    raw: Mapping[str, Any],
    above: Callable[[str], bool],
    by_id: Mapping[str, LegSpec],
    variables: Collection[str],
) -> None:
    for key, text in _texts(leg):
        label = f"leg {leg.id!r}: {key}"
        try:
            refs = references(text)
        except TemplateError as exc:
            p.at(raw, key, f"{label}: {exc}")
            continue
        for name in sorted(refs.names - CONTEXT_NAMES):
            p.at(
                raw,
                key,
                f"{label}: unknown name {name!r}; a template sees vars, legs and "
                "(in a for_each leg) item",
            )
        if "item" in refs.names and "for_each" not in raw:
            p.at(raw, key, f"{label}: item is defined only in a for_each leg")
        for attr in sorted(refs.private):
            p.at(
                raw,
                key,
                f"{label}: reads {attr!r}; attributes starting with _ are refused "
                "(the sandbox keeps Python internals out of reach)",
            )
        if refs.dynamic_legs:
            p.at(
                raw,
                key,
                f"{label}: reads legs by a computed key or as a whole; name each leg: "
                "legs.ID or legs['ID']",
            )
        for ref in sorted(r for r in refs.legs if not above(r)):
            if ref == leg.id:
                why = "a leg cannot read its own outputs"
            elif ref in by_id:
                why = (
                    f"it is not an ancestor of {leg.id!r}; add it to depends_on "
                    "(directly or through a leg in between)"
                )
            else:
                why = "there is no such leg"
            p.at(raw, key, f"{label}: reads legs.{ref}, but {why}")
        for name in sorted(refs.vars - set(variables)):
            p.at(
                raw,
                key,
                f"{label}: reads vars.{name}, which is not declared; "
                "add it under vars: (or fix the name)",
            )


def declared_artifacts(leg: LegSpec) -> set[str] | None:
    """The artifact ids ``leg`` declares (inline, profile, playbook); None when its
    profile or playbook cannot be read (that problem is reported on its own)."""
    ids = {str(a.get("id")) for a in leg.task.artifacts}
    if not (leg.task.profile or leg.task.playbook):
        return ids

    try:
        profile = load_profile(leg.task.profile) if leg.task.profile else None
        playbook = load_playbook(leg.task.playbook) if leg.task.playbook else None
        contract = resolve_contract_for(profile, playbook, leg.task.artifacts)
    except LirunError:
        return None
    expected = contract["expected"] if contract is not None else []
    return ids | {str(entry["id"]) for entry in expected}


def _check_fan_out(
    p: Problems,
    leg: LegSpec,
    raw: Mapping[str, Any],
    above: Callable[[str], bool],
    by_id: Mapping[str, LegSpec],
) -> None:
    if leg.for_each is None or leg.for_each.artifact is None:
        return
    source, _, artifact = leg.for_each.artifact.partition(".")
    node = raw.get("for_each")
    label = f"leg {leg.id!r}: for_each.artifact {leg.for_each.artifact}"
    if source not in by_id:
        p.at(node, "artifact", f"{label}: there is no leg {source!r}")
    elif not above(source):
        p.at(
            node,
            "artifact",
            f"{label}: {source!r} is not an ancestor of {leg.id!r}; add it to depends_on",
        )
    elif by_id[source].for_each is not None:
        p.at(
            node,
            "artifact",
            f"{label}: {source!r} fans out itself, so it has one such file per item; "
            "fan out over a single leg's artifact",
        )
    else:
        declared = declared_artifacts(by_id[source])
        if declared is not None and artifact not in declared:
            listed = ", ".join(sorted(declared)) or "none"
            p.at(
                node,
                "artifact",
                f"{label}: leg {source!r} declares no artifact {artifact!r} "
                f"(its artifacts: {listed})",
            )


def _check_task(p: Problems, leg: LegSpec, raw: Mapping[str, Any], base: str) -> None:
    """What ``build_request`` would refuse: profiles, playbooks, provider, options."""
    task = leg.task
    if (task.agent is None) == (task.run is None):
        return  # the shape problem is reported already

    try:
        check_task(task)
        if task.agent is not None and task.options:
            provider, _ = parse_provider_spec(task.agent)
            ProviderOptions.from_mapping(task.options).check_for(provider)
    except LirunError as exc:
        p.at(raw, "agent" if task.agent is not None else "run", f"leg {leg.id!r}: {exc}")
    if task.run:
        problem = _missing_program(task.run[0], leg.cwd or base)
        if problem is not None:
            p.at(raw, "run", f"leg {leg.id!r}: {problem}")


@functools.lru_cache(maxsize=4096)  # a 10,000-leg flow names a handful of programs
def _missing_program(program: str, cwd: str) -> str | None:
    """Why a command leg's program cannot start, when that is known before the run (a
    templated program is only known then)."""

    if "{{" in program or "{%" in program:
        return None
    if os.sep in program:
        path = os.path.join(cwd, os.path.expanduser(program))
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return None
        return f"command {program!r} is not an executable file"
    if which(program) is None:
        return f"command {program!r} not found on PATH; check the name or give its path"
    return None


def _check_isolation(p: Problems, leg: LegSpec, raw: Mapping[str, Any], base: str) -> None:
    """``isolation: worktree`` needs a commit to start the worktree from."""
    if leg.isolation != "worktree":
        return

    cwd = leg.cwd or base
    try:
        repo = Repo(cwd)
        ok = repo.is_repo() and repo.resolve("HEAD") is not None
    except GitError:
        ok = False
    if not ok:
        p.at(
            raw,
            "isolation",
            f"leg {leg.id!r}: isolation: worktree needs its cwd ({cwd}) in a git repository "
            "with a commit; use isolation: shared, or run the flow inside a repository",
        )
