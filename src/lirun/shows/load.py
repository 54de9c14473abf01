"""Reading a show file (YAML) into a checked ``ShowSpec``.

The whole file is checked before anything starts, and every problem is reported, one per
line with ``file:line``: unknown or repeated keys, wrong types, duplicate play names,
unknown or cyclic dependencies, a repository that is not a git repository, a base branch
that does not exist, a play with both or neither of ``agent`` and ``run``, ``attempts``
other than 1 or 2, provider options that do not fit the agent. Reading the file and
asking git about the repository and the base branch are the only things done; nothing
is written.

The format (docs/shows.md): top-level ``topic``, ``repo`` (relative to the
file), ``base``, ``integration`` (may hold ``{id}``), ``gate`` / ``final_gate`` (a
``sh -c`` string or an argv list), ``gate_timeout``, ``final_gate_timeout``,
``parallel`` and ``plays``. A play's ``run`` is an argv list, or a string run through
``sh -c`` (as a gate is).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lirun.errors import UsageError
from lirun.exec.profile_files import check_artifacts, load_playbook
from lirun.exec.profiles import ProfileError
from lirun.exec.provider_options import ProviderOptions, option_keys
from lirun.exec.task import MAX_PARALLEL, TASK_KEYS, Task, check_task
from lirun.exec.worktrees import GitError, Repo
from lirun.inputfile import InputFileError, read_bounded
from lirun.orchestra.graph import find_cycle, unknown_deps
from lirun.providers.registry import parse_provider_spec
from lirun.shows.spec import DEFAULT_ATTEMPTS, Gate, PlaySpec, ShowSpec
from lirun.teams.membership import parse_setting
from lirun.yamlfile.lines import MAX_FILE_BYTES, LineMap, YamlFileError, read_yaml
from lirun.yamlfile.problems import ProblemReader

__all__ = [
    "PLAY_KEYS",
    "SHOW_KEYS",
    "ShowFileError",
    "check_branch_name",
    "load_show",
]

SHOW_KEYS = frozenset(
    {
        "topic",
        "repo",
        "base",
        "integration",
        "gate",
        "gate_timeout",
        "final_gate",
        "final_gate_timeout",
        "parallel",
        "plays",
        "team",
        "team_preamble",
    }
)
PLAY_KEYS = TASK_KEYS | {"name", "gate", "gate_timeout", "attempts"}
# A play's name becomes part of a branch (<integration>--<name>-a1) and a directory.
_PLAY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SAMPLE_ID = "20260101T000000-abc123"  # stands in for {id} when a branch name is checked
# A branch whose name starts with one of these would be read by git as another ref.
_AMBIGUOUS_PREFIXES = frozenset({"refs", "heads", "tags", "remotes"})


class ShowFileError(UsageError):
    """A show file cannot run as written; ``problems`` holds one ``file:line: message`` per
    problem found (all of them, not only the first). Fix the file and run again; nothing
    was started and nothing was written."""

    def __init__(self, path: str, problems: Sequence[str]) -> None:
        self.path = path
        self.problems = tuple(problems)
        count = len(self.problems)
        head = f"{path}: {count} problem{'s' if count != 1 else ''}; nothing was started"
        super().__init__("\n".join([head, *self.problems]))


def check_branch_name(name: str) -> str | None:
    """Why ``name`` cannot be a git branch name (git check-ref-format rules), else None."""
    if not name or name.startswith("-") or name.endswith(("/", ".", ".lock")):
        return "must not be empty, start with '-' or end with '/', '.' or '.lock'"
    bad = [c for c in name if c in " ~^:?*[\\\x7f" or ord(c) < 32]
    if bad:
        return f"must not contain {bad[0]!r}"
    if ".." in name or "@{" in name or "//" in name or name == "@":
        return "must not contain '..', '@{' or '//'"
    if name == "HEAD":
        return "must not be HEAD"
    first = name.split("/", 1)[0]
    if first in _AMBIGUOUS_PREFIXES:
        # git would make refs/heads/refs/heads/x, and "refs/heads/x" names another ref
        return (
            f"must not start with {first}/ (a short branch name is wanted, and "
            f"{first}/... reads as another ref); write it without that prefix"
        )
    if name.endswith("HEAD") and name.upper() == name and "/" not in name:
        return "must not look like a git special ref (HEAD, FETCH_HEAD, ORIG_HEAD, ...)"
    if len(name) >= 40 and all(c in "0123456789abcdef" for c in name):
        return "must not look like a commit id"
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "no part between slashes may start with '.' or end with '.lock'"
    return None


def _gate(
    r: ProblemReader, node: Mapping[str, Any], key: str, timeout_key: str, label: str
) -> Gate | None:
    command = r.command(node, key, label)
    timeout = r.seconds(node, timeout_key, label)
    return None if command is None else Gate(command=command, timeout=timeout)


# --- plays ------------------------------------------------------------------------------------


def _play_name(r: ProblemReader, play: Mapping[str, Any], index: int) -> str | None:
    name = play.get("name")
    if name is None:
        r.problem(play, None, f"play {index + 1}: name is required")
        return None
    if not isinstance(name, str) or not _PLAY_NAME.match(name) or ".." in name:
        r.problem(
            play,
            "name",
            f"play {index + 1}: name {name!r} must start with a letter or digit and use only "
            "A-Z a-z 0-9 . _ - with no '..' (it becomes part of a branch name)",
        )
        return None
    return name


def _depends_on(r: ProblemReader, play: Mapping[str, Any], label: str) -> tuple[str, ...]:
    value = play.get("depends_on")
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(d, str) and d for d in value):
        r.problem(
            play, "depends_on", f"{label}depends_on must be a list of play names, got {value!r}"
        )
        return ()
    return tuple(dict.fromkeys(value))


def _attempts(r: ProblemReader, play: Mapping[str, Any], label: str) -> int:
    value = play.get("attempts", DEFAULT_ATTEMPTS)
    if isinstance(value, bool) or value not in (1, 2):
        r.problem(
            play,
            "attempts",
            f"{label}attempts must be 1 (a failed gate ends gate_failed) or 2 (one redo "
            f"with feedback), got {value!r}",
        )
        return DEFAULT_ATTEMPTS
    return int(value)


def _task(r: ProblemReader, play: Mapping[str, Any], label: str) -> Task | None:
    """The play's Task, or None when its own keys already have a problem."""
    before = len(r)
    agent = r.text(play, "agent", label)
    if agent is not None:
        try:
            parse_provider_spec(agent)
        except UsageError as exc:
            r.problem(play, "agent", f"{label}{exc}")
    prompt = r.text(play, "prompt", label)
    run = r.command(play, "run", label) if "run" in play else None
    options = {k: play[k] for k in sorted(option_keys()) if k in play}
    has_agent, has_run = "agent" in play, "run" in play
    if has_agent == has_run:
        r.problem(
            play,
            None,
            f"{label}give exactly one of agent (with a prompt) and run (a command), "
            f"not {'both' if has_agent else 'neither'}",
        )
    elif has_run:
        for key in ("prompt", *sorted(options)):
            if key in play:
                r.problem(play, key, f"{label}{key} is for agents; a run play takes a command only")
    elif "prompt" not in play and "playbook" not in play:
        r.problem(play, "agent", f"{label}agent {play['agent']} has no prompt; give prompt:")
    if options and has_agent:
        try:
            ProviderOptions.from_mapping(options, where=f"{label.rstrip(': ')}")
        except UsageError as exc:
            r.problem(play, sorted(options)[0], str(exc))
    artifacts = None
    try:
        artifacts = check_artifacts(r.path, play.get("artifacts"))
    except ProfileError as exc:
        line, text = _without_path(str(exc), r.path)
        r.at_line(line or r.line_of(play, "artifacts"), f"{label}{text}")
    profile = r.text(play, "profile", label)
    playbook = r.text(play, "playbook", label)
    timeout = r.seconds(play, "timeout", label)
    idle_timeout = r.seconds(play, "idle_timeout", label)
    stall_timeout = r.stall_seconds(play, "stall_timeout", label)
    require_change = r.flag(play, "require_change", label)
    if len(r) > before:
        return None
    if isinstance(run, str):
        run = ("sh", "-c", run)
    return Task(
        agent=agent,
        prompt=prompt,
        run=run,
        options=options,
        profile=profile,
        playbook=playbook,
        artifacts=tuple(artifacts or ()),
        timeout=timeout,
        idle_timeout=idle_timeout,
        stall_timeout=stall_timeout,
        require_change=require_change,
    )


