"""``li flow run FLOW.yaml`` and ``li flow resume INVOCATION``: a graph of legs as one
invocation, one supervised session per leg.

The file is checked whole before anything starts (every problem on its own
``file:line`` line, exit 2, nothing written); ``--dry-run`` prints the plan and stops
there. Progress goes to stderr; stdout gets one line (``--json``: one object).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lirun.cli.clean import (
    CLEAN_EXIT_CODES,
    FLOW_CLEAN_DESCRIPTION,
    add_clean_options,
    clean_flow_command,
)
from lirun.cli.common import (
    add_db_option,
    adopt_orphans,
    print_json,
    print_started,
    refuse_if_signalled,
)
from lirun.cli.flow_view import final_line, stopped_lines, table_lines
from lirun.cli.lists import LIST_EXIT_CODES, add_list_options, flow_list
from lirun.cli.options import parallel_count, seconds
from lirun.cli.parser import CommandParser
from lirun.errors import UsageError
from lirun.exec.detach import detached_env, spawn_worker, wait_for_row
from lirun.flows.cleanup import leftover_flows
from lirun.flows.engine import FlowOptions, resume_flow, run_flow
from lirun.flows.load import load_flow, parse_var
from lirun.flows.preview import preview_flow
from lirun.flows.report import resumable_legs
from lirun.record.rundir import allocate_run, new_run_id
from lirun.settings import Settings
from lirun.signals import hold_signals, release_signals
from lirun.store import open_existing, open_store
from lirun.yamlfile import gcpause

EXIT_CODES = """\
  0    completed: every leg completed (a may_be_empty leg may be completed_empty);
       with --dry-run: the file is valid and the plan was printed;
       with --detach: the flow started and its invocation id was printed
  1    completed_empty (a leg had nothing to show) or failed (a leg failed or timed out;
       the reason names it)
  2    usage or setup error: a bad option, a flow file with problems (each listed as
       file:line), an unknown invocation, the database unavailable; nothing was started
  124  timed_out (--timeout reached; the running legs were stopped)
  130  aborted (SIGINT; every running leg was stopped)
  143  cancelled (SIGTERM; every running leg was stopped)"""

DESCRIPTION = """\
A flow is a YAML file of legs: agents (PROVIDER[/MODEL] with a prompt; li agent --help
lists the providers) or commands (run:), with depends_on, artifacts, for_each fan-out,
retries and isolation.
The flow is one invocation (`li wait ID`, `li status ID`); every leg is a supervised
execution with its own record (a command leg's exit code is its verdict unless it says
require_change: true). Prompts and command arguments are templates over vars, the
outputs of ancestor legs (legs.ID.reply, a command leg's legs.ID.output,
legs.ID.artifacts.NAME) and, in a fan-out leg, item. See docs/flows.md."""

RUN_DESCRIPTION = f"""{DESCRIPTION}

