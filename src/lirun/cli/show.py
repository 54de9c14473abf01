"""``li show run | resume | abort | clean | status``: plays in worktrees, merged through gates.

Each subcommand parses, makes one library call (``lirun.shows``) and renders. A show file
is checked whole before anything starts (``shows/load.py``): its problems go to
stderr one per line as ``file:line: message`` and the exit code is 2. Progress goes to
stderr, the board (or ``--json``) to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from lirun.cli.clean import (
    CLEAN_EXIT_CODES,
    SHOW_CLEAN_DESCRIPTION,
    add_clean_options,
    clean_show_command,
)
from lirun.cli.common import (
    add_db_option,
    adopt_orphans,
    deliver_pending,
    make_parser,
    print_json,
    refuse_if_signalled,
)
from lirun.cli.lists import LIST_EXIT_CODES, add_list_options, show_list
from lirun.cli.options import parallel_count
from lirun.cli.show_board import render_board, render_show_list, show_row_json
from lirun.cli.show_detach import detach
from lirun.errors import DatabaseMissingError, UsageError
from lirun.paths import resolve_db_url
from lirun.settings import Settings
from lirun.shows.engine import ShowOptions, abort_show, resume_show, run_show, show_report
from lirun.shows.load import ShowFileError, load_show
from lirun.shows.preflight import dry_run_problems
from lirun.shows.preview import plan_show
from lirun.signals import held_trap
from lirun.store import open_store
from lirun.store.rows import ShowListRow

RUN_EXIT_CODES = """\
  0    the show completed: every play merged and the final gate passed on the integration
       head; with --dry-run: the plan was printed and the repository is ready for it;
       with --detach: the show started and its id was printed
  1    the show needs a person: a play escalated or failed its gate (the board says which
       and what to do), the final gate failed, or the show was aborted
  2    usage or setup error: a bad option, a show file with problems (each printed as
       file:line), a repository or branch that cannot be used (with --dry-run too: an
       earlier show's worktree or unmerged attempt branch left behind, integration
       commits base lacks), another li owns the show, the database cannot be opened;
       nothing was merged
  130  interrupted by SIGINT: running plays were stopped; `li show resume SHOW` continues
  143  terminated by SIGTERM: likewise"""

STATUS_EXIT_CODES = """\
  0  shown (an empty list too)
  2  usage error; SHOW not found or ambiguous; the database cannot be opened"""

ABORT_EXIT_CODES = """\
  0  the show is aborted: finished but unmerged plays are aborted_after_finish, plays not
     started are blocked (play.blocked.show_aborted); the integration branch is left as
     is, and the worktrees and attempt branches until `li show clean SHOW`
  2  usage error (--actor and --justification are required and audited); SHOW not found
     or ambiguous; the show already ended (completed or aborted), nothing was changed;
     the database cannot be opened"""

SHOW_NOTE = """\
SHOW is a show id (or a unique prefix or suffix of one) or the topic of an active show."""

DESCRIPTION = f"""\
A show runs a batch of plays (an agent with a prompt, or a command), each in its own git
worktree on its own branch, and merges each into the integration branch only through a
gate run on the merge result. See docs/shows.md for the file format.

subcommands:
  run FILE        validate FILE whole, then run the show (--dry-run: print the plan)
  resume SHOW     continue a show after a person fixed things or li was stopped
  abort SHOW      end a show as aborted (--actor and --justification, audited)
  clean SHOW      remove an ended show's worktrees and merged or abandoned branches
  status [SHOW]   recent shows, or one show's board: what merged, what needs a person

{SHOW_NOTE}"""

RUN_DESCRIPTION = f"""\
Validate the show file whole (every problem reported as file:line, nothing started),
then run it: the integration branch is created from base when missing; each play whose
dependencies merged runs in its own worktree under <home>/worktrees on branch
<integration>--<play>-a<attempt>; its result is merged into the integration head in a
separate worktree and the gate runs there; only a passing merge result moves the
integration branch (one compare-and-swap ref update). A failed gate or a conflict is
redone once with feedback (attempts: 2), then a person decides. Independent plays run
side by side (--parallel); gates and merges one at a time. The user's own checkout and
the base branch are never touched.

Progress lines go to stderr; the board (or --json) to stdout when the show stops.
--detach: the show id is printed once a background li owns the show (its own output in
<home>/shows/<id>/li.stderr.log); `li wait ID` and `li show status ID` follow it.

