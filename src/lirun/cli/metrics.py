"""``li metrics``: the dashboard's ``/metrics`` printed once, for a cron job or a node
exporter's textfile collector."""

from __future__ import annotations

import sys
from typing import Any

from lirun.cli.common import add_db_option, make_parser
from lirun.paths import resolve_db_url
from lirun.settings import Settings
from lirun.store import open_store

EXIT_CODES = """\
  0  printed
  2  usage error; the database cannot be opened; prometheus_client is not installed"""

DESCRIPTION = """\
The record as Prometheus metrics (text format 0.0.4), the same families `li ui` serves at
/metrics: runs started and ended by kind, status and reason; run durations; cost and
tokens by provider and model; live workers and their heartbeat age; queued and overdue
schedule runs; outcomes pending in this machine's spool; each schedule's events seen,
fired and skipped, its polls and poll failures. Every number is read from the
database, so it is the same from any process. Reads only. For a node exporter's textfile
collector: li metrics > DIR/lirun.prom.$$ && mv DIR/lirun.prom.$$ DIR/lirun.prom"""

INSTALL_HINT = "li metrics needs prometheus_client: pip install 'lirun[metrics]'\n"


def build_parser() -> Any:
    parser = make_parser("li metrics", DESCRIPTION, EXIT_CODES)
    add_db_option(parser)
    return parser


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    try:
        from lirun.ui.metrics import render
    except ImportError:
        sys.stderr.write(INSTALL_HINT)
        return 2
    url = resolve_db_url(args.db)
    # Read-only: a mistyped --db is an error (exit 2), never a new empty database that
    # would report zeros to a dashboard.
    store = open_store(url, readonly=True)
    try:
        text = render(store, url)
    finally:
        store.close()
    sys.stdout.buffer.write(text)
    sys.stdout.flush()
    return 0
