"""`li wait` as a process: arguments, stdout lines, stderr diagnostics, signals, nice.

The library part (``wait_for_terminal``, ``drive``, the ``Watcher``) is ``lirun.wait``;
this module is the command around it, and ``run_wait`` is its entry (internal; the old
``lirun.run_wait`` warns until 0.3.0).

stdout carries only contract lines, each flushed as its target finishes (also on a
pipe); everything else goes to stderr. A live progress line is drawn only when
stderr is a terminal.
"""

from __future__ import annotations

import _signal
import contextlib
import os
import sys
import time
from collections.abc import Callable
from types import SimpleNamespace

from lirun.errors import DatabaseConnectionLostError, LirunError
from lirun.hints import Any
from lirun.paths import DB_URL_HELP
from lirun.signals import SignalTrap
from lirun.store.bounds import answer_by
from lirun.wait.api import check_interval, check_timeout, drive, start_watching
from lirun.wait.outcome import (
    describe_problem,
    format_wait_line,
    json_record,
    prints_line,
    wait_exit_code,
)
from lirun.wait.resolve import split_ids
from lirun.wait.watch import Watcher

PROG = "li wait"
# The shape of a --json line (src/lirun/schemas/wait.json); the tab-separated line has none.
WAIT_SCHEMA = "lirun.wait/2"
EXIT_CODES = """\
  0  every target is terminal and successful
  1  every target is terminal, some unsuccessful
  2  a target was not found, was deleted (unknown) or is ambiguous; no database; usage error
  3  interrupted (SIGINT/SIGTERM), or --timeout reached with targets still running
  precedence: 2 > 3 > 1 > 0"""
DESCRIPTION = """\
Wait until each run is terminal and print one line per run as it finishes:
  <id>\\tstatus=<s>\\treason=<code|unknown>\\tartifact_dir=<path|->\\texit_code=<n|->
An ID may be an execution (session), invocation, play (success: merged), show
(success: completed), branch, run id or schedule run, or a unique prefix of one or its
random suffix (2b5dd3); several may be given,
separated by spaces or commas. An ambiguous one lists up to ten candidates on stderr.
A waiter lowers its own CPU priority (nice 10): the runs it waits for come first."""
PROGRESS_SECONDS = 0.25
WAITER_NICENESS = 10