The whole file is checked before anything starts; every problem is printed on its own
file:line line and nothing is written. --var KEY=VALUE overrides a variable the file
declares under vars: (a key it does not declare is an error). --dry-run prints the
expanded graph (fan-out instances, waves, each leg's isolation) and exits."""

RESUME_DESCRIPTION = """\
Start a new invocation (resumed_from INVOCATION) from the flow stored with INVOCATION
(no file needed): legs that completed are reused with their outputs, not run again;
failed, stopped and unfinished legs run, as many at once as before unless --parallel
says otherwise. INVOCATION may be a unique prefix or suffix. If `li gc` pruned a leg
it would reuse (its reply and artifacts are gone), nothing runs and it exits 2: run the
flow again with `li flow run`."""


def _common(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--parallel",
        metavar="N",
        type=parallel_count,
        help="legs at once (default: the file's parallel:, else 4)",
    )
    add(
        "--timeout",
        metavar="DUR",
        type=seconds,
        help="the whole flow's wall-clock limit: timed_out (124)",
    )
    add(
        "--detach",
        action="store_true",
        help="run in the background; print the invocation id once its row exists and exit 0",
    )
    add(
        "--json",
        action="store_true",
        help="one JSON object on stdout (the report: legs, status, reason, exit_code)",
    )
    add_db_option(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="li flow",
        usage="li flow {run,resume,list,clean} ...",
        description=DESCRIPTION,
        epilog=f"exit codes:\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--detached-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run-id", help=argparse.SUPPRESS)
    subs = parser.add_subparsers(dest="command", metavar="{run,resume,list,clean}", required=True)
    sub: dict[str, Any] = {
        "formatter_class": argparse.RawDescriptionHelpFormatter,
        "epilog": f"exit codes:\n{EXIT_CODES}",
    }
    run = subs.add_parser(
        "run", prog="li flow run", help="run a flow file", description=RUN_DESCRIPTION, **sub
    )
    run.add_argument("file", metavar="FLOW.yaml", help="the flow file")
    run.add_argument(
        "--var",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="set a declared variable (repeatable)",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="check the file, print the plan, run nothing"
    )
    _common(run)
    resume = subs.add_parser(
        "resume",
        prog="li flow resume",
        help="rerun what did not complete",
        description=RESUME_DESCRIPTION,
        **sub,
    )
    resume.add_argument("invocation", metavar="INVOCATION", help="the flow invocation to resume")
    _common(resume)

    listing = subs.add_parser(
        "list",
        prog="li flow list",
        help="the flows of the record, newest first",
        description="The flows of the record, newest first: id, flow file, status, age, "
        "duration, tokens, cost and reason. `li status ID` shows one with its legs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"exit codes:\n{LIST_EXIT_CODES}",
    )
    add_list_options(listing, "invocation")
    clean = subs.add_parser(
        "clean",
        prog="li flow clean",
        help="remove an ended flow's leg worktrees and merged branches",
        description=FLOW_CLEAN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"exit codes:\n{CLEAN_EXIT_CODES}",
    )
    clean.add_argument("invocation", metavar="INVOCATION", help="the flow invocation")
    add_clean_options(clean)
    return parser


def _vars(texts: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in texts:
        key, value = parse_var(text)
        if key in out:
            raise UsageError(f"--var {key} is given twice; give each variable once")
        out[key] = value
    return out


def _progress(line: str) -> None:
    sys.stderr.write(f"li flow: {line}\n")
    sys.stderr.flush()


def _options(args: argparse.Namespace, settings: Settings) -> Any:
    """The flow's options; its legs run on ``settings`` (li's) with ``--db`` over them."""
    return FlowOptions(
        parallel=args.parallel,
        timeout=args.timeout,
        on_progress=_progress,
        settings=settings.with_flags(db_url=args.db),
    )


def _finish(report: Any, *, as_json: bool) -> int:
    code = int(report.exit_code)
    data = report.to_dict()
    if as_json:
        print_json({**data, "exit_code": code}, schema="lirun.flow_result/1")
        return code
    for line in table_lines(data.get("legs") or []):
        sys.stderr.write(f"  {line}\n")
    for line in stopped_lines(data.get("legs") or []):
        sys.stderr.write(f"li flow: {line}\n")
    sys.stdout.write(final_line(data, code) + "\n")
    sys.stdout.flush()
    return code


def _worker_argv(args: argparse.Namespace, head: list[str]) -> list[str]:
    argv = list(head)
    for flag, value in (
        ("--parallel", args.parallel),
        ("--timeout", args.timeout),
    ):
        if value is not None:
            argv.append(f"{flag}={value}")
    return argv


def _detach(args: argparse.Namespace, argv: list[str]) -> int:
    """Start ``li flow`` in the background with a pre-allocated invocation id; return once
    the worker's invocation row exists."""

    store = open_store(args.db)  # no database, no start: exit 2 before anything exists
    try:
        run = allocate_run(run_id=new_run_id())
        # The database in the worker's environment: a URL in its argv shows in `ps`.
        proc = spawn_worker("flow", argv, run, env=detached_env(args.db))
        wait_for_row(store, run, proc, entity_type="invocation")
    finally:
        store.close()
    started = {"invocation_id": run.run_id, "status": "running", "run_dir": str(run.state_root)}
    print_started(started, "invocation_id", as_json=args.json)
    return 0


def _held() -> Any:
    trap = hold_signals()
    refuse_if_signalled(trap)
    return trap


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_flow(args.file, _vars(args.var))
    if args.dry_run:
        with gcpause.paused():  # a plan of every leg: its values all live until printed
            plan = preview_flow(spec, parallel=args.parallel)
            if args.json:
                print_json(plan.to_dict(), schema="lirun.flow_plan/1")
            else:
                sys.stdout.write("\n".join(plan.text_lines()) + "\n")
        _note_leftovers(spec.cwd)
        return 0
    if args.detach and not args.detached_worker:
        head = ["run", str(spec.path), *(f"--var={k}={v}" for k, v in _vars(args.var).items())]
        return _detach(args, _worker_argv(args, head))

    adopt_orphans()
    report = run_flow(
        spec,
        db_url=args.db,
        options=_options(args, settings),
        invocation_id=args.run_id,
        stop=_held(),
    )
    return _finish(report, as_json=args.json)


def _note_leftovers(cwd: str) -> None:
    """Earlier flows' leg branches in this repository: they do not stop this run (its
    worktrees and branches are named by its new id), so a note, not a problem."""
    found = leftover_flows(cwd)
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        sys.stderr.write(
            f"li flow run: note: {len(found)} earlier flow(s) left leg branches in this "
            f"repository ({shown}); they do not stop this run; `li flow clean ID` removes "
            "their worktrees and merged branches\n"
        )


def _full_invocation_id(text: str, db: str | None, *, detach: bool) -> str:
    store = open_existing(
        db, f"invocation with id {text!r}"
    )  # no database: nothing to resume, none made
    try:
        found = str(store.resolve_id("invocation", text))
        if detach:  # refused here, in one line, not in a detached worker's log
            resumable_legs(store, found)
        return found
    finally:
        store.close()


def resume_command(args: argparse.Namespace, settings: Settings) -> int:
    detach = args.detach and not args.detached_worker
    invocation = _full_invocation_id(args.invocation, args.db, detach=detach)
    if detach:
        return _detach(args, _worker_argv(args, ["resume", invocation]))

    adopt_orphans()
    report = resume_flow(
        invocation,
        db_url=args.db,
        options=_options(args, settings),
        invocation_id=args.run_id,
        stop=_held(),
    )
    return _finish(report, as_json=args.json)


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            return run_command(args, settings)
        if args.command == "list":
            return flow_list(args)
        if args.command == "clean":
            return clean_flow_command(args)
        return resume_command(args, settings)
    finally:
        release_signals()
