"""What a schedule runs: the ACTION after ``--``, parsed, checked and snapshotted at ``add``.

``agent PROVIDER[/MODEL] PROMPT [options] [-- PROVIDER_OPTIONS...]`` and ``run [options]
[--] CMD ...`` become a :class:`~lirun.exec.task.Task`, the value flows and shows use, so a
worker builds its execution request with ``build_request`` exactly as they do. ``flow
FILE`` and ``show FILE`` name a file, resolved to an absolute path whose sha256 is kept.
``gc --older-than DUR [--status S]... [--keep-failed]`` is ``li gc``'s retention policy,
applied by the worker to the database it serves (docs/retention.md).
Every action has a working directory (``--cwd DIR``, else the caller's), resolved and
checked here; a worker where it or the file is missing (or the file changed) fails the
run with a typed reason instead of running something else.

The options are ``li agent``'s that describe the work itself (``--cwd``, ``--timeout``,
``--idle-timeout``, ``--stall-timeout``, ``--profile``, ``--playbook``, ``--artifact``,
``--prompt``; and ``li run``'s ``--require-change`` for ``run``), read the same way; those
about one invocation from a terminal (``--detach``, ``--resume``, ``--save``, ``--run-id``,
``--json``, ``--db``, ``--bin``) are refused with the reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lirun.durations import parse_seconds
from lirun.errors import UsageError
from lirun.exec.artifact_check_option import attach_artifact_checks
from lirun.exec.profiles import parse_artifact_option
from lirun.exec.provider_options import ProviderOptions
from lirun.exec.task import Task, check_task
from lirun.flows.load import load_flow
from lirun.lifecycle import policy_for
from lirun.provider_errors import ProviderNotFoundError
from lirun.providers.registry import parse_provider_spec, provider_names
from lirun.record.retention_rules import MAX_OLDER_THAN, RetentionPolicy
from lirun.schedules.durations import format_duration, parse_duration
from lirun.shows.load import load_show

KINDS = ("agent", "run", "flow", "show", "gc")
USAGE = (
    "agent PROVIDER[/MODEL] PROMPT [options] [-- PROVIDER_OPTIONS...] | run [options] [--] "
    "CMD ... | flow FILE [--cwd DIR] | show FILE [--cwd DIR] "
    "| gc --older-than DUR [--status S]... [--keep-failed]"
)


def example() -> str:
    """An agent action to show in a message, with the first provider lirun knows."""
    name = next(iter(provider_names()), "PROVIDER")
    return f"-- agent {name} 'review the open pull requests' --timeout 1800"


# option → (takes a value, which action kinds accept it)
_OPTIONS: dict[str, tuple[bool, tuple[str, ...]]] = {
    "--cwd": (True, KINDS),
    "--timeout": (True, ("agent", "run")),
    "--idle-timeout": (True, ("agent", "run")),
    "--stall-timeout": (True, ("agent",)),
    "--profile": (True, ("agent", "run")),
    "--playbook": (True, ("agent",)),
    "--artifact": (True, ("agent", "run")),
    "--artifact-check": (True, ("agent", "run")),
    "--prompt": (True, ("agent",)),
    "--require-change": (False, ("run",)),
    "--older-than": (True, ("gc",)),
    "--status": (True, ("gc",)),
    "--keep-failed": (False, ("gc",)),
}
_REFUSED = {
    "--detach": "a schedule's runs always run in a worker",
    "--resume": "each scheduled run starts a new conversation",
    "--resume-on-timeout": "not available for scheduled runs yet",
    "--save": "a scheduled run keeps its artifacts under its own run directory",
    "--run-id": "each scheduled run gets its own id",
    "--invocation": "a scheduled run makes its own record",
    "--json": "give --json to the li schedule command itself",
    "--db": "give --db to li itself (li --db URL schedule add ...)",
    "--bin": "the worker finds the provider on its own machine ($LIRUN_<PROVIDER>_BIN, PATH)",
    "--grace": "set grace in a profile's defaults",
}


@dataclass(frozen=True, slots=True)
class Action:
    """A checked action. ``task`` for agent/run; ``file`` and ``sha256`` for flow/show;
    ``retention`` (a ``RetentionPolicy`` as a dict) for gc; ``cwd`` (absolute) for all."""

    kind: str
    cwd: str
    task: Task | None = None
    file: str | None = None
    sha256: str | None = None
    retention: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "cwd": self.cwd}
        if self.task is not None:
            data["task"] = self.task.to_dict()
        if self.file is not None:
            data.update(file=self.file, sha256=self.sha256)
        if self.retention is not None:
            data["retention"] = dict(self.retention)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Action:
        task = data.get("task")
        return cls(
            kind=str(data["kind"]),
            cwd=str(data["cwd"]),
            task=Task.from_dict(task) if task is not None else None,
            file=data.get("file"),
            sha256=data.get("sha256"),
            retention=data.get("retention"),
        )

    def describe(self) -> str:
        if self.kind == "agent" and self.task is not None:
            prompt = " ".join(str(self.task.prompt or "(playbook prompt)").split())
            return f"agent {self.task.agent} {prompt[:60]!r}"
        if self.kind == "run" and self.task is not None:
            flag = "--require-change " if self.task.require_change else ""
            return "run " + flag + shlex.join(self.task.run or ())
        if self.kind == "gc" and self.retention is not None:
            return "gc " + " ".join(gc_action_words(RetentionPolicy.from_dict(self.retention)))
        return f"{self.kind} {self.file}"


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def _split(kind: str, words: list[str]) -> tuple[dict[str, list[str]], list[str], list[str]]:
    """(options, positionals, after ``--``). ``run`` stops at its first positional (the
    command is everything from there); the others take options anywhere before ``--``."""
    options: dict[str, list[str]] = {}
    positionals: list[str] = []
    index = 0
    while index < len(words):
        token = words[index]
        if token == "--":
            return options, positionals, words[index + 1 :]
        if kind == "run" and not token.startswith("-"):
            return options, positionals, words[index:]
        if token.startswith("--") and token != "--":
            index = _take_option(kind, words, index, options)
            continue
        positionals.append(token)
        index += 1
    return options, positionals, []


def _take_option(kind: str, words: list[str], index: int, options: dict[str, list[str]]) -> int:
    token = words[index]
    name, eq, value = token.partition("=")
    if name in _REFUSED:
        raise UsageError(f"action {kind}: {name} does not apply to a schedule: {_REFUSED[name]}")
    spec = _OPTIONS.get(name)
    if spec is None or kind not in spec[1]:
        allowed = sorted(o for o, (_, kinds) in _OPTIONS.items() if kind in kinds)
        raise UsageError(
            f"action {kind}: unknown option {name!r}; it takes {', '.join(allowed)}"
            + ("; the provider's own options go after a further --" if kind == "agent" else "")
        )
    if not spec[0]:  # a flag
        if eq:
            raise UsageError(f"action {kind}: {name} takes no value; give {name} alone")
        options.setdefault(name, []).append("")
        return index + 1
    if not eq:
        if index + 1 >= len(words):
            raise UsageError(f"action {kind}: {name} needs a value")
        value, index = words[index + 1], index + 1
    options.setdefault(name, []).append(value)
    return index + 1


def _one(options: dict[str, list[str]], name: str) -> str | None:
    values = options.get(name)
    if values and len(values) > 1 and name not in ("--artifact", "--artifact-check", "--status"):
        raise UsageError(f"{name} is given {len(values)} times; give it once")
    return values[-1] if values else None


def _seconds(
    options: dict[str, list[str]], name: str, *, zero_is_off: bool = False
) -> float | None:
    text = _one(options, name)
    return None if text is None else parse_seconds(text, name, zero=zero_is_off)


def resolve_cwd(text: str | None, base: str) -> str:
    """The absolute directory; one naming an event field (``{{ event.repo }}``, an event
    schedule's) is rendered and checked when its run starts, not here."""
    path = os.path.abspath(os.path.join(base, os.path.expanduser(text or ".")))
    if "{{" in path:
        return path
    if not os.path.isdir(path):
        raise UsageError(f"--cwd {path!r} is not a directory; create it or fix the path")
    return path


def parse_action(words: list[str], *, base: str | None = None) -> Action:
    """The action in ``words`` (what follows ``--``), checked on this machine: a
    relative ``--cwd`` or FILE is read from ``base`` (default: the current directory).
    UsageError (exit 2) saying what is wrong and how a valid action looks."""
    if not words:
        raise UsageError(f"no action given after --; give one of: {USAGE} (e.g. {example()})")
    kind, rest = words[0], list(words[1:])
    if kind not in KINDS:
        raise UsageError(f"unknown action {kind!r}; give one of: {USAGE} (e.g. {example()})")
    options, positionals, tail = _split(kind, rest)
    here = base or os.getcwd()
    cwd = resolve_cwd(_one(options, "--cwd"), here)
    if kind in ("flow", "show"):
        return _file_action(kind, positionals, tail, cwd)
    if kind == "gc":
        return Action(kind="gc", cwd=cwd, retention=_gc_policy(options, positionals + tail))
    if kind == "run":
        return Action(kind="run", cwd=cwd, task=_run_task(options, positionals, tail, here))
    return Action(kind="agent", cwd=cwd, task=_agent_task(options, positionals, tail, here))


def _limits(options: dict[str, list[str]], base: str) -> dict[str, Any]:
    entries = [parse_artifact_option(text) for text in options.get("--artifact", [])]
    ids = [a["id"] for a in entries]
    if len(ids) != len(set(ids)):
        raise UsageError("--artifact: an id is given twice; give each artifact id once")
    checks = options.get("--artifact-check", [])
    artifacts = tuple(attach_artifact_checks(entries, checks, base) if checks else entries)
    return {
        "timeout": _seconds(options, "--timeout"),
        "idle_timeout": _seconds(options, "--idle-timeout"),
        "stall_timeout": _seconds(options, "--stall-timeout", zero_is_off=True),
        "profile": _one(options, "--profile"),
        "artifacts": artifacts,
    }


def _run_task(
    options: dict[str, list[str]], positionals: list[str], tail: list[str], base: str
) -> Task:
    command = [*positionals, *tail]
    if not command:
        raise UsageError("action run: no command given; e.g. -- run make nightly")
    task = Task(
        run=tuple(command), require_change="--require-change" in options, **_limits(options, base)
    )
    _check(task)
    return task


def _agent_task(
    options: dict[str, list[str]], positionals: list[str], tail: list[str], base: str
) -> Task:
    if not positionals:
        raise UsageError(f"action agent: no provider given; e.g. {example()}")
    if len(positionals) > 2:
        raise UsageError(
            f"action agent: too many words after {positionals[0]!r} "
            f"({' '.join(positionals[1:])!r}); quote the prompt so it is one argument"
        )
    prompt = positionals[1] if len(positionals) == 2 else None
    option_prompt = _one(options, "--prompt")
    if prompt is not None and option_prompt is not None:
        raise UsageError("action agent: two prompts (PROMPT and --prompt); give it once")
    task = Task(
        agent=positionals[0],
        prompt=prompt if prompt is not None else option_prompt,
        options={"provider_args": list(tail)} if tail else {},
        playbook=_one(options, "--playbook"),
        **_limits(options, base),
    )
    if task.prompt is None and task.playbook is None:
        raise UsageError(f"action agent: no prompt given; e.g. {example()}")
    _check(task)
    return task


def _check(task: Task) -> None:
    """``check_task``, except that the provider's executable need not be on this machine:
    the worker that runs it looks for it on its own (and fails the run if it is missing)."""

    if task.agent is not None:
        name, _model = parse_provider_spec(task.agent)
        ProviderOptions.from_mapping(task.options, where=f"agent {task.agent}").check_for(name)
    with contextlib.suppress(ProviderNotFoundError):
        check_task(task)


def _file_action(kind: str, positionals: list[str], tail: list[str], cwd: str) -> Action:
    if len(positionals) != 1 or tail:
        raise UsageError(f"action {kind}: give exactly one FILE, e.g. -- {kind} nightly.yaml")
    path = os.path.abspath(os.path.join(cwd, os.path.expanduser(positionals[0])))
    if not os.path.isfile(path):
        what = "is not a file" if os.path.exists(path) else "does not exist"
        raise UsageError(f"action {kind}: {path} {what}; give the {kind} file's path")
    _validate_file(kind, path)
    try:
        digest = sha256_of(path)
    except OSError as exc:
        raise UsageError(f"action {kind}: cannot read {path}: {exc}") from None
    return Action(kind=kind, cwd=cwd, file=path, sha256=digest)


def _validate_file(kind: str, path: str) -> None:
    """The whole check of the flow or show file at ``add`` (its loader's errors, each with
    file:line); the worker checks the file again, against this digest, before it runs."""
    if kind == "flow":
        load_flow(Path(path))
    else:
        load_show(Path(path))


def _gc_policy(options: dict[str, list[str]], extra: list[str]) -> dict[str, Any]:
    """The retention policy of a ``gc`` action, checked as ``li gc`` checks it."""
    if extra:
        raise UsageError(f"action gc: unexpected {extra[0]!r}; e.g. -- gc --older-than 90d")
    older = _one(options, "--older-than")
    if older is None:
        raise UsageError("action gc: --older-than DUR is required; e.g. -- gc --older-than 90d")
    terminal = policy_for("session").terminal
    statuses = tuple(dict.fromkeys(options.get("--status", [])))
    for status in statuses:
        if status not in terminal:
            raise UsageError(
                f"action gc: --status {status!r} is not a final status; "
                f"give one of {', '.join(sorted(terminal))}"
            )
    policy = RetentionPolicy(
        older_than=parse_duration(older, "--older-than", high=MAX_OLDER_THAN),
        statuses=statuses,
        keep_failed="--keep-failed" in options,
    )
    return policy.to_dict()


def gc_action_words(policy: Any) -> tuple[str, ...]:
    """The words of the ``gc`` action (and ``li gc`` options) that state ``policy``."""
    words = ["--older-than", format_duration(policy.older_than)]
    for status in policy.statuses:
        words += ["--status", status]
    if policy.keep_failed:
        words.append("--keep-failed")
    return tuple(words)
