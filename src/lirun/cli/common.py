"""Pieces every command shares: the --db option, error output, JSON output."""

from __future__ import annotations

import sys

from lirun.hints import Any
from lirun.paths import DB_URL_HELP

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

# argparse and json are imported where used: `li wait` imports this module for
# deliver_pending and must not pay for them (bench/bench_startup.py).


def make_parser(prog: str, description: str, exit_codes: str) -> argparse.ArgumentParser:
    """argparse with usage errors on stderr and exit code 2 (argparse's own convention)."""
    import argparse

    return argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=f"exit codes:\n{exit_codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL", default=None, help=DB_URL_HELP)


def print_json(obj: Any) -> None:
    import json

    sys.stdout.write(json.dumps(obj, default=str, sort_keys=True) + "\n")
    sys.stdout.flush()


def warn(prog: str, message: str) -> None:
    sys.stderr.write(f"{prog}: {message}\n")


def deliver_pending(prog: str, url: str | None) -> None:
    """Record the outcomes spooled for this database before answering (cheap when none)."""
    from lirun.paths import nothing_pending

    if nothing_pending():
        return
    from lirun.record.spool import deliver_pending as deliver

    deliver(url, warn=lambda message: warn(prog, f"warning: {message}"))
