"""Reading a flow file: YAML with ``file:line`` errors into a ``FlowSpec``.

The whole file is checked before anything starts, and every problem is reported at
once, one line each: unknown keys, wrong types, duplicate or unsafe ids, unknown
dependencies, cycles, template mistakes (syntax, a leg that is not an ancestor, an
undeclared variable, ``item`` outside a fan-out leg), fan-out over an artifact no
ancestor declares, too many items, provider options the provider does not take.
Nothing is written anywhere: loading is a pure read of the file, its profiles and
playbooks. ``flows/load_checks.py`` holds the checks that need the whole graph.

Variables are text. ``vars:`` declares them with their defaults (``null``: no default,
``--var`` must give one); ``--var KEY=VALUE`` overrides a declared one, and a key the
file does not declare is an error (a typo would otherwise be silently ignored).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lirun.errors import UsageError
from lirun.exec.profile_files import check_artifacts
from lirun.exec.profiles import ProfileError
from lirun.exec.provider_options import option_keys
from lirun.exec.task import MAX_PARALLEL, TASK_KEYS, Task
from lirun.flows.load_checks import check_graph
from lirun.flows.spec import MAX_FAN_OUT, FlowSpec, ForEach, LegSpec
from lirun.inputfile import InputFileError, read_bounded
from lirun.teams.membership import parse_setting
from lirun.yamlfile import gcpause
from lirun.yamlfile.lines import MAX_FILE_BYTES, YamlFileError, read_yaml
from lirun.yamlfile.problems import ProblemReader, did_you_mean

__all__ = [
    "LEG_KEYS",
    "TOP_KEYS",
    "FlowFileError",
    "Problems",
    "load_flow",
    "parse_var",
]

TOP_KEYS = frozenset(
    {"description", "vars", "parallel", "fail_fast", "legs", "team", "team_preamble"}
)
LEG_KEYS = TASK_KEYS | {
    "id",
    "description",
    "cwd",
    "retries",
    "isolation",
    "may_be_empty",
    "for_each",
}
ISOLATIONS = ("worktree", "shared")
MAX_RETRIES = 10
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class FlowFileError(UsageError):
    """A flow file cannot run as written. ``problems`` holds every problem found, each
    ``file:line: what is wrong``; fix them all (nothing was started or written)."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        count = len(self.problems)
        head = f"{path}: {count} problem{'s' if count != 1 else ''}; nothing was started"
        super().__init__("\n".join([head, *(f"  {p}" for p in self.problems)]))