def _number(check: Callable[[float], float | None]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        import argparse

        from lirun.cli.parser import Duration

        number = Duration(zero=True, high=float("inf"))(text)  # the bounds are check's
        try:
            value = check(number)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        assert value is not None
        return value

    return parse


def _plain_seconds(text: str) -> float:
    """``90`` or ``2.5``; anything else (``5m``, ``1e3``) is argparse's, which reads every
    DURATION without putting its parser on the fast path."""
    if not text.replace(".", "", 1).isdigit():
        raise ValueError(text)
    return float(text)


def _quick_parse(argv: list[str]) -> SimpleNamespace | None:
    """The plain spellings, without building an argparse parser (~3 ms of startup).

    None sends everything else (help, abbreviations, ``--``, any error) to argparse,
    which stays the one source of help text and error messages.
    """
    converters: dict[str, Callable[[str], Any]] = {
        "--interval": lambda v: check_interval(_plain_seconds(v)),
        "--timeout": lambda v: check_timeout(_plain_seconds(v)),
        "--db": str,
    }
    found: dict[str, Any] = {"interval": 1.0, "timeout": None, "json": False, "db": None}
    ids: list[str] = []
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg == "--json":
            found["json"] = True
        elif name in converters:
            given = value if eq else next(args, None)
            if given is None:
                return None
            try:
                found[name[2:]] = converters[name](given)
            except ValueError:
                return None
        elif arg.startswith("-"):
            return None
        else:
            ids.append(arg)
    return SimpleNamespace(ids=ids, **found) if ids else None


def parse_args(argv: list[str]) -> Any:
    """Namespace(ids, interval, timeout, json, db); SystemExit on --help or a usage error."""
    from lirun.cli.common import given_db  # on the fast path: loaded by main already

    quick = _quick_parse(argv)
    args = quick if quick is not None else full_parse(argv)
    if args.db is None:
        args.db = given_db()  # `li --db URL wait ID`
    return args


def full_parse(argv: list[str]) -> Any:
    import argparse

    from lirun.cli.parser import CommandParser

    parser = CommandParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=f"exit codes:\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("ids", nargs="+", metavar="ID", help="what to wait for")
    parser.add_argument(
        "--interval",
        type=_number(check_interval),
        default=1.0,
        metavar="DUR",
        help="time between full reads (default 1s); commits wake the waiter sooner",
    )
    parser.add_argument(
        "--timeout",
        type=_number(check_timeout),
        default=None,
        metavar="DUR",
        help="give up after DUR with exit 3 if targets are still running (also on a "
        "database that does not answer: by DUR plus about a second)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--db", metavar="URL", default=None, help=DB_URL_HELP)
    return parser.parse_args(argv)


def _warn(message: str) -> None:
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.stderr.flush()


class Output:
    """Writes contract lines to stdout, diagnostics and progress to stderr."""

    def __init__(self, *, as_json: bool, progress: bool) -> None:
        self.as_json = as_json
        self.progress = progress
        self._drawn = False
        self._last_draw = 0.0
        self._stdout_ok = True

    def _clear(self) -> None:
        if self._drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._drawn = False

    def emit(self, outcome: dict[str, Any]) -> None:
        self._clear()
        if not prints_line(outcome):
            _warn(describe_problem(outcome))
            return
        if self.as_json:
            import json  # only for --json: the default line needs no json on start-up

            line = json.dumps({"schema": WAIT_SCHEMA, **json_record(outcome)})
        else:
            line = format_wait_line(outcome)
        if self._stdout_ok:
            try:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                self._stdout_ok = False  # the reader left; keep waiting for the exit code

    def idle(self, watcher: Watcher) -> None:
        now = time.monotonic()
        if not self.progress or now - self._last_draw < PROGRESS_SECONDS:
            return
        self._last_draw = now
        waiting = watcher.pending_outcomes()
        total = len(watcher.targets)
        first = f"{waiting[0]['run_id']} ({waiting[0]['status']})" if waiting else ""
        sys.stderr.write(f"\r\x1b[K{PROG}: {total - len(waiting)}/{total} done; waiting on {first}")
        sys.stderr.flush()
        self._drawn = True

    def finish(self, watcher: Watcher, *, signum: int | None) -> None:
        """Name the targets left unfinished by a signal or the timeout."""
        self._clear()
        waiting = watcher.pending_outcomes()
        if waiting:
            import signal  # only to name a signal that came

            names = ", ".join(f"{o['run_id']} ({o['status']})" for o in waiting)
            why = f"interrupted by {signal.Signals(signum).name}" if signum else "timed out"
            _warn(f"{why}; still waiting on {names}")


class StopRequested:
    """``stop`` for the wait loop: true once a signal came; ``fileno()`` is the trap's
    wake-up pipe, so a waker can sleep on it instead of looking every few milliseconds."""

    def __init__(self, trap: SignalTrap) -> None:
        self._trap = trap

    def __call__(self) -> bool:
        return self._trap.received is not None

    def fileno(self) -> int:
        return self._trap.fileno()


def _yield_cpu() -> None:
    """A waiter only watches: on a busy machine the runs it waits for get the CPU first.

    Fifty waiters reacting to a busy writer's commits otherwise take a share of the
    writer's core (bench/bench_wait.py); an idle machine runs a niced waiter as fast.
    """
    with contextlib.suppress(OSError):
        os.nice(WAITER_NICENESS)


def _left(deadline: float | None) -> float | None:
    """The --timeout still to go (0 once the deadline has passed: one look)."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _deliver_spool(db: str | None, deadline: float | None) -> None:
    """Outcomes spooled by a teardown that could not write land before anything is read,
    by the deadline too: what cannot be written by then stays spooled for a later command."""
    from lirun.cli.common import deliver_pending  # on the fast path: loaded by main already

    with answer_by(deadline):
        deliver_pending(PROG, db)


def _wait(args: Any, ids: list[str], trap: SignalTrap, deadline: float | None) -> int:
    _yield_cpu()
    stop = StopRequested(trap)
    try:
        store, _, watcher = start_watching(args.db, ids, timeout=_left(deadline), stop=stop)
    except DatabaseConnectionLostError as exc:  # still unreachable at --timeout or a signal
        _warn(f"{'interrupted' if trap.received else 'timed out'}: {exc}")
        return 3
    out = Output(as_json=args.json, progress=sys.stderr.isatty())
    try:
        try:
            results = drive(
                watcher,
                interval=args.interval,
                timeout=_left(deadline),
                emit=out.emit,
                stop=stop,
                idle=out.idle,
            )
            out.finish(watcher, signum=trap.received)
        finally:
            watcher.close()
    finally:
        store.close()
    return wait_exit_code(results)


def run_wait(argv: list[str]) -> int:
    """`li wait ID...`: print one line per target as it finishes; exit per design.md §5."""
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return 2 if exc.code not in (0, None) else 0
    ids = split_ids(args.ids)
    if not ids:
        _warn("error: no ids given (they were empty after splitting on spaces and commas)")
        return 2
    # One deadline for the whole wait: the spool's delivery, the connect and every read.
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    _deliver_spool(args.db, deadline)
    with SignalTrap((_signal.SIGINT, _signal.SIGTERM)) as trap:
        try:
            return _wait(args, ids, trap, deadline)
        except LirunError as exc:
            _warn(f"error: {exc}")
            return 2


def main(argv: list[str]) -> int:
    return run_wait(argv)
