"""``li attention``: what needs a person now, the same list as the dashboard's needs-you
page (``/attention``): escalated or gate-failed plays of active shows, runs whose owner
died and were not reaped, outcomes pending in a spool, overdue schedules with no live
worker, queued runs no worker claimed, schedules failing since their last success, failed
submitted runs not retried, failed flows not resumed."""

from __future__ import annotations

import time
from typing import Any

from lirun.cli.common import add_db_option, make_parser, print_json
from lirun.cli.render import format_span
from lirun.cli.status import parse_duration
from lirun.errors import DatabaseMissingError
from lirun.paths import resolve_db_url
from lirun.settings import Settings
from lirun.store import open_store
from lirun.ui.attention_facts import attention_items

EXIT_CODES = """\
  0  nothing needs a person
  1  something does (the list says what, and the command that acts on each)
  2  usage error; the database cannot be opened"""

DESCRIPTION = """\
What needs a person now, most blocking first: plays escalated or failing their gate in a
show still active (as li show list counts them), running records whose owner died and
that nobody reaped (li reap), outcomes still pending in a spool (li status ID records
them), schedules overdue with no live worker (li worker), runs queued longer than a tenth
of their start deadline with no worker claiming them (li worker --allow-root DIR),
schedules whose runs failed since their last success, runs queued by li submit that
failed and were not retried (by id and action: li logs ID), and flows that failed and
were not resumed. Failures older than --since (default 7d) age out; states do not. Reads
only: nothing is reaped, delivered or acknowledged."""


def build_parser() -> Any:
    parser = make_parser("li attention", DESCRIPTION, EXIT_CODES)
    parser.add_argument(
        "--since",
        metavar="DURATION",
        default="7d",
        help="failures within this window, e.g. 2h, 1d (7d)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON array on stdout")
    add_db_option(parser)
    return parser


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    now = time.time()
    since = now - parse_duration(args.since)
    url = resolve_db_url(args.db)
    try:
        store = open_store(url, readonly=True)
    except DatabaseMissingError:
        items = []
    else:
        try:
            items = attention_items(store, url, now, since)
        finally:
            store.close()
    if args.json:
        print_json([item.to_dict() for item in items], schema="lirun.attention_item/1")
        return 1 if items else 0
    if not items:
        print("nothing needs you")
        return 0

    count = len(items)
    print(f"{count} thing{'s' if count != 1 else ''} need{'' if count != 1 else 's'} you:")
    for item in items:
        ago = "" if item.since is None else f" ({format_span(now - float(item.since))} ago)"
        print(f"- {item.what}{ago}")
        print(f"    {item.do}")
    return 1