def _without_path(message: str, path: Path) -> tuple[int, str]:
    """``check_artifacts`` names ``file:line`` itself; the problem line names the file as
    the user gave it, so this returns the line (0: none) and the words after it."""
    text = str(path)
    if not message.startswith(text):
        return 0, message
    head, _, rest = message[len(text) :].lstrip(":").partition(":")
    if head.isdigit():
        return int(head), rest.lstrip()
    return 0, message[len(text) :].lstrip(": ")


def _play_gate(
    r: ProblemReader, play: Mapping[str, Any], label: str, show_gate: Gate | None
) -> Gate | None:
    """The play's own gate; ``gate_timeout`` alone runs the show's gate with that limit."""
    if "gate" in play:
        return _gate(r, play, "gate", "gate_timeout", label)
    timeout = r.seconds(play, "gate_timeout", label)
    if timeout is None or show_gate is None:
        return None
    return Gate(command=show_gate.command, timeout=timeout)


def _playbook_prompt(name: str) -> None:
    if load_playbook(name).prompt is None:
        raise UsageError(f"no prompt: give prompt:, or a playbook with one ({name} has none)")


def _play(r: ProblemReader, play: object, index: int, show_gate: Gate | None) -> PlaySpec | None:
    if not isinstance(play, LineMap):
        r.at_line(
            0, f"plays[{index + 1}] must be a mapping (name:, agent: or run:, ...), got {play!r}"
        )
        return None
    name = _play_name(r, play, index)
    label = f"play {name or index + 1}: "
    r.keys(play, PLAY_KEYS | option_keys(), label)
    before = len(r)
    task = _task(r, play, label)
    depends_on = _depends_on(r, play, label)
    gate = _play_gate(r, play, label, show_gate)
    attempts = _attempts(r, play, label)
    if task is not None and len(r) == before:
        try:
            check_task(task)
            if task.is_agent and task.prompt is None and task.playbook:
                _playbook_prompt(task.playbook)
        except UsageError as exc:
            r.problem(play, "agent" if task.is_agent else "run", f"{label}{exc}")
    if name is None or task is None:
        return None
    return PlaySpec(
        name=name, task=task, depends_on=depends_on, gate=gate, attempts=attempts, line=play.line
    )


