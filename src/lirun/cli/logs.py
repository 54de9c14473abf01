"""``li logs ID``: what a run wrote, from its stream files (``run_output``).

The ID is resolved as ``li status`` resolves it. A session is its own output; a play, its
work session; a flow invocation, each of its legs in turn; a schedule run, what it
started. Files are read through ``exec.log_reader`` (an agent's transcript as readable
text, the dashboard's reading); ``--follow`` polls them and the record until the record
is terminal, so another process may be writing both.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import Any

from lirun.cli.common import add_db_option, deliver_pending, make_parser
from lirun.errors import DatabaseMissingError, NotFoundError, OutputGoneError, UsageError
from lirun.exec.log_reader import Cursor, pick_streams, stream_label
from lirun.lifecycle import is_terminal, shown_kind
from lirun.liveness import host_name
from lirun.paths import resolve_db_url
from lirun.run_output import TRANSCRIPT_SUFFIX, stream_dir
from lirun.settings import Settings
from lirun.store import Store, open_store
from lirun.views.detail import liveness, resolve_record

PROG = "li logs"
POLL_SECONDS = 0.25  # how often --follow looks at the files
RECORD_SECONDS = 1.0  # and at the record (is the run terminal? a new leg?)

EXIT_CODES = """\
  0    shown (nothing, if the run wrote nothing yet); with --follow, the run ended, or
       its owner died and nobody reaped it (said on stderr, with the command that does)
  2    usage error; ID not found or ambiguous; the database cannot be opened
  3    the record is there but its output is not: pruned by li gc, its run directory
       removed, or it ran on another host
  130  interrupted (Ctrl-C) while following
  141  the reader went away (li logs ID | head)"""

DESCRIPTION = """\
What a run wrote: a command's stdout and stderr; an agent's transcript as readable text
(assistant text as written; each tool call, tool result, error, retry or warning on one
line; --raw for the provider's JSON lines) and its stderr. ID is anything li status takes:
a run (session) id, a gate run, a play (its work session), a flow invocation (each leg,
in turn), a schedule run (what it started); a unique prefix or suffix will do. With both
streams, or several runs, a line `==> NAME <==` heads each part, as tail does. Invisible
and control characters are shown escaped (\\x1b). --follow prints what is appended until
the run is terminal (another process may be running it), then exits."""


def build_parser() -> Any:
    parser = make_parser(PROG, DESCRIPTION, EXIT_CODES)
    parser.add_argument("id", metavar="ID", help="a run, play, flow or schedule run id")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--stdout", action="store_true", help="only stdout (an agent's transcript)")
    which.add_argument("--stderr", action="store_true", help="only stderr")
    parser.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the run is terminal"
    )
    parser.add_argument("--tail", metavar="N", type=int, help="only the last N lines of each")
    parser.add_argument(
        "--raw", action="store_true", help="an agent's stream as the provider wrote it (JSON)"
    )
    add_db_option(parser)
    return parser


class Target:
    """What the ID names (``kind``, ``row``) and the runs that hold its output."""

    def __init__(self, kind: str, row: dict[str, Any]) -> None:
        self.kind = kind
        self.row = row
        # several runs (a flow's legs): each part is headed by its run id
        self.many = kind == "invocation" or bool(
            kind == "schedule_run" and row.get("invocation_id")
        )

    def runs(self, store: Store) -> list[dict[str, Any]]:
        """The session rows whose stream files are this record's output, oldest first."""
        row, kind = self.row, self.kind
        if kind == "show":
            raise UsageError(
                f"show {row['id']} writes no output of its own; `li show status {row['id']}` "
                "lists its plays' and gates' runs, each one li logs ID"
            )
        if kind == "session":
            return [row]
        if kind == "invocation" or (kind == "schedule_run" and row.get("invocation_id")):
            ident = row["id"] if kind == "invocation" else row["invocation_id"]
            return [s.as_dict() for s in store.waits.invocation_sessions(ident)]
        if kind == "schedule_run" and row.get("show_id"):
            raise UsageError(
                f"schedule run {row['id']} started show {row['show_id']}: `li show status "
                f"{row['show_id']}` lists its runs, each one li logs ID"
            )
        session = store.get_entity("session", row["session_id"]) if row.get("session_id") else None
        return [session] if session is not None else []

    def refresh(self, store: Store) -> None:
        row = store.get_entity(self.kind, self.row["id"])
        if row is None:
            raise NotFoundError(
                f"{shown_kind(self.kind)} {self.row['id']} was deleted while followed"
            )
        self.row = row

    def done(self, runs: list[dict[str, Any]]) -> bool:
        """Whether nothing more will be written: the record is terminal (a play, which
        outlives its run through gates and merges: its run is)."""
        if self.kind == "play" and runs:
            return all(is_terminal("session", r.get("status")) for r in runs)
        return is_terminal(self.kind, self.row.get("status"))


def gone_reason(run: dict[str, Any]) -> str | None:
    """Why a run's output files cannot be read here, or None when they can (or will be)."""
    ident, run_dir = run["id"], run.get("run_dir")
    if run.get("pruned_at"):
        when = time.strftime("%Y-%m-%d", time.localtime(float(run["pruned_at"])))
        by = f" by {run['pruned_by']}" if run.get("pruned_by") else ""
        return (
            f"run {ident} was pruned{by} on {when} (li gc): its output files are gone; "
            f"li status {ident} shows what the record kept"
        )
    if run_dir and os.path.isdir(run_dir):
        return None
    host = run.get("owner_host")
    if run_dir and host and host != host_name():
        return f"run {ident} ran on host {host}: its output files are there ({run_dir})"
    if run_dir:
        return f"run {ident}'s run directory {run_dir} is gone, and its output files with it"
    return None  # not started yet: nothing written, and nothing lost


class Printer:
    """Lines on stdout, each part headed ``==> NAME <==`` (when headed) as it changes."""

    def __init__(self, headed: bool) -> None:
        self.headed = headed
        self.current: str | None = None
        self.printed = False

    def write(self, label: str, lines: Iterable[str]) -> None:
        text = "".join(line + "\n" for line in lines)
        if not text:
            return
        if self.headed and label != self.current:
            sys.stdout.write(f"{'' if self.current is None else chr(10)}==> {label} <==\n")
        self.current = label
        self.printed = True
        sys.stdout.write(text)


class Reader:
    """Every stream file of the target's runs, each read through its own cursor."""

    def __init__(self, target: Target, args: Any) -> None:
        self.target = target
        self.which = "stdout" if args.stdout else "stderr" if args.stderr else "all"
        self.raw = args.raw
        self.cursors: dict[tuple[str, str], tuple[str, Cursor]] = {}
        self.out = Printer(headed=self.which == "all" or target.many)

    def add_runs(self, runs: list[dict[str, Any]]) -> list[Cursor]:
        """Cursors for stream files not seen before (a new leg, a file just created)."""
        new = []
        for run in runs:
            names = pick_streams(run.get("run_dir"), self.which)
            transcripts = sum(n.endswith(TRANSCRIPT_SUFFIX) for n in names)
            for name in names:
                if (run["id"], name) in self.cursors:
                    continue
                label = stream_label(name, self.raw, transcripts)
                if self.target.many:  # a flow's leg by its name and run
                    leg = f"leg {run['flow_leg']} " if run.get("flow_leg") else ""
                    label = f"{leg}{run['id']} {label}"
                path = f"{stream_dir(run['run_dir'])}/{name}"
                cursor = Cursor(path, provider=run.get("provider"), raw=self.raw)
                self.cursors[(run["id"], name)] = (label, cursor)
                new.append(cursor)
        return new

    def first(self, tail: int | None, final: bool) -> None:
        for label, cursor in self.cursors.values():
            if tail is None:
                for batch in cursor.batches(final=final):
                    self.out.write(label, batch)
            else:
                self.out.write(label, cursor.tail(tail, final=final))

    def more(self, final: bool) -> None:
        for label, cursor in self.cursors.values():
            for batch in cursor.batches(final=final):
                self.out.write(label, batch)
        sys.stdout.flush()


def readable_runs(target: Target, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs whose files are here; those that are not are said on stderr, and when no
    run is left for a record that had some: OutputGoneError (exit 3)."""
    kept: list[dict[str, Any]] = []
    reasons: list[str] = []
    for run in runs:
        reason = gone_reason(run)
        if reason is None:
            kept.append(run)
        else:
            reasons.append(reason)
    if reasons and not kept:
        raise OutputGoneError("; ".join(reasons))
    for reason in reasons:
        sys.stderr.write(f"{PROG}: {reason}\n")
    return kept


def follow(store: Store, target: Target, reader: Reader) -> None:
    """Print what is appended until the record is terminal, then what is left."""
    last_look = time.monotonic()
    while True:
        time.sleep(POLL_SECONDS)
        if time.monotonic() - last_look < RECORD_SECONDS:
            reader.more(final=False)
            continue
        last_look = time.monotonic()
        target.refresh(store)  # the record first: a file is complete once it is terminal
        runs = target.runs(store)
        done = target.done(runs)
        reader.add_runs([r for r in runs if gone_reason(r) is None])
        dead = None if done else owner_gone(target, runs)
        reader.more(final=done or dead is not None)
        if dead is not None:  # nobody will end the record: following would never end
            sys.stderr.write(f"{PROG}: stopped following: {dead}\n")
        if done or dead is not None:
            return


def owner_gone(target: Target, runs: list[dict[str, Any]]) -> str | None:
    """Why no process will write more, when the owners of what is followed are all judged
    dead (``li status``'s judgment, with the command that reaps them); else None."""
    now = time.time()
    if target.kind in ("session", "invocation"):
        owned = [(target.kind, target.row)]
    else:
        owned = [("session", r) for r in runs if not is_terminal("session", r.get("status"))]
    found = [liveness(kind, row, now) for kind, row in owned]
    if not found or not all(f and f.get("verdict") == "dead" for f in found):
        return None
    first = found[0] or {}
    return f"{first.get('summary')}; {first.get('advice') or first.get('reap')}"


def show_logs(store: Store, args: Any) -> int:
    kind, row = resolve_record(store, args.id)
    target = Target(kind, row)
    runs = readable_runs(target, target.runs(store))
    reader = Reader(target, args)
    reader.add_runs(runs)
    done = target.done(runs)
    reader.first(args.tail, final=done)
    sys.stdout.flush()
    if args.follow and not done:
        follow(store, target, reader)
    elif not reader.out.printed:  # said on stderr: stdout stays the output alone
        where = {"stdout": " to stdout", "stderr": " to stderr", "all": ""}[reader.which]
        said = "has started no run" if not runs else f"wrote nothing{where}"
        sys.stderr.write(f"{PROG}: {shown_kind(kind)} {row['id']} {said}{'' if done else ' yet'}\n")
    return 0


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    if args.tail is not None and args.tail < 0:
        raise UsageError(f"--tail must be 0 or more, got {args.tail}")
    url = resolve_db_url(args.db)
    deliver_pending(PROG, url)
    try:
        store = open_store(url, readonly=True)
    except DatabaseMissingError as exc:
        raise NotFoundError(f"{exc}; so there is no record {args.id!r}") from exc
    try:
        return show_logs(store, args)
    finally:
        store.close()
