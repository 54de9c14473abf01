"""``li``: dispatch to one module per command, imported only when that command runs."""

from __future__ import annotations

import importlib
import os
import sys

from lirun.errors import LirunError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from lirun.settings import Settings

# name → (module, one-line help). Each module has ``main(argv, settings) -> int`` (the
# settings cli.main read once), but the fast path's (FAST_COMMANDS): ``main(argv) -> int``.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("lirun.cli.run", "run any command under supervision: li run -- CMD ..."),
    "agent": ("lirun.cli.agent", "run an agent CLI under supervision (li agent --help lists them)"),
    "wait": ("lirun.cli.wait", "wait for runs to finish; one stable line per run"),
    "status": ("lirun.cli.status", "recent executions, or one record with its history"),
    "logs": ("lirun.cli.logs", "what a run wrote: stdout, stderr, an agent's transcript"),
    "attention": ("lirun.cli.attention", "what needs a person now: the dashboard's needs-you list"),
    "gc": ("lirun.cli.gc", "prune old records to tombstones and remove their run directories"),
    "reap": ("lirun.cli.reap", "finalize executions whose owner process is gone"),
    "override": ("lirun.cli.override", "audited repair of a record's status"),
    "invoke": ("lirun.cli.invoke", "start and end invocations"),
    "db": ("lirun.cli.db", "database housekeeping: path, migrate"),
    "flow": ("lirun.cli.flow", "run a flow file: legs of agents and commands as one invocation"),
    "show": ("lirun.cli.show", "shows: plays in their own worktrees, merged through gates"),
    "schedule": ("lirun.cli.schedule", "define runs started by time: add, list, apply, ..."),
    "worker": ("lirun.cli.worker", "fire due schedules and run queued work; li worker status"),
    "team": ("lirun.cli.team", "teams: a shared inbox for agents working side by side"),
    "submit": ("lirun.cli.submit", "queue one run for the workers: li submit -- ACTION ..."),
    "lease": ("lirun.cli.lease", "li lease check: may this work still commit a side effect"),
    "ui": ("lirun.cli.ui", "the live web dashboard (extra `ui`): runs, flows, shows, schedules"),
    "metrics": ("lirun.cli.metrics", "the record as Prometheus metrics, printed once"),
    "schema": ("lirun.cli.schema", "the JSON Schemas of the --json outputs: li schema [NAME]"),
}

USAGE = """usage: li [--db URL] [-v | -q] COMMAND [ARGS...]

Run headless AI-agent CLIs under supervision and keep a durable, typed record of how
each execution ended.

commands:
{commands}

options:
  --db URL     state database: a path, sqlite:///path, postgresql://... or host=... dbname=...
               (default: $LIRUN_DB_URL, else $LIRUN_HOME/state.db)
  -v, --verbose  also print debug notes on stderr (-vv: the same)
  -q, --quiet  print only warnings and errors on stderr, not notices
  -h, --help   show this help
  --version    print the version

Run `li COMMAND --help` for a command's options and exit codes.
exit codes: 0 success; 1 unsuccessful outcome; 2 usage or setup error; others per command.
"""


def _usage() -> str:
    width = max(len(n) for n in COMMANDS)
    lines = [f"  {name.ljust(width)}  {helptext}" for name, (_, helptext) in COMMANDS.items()]
    return USAGE.format(commands="\n".join(lines))


_early_signals: list[int] = []


def _record_early(signum: int, frame: object) -> None:
    _early_signals.append(signum)


def _record_signals_early() -> None:
    """Record signals through the C module: ``import signal`` loads enum (~10 ms), and a
    SIGINT meanwhile would be a KeyboardInterrupt traceback."""
    import _signal

    for signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(signum, _record_early)


class GlobalOptions:
    """What comes before the command: ``--db URL``, ``-v``/``-q``; the rest is the command."""

    __slots__ = ("db", "rest", "verbosity")

    def __init__(self, args: list[str]) -> None:
        self.db: str | None = None
        self.verbosity = 0  # -q: -1; -v, -vv: 1, 2
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--db" and i + 1 < len(args):
                self.db, i = args[i + 1], i + 2
                continue
            if arg.startswith("--db=") and len(arg) > len("--db="):
                self.db = arg.split("=", 1)[1]
            elif arg in ("-q", "--quiet"):
                self.verbosity = -1
            elif arg == "--verbose" or (arg.startswith("-v") and arg.strip("v") == "-"):
                more = 1 if arg == "--verbose" else len(arg) - 1  # -vv: 2
                self.verbosity = max(0, self.verbosity) + more
            else:
                break
            i += 1
        self.rest = args[i:]