def _plays(r: ProblemReader, data: Mapping[str, Any], show_gate: Gate | None) -> list[PlaySpec]:
    raw = data.get("plays")
    if raw is None:
        r.problem(data, None, "plays is required: a list of plays (name:, agent: or run:, ...)")
        return []
    if not isinstance(raw, list) or not raw:
        r.problem(data, "plays", f"plays must be a non-empty list of plays, got {raw!r}")
        return []
    plays: list[PlaySpec] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw):
        name = item.get("name") if isinstance(item, Mapping) else None
        if isinstance(name, str) and name in seen:
            r.problem(
                item, "name", f"play name {name!r} is used twice (first on line {seen[name]})"
            )
        elif isinstance(name, str) and isinstance(item, LineMap):
            seen[name] = item.key_lines.get("name", item.line)
        play = _play(r, item, index, show_gate)
        if play is not None and play.name not in {p.name for p in plays}:
            plays.append(play)
    _check_graph(r, raw, seen)
    if "gate" not in data:
        ungated = dict.fromkeys(
            str(item.get("name"))
            for item in raw
            if isinstance(item, Mapping) and "gate" not in item
        )
        if ungated:
            r.problem(
                data,
                None,
                f"no gate for play(s) {', '.join(ungated)}: give gate: at the top (every "
                'play\'s default) or in each play; nothing merges ungated (gate: "true" says '
                "so outright)",
            )
    return plays


def _check_graph(r: ProblemReader, raw: list[Any], names: Mapping[str, int]) -> None:
    """Unknown and cyclic dependencies, named at the play that declares them."""
    deps: dict[str, list[str]] = {}
    nodes: dict[str, Any] = {}
    for item in raw:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            continue
        name = item["name"]
        if name in deps:
            continue
        value = item.get("depends_on") or []
        deps[name] = [d for d in value if isinstance(d, str)] if isinstance(value, list) else []
        nodes[name] = item
    for node, missing in unknown_deps(deps):
        known = ", ".join(names) or "none"
        r.problem(
            nodes[node],
            "depends_on",
            f"play {node}: depends on {missing!r}, which is not a play here (plays: {known})",
        )
    cycle = find_cycle(deps)
    if cycle is not None:
        r.problem(nodes[cycle[0]], "depends_on", "dependency cycle: " + " -> ".join(cycle))


# --- the show ---------------------------------------------------------------------------------


