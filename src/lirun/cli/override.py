"""``li override ENTITY ID``: the audited repair of a record's status (design.md D5).

One call of ``lirun.Client.override`` (``client/override.py``), rendered. The write goes
through ``update_status`` with ``override=True``: it may leave a terminal
status, and it records a ``status_transition_override`` admin event naming the actor and
the justification in the same transaction as the status and history rows. The id is
exact, or a prefix or suffix (a run id's random part) that names exactly one record of
that entity type; an ambiguous one is refused with the candidates, so a repair never
lands on a record picked by chance. The reason must fit the new status (``reasons``).
"""

from __future__ import annotations

from typing import Any

from lirun.cli.common import add_db_option, make_parser, print_json, warn
from lirun.client import Client, Overridden
from lirun.client.override import required_text
from lirun.errors import DatabaseMissingError, NotFoundError, RecordChangedError
from lirun.lifecycle import ENTITY_TYPES, canonical_entity_type
from lirun.settings import Settings

EXIT_CODES = """\
  0  the status was changed (and the repair audited)
  1  the record changed concurrently; nothing was written, look again and retry
  2  usage error: unknown entity, status or reason, a reason that does not fit the new
     status (the error lists the codes that do), a missing actor or justification, no
     such record, an ambiguous id, a run or flow invocation that still runs (its
     owner records how it ends: li wait, or li reap if the owner is gone), or the
     database cannot be opened"""

DESCRIPTION = """\
Set a record's status deliberately, even away from a terminal status, with an audit
trail: the actor and justification are stored in admin_events and the history row has
source=admin. Example:

  li override run 20260709T120000-abc123 --to completed \\
      --reason run.completed.admin --actor alice --justification "verified by hand"

ID is the full id, or a prefix or the random suffix (2b5dd3) when only one record of
ENTITY matches it. The reason must fit the new status: run.completed.* for completed,
run.failed.* (or session.orphaned.no_process, session.stale.no_heartbeat) for failed,
run.cancelled.sigint for aborted, and so on.

ENTITY is one of: run (stored as session, the older word, also accepted), """ + ", ".join(
    sorted(ENTITY_TYPES - {"session"})
)


def build_parser() -> Any:
    parser = make_parser("li override", DESCRIPTION, EXIT_CODES)
    parser.add_argument("entity", metavar="ENTITY", help="entity type, e.g. run")
    parser.add_argument("id", metavar="ID", help="the record's id (or its unique prefix/suffix)")
    parser.add_argument("--to", required=True, metavar="STATUS", help="the new status")
    parser.add_argument("--reason", required=True, metavar="CODE", help="a registered reason")
    parser.add_argument("--actor", required=True, metavar="A", help="who is repairing")
    parser.add_argument("--justification", required=True, metavar="J", help="why (audited)")
    parser.add_argument("--summary", default="", metavar="S", help="reason summary text")
    add_db_option(parser)
    parser.add_argument("--json", action="store_true", help="the updated record as JSON")
    return parser


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    entity = canonical_entity_type(args.entity)
    actor = required_text(args.actor, "--actor")
    justification = required_text(args.justification, "--justification")
    # create=False: with no database there is no record to repair, and none is made.
    with Client(args.db, settings=settings, create=False) as client:
        try:
            done = client.override(
                args.id,
                args.to,
                reason=args.reason,
                justification=justification,
                actor=actor,
                summary=args.summary,
                entity=entity,
            )
        except DatabaseMissingError as exc:
            raise NotFoundError(f"no {entity} with id {args.id!r}: {exc}") from None
        except RecordChangedError as exc:
            warn("li override", str(exc))
            return exc.exit_code
    _report(args.json, done)
    return 0


def _report(as_json: bool, done: Overridden) -> None:
    if as_json:
        print_json(done.as_dict(), schema="lirun.override/1")
        return
    print(
        f"{done.entity} {done.id}: {done.previous_status} -> {done.status} "
        f"(reason {done.reason}; audited as status_transition_override)"
    )
