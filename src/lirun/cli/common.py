"""Pieces every command shares: the --db option, error output, JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on stderr and exit code 2 (argparse's own convention)."""


def make_parser(prog: str, description: str, exit_codes: str) -> Parser:
    return Parser(
        prog=prog,
        description=description,
        epilog=f"exit codes:\n{exit_codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="state database (path, sqlite:///path or postgresql://...); "
        "default $LIRUN_DB_URL, else $LIRUN_HOME/state.db",
    )


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, default=str, sort_keys=True) + "\n")
    sys.stdout.flush()


def warn(prog: str, message: str) -> None:
    sys.stderr.write(f"{prog}: {message}\n")
