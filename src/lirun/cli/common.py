"""Pieces every command shares: the --db option, error output, JSON output."""

from __future__ import annotations

import sys

from lirun.hints import Any
from lirun.paths import DB_URL_HELP

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from lirun.cli.parser import CommandParser

# argparse and json are imported where used: `li wait` imports this module for
# deliver_pending and must not pay for them (bench/bench_startup.py).


def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it ($COLUMNS, then the
    terminal, else 80), without importing shutil (argparse's formatter does, on every
    parser built, whether or not help is printed)."""
    import os

    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    stdout = sys.__stdout__
    try:
        return os.get_terminal_size(stdout.fileno()).columns or 80 if stdout else 80
    except (ValueError, OSError):
        return 80


def make_parser(prog: str, description: str, exit_codes: str) -> CommandParser:
    """argparse with usage errors on stderr and exit code 2 (argparse's own convention)."""
    import argparse

    from lirun.cli.parser import CommandParser

    class Formatter(argparse.RawDescriptionHelpFormatter):
        def __init__(self, prog: str, **options: Any) -> None:
            options.setdefault("width", _columns() - 2)  # as argparse computes it
            super().__init__(prog, **options)

    return CommandParser(
        prog=prog,
        description=description,
        epilog=f"exit codes:\n{exit_codes}",
        formatter_class=Formatter,
    )


# ``li --db URL COMMAND``: the database given before the command, the default of the
# command's own --db (set once by cli.main; the environment is left as it was).
_given_db: list[str | None] = [None]


def use_db(url: str | None) -> None:
    """Make ``url`` (``li --db URL``) the default of every command's ``--db``."""
    _given_db[0] = url


def given_db() -> str | None:
    return _given_db[0]


def add_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="URL", default=given_db(), help=DB_URL_HELP)


def adopt_orphans() -> None:
    """This ``li`` supervises runs: their orphans are re-parented to it (the child
    subreaper), so that without a cgroup it still ends whatever they left running."""
    from lirun.exec.descendants import enable_subreaper

    enable_subreaper()


def print_json(obj: Any, *, schema: str) -> None:
    """``obj`` as one JSON line naming its shape (docs/json.md): an object gains
    ``"schema": schema``; a list (which cannot carry a key) gets it on each element."""
    import json

    if isinstance(obj, dict):
        obj = {"schema": schema, **obj}
    elif isinstance(obj, list):
        obj = [{"schema": schema, **item} if isinstance(item, dict) else item for item in obj]
    sys.stdout.write(json.dumps(obj, default=str, sort_keys=True) + "\n")
    sys.stdout.flush()


def refuse_if_signalled(trap: Any) -> None:
    """A signal that came while the command was starting (``trap``: the held
    ``SignalTrap``, or None) means nothing starts: StartInterruptedError, exit 2."""
    if trap is not None and trap.received is not None:
        from lirun.errors import StartInterruptedError

        raise StartInterruptedError(f"{trap.signal_name} received; nothing was started")


def print_started(started: dict[str, Any], id_key: str, *, as_json: bool) -> None:
    """A ``--detach`` start's answer on stdout: the id alone, or with --json the object."""
    if as_json:
        print_json(started, schema="lirun.started/1")
    else:
        sys.stdout.write(f"{started[id_key]}\n")
        sys.stdout.flush()


def warn(prog: str, message: str) -> None:
    sys.stderr.write(f"{prog}: {message}\n")


def deliver_pending(prog: str, url: str | None) -> None:
    """Record the outcomes spooled for this database before answering (cheap when none)."""
    from lirun.paths import nothing_pending

    if nothing_pending():
        return
    from lirun.record.spool import deliver_pending as deliver

    deliver(url)  # a failure is logged: `li: warning: …`


def print_table(header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """A table on stdout: the header line, then one line per row, columns aligned (the
    last one left ragged). Every table ``li`` prints has a header."""
    lines = [tuple(str(c) for c in header)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        cells = [c.ljust(w) for c, w in zip(line, widths, strict=False)]
        sys.stdout.write("  ".join([*cells, line[-1]]).rstrip() + "\n")


def in_words(seconds: float) -> str:
    """``3 s``, ``4 min``, ``2 h 5 min``, ``3 d``: a span as a person says it."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        hours, minutes = divmod(s // 60, 60)
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    return f"{s // 86400} d"
