"""``li reap``: finalize running executions whose owner is dead (design.md §4.6)."""

from __future__ import annotations

from typing import Any

from lirun.cli.common import add_db_option, deliver_pending, make_parser, print_json
from lirun.record.reap import find_orphans, reap_sessions, report
from lirun.record.reap_flows import find_orphan_flows, reap_flows
from lirun.settings import Settings
from lirun.store import open_store

EXIT_CODES = "  0  done (also when nothing needed reaping)\n  2  usage error, or no database"


def _print(item: dict[str, Any], *, as_json: bool, dry_run: bool) -> None:
    if as_json:
        print_json(item, schema="lirun.reap/1")
        return
    state = "would reap" if dry_run else "reaped" if item["reaped"] else "already finalized"
    print(f"{item['id']}\t{state}\t{item['reason_code']}\t{item['reason_summary']}")


def main(argv: list[str], settings: Settings) -> int:
    parser = make_parser(
        "li reap",
        "Mark running executions and flows failed when their owner process is gone (same "
        "host) or their heartbeat is older than its lease (a flow's running legs with it). "
        "Safe to run alongside other reapers.",
        EXIT_CODES,
    )
    parser.add_argument("--dry-run", action="store_true", help="list, do not write")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    add_db_option(parser)
    args = parser.parse_args(argv)
    if not args.dry_run:
        deliver_pending("li reap", args.db)
    store = open_store(args.db, readonly=args.dry_run)
    try:
        orphans = find_orphans(store)
        flows = find_orphan_flows(store)  # a flow's legs first, then its invocation
        if args.dry_run:
            items = [report(o.row, o.verdict, reaped=False) for o in [*orphans, *flows]]
        else:
            items = reap_sessions(store, [o.row.id for o in orphans])
            items += reap_flows(store, [o.row for o in flows])
    finally:
        store.close()
    for item in items:
        _print(item, as_json=args.json, dry_run=args.dry_run)
    return 0
