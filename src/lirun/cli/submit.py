"""``li submit -- ACTION ...``: queue one ad-hoc run for the workers; print its id."""

from __future__ import annotations

from lirun.cli.common import add_db_option, make_parser, print_json
from lirun.errors import UsageError

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

  id=$(li submit -- run make nightly) && li wait "$id"
"""


def main(argv: list[str]) -> int:
    mine, words = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, None)
    )
    parser = make_parser("li submit", DESCRIPTION, EXIT_CODES)
    parser.usage = "li submit [--db URL] [--json] -- ACTION ..."
    parser.add_argument("--json", action="store_true", help="the queued run as JSON")
    add_db_option(parser)
    args = parser.parse_args(mine)
    if words is None:
        raise UsageError("no action: give it after --, e.g. li submit -- run make nightly")
    from lirun.schedules.actions import parse_action
    from lirun.schedules.registry import current_actor
    from lirun.schedules.submit import submit
    from lirun.store import open_store

    action = parse_action(words)
    store = open_store(args.db)
    try:
        row = submit(store, action, actor=current_actor())
    finally:
        store.close()
    print_json(row) if args.json else print(row["id"])
    return 0