def starts_a_run(args: list[str]) -> bool:
    """``args`` (``li``'s own, without the program name) ask for a supervised execution."""
    args = GlobalOptions(args).rest
    return bool(args) and (args[0] in ("run", "agent") or args[:2] in SUPERVISING_SUBCOMMANDS)


# Subcommands that supervise executions as ``li run`` does (their signals are held early).
SUPERVISING_SUBCOMMANDS = (["show", "run"], ["show", "resume"])


# The exit code of a command whose reader went away (as a shell reports a process that
# SIGPIPE ended): ``li schedule runs NAME | head -1`` ends quietly.
BROKEN_PIPE_EXIT = 141


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's last flush at exit must not meet the
    closed pipe again (and print "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    """``li``: one command; its output closed early (``| head``) ends it quietly, 141."""
    try:
        try:
            code = _dispatch(argv)
        finally:  # argparse's --help ends in SystemExit with its text still buffered
            sys.stdout.flush()  # here a closed pipe is met inside, not at interpreter exit
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE_EXIT
    return code


def _dispatch(argv: list[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if GlobalOptions(args).rest[:1] in (["--db"], ["--db="]):
        sys.stderr.write(
            "li: --db needs a value: a path, sqlite:///path, postgresql://... "
            "or host=... dbname=...\n"
        )
        return 2
    if argv is None and starts_a_run(args):
        # First thing, before any import that could be interrupted: a signal from now on
        # is recorded, and the exit code is always that of the stored status (or 2).
        _record_signals_early()
        from lirun.signals import hold_signals, release_signals

        hold_signals(early=_early_signals)
        try:
            return _main(args)
        finally:
            release_signals()
    return _main(args)


def _main(args: list[str]) -> int:
    options = GlobalOptions(args)
    args = options.rest
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(_usage())
        return 0 if args else 2
    if args[0] == "--version":
        from lirun import __version__

        print(f"lirun {__version__}")
        return 0
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        sys.stderr.write(_unknown_command(name))
        return 2
    from lirun.cli.common import use_db
    from lirun.cli.diagnostics import li_lines
    from lirun.store.bounds import name_connections

    use_db(options.db)  # the command's --db default: passed down, not put in os.environ
    name_connections(name)  # pg_stat_activity shows lirun-<command>
    settings: Settings | None = None
    if name not in FAST_COMMANDS:
        try:
            settings = _settings(options.db)
        except UsageError as exc:  # a bad LIRUN_* value: one line, before the command starts
            sys.stderr.write(f"li {name}: error: {exc}\n")
            return 2

    with li_lines(options.verbosity):  # the library's log records, as `li: …` lines
        return _command(name, rest, settings)


def _unknown_command(name: str) -> str:
    """``li stauts``: the error line, with the command meant when one is close."""
    import difflib

    close = difflib.get_close_matches(name, list(COMMANDS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"li: error: unknown command {name!r}{hint}\ntry 'li --help' for the list\n"


# The fast path (ARCHITECTURE.md): these read no Settings (only the home and database).
FAST_COMMANDS = ("wait", "status")


def _settings(db: str | None) -> Settings:
    """This command's ``Settings``, read once: the environment, then ``li --db URL``. A bad
    ``LIRUN_*`` value raises ``UsageError``."""
    from lirun.settings import Settings

    return Settings.from_env().with_flags(db_url=db)


def _command(name: str, rest: list[str], settings: Settings | None) -> int:
    """Run command ``name``: a fast-path command gets ``rest``, any other also ``settings``."""
    from lirun import platform  # here, not at the top: `li --help` loads no command module

    try:
        platform.check()  # a bad LIRUN_PLATFORM: one clear line before anything runs
        module = importlib.import_module(COMMANDS[name][0])
        code = module.main(rest) if name in FAST_COMMANDS else module.main(rest, settings)
        return int(code)
    except LirunError as exc:
        sys.stderr.write(f"li {name}: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write(f"li {name}: interrupted\n")
        return 130