class Problems(ProblemReader):
    """The flow loader's ``ProblemReader``: messages name the file's absolute path;
    ``at`` places one by a YAML node and key. ``lines`` are in file order (those
    without a line, such as ``--var``, first)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, str(path))

    def at(self, node: object, key: object, message: str) -> None:
        self.problem(node, key, message)

    @property
    def lines(self) -> list[str]:
        return self.problems


def parse_var(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (``--var``) → ``(KEY, VALUE)``; UsageError otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not _VAR_NAME.fullmatch(key):
        raise UsageError(
            f"--var {text!r}: expected KEY=VALUE with KEY a name (letters, digits, _), "
            "e.g. --var target=src"
        )
    return key, value


def load_flow(
    path: str | os.PathLike[str],
    vars: Mapping[str, str] = {},  # read only, never mutated
    *,
    cwd: str | None = None,
) -> FlowSpec:
    """The flow in ``path`` with ``vars`` (``--var``) applied, checked whole.

    ``cwd``: where the legs run (default: the current directory), made absolute; a leg's
    own ``cwd`` is relative to it. FlowFileError (exit 2) lists every problem.
    """
    with gcpause.paused():  # a long file's values all live until the end: nothing to collect
        return _load_flow(path, vars, cwd)


def _load_flow(path: str | os.PathLike[str], vars: Mapping[str, str], cwd: str | None) -> FlowSpec:

    file = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    try:
        digest = hashlib.sha256(read_bounded(file, MAX_FILE_BYTES)).hexdigest()
    except InputFileError as exc:
        raise FlowFileError(str(file), [f"{file}: cannot read the flow file: {exc}"]) from None
    try:
        data = read_yaml(file, expected="vars:, parallel:, legs:, ...")
    except YamlFileError as exc:
        raise FlowFileError(str(file), [str(exc)]) from None
    base = os.path.abspath(os.path.expanduser(cwd or os.getcwd()))
    problems = Problems(file)
    _check_repeated_keys(problems, data)
    _check_keys(problems, data, TOP_KEYS, "flow")
    variables = _variables(problems, data, vars)
    parallel = _positive_int(problems, data, "parallel", high=MAX_PARALLEL)
    fail_fast = _flag(problems, data, "fail_fast")
    team, team_problem = parse_setting(data.get("team"), data.get("team_preamble"))
    if team_problem:
        problems.at(data, "team" if "team" in data else "team_preamble", team_problem)
    legs = _legs(problems, data, base)
    declared = data.get("vars")
    names = {str(name) for name in declared} if isinstance(declared, dict) else set()
    check_graph(problems, legs, names, base)
    if problems:
        raise FlowFileError(str(file), problems.lines)
    return FlowSpec(
        legs=tuple(leg for leg, _ in legs),
        vars=variables,
        parallel=parallel,
        fail_fast=fail_fast,
        cwd=base,
        path=str(file),
        digest=digest,
        team=team,
    )


# --- the top level ----------------------------------------------------------------------------


def _check_keys(p: Problems, data: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    for key in data:
        if key not in allowed:
            p.at(
                data,
                key,
                f"unknown {what} key {str(key)!r}{did_you_mean(key, allowed)} "
                f"(allowed: {', '.join(sorted(allowed))})",
            )


def _check_repeated_keys(p: Problems, node: object) -> None:
    """A key given twice in one mapping: YAML keeps the last, silently; refuse it."""
    if isinstance(node, dict):
        for key, line in getattr(node, "duplicates", ()):
            first = getattr(node, "key_lines", {}).get(key)
            p.add(f"{p.path}:{line}: key {str(key)!r} is given twice (first on line {first})")
        for value in node.values():
            _check_repeated_keys(p, value)
    elif isinstance(node, list):
        for value in node:
            _check_repeated_keys(p, value)


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _variables(
    p: Problems, data: Mapping[str, Any], overrides: Mapping[str, str]
) -> dict[str, str]:
    raw = data.get("vars")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        p.at(data, "vars", f"vars must be a mapping of NAME: default, got {type(raw).__name__}")
        raw = {}
    out: dict[str, str] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not _VAR_NAME.fullmatch(name):
            p.at(
                raw, name, f"variable name {name!r}: use letters, digits and _ (not first a digit)"
            )
        elif value is not None and not isinstance(value, str | int | float | bool):
            p.at(
                raw,
                name,
                f"vars.{name} must be text, a number or a boolean (variables are text), "
                f"got {type(value).__name__}",
            )
        elif name in overrides:
            out[name] = overrides[name]
        elif value is None:
            p.at(raw, name, f"vars.{name} has no default; give it with --var {name}=VALUE")
        else:
            out[name] = _as_text(value)
    for name in overrides:
        if name not in raw:
            declared = ", ".join(sorted(map(str, raw))) or "none"
            p.add(
                f"--var {name}: the flow declares no variable {name!r} (declared: {declared}); "
                "declare it under vars: with a default"
            )
    return out


def _positive_int(
    p: Problems, node: Mapping[str, Any], key: str, *, low: int = 1, high: int | None = None
) -> int | None:
    value = node.get(key)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        p.at(node, key, f"{key} must be a whole number {bound}, got {value!r}")
        return None
    return value


def _flag(p: Problems, node: Mapping[str, Any], key: str) -> bool:
    return p.flag(node, key, "")


def _text_list(p: Problems, node: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    """A list of non-empty strings (a single string is a list of one)."""
    value = node.get(key)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        p.at(node, key, f"{key} must be a list of non-empty text, got {value!r}")
        return None
    return tuple(items)


# --- legs -------------------------------------------------------------------------------------


def _legs(p: Problems, data: Mapping[str, Any], base: str) -> list[tuple[LegSpec, dict[str, Any]]]:
    raw = data.get("legs")
    if raw is None:
        p.at(data, None, "the flow has no legs: add legs: with at least one leg")
        return []
    if not isinstance(raw, list) or not raw:
        p.at(data, "legs", "legs must be a non-empty list of legs (each a mapping with id:)")
        return []
    legs: list[tuple[LegSpec, dict[str, Any]]] = []
    for index, entry in enumerate(raw):
        if not isinstance(entry, dict):
            p.at(data, "legs", f"legs[{index}] must be a mapping with id:, got {entry!r}")
            continue
        leg = _leg(p, entry, index, base)
        if leg is not None:
            legs.append((leg, entry))
    return legs


def _leg(p: Problems, raw: dict[str, Any], index: int, base: str) -> LegSpec | None:
    ident = raw.get("id")
    if not isinstance(ident, str) or not ident:
        p.at(raw, "id" if "id" in raw else None, f"legs[{index}] needs an id (text), got {ident!r}")
        return None
    _check_keys(p, raw, LEG_KEYS | option_keys(), f"leg {ident!r}")
    task = _task(p, raw, ident)
    return LegSpec(
        id=ident,
        task=task,
        depends_on=_text_list(p, raw, "depends_on") or (),
        for_each=_for_each(p, raw),
        cwd=_leg_cwd(p, raw, base),
        retries=_positive_int(p, raw, "retries", low=0, high=MAX_RETRIES) or 0,
        isolation=_isolation(p, raw),
        may_be_empty=_flag(p, raw, "may_be_empty"),
        line=getattr(raw, "line", None),
    )


def _task(p: Problems, raw: dict[str, Any], ident: str) -> Task:
    agent = p.text(raw, "agent", "")
    run = _run(p, raw)
    options = {k: raw[k] for k in sorted(option_keys() & set(raw))}
    if ("agent" in raw) == ("run" in raw):
        p.at(raw, None, f"leg {ident!r} needs exactly one of agent: (with prompt:) or run:")
    elif "agent" in raw and "prompt" not in raw and "playbook" not in raw:
        p.at(raw, None, f"leg {ident!r}: an agent leg needs prompt: (or a playbook with one)")
    elif "run" in raw:
        for key in ("prompt", *options):
            if key in raw:
                p.at(raw, key, f"leg {ident!r}: {key} applies to agent legs; a run: leg takes none")
    artifacts: list[dict[str, Any]] | None = None
    try:
        artifacts = check_artifacts(p.path, raw.get("artifacts"))
    except ProfileError as exc:
        p.add(f"{exc} (leg {ident!r})")
    return Task(
        agent=agent,
        prompt=p.text(raw, "prompt", ""),
        run=run,
        options=options,
        profile=p.text(raw, "profile", ""),
        playbook=p.text(raw, "playbook", ""),
        artifacts=tuple(artifacts or ()),
        timeout=p.seconds(raw, "timeout", ""),
        idle_timeout=p.seconds(raw, "idle_timeout", ""),
        stall_timeout=p.stall_seconds(raw, "stall_timeout", ""),
        require_change=_flag(p, raw, "require_change"),
    )


def _run(p: Problems, raw: dict[str, Any]) -> tuple[str, ...] | None:
    """``run:`` as an argv list; a string runs through ``sh -c``."""
    value = raw.get("run")
    if value is None:
        return None
    if isinstance(value, str) and value.strip():
        return ("sh", "-c", value)
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(a, str | int | float) and not isinstance(a, bool) for a in value)
    ):
        p.at(
            raw,
            "run",
            "run must be a command: a non-empty list of words ([make, test]) or a sh -c "
            f"string, got {value!r}",
        )
        return None
    return tuple(str(a) for a in value)


def _leg_cwd(p: Problems, raw: dict[str, Any], base: str) -> str | None:
    value = p.text(raw, "cwd", "")
    if value is None:
        return None
    path = os.path.normpath(os.path.join(base, os.path.expanduser(value)))
    if not os.path.isdir(path):
        p.at(raw, "cwd", f"cwd {value!r} is not a directory ({path}); create it or fix the path")
    return path


def _isolation(p: Problems, raw: dict[str, Any]) -> str | None:
    value = raw.get("isolation")
    if value is None:
        return None
    if value not in ISOLATIONS:
        p.at(raw, "isolation", f"isolation must be worktree or shared, got {value!r}")
        return None
    return str(value)


def _for_each(p: Problems, raw: dict[str, Any]) -> ForEach | None:
    value = raw.get("for_each")
    if value is None:
        return None
    if isinstance(value, list):
        if len(value) > MAX_FAN_OUT:
            p.at(
                raw,
                "for_each",
                f"for_each has {len(value)} items; at most {MAX_FAN_OUT} are allowed",
            )
            return None
        bad = [v for v in value if not isinstance(v, str | int | float | bool)]
        if bad:
            p.at(raw, "for_each", f"for_each items must be text or numbers, got {bad[0]!r}")
            return None
        return ForEach(items=tuple(_as_text(v) for v in value))
    if isinstance(value, dict):
        _check_keys(p, value, frozenset({"artifact", "split"}), "for_each")
        artifact = value.get("artifact")
        split = value.get("split", "lines")
        ok = True
        if (
            not isinstance(artifact, str)
            or artifact.count(".") < 1
            or not all(artifact.partition(".")[::2])
        ):
            p.at(
                value,
                "artifact" if "artifact" in value else None,
                "for_each.artifact must be LEG.ARTIFACT (a leg this one depends on, and one "
                f"of its artifact ids), got {artifact!r}",
            )
            ok = False
        if split not in ("lines", "json"):
            p.at(value, "split", f"for_each.split must be lines or json, got {split!r}")
            ok = False
        return ForEach(artifact=artifact, split=split) if ok else None
    p.at(
        raw,
        "for_each",
        "for_each must be a list of items or {artifact: LEG.ARTIFACT, split: lines|json}, "
        f"got {value!r}",
    )
    return None
