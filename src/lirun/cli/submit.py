"""``li submit -- ACTION ...``: queue one ad-hoc run for the workers; print its id."""

from __future__ import annotations

from lirun.cli.common import add_db_option, make_parser, print_json
from lirun.errors import UsageError
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import make_policies
from lirun.schedules.registry import current_actor
from lirun.schedules.submit import submit
from lirun.settings import Settings
from lirun.store import open_store

EXIT_CODES = """\
  0    queued; its id is on stdout (li wait ID: exit 0 when it completed)
  2    usage error: no or an invalid ACTION (said on stderr with an example), or the
       database could not be opened or written"""

DESCRIPTION = """\
Queue one run of ACTION (a schedule run with no schedule) and print its id; a worker
(li worker) runs it. The ACTION is that of li schedule add:
  agent PROVIDER[/MODEL] PROMPT [options] [-- PROVIDER_OPTIONS]
  run [--cwd DIR] [--timeout S] [--] CMD ...
  flow FILE [--cwd DIR]      show FILE [--cwd DIR]

--start-deadline, --retries and --notify are those of li schedule add, for this run.

  id=$(li submit -- run make nightly) && li wait "$id"
"""


def main(argv: list[str], settings: Settings) -> int:
    mine, words = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, None)
    )
    parser = make_parser("li submit", DESCRIPTION, EXIT_CODES)
    parser.usage = (
        "li submit [--start-deadline DUR] [--retries N] [--notify CMD] [--db URL] [--json] "
        "-- ACTION ..."
    )
    parser.add_argument("--json", action="store_true", help="the queued run as JSON")
    parser.add_argument(
        "--start-deadline", metavar="DURATION",
        help="not started by then: failed, schedule.failed.start_deadline (default 1h)",
    )  # fmt: skip
    parser.add_argument(
        "--retries", metavar="N", help="new attempts when the record marks it retryable (0)"
    )
    parser.add_argument(
        "--notify", metavar="CMD", help="a shell command run when it ends (li schedule add)"
    )
    add_db_option(parser)
    args = parser.parse_args(mine)
    if words is None:
        raise UsageError("no action: give it after --, e.g. li submit -- run make nightly")

    raw = {"start_deadline": args.start_deadline, "retries": args.retries, "notify": args.notify}
    policies = make_policies(raw, None)
    action = parse_action(words)
    store = open_store(args.db)
    try:
        row = submit(store, action, actor=current_actor(), policies=policies)
    finally:
        store.close()
    print_json(row.as_dict(), schema="lirun.schedule_run/1") if args.json else print(row.id)
    return 0