def _repo_and_base(r: ProblemReader, data: Mapping[str, Any], folder: Path) -> tuple[str, str]:
    raw_repo = data.get("repo", ".")
    base = r.text(data, "base", "") or ""
    if "base" not in data:
        r.problem(data, None, "base is required: the branch the show starts from (e.g. main)")
    if not isinstance(raw_repo, str) or not raw_repo.strip():
        r.problem(data, "repo", f"repo must be a path (relative to this file), got {raw_repo!r}")
        return "", base
    path = (folder / os.path.expanduser(raw_repo)).resolve()
    repo = Repo(str(path))
    try:
        if not repo.is_repo():
            r.problem(
                data,
                "repo" if "repo" in data else None,
                f"repo {raw_repo!r} ({path}) is not a git repository; give the path of one, "
                "relative to this file",
            )
            return str(path), base
        top = repo.toplevel()
        if base and repo.branch_head(base) is None:
            r.problem(
                data,
                "base",
                f"base branch {base!r} does not exist in {top}; "
                "create it or name an existing branch",
            )
    except GitError as exc:
        r.problem(data, "repo", str(exc))
        return str(path), base
    return top, base


def _integration(r: ProblemReader, data: Mapping[str, Any], topic: str | None, base: str) -> str:
    raw = data.get("integration")
    if raw is None:
        name = f"show/{topic}" if topic else ""
        why = check_branch_name(name) if name else None
        if why is not None:
            r.problem(
                data,
                "topic",
                f"the default integration branch show/{topic} {why}; "
                "give integration: or another topic",
            )
        return name
    if not isinstance(raw, str) or not raw.strip():
        r.problem(data, "integration", f"integration must be a branch name, got {raw!r}")
        return ""
    why = check_branch_name(raw.replace("{id}", _SAMPLE_ID))
    if why is None and ("{" in raw.replace("{id}", "") or "}" in raw.replace("{id}", "")):
        why = "may hold {id} (the show id) and no other braces"
    if why is not None:
        r.problem(data, "integration", f"integration branch {raw!r} {why}")
    elif raw == base:
        r.problem(
            data,
            "integration",
            "integration must not be the base branch: lirun never "
            "moves the base; name a branch of its own (e.g. show/<topic>)",
        )
    return raw


def _parallel(r: ProblemReader, data: Mapping[str, Any]) -> int | None:
    value = data.get("parallel")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARALLEL:
        r.problem(
            data,
            "parallel",
            f"parallel must be a whole number from 1 to {MAX_PARALLEL}, got {value!r}",
        )
        return None
    return value


def load_show(path: str | os.PathLike[str]) -> ShowSpec:
    """The show file at ``path`` as a ``ShowSpec``; ShowFileError (exit 2) listing every
    problem, with ``file:line``, when it cannot run as written."""
    shown = os.fspath(path)
    file = Path(shown).expanduser()
    try:
        raw_bytes = read_bounded(file, MAX_FILE_BYTES)
    except InputFileError as exc:
        problem = f"{shown}: cannot read the show file: {exc}"
        raise ShowFileError(shown, [problem]) from None
    try:
        data = read_yaml(file, expected="topic:, base:, plays:, ...")
    except YamlFileError as exc:
        raise ShowFileError(shown, [str(exc).replace(str(file), shown, 1)]) from None
    r = ProblemReader(file, shown)
    r.keys(data, SHOW_KEYS, "")
    topic = r.text(data, "topic", "")
    if "topic" not in data:
        r.problem(data, None, "topic is required: a short name for this batch of work")
    repo, base = _repo_and_base(r, data, file.resolve().parent)
    integration = _integration(r, data, topic, base)
    gate = _gate(r, data, "gate", "gate_timeout", "")
    final_gate = _gate(r, data, "final_gate", "final_gate_timeout", "")
    for key, partner in (("gate_timeout", "gate"), ("final_gate_timeout", "final_gate")):
        if key in data and partner not in data:
            r.problem(data, key, f"{key} needs {partner}")
    parallel = _parallel(r, data)
    team, team_problem = parse_setting(data.get("team"), data.get("team_preamble"))
    if team_problem:
        r.problem(data, "team" if "team" in data else "team_preamble", team_problem)
    plays = _plays(r, data, gate)
    if r.problems:
        raise ShowFileError(shown, r.problems)
    assert topic is not None
    return ShowSpec(
        topic=topic,
        repo=repo,
        base=base,
        integration=integration,
        plays=tuple(plays),
        gate=gate,
        final_gate=final_gate,
        parallel=parallel,
        path=str(file.resolve()),
        digest=hashlib.sha256(raw_bytes).hexdigest(),
        team=team,
    )
