"""``li worker``: fire due schedules and run queued work; ``li worker status``."""

from __future__ import annotations

import os
import time

from lirun.cli.common import add_db_option, adopt_orphans, make_parser, print_json, print_table
from lirun.errors import UsageError
from lirun.paths import resolve_db_url
from lirun.schedules.durations import MAX_SECONDS, seconds_or_duration
from lirun.schedules.worker import Worker, WorkerOptions, live_workers
from lirun.settings import Settings
from lirun.store import open_store

EXIT_CODES = """\
  0    stopped by a signal after its running work ended (or was cancelled at the end
       of the grace period); status: listed
  2    usage error (an invalid --concurrency, --grace, --lease or --allow-root), or the
       database could not be opened"""

DESCRIPTION = """\
Fire due schedules (li schedule) and run queued schedule runs (li submit, li schedule
fire), at most --concurrency at once, until SIGTERM. One line per fire and per run end
on stderr.

Each run is claimed by compare-and-set (queued → running), so several workers on one
database never run a run twice; on PostgreSQL runs are dispatched through procrastinate
when it is installed (the postgres extra). A worker holds a lease on each run it runs
(--lease, default 60s, renewed by its heartbeat): a run whose worker was killed or cut
off becomes failed (schedule.failed.lease_lapsed) once the lease lapses, and a worker
that cannot renew its lease stops its runs.

SIGTERM: claim nothing more, let running work finish for --grace, then cancel it
(schedule.cancelled.worker_stopped); a second signal cancels at once.

Anyone who can write to the database can make workers run commands: give --allow-root
DIR (repeatable) to refuse actions whose cwd is outside those directories
(schedule.failed.cwd_not_allowed).

  li worker --concurrency 4 --allow-root ~/src
  li worker status --json"""


# A lease longer than a day would leave a killed worker's runs unclaimed for as long.
MAX_LEASE_SECONDS = 86400


def _duration(text: str, what: str, *, low: float = 0.0, high: float | None = None) -> float:
    return seconds_or_duration(text, what, low=low, high=MAX_SECONDS if high is None else high)


def _status(argv: list[str]) -> int:
    parser = make_parser(
        "li worker status",
        "The live workers (heartbeat within their lease): host, pid, heartbeat age, "
        "the schedule runs each is running.",
        "  0    listed (also when none is live)\n  2    usage error, or no database",
    )
    parser.add_argument("--json", action="store_true", help="one JSON array")
    add_db_option(parser)
    args = parser.parse_args(argv)

    store = open_store(args.db, readonly=True)
    try:
        workers = live_workers(store, time.time())
    finally:
        store.close()
    if args.json:
        print_json(
            [
                {k: w.as_dict()[k] for k in ("id", "host", "pid", "started_at", "heartbeat_age",
                                             "concurrency", "transport", "running")}
                for w in workers
            ],
            schema="lirun.worker/1",
        )  # fmt: skip
        return 0
    if not workers:
        print("no live worker (li worker starts one)")
        return 0

    rows = [
        (
            w.worker.id,
            w.worker.host,
            w.worker.pid,
            f"{w.heartbeat_age:.1f}s ago",
            ",".join(w.worker.running) or "-",
        )
        for w in workers
    ]
    print_table(("WORKER", "HOST", "PID", "HEARTBEAT", "RUNNING"), rows)
    return 0


def main(argv: list[str], settings: Settings) -> int:
    if argv[:1] == ["status"]:
        return _status(argv[1:])
    parser = make_parser("li worker", DESCRIPTION, EXIT_CODES)
    parser.usage = (
        "li worker [--concurrency N] [--grace DUR] [--allow-root DIR]... [--lease DUR] "
        "[--db URL]\n       li worker status [--json] [--db URL]"
    )
    parser.add_argument("--concurrency", type=int, default=1, metavar="N", help="default 1")
    parser.add_argument(
        "--grace", default="30s", metavar="DUR", help="after SIGTERM, before cancelling (30s)"
    )
    parser.add_argument(
        "--allow-root", action="append", default=[], metavar="DIR",
        help="run only actions whose cwd is inside DIR (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--lease", default="60s", metavar="DUR", help="run lease, renewed every quarter (60s)"
    )
    add_db_option(parser)
    args = parser.parse_args(argv)
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, not {args.concurrency}")
    roots = []
    for root in args.allow_root:
        path = os.path.abspath(os.path.expanduser(root))
        if not os.path.isdir(path):
            raise UsageError(f"--allow-root {root!r}: {path} is not a directory")
        roots.append(path)
    lease = _duration(args.lease, "--lease", low=1, high=MAX_LEASE_SECONDS)

    options = WorkerOptions(
        db_url=resolve_db_url(args.db),
        concurrency=args.concurrency,
        grace=_duration(args.grace, "--grace"),
        allow_roots=tuple(roots),
        lease_seconds=lease,
        settings=settings.with_flags(db_url=args.db),  # every run's, li's with --db over them
    )

    adopt_orphans()
    return Worker(options).run()
