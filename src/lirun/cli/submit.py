"""``li submit -- ACTION ...``: queue one ad-hoc run for the workers; print its id.

One call of ``lirun.Client.submit``, rendered (with a warning when no worker is live)."""

from __future__ import annotations

from lirun.cli.common import add_db_option, make_parser, print_json, warn
from lirun.client import Client
from lirun.errors import UsageError
from lirun.schedules.submit import live_worker_count, worker_command
from lirun.settings import Settings

EXIT_CODES = """\
  0    queued (with --key: or queued before under that key); its id is on stdout
       (li wait ID: exit 0 when it completed). Once the run is stored nothing turns
       this into a failure: a worker that could not be told at once is a warning on
       stderr, and a worker finds the run within seconds anyway; with no worker live,
       one line on stderr says so and names the li worker command that starts one
       (the run stays queued until a worker claims it or its start deadline passes)
  2    usage error: no or an invalid ACTION (said on stderr with an example), a bad
       --key, or a --key given before to another action; or the database could not be
       opened or written: nothing was queued (if the link broke during the commit
       itself the run may be stored: a retry with the same --key tells)"""

DESCRIPTION = """\
Queue one run of ACTION (a schedule run with no schedule) and print its id; a worker
(li worker) runs it. The ACTION is that of li schedule add:
  agent PROVIDER[/MODEL] PROMPT [options] [-- PROVIDER_OPTIONS]
  run [--cwd DIR] [--timeout S] [--] CMD ...
  flow FILE [--cwd DIR]      show FILE [--cwd DIR]

--start-deadline, --retries and --notify are those of li schedule add, for this run.

--key KEY makes retrying safe: the run is stored with KEY (unique across schedule runs,
kept for good), and a submit with a KEY already stored queues nothing and prints that
run's id (saying so on stderr), also when two such submits race. The same KEY with
another ACTION or other options is refused (exit 2). KEY: 1 to 200 printable characters.

  id=$(li submit --key "nightly-$(date +%F)" -- run make nightly) && li wait "$id"
"""


def main(argv: list[str], settings: Settings) -> int:
    mine, words = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, None)
    )
    parser = make_parser("li submit", DESCRIPTION, EXIT_CODES)
    parser.usage = (
        "li submit [--key KEY] [--start-deadline DUR] [--retries N] [--notify CMD] [--db URL] "
        "[--json] -- ACTION ..."
    )
    parser.add_argument("--json", action="store_true", help="the queued run as JSON")
    parser.add_argument(
        "--key", metavar="KEY",
        help="idempotency key: a second submit with KEY returns the first run's id",
    )  # fmt: skip
    parser.add_argument(
        "--start-deadline", metavar="DURATION",
        help="not started by then: failed, schedule.failed.start_deadline (default 1h)",
    )  # fmt: skip
    parser.add_argument(
        "--retries", metavar="N", help="new attempts when the record marks it retryable (0)"
    )
    parser.add_argument(
        "--notify", metavar="CMD", help="a shell command run when it ends (li schedule add)"
    )
    add_db_option(parser)
    args = parser.parse_args(mine)
    if words is None:
        raise UsageError("no action: give it after --, e.g. li submit -- run make nightly")

    with Client(args.db, settings=settings) as client:
        queued = client.submit(
            words,
            key=args.key,
            start_deadline=args.start_deadline,
            retries=args.retries,
            notify=args.notify,
        )
    if not queued.created:
        warn(
            "li submit",
            f"run {queued.run_id} ({queued.status}) was submitted before with --key "
            f"{args.key!r}; nothing new was queued",
        )
    elif live_worker_count(args.db) == 0:
        warn(
            "li submit",
            f"run {queued.run_id} is queued, but no worker is live to run it: start one with "
            f"{worker_command(queued.as_dict()['action_json'])}",
        )
    print_json(queued.as_dict(), schema="lirun.schedule_run/1") if args.json else print(
        queued.run_id
    )
    return 0
