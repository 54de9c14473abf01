"""Options shared by ``li run`` and ``li agent``, and the flow both follow.

Every check that can fail runs before anything is created: profiles and playbooks, the
artifact contract, ``--cwd``, the branch to resume, the invocation, the run id. A failed
check exits 2 with no run directory and no row.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lirun.cli.common import add_db_option, print_json, print_started, refuse_if_signalled
from lirun.cli.parser import CommandParser, Duration
from lirun.durations import MAX_SECONDS
from lirun.errors import AmbiguousIdError, NotFoundError, UsageError
from lirun.exec.artifact_check_option import attach_artifact_checks
from lirun.exec.declarations import MAX_PARALLEL, declarations
from lirun.exec.descendants import enable_subreaper
from lirun.exec.detach import detached_env, spawn_worker, wait_for_row
from lirun.exec.execution import execute, prepare
from lirun.exec.leg_states import stall_limit
from lirun.exec.legs import Echo
from lirun.exec.profiles import parse_artifact_option
from lirun.exec.request import RunRequest, settings_of
from lirun.exec.supervisor import Limits
from lirun.record.rundir import allocate_run
from lirun.settings import Settings
from lirun.signals import held_trap
from lirun.store import open_store

__all__ = [
    "EXIT_CODES",
    "RUN_EXIT_CODES",
    "Resolved",
    "add_execution_options",
    "execute_or_detach",
    "option_arity",
    "resolve_options",
    "split_command",
    "unknown_option",
    "worker_argv",
]

_COMMON_EXIT_CODES = """\
       with --detach: the run started and its id was printed
  1    completed_empty (nothing to show) or failed
  2    usage or setup error (bad option, missing --cwd, malformed artifact contract,
       provider or command not found, the record could not be created, a signal while
       starting); nothing was started and no row was written. Also: the run ended but
       neither the database nor the pending spool could take its outcome (said on stderr)
  124  timed_out (--timeout, or --idle-timeout with no output; li agent's --stall-timeout
       ends a run failed, exit 1)
  130  aborted (SIGINT)
  143  cancelled (SIGTERM)"""
EXIT_CODES = (  # li agent
    "  0    completed (work shown since the start: a commit, a changed tree, an artifact, "
    "a reply);\n" + _COMMON_EXIT_CODES
)
RUN_EXIT_CODES = (  # li run: a command's exit code is its verdict
    "  0    completed (the command exited 0; with --require-change or declared artifacts:\n"
    "       and changed something since the start or produced an artifact);\n" + _COMMON_EXIT_CODES
)

FILES_NOTE = """\
files: <home>/runs/<id>/run.json (written before the child starts) and stream/ (the
child's output, never held in memory); artifacts under --save DIR, else
<home>/runs/<id>/artifacts. The row's id is the run id: `li wait ID` prints one line.
The child gets LIRUN_ARTIFACT_DIR (the artifact root, created before it starts),
LIRUN_PARENT_RUN_ID (this run's id) and LIRUN_DB_URL (this run's database, with any
password removed: a nested li uses the same database, credentials never reach the child).
env: LIRUN_HEARTBEAT_INTERVAL (seconds between heartbeats, default 15),
LIRUN_WRITE_RETRY_SECONDS (how long the final write retries, default 30; then the
outcome is spooled and recorded by the next li command on this database)."""


def parallel_count(text: str) -> int:
    """``--parallel N``: 1 to MAX_PARALLEL executions at once."""

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_PARALLEL:
        raise argparse.ArgumentTypeError(
            f"expected 1 to {MAX_PARALLEL} (each runs with its own database connections), "
            f"got {text!r}"
        )
    return value


# Every duration option: a number of seconds or a DURATION such as 20s, 5m, 1h30m.
seconds = Duration(high=MAX_SECONDS)
stall_seconds = Duration(zero=True, high=MAX_SECONDS)  # --stall-timeout: 0 turns it off
_grace_seconds = Duration(zero=True, high=MAX_SECONDS)


def add_execution_options(parser: argparse.ArgumentParser) -> None:
    """The options of §7 shared by ``li run`` and ``li agent``."""
    add = parser.add_argument
    add(
        "--cwd",
        metavar="DIR",
        help="child's working directory; completion evidence is checked "
        "there (default: the current directory)",
    )
    add("--save", metavar="DIR", help="artifact root (default: <home>/runs/<id>/artifacts)")
    add("--timeout", metavar="DUR", type=seconds, help="wall-clock limit: timed_out (exit 124)")
    add(
        "--idle-timeout",
        metavar="DUR",
        type=seconds,
        help="watchdog: no output for DUR: timed_out with run.timed_out.idle",
    )
    add(
        "--grace",
        metavar="DUR",
        type=_grace_seconds,
        help="agents: after the stream's terminal event, stop a child still running after "
        "DUR; the event's verdict stands (default 10s)",
    )
    add(
        "--artifact",
        metavar="ID=PATH[?]",
        action="append",
        default=[],
        help="a required artifact under the artifact root; a trailing ? makes it optional "
        "(repeatable)",
    )
    add(
        "--artifact-check",
        metavar="ID.CHECK=VALUE",
        action="append",
        default=[],
        help="a content check on an --artifact: min_bytes, max_bytes, sha256, matches=REGEX, "
        "json (no value), json_schema=PATH, lines=MIN..MAX; a failure is "
        "run.failed.artifact_invalid (repeatable)",
    )
    add("--profile", metavar="NAME", help="agent profile <home>/profiles/NAME.yaml")
    add("--playbook", metavar="NAME", help="playbook <home>/playbooks/NAME.yaml")
    add(
        "--invocation",
        metavar="ID",
        help="attach this execution to an invocation (its id, or a unique prefix or suffix)",
    )
    add(
        "--resume",
        metavar="BRANCH",
        help="continue a conversation: a new execution row in BRANCH (a branch id or a run "
        "id, or a run id's unique prefix or random suffix), resumed_from its last execution",
    )
    add(
        "--resume-on-timeout",
        action="store_true",
        help="after a timeout, resume once inside the same execution (one row, one id); "
        "the resumed leg gets the same limits (an agent resumes its engine session)",
    )
    add(
        "--detach",
        action="store_true",
        help="run in the background; print the run id once the row exists and exit 0",
    )
    add("--run-id", metavar="ID", help="use this run id (default: $LIRUN_RUN_ID or a new one)")
    add(
        "--json",
        action="store_true",
        help="print a JSON summary on stdout (run_id, status, reason, run_dir, artifact_dir, "
        "exit_code)",
    )
    add_db_option(parser)
    add("--detached-worker", action="store_true", help=argparse.SUPPRESS)


# --- parsing ----------------------------------------------------------------------------------


def option_arity(parser: CommandParser) -> dict[str, bool]:
    """Each option string → whether it takes a value (``--timeout S``) or not (``--json``)."""
    return {name: action.nargs != 0 for action in parser.options for name in action.option_strings}


def _known_option(token: str, arity: dict[str, bool]) -> str | None:
    """The option ``token`` names, allowing argparse's unique abbreviations; else None."""
    name = token.split("=", 1)[0]
    if name in arity:
        return name
    if name.startswith("--"):
        matches = [o for o in arity if o.startswith(name)]
        if len(matches) == 1:
            return matches[0]
    return None


def split_command(argv: list[str], arity: dict[str, bool]) -> tuple[list[str], list[str]]:
    """``[options] [--] CMD ...`` → (options, CMD): the first token that is not an option
    (or an option's value) starts CMD; a bare ``--`` ends the options explicitly."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return argv[:index], argv[index + 1 :]
        if not token.startswith("-") or token == "-":
            return argv[:index], argv[index:]
        option = _known_option(token, arity)
        takes_value = option is not None and arity[option] and "=" not in token
        index += 2 if takes_value else 1
    return argv, []


def unknown_option(prog: str, extras: list[str], hint: str) -> UsageError:
    """The one-line error for tokens argparse did not recognize."""
    options = [t for t in extras if t.startswith("-")]
    if options:
        return UsageError(f"unknown option {options[0]!r}; {hint} (see {prog} --help)")
    return UsageError(f"unexpected argument {extras[0]!r}; {hint} (see {prog} --help)")


# ``db`` reaches the worker in its environment, never its arguments (``detached_env``).
_NOT_FORWARDED = frozenset({"help", "detach", "detached_worker", "run_id", "db"})


def worker_argv(parser: CommandParser, args: argparse.Namespace) -> list[str]:
    """The parsed options as ``--name=value`` tokens for a detached worker.

    Built from the namespace rather than copied from argv so that what the parent
    resolved (a prompt read from stdin, ids given as a prefix or suffix) reaches the
    worker as is. The worker gets ``--run-id`` from the spawner.
    """
    out: list[str] = []
    for action in parser.options:
        if not action.option_strings or action.dest in _NOT_FORWARDED:
            continue
        value = getattr(args, action.dest, None)
        flag = max(action.option_strings, key=len)
        if action.nargs == 0:
            if value:
                out.append(flag)
        elif isinstance(value, list):
            out.extend(f"{flag}={item}" for item in value)
        elif value is not None:
            out.append(f"{flag}={value}")
    return out


@dataclass(slots=True)
class Resolved:
    """Options after profiles, playbooks and defaults, ready for an RunRequest."""

    cwd: str
    save_dir: str | None
    limits: Any
    contract: dict[str, Any] | None
    defaults: dict[str, Any] = field(default_factory=dict)
    playbook_prompt: str | None = None


def _limits(args: argparse.Namespace, defaults: dict[str, Any]) -> Any:
    def pick(name: str) -> Any:
        value = getattr(args, name)
        return value if value is not None else defaults.get(name)

    grace = pick("grace")
    # Only li agent has --stall-timeout: a command's output says nothing about progress.
    agent = hasattr(args, "stall_timeout")
    return Limits(
        timeout=pick("timeout"),
        idle_timeout=pick("idle_timeout"),
        stall_timeout=stall_limit(pick("stall_timeout")) if agent else None,
        grace=10.0 if grace is None else float(grace),
    )


def _declarations(args: argparse.Namespace) -> Any:
    """What --profile, --playbook and --artifact declare (``exec.task.Declared``), or
    None when nothing is declared."""
    if not (args.profile or args.playbook or args.artifact or args.artifact_check):
        return None

    entries: list[Any] = []
    if args.artifact or args.artifact_check:
        entries = [parse_artifact_option(text) for text in args.artifact]
        _refuse_repeated_ids(entries)
        entries = attach_artifact_checks(entries, args.artifact_check, os.getcwd())
    return declarations(args.profile, args.playbook, entries)


def _full_id(store: Any, entity_type: str, text: str, option: str) -> str:
    try:
        return str(store.resolve_id(entity_type, text))
    except NotFoundError:
        return text  # preflight says what is missing, in its own words
    except AmbiguousIdError as exc:
        raise UsageError(f"{option} {exc}") from None


def resolve_ids(args: argparse.Namespace) -> None:
    """``--resume`` and ``--invocation`` given as a prefix or a run id's random suffix
    become the full ids they name (in ``args``), so a detached worker gets the same ones."""
    if not (args.resume or args.invocation):
        return

    store = open_store(args.db)
    try:
        if args.invocation:
            args.invocation = _full_id(store, "invocation", args.invocation, "--invocation")
        if args.resume and store.sessions.get_branch(args.resume) is None:
            args.resume = _full_id(store, "session", args.resume, "--resume")
    finally:
        store.close()


def _refuse_repeated_ids(entries: list[Any]) -> None:
    """Two --artifact with one id: one would silently replace the other."""
    seen: dict[str, str] = {}
    for entry in entries:
        if entry["id"] in seen:
            raise UsageError(
                f"--artifact {entry['id']} is given twice ({seen[entry['id']]} and "
                f"{entry['path']}); give each id once"
            )
        seen[entry["id"]] = entry["path"]


def resolve_options(args: argparse.Namespace) -> Resolved:
    """Ids, profiles, playbook, contract and defaults; every failure is exit 2, nothing
    created."""
    resolve_ids(args)
    declared = _declarations(args)
    defaults = declared.defaults if declared else {}
    cwd = os.path.abspath(os.path.expanduser(args.cwd or defaults.get("cwd") or os.getcwd()))
    if not os.path.isdir(cwd):
        raise UsageError(f"--cwd {cwd!r} is not a directory; create it or fix the path")
    save = args.save or defaults.get("save")
    return Resolved(
        cwd=cwd,
        save_dir=os.path.expanduser(save) if save else None,
        limits=_limits(args, defaults),
        contract=declared.contract if declared else None,
        defaults=defaults,
        playbook_prompt=declared.playbook_prompt if declared else None,
    )


def request_from(
    args: argparse.Namespace, resolved: Resolved, program: Any, settings: Settings, **more: Any
) -> Any:
    """The execution the command line asks for, with ``settings`` (cli.main's) under its
    ``--db`` and ``--run-id``: the run reads no setting from the environment again."""
    return RunRequest(
        program=program,
        cwd=resolved.cwd,
        limits=resolved.limits,
        save_dir=resolved.save_dir,
        artifact_contract=resolved.contract,
        invocation_id=args.invocation,
        resume_branch=args.resume,
        resume_on_timeout=args.resume_on_timeout,
        settings=settings.with_flags(db_url=args.db, run_id=args.run_id),
        **more,
    )


def echo_for(args: argparse.Namespace) -> Any:
    """Child stdout is the user's result: li's stdout, unless --json owns stdout."""

    if args.detached_worker:
        return Echo(None, None)
    return Echo(stdout_fd=2 if args.json else 1, stderr_fd=2)


def stdin_for(args: argparse.Namespace) -> int | None:
    return subprocess.DEVNULL if args.detached_worker else None


def _detach(
    command: str, argv: list[str], request: Any, *, as_json: bool, worker_stdin: str | None
) -> int:
    settings = settings_of(request)
    store = open_store(settings.db_url)
    try:
        prepare(request, store)
        refuse_if_signalled(held_trap())
        run = allocate_run(request.save_dir, settings.run_id, settings)
        env = detached_env(settings.db_url)
        proc = spawn_worker(command, argv, run, env=env, stdin_text=worker_stdin)
        wait_for_row(store, run, proc)
    finally:
        store.close()
    started = {
        "run_id": run.run_id,
        "status": "running",
        "run_dir": str(run.state_root),
        "artifact_dir": str(run.artifact_dir),
    }
    print_started(started, "run_id", as_json=as_json)
    return 0


def report(prog: str, result: Any, *, as_json: bool) -> None:
    """The final word: JSON on stdout with --json, else one line on stderr."""
    if as_json:
        print_json(result.summary(), schema="lirun.run_result/1")
        return
    reason = result.reason or "unknown"
    sys.stderr.write(f"{prog}: run {result.run_id} {result.status} ({reason})\n")


def execute_or_detach(
    prog: str,
    command: str,
    argv: list[str],
    args: argparse.Namespace,
    request: Any,
    *,
    on_result: Callable[[Any], None] | None = None,
    worker_stdin: str | None = None,
) -> int:
    """Run attached (exit code of the final status) or hand off to a detached worker
    (``worker_stdin``: what it reads on stdin, e.g. the prompt)."""
    if args.detach and not args.detached_worker:
        return _detach(command, argv, request, as_json=args.json, worker_stdin=worker_stdin)

    # li's own process only (a library caller's process is not ours to change): orphans
    # of the run are re-parented to li, which ends them with the run.
    enable_subreaper()
    result = execute(request, trap=held_trap())
    if on_result is not None and not args.json and not args.detached_worker:
        on_result(result)
    report(prog, result, as_json=args.json)
    return int(result.exit_code)
