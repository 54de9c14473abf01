"""``li flow list`` and ``li show list``: the flows and shows of the record, newest first,
with ``--status``, ``--since`` and ``--json`` (read-only, like ``li status``)."""

from __future__ import annotations

import time
from typing import Any

from lirun.cli.common import add_db_option, deliver_pending, print_json
from lirun.cli.list_render import render_flows
from lirun.cli.show_board import render_show_list, show_row_json
from lirun.cli.status import parse_duration
from lirun.errors import DatabaseMissingError, UsageError
from lirun.lifecycle import policy_for
from lirun.paths import resolve_db_url
from lirun.store import open_store

LIST_EXIT_CODES = """\
  0    listed (an empty list too, and no database yet)
  2    usage error: a bad --status, --since or --limit; the database cannot be opened"""


def add_list_options(parser: Any, kind: str) -> None:
    """--status (the statuses ``kind`` has), --since, --limit, --json, --db."""
    parser.add_argument(
        "--status",
        metavar="S",
        choices=sorted(policy_for(kind).statuses),
        help="only those in this status (%(choices)s)",
    )
    parser.add_argument(
        "--since", metavar="DURATION", help="only those started within, e.g. 30m, 2h, 1d"
    )
    parser.add_argument("--limit", metavar="N", type=int, default=20, help="at most N (20)")
    parser.add_argument("--json", action="store_true", help="one JSON array on stdout")
    add_db_option(parser)


def _rows(args: Any, prog: str, read: str) -> list[dict[str, Any]]:
    return [r.as_dict() for r in _read(args, prog, read)]


def _read(args: Any, prog: str, read: str) -> list[Any]:
    """The rows the list ``read`` of ``store.lists`` gives for the list options."""
    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    since = None if args.since is None else time.time() - parse_duration(args.since)
    url = resolve_db_url(args.db)
    deliver_pending(prog, url)
    try:
        store = open_store(url, readonly=True)
    except DatabaseMissingError:
        return []
    try:
        return list(getattr(store.lists, read)(status=args.status, since=since, limit=args.limit))
    finally:
        store.close()


def _empty(args: Any, noun: str, how: str) -> str:
    if args.status or args.since:
        return f"no {noun} match these filters"
    return f"no {noun} yet ({how})"


def flow_list(args: Any) -> int:
    rows = _rows(args, "li flow list", "flows")
    if args.json:
        print_json(rows, schema="lirun.flow_row/1")
    elif not rows:
        print(_empty(args, "flows", "li flow run FILE starts one"))
    else:
        render_flows(rows, time.time())
    return 0


def show_list(args: Any) -> int:
    rows = _read(args, "li show list", "shows")
    if args.json:
        print_json([show_row_json(row) for row in rows], schema="lirun.show_row/1")
    elif not rows:
        print(_empty(args, "shows", "li show run FILE starts one"))
    else:
        render_show_list(rows, time.time())
    return 0
