"""``li invoke start`` / ``li invoke end``: open and close an invocation record.

An invocation groups the executions of one skill call (``li agent --invocation ID``).
``end`` is a guarded write: it applies only while the invocation is still running, so a
second ``end`` never rewrites the first one's outcome.
"""

from __future__ import annotations

from typing import Any

from lirun.cli.common import add_db_option, make_parser, print_json, warn
from lirun.lifecycle import EXIT_CODE_BY_STATUS, policy_for
from lirun.reasons import resolve_run_reason
from lirun.record.rundir import safe_component
from lirun.settings import Settings
from lirun.store import open_store
from lirun.store.rows import InvocationRow

PROG = "li invoke"
TERMINAL = sorted(policy_for("invocation").terminal)

EXIT_CODES = """\
  start: 0 created (the id is printed on stdout); 2 usage error, id taken, database error
  end:   the status's exit code when the end was recorded (or was already recorded
         with the same status): completed 0, completed_empty 1, failed 1, timed_out 124,
         aborted 130, cancelled 143;
         1 when the invocation had already ended with a different status (nothing written);
         2 usage error, unknown or ambiguous invocation id, or database error"""

DESCRIPTION = """\
Start an invocation, run executions under it (li agent --invocation ID), then end it:

  id=$(li invoke start --skill review --prompt "review PR 12")
  li agent PROVIDER "..." --invocation "$id"
  li invoke end "$id" --status completed

ID may be the full id or a prefix or suffix that names only one invocation;
--reason must fit --status (run.failed.* for failed, run.completed.* for completed)."""


def build_parser() -> Any:
    parser = make_parser(PROG, DESCRIPTION, EXIT_CODES)
    sub = parser.add_subparsers(dest="action", required=True, metavar="{start,end}")
    start = sub.add_parser(
        "start",
        help="create a running invocation; prints its id",
        epilog=parser.epilog,
        formatter_class=parser.formatter_class,
    )
    start.add_argument("--skill", required=True, metavar="NAME", help="the skill invoked")
    start.add_argument("--prompt", metavar="P", help="the prompt, kept for the record")
    start.add_argument("--id", metavar="ID", help="use this id (default: a new uuid)")
    end = sub.add_parser(
        "end",
        help="record how an invocation ended (guarded)",
        epilog=parser.epilog,
        formatter_class=parser.formatter_class,
    )
    end.add_argument(
        "id", metavar="ID", help="the invocation id (or a prefix/suffix naming only one)"
    )
    end.add_argument("--status", required=True, choices=TERMINAL, help="%(choices)s")
    end.add_argument("--reason", metavar="CODE", help="reason code (default from the status)")
    end.add_argument("--summary", default="", metavar="S", help="reason summary text")
    for p in (start, end):
        add_db_option(p)
        p.add_argument("--json", action="store_true", help="the record as JSON on stdout")
    return parser


def start(args: Any) -> int:
    ident = None if args.id is None else safe_component(args.id, "invocation id")
    store = open_store(args.db)
    try:
        row = store.invocations.create(skill=args.skill, prompt=args.prompt, id=ident)
    finally:
        store.close()
    print_json(row.as_dict(), schema="lirun.invocation/1") if args.json else print(row.id)
    return 0


def end(args: Any) -> int:
    code = EXIT_CODE_BY_STATUS[args.status]
    reason = args.reason or resolve_run_reason(args.status)
    store = open_store(args.db)
    try:
        ident = store.resolve_id("invocation", args.id)
        applied = store.update_status(
            "invocation",
            ident,
            new_status=args.status,
            reason_code=reason,
            reason_summary=args.summary,
            expected_statuses={"running"},
        )
        row = store.invocations.get(ident)
    finally:
        store.close()
    assert row is not None  # update_status raised NotFoundError otherwise
    if args.json:
        print_json({**row.as_dict(), "applied": applied}, schema="lirun.invocation_end/1")
    elif applied:
        print(f"{row.id}\t{row.status}\t{row.status_reason_code}")
    return code if applied else _not_applied(args, row, code)


def _not_applied(args: Any, row: InvocationRow, code: int) -> int:
    if row.status == args.status:
        warn(PROG, f"invocation {row.id} had already ended as {row.status}; unchanged")
        if not args.json:
            print(f"{row.id}\t{row.status}\t{row.status_reason_code}")
        return code
    warn(
        PROG,
        f"invocation {row.id} had already ended as {row.status} "
        f"({row.status_reason_code}); not changed to {args.status}. "
        "Use `li override invocation ID` to repair it deliberately",
    )
    return 1


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    return start(args) if args.action == "start" else end(args)