{SHOW_NOTE}"""


def _sub(subs: Any, name: str, usage_help: str, description: str, exit_codes: str) -> Any:
    return subs.add_parser(
        name,
        help=usage_help,
        description=description,
        epilog=f"exit codes:\n{exit_codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = make_parser("li show", DESCRIPTION, RUN_EXIT_CODES)
    subs = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
    run = _sub(subs, "run", "run a show file", RUN_DESCRIPTION, RUN_EXIT_CODES)
    run.add_argument("file", metavar="SHOW.yaml", help="the show file")
    run.add_argument(
        "--parallel",
        type=parallel_count,
        metavar="N",
        help="at most N plays at once (default: the file's)",
    )
    run.add_argument(
        "--continue-integration",
        action="store_true",
        help="start even though the integration branch has commits not on base "
        "(e.g. from an earlier show of this topic); otherwise that is refused",
    )
    run.add_argument(
        "--dry-run", action="store_true", help="validate and print the plan; touch nothing"
    )
    run.add_argument(
        "--detach", action="store_true", help="run in the background; print the show id"
    )
    run.add_argument("--json", action="store_true", help="the final report (or plan) as JSON")
    add_db_option(run)
    run.add_argument("--detached-worker", action="store_true", help=argparse.SUPPRESS)
    run.add_argument("--show-id", help=argparse.SUPPRESS)

    resume = _sub(
        subs,
        "resume",
        "continue a show",
        "Continue SHOW: after a person merged or fixed a play (`li override play ID --to "
        "merged ...`), or after li show run was stopped or killed (orphaned play runs "
        "are reaped and redone). The integration head must still descend from the last "
        f"gated commit; a head a person moved is gated again.\n\n{SHOW_NOTE}",
        RUN_EXIT_CODES,
    )
    resume.add_argument("show", metavar="SHOW")
    resume.add_argument(
        "--parallel", type=parallel_count, metavar="N", help="at most N plays at once"
    )
    resume.add_argument("--json", action="store_true", help="the final report as JSON")
    add_db_option(resume)

    abort = _sub(
        subs,
        "abort",
        "end a show as aborted",
        "End SHOW as aborted. Plays that finished but did not merge become "
        "aborted_after_finish, plays not started become blocked; merges already made stay "
        f"on the integration branch. The actor and justification are audited.\n\n{SHOW_NOTE}",
        ABORT_EXIT_CODES,
    )
    abort.add_argument("show", metavar="SHOW")
    abort.add_argument("--actor", required=True, metavar="A", help="who is aborting")
    abort.add_argument("--justification", required=True, metavar="J", help="why (audited)")
    abort.add_argument("--json", action="store_true", help="the report as JSON")
    add_db_option(abort)

    status = _sub(
        subs,
        "status",
        "recent shows, or one show's board",
        "Without SHOW: recent shows, newest first. With SHOW: its board: plays by status, "
        "attempts, gate verdicts, merge commits, the id of every run (`li status "
        f"ID` shows one) and what needs a person, with what to do.\n\n{SHOW_NOTE}",
        STATUS_EXIT_CODES,
    )
    clean = _sub(
        subs,
        "clean",
        "remove an ended show's worktrees and merged or abandoned branches",
        SHOW_CLEAN_DESCRIPTION,
        CLEAN_EXIT_CODES,
    )
    clean.add_argument("show", metavar="SHOW")
    add_clean_options(clean)

    listing = _sub(
        subs,
        "list",
        "the shows of the record, newest first",
        "The shows of the record, newest first: id, topic, status, plays merged of all, "
        "plays that need a person, age and reason. `li show status SHOW` shows one's board.",
        LIST_EXIT_CODES,
    )
    add_list_options(listing, "show")
    status.add_argument("show", metavar="SHOW", nargs="?")
    status.add_argument("--json", action="store_true", help="JSON on stdout")
    status.add_argument("--limit", type=int, default=20, metavar="N", help="at most N shows (20)")
    add_db_option(status)
    return parser


# --- run --------------------------------------------------------------------------------------


def _progress(line: str) -> None:
    sys.stderr.write(f"li show: {line}\n")
    sys.stderr.flush()


def _stop_trap() -> Any:
    """The process-wide trap ``li`` holds for show run/resume; a signal that came while
    the file was read means nothing starts (exit 2, as for ``li run``)."""

    trap = held_trap()
    refuse_if_signalled(trap)
    return trap


def _load(args: argparse.Namespace) -> Any:
    return load_show(args.file)


def _dry_run(args: argparse.Namespace, spec: Any) -> int:
    plan = plan_show(spec, parallel=args.parallel)
    problems = dry_run_problems(spec, continue_integration=args.continue_integration)
    if args.json:
        print_json({**plan.to_dict(), "problems": problems}, schema="lirun.show_plan/1")
    else:
        sys.stdout.write(plan.text())
    for problem in problems:
        sys.stderr.write(f"li show run: {problem}\n")
    if problems:
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        sys.stderr.write(
            f"li show run: dry run: the file is valid, but a real run would stop on {count} "
            "in the repository; nothing was started\n"
        )
        return 2
    sys.stderr.write("li show run: dry run: the file is valid; nothing was started\n")
    return 0


def _report(report: Any, as_json: bool) -> int:
    if as_json:
        print_json(report.to_dict(), schema="lirun.show_report/1")
    else:
        render_board(report.to_dict())
    return int(report.exit_code)


def _options(args: argparse.Namespace, settings: Settings, **more: Any) -> Any:
    """The show's options; its plays and gates run on li's settings with ``--db`` over them."""
    settings = settings.with_flags(db_url=args.db)
    return ShowOptions(parallel=args.parallel, on_progress=_progress, settings=settings, **more)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.dry_run and args.detach:
        raise UsageError("--dry-run and --detach contradict each other; use one")
    spec = _load(args)
    if args.dry_run:
        return _dry_run(args, spec)
    if args.detach and not args.detached_worker:
        return detach(args, spec)

    options = _options(args, settings, continue_integration=args.continue_integration)
    stop = _stop_trap()
    adopt_orphans()
    report = run_show(spec, db_url=args.db, options=options, show_id=args.show_id, stop=stop)
    return _report(report, args.json)


def resume(args: argparse.Namespace, settings: Settings) -> int:
    options = _options(args, settings)
    adopt_orphans()
    report = resume_show(args.show, db_url=args.db, options=options, stop=_stop_trap())
    return _report(report, args.json)


def _required_text(value: str, option: str) -> str:
    if not value.strip():
        raise UsageError(f"{option} must not be empty: an abort is audited by who and why")
    return value.strip()


def abort(args: argparse.Namespace) -> int:
    actor = _required_text(args.actor, "--actor")
    justification = _required_text(args.justification, "--justification")

    report = abort_show(args.show, db_url=args.db, actor=actor, justification=justification)
    _report(report, args.json)
    return 0


# --- status -----------------------------------------------------------------------------------


def status(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    if args.show is not None:
        return _report_status(show_report(args.show, db_url=args.db), args.json)
    return _list(args)


def _report_status(report: Any, as_json: bool) -> int:
    _report(report, as_json)
    return 0


def _list(args: argparse.Namespace) -> int:
    url = resolve_db_url(args.db)
    deliver_pending("li show status", url)
    try:
        store = open_store(url, readonly=True)
    except DatabaseMissingError:
        rows: list[ShowListRow] = []
    else:
        try:
            rows = store.waits.recent_shows(limit=args.limit)
        finally:
            store.close()
    if args.json:
        print_json([show_row_json(row) for row in rows], schema="lirun.show_row/1")
    elif not rows:
        print("no shows yet (li show run FILE starts one)")
    else:
        render_show_list(rows, time.time())
    return 0


def _problems(error: Any, prog: str) -> int:
    """A show file's problems, one per line as ``file:line: message``, then the count."""
    for problem in error.problems:
        sys.stderr.write(f"{problem}\n")
    count = len(error.problems)
    sys.stderr.write(
        f"{prog}: {count} problem{'s' if count != 1 else ''} in {error.path}; nothing was started\n"
    )
    return 2


def _list_shows(args: argparse.Namespace) -> int:
    return show_list(args)


# The subcommands that start executions: they run on li's settings.
STARTS = {"run": run, "resume": resume}
COMMANDS = {
    "abort": abort,
    "status": status,
    "list": _list_shows,
    "clean": clean_show_command,
}


def main(argv: list[str], settings: Settings) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.subcommand is None:
        parser.error("name a subcommand: run, resume, abort, clean, status or list")

    start = STARTS.get(args.subcommand)
    try:
        return int(start(args, settings) if start else COMMANDS[args.subcommand](args))
    except ShowFileError as exc:
        return _problems(exc, f"li show {args.subcommand}")
