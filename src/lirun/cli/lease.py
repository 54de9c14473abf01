"""``li lease check``: is the lease that started this work still the current one?"""

from __future__ import annotations

import sys

from lirun.cli.common import add_db_option, make_parser
from lirun.errors import DatabaseError
from lirun.schedules import fence_token
from lirun.settings import FENCE_ENV, Settings
from lirun.store import open_store

EXIT_CODES = f"""\
  0  current: the run is running under this fence's epoch and its lease has not
     expired by the database's clock
  1  not current: taken over (another worker ended the run once its lease lapsed, or
     it runs under a newer epoch or another worker's claim), lapsed (expired, not
     renewed), the run ended, or no such run; commit nothing
  2  usage error: no fence ({FENCE_ENV} unset: a plain li run has none) or not a fence
  3  cannot tell: the database could not be reached or read (never 0 then)"""

DESCRIPTION = f"""\
Work a worker runs (li submit, li schedule, and the legs and plays of a flow or show it
runs) has {FENCE_ENV} in its environment: the fence of the lease its run was claimed
under. Call li lease check before each side effect and commit only on exit 0: a copy of
the work that outlived its lease (its whole worker frozen, guard and all, while another
worker took the run over) is told 1 and must stop.

An exit 0 says the lease was current when the database answered; no other worker can
take the run over until that lease expires and then stays expired for half a lease, so
commit soon after the check (well within a quarter of the lease) or check again.

  li lease check && commit-the-side-effect
  li lease check --fence RUN_ID:EPOCH:WORKER_ID --db postgresql://host/db"""


def main(argv: list[str], settings: Settings) -> int:
    parser = make_parser("li lease", DESCRIPTION, EXIT_CODES)
    parser.usage = "li lease check [--fence TOKEN] [--quiet] [--db URL]"
    parser.add_argument("action", choices=["check"], help="check: is the fence current")
    parser.add_argument(
        "--fence", metavar="TOKEN", help=f"the fence to check (default: ${FENCE_ENV})"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing; the exit code says")
    add_db_option(parser)
    args = parser.parse_args(argv)
    fence = fence_token.parse(args.fence if args.fence is not None else settings.fence)
    try:
        store = open_store(args.db or settings.db_url, readonly=True)
    except DatabaseError as exc:
        verdict = fence_token.cannot_tell(exc)
    else:
        try:
            verdict = fence_token.check(store, fence)
        finally:
            store.close()
    if not args.quiet:
        stream = sys.stdout if verdict.code != fence_token.CANNOT_TELL else sys.stderr
        stream.write(("" if stream is sys.stdout else "li lease: ") + verdict.line + "\n")
    return verdict.code
