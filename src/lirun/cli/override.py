"""``li override ENTITY ID``: the audited repair of a record's status (design.md D5).

The write goes through ``update_status`` with ``override=True``: it may leave a terminal
status, and it records a ``status_transition_override`` admin event naming the actor and
the justification in the same transaction as the status and history rows. The id is
exact, or a prefix or suffix (a run id's random part) that names exactly one record of
that entity type; an ambiguous one is refused with the candidates, so a repair never
lands on a record picked by chance. The reason must fit the new status (``reasons``).
"""

from __future__ import annotations

from typing import Any

from lirun.cli.common import add_db_option, make_parser, print_json, warn
from lirun.errors import NotFoundError, UsageError
from lirun.lifecycle import ENTITY_TYPES, canonical_entity_type
from lirun.settings import Settings
from lirun.store import open_existing

EXIT_CODES = """\
  0  the status was changed (and the repair audited)
  1  the record changed concurrently; nothing was written, look again and retry
  2  usage error: unknown entity, status or reason, a reason that does not fit the new
     status (the error lists the codes that do), a missing actor or justification, no
     such record, an ambiguous id, or the database cannot be opened"""

DESCRIPTION = """\
Set a record's status deliberately, even away from a terminal status, with an audit
trail: the actor and justification are stored in admin_events and the history row has
source=admin. Example:

  li override session 20260709T120000-abc123 --to completed \\
      --reason run.completed.admin --actor alice --justification "verified by hand"

ID is the full id, or a prefix or the random suffix (2b5dd3) when only one record of
ENTITY matches it. The reason must fit the new status: run.completed.* for completed,
run.failed.* (or session.orphaned.no_process, session.stale.no_heartbeat) for failed,
run.cancelled.sigint for aborted, and so on.

ENTITY is one of: """ + ", ".join(sorted(ENTITY_TYPES))


def build_parser() -> Any:
    parser = make_parser("li override", DESCRIPTION, EXIT_CODES)
    parser.add_argument("entity", metavar="ENTITY", help="entity type, e.g. session")
    parser.add_argument("id", metavar="ID", help="the record's id (or its unique prefix/suffix)")
    parser.add_argument("--to", required=True, metavar="STATUS", help="the new status")
    parser.add_argument("--reason", required=True, metavar="CODE", help="a registered reason")
    parser.add_argument("--actor", required=True, metavar="A", help="who is repairing")
    parser.add_argument("--justification", required=True, metavar="J", help="why (audited)")
    parser.add_argument("--summary", default="", metavar="S", help="reason summary text")
    add_db_option(parser)
    parser.add_argument("--json", action="store_true", help="the updated record as JSON")
    return parser


def _required_text(value: str, option: str) -> str:
    if not value.strip():
        raise UsageError(f"{option} must not be empty: an override is audited by who and why")
    return value.strip()


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    entity = canonical_entity_type(args.entity)
    actor = _required_text(args.actor, "--actor")
    justification = _required_text(args.justification, "--justification")
    store = open_existing(args.db, f"{entity} with id {args.id!r}")  # none: nothing created
    try:
        ident = store.resolve_id(entity, args.id)
        before = store.get_entity(entity, ident)
        if before is None:
            raise NotFoundError(f"no {entity} with id {ident!r}")
        applied = store.update_status(
            entity,
            ident,
            new_status=args.to,
            reason_code=args.reason,
            reason_summary=args.summary,
            source="admin",
            actor=actor,
            expected_updated_at=before["updated_at"],
            override=True,
            override_actor=actor,
            override_justification=justification,
        )
        after = store.get_entity(entity, ident)
    finally:
        store.close()
    if not applied or after is None:
        warn(
            "li override",
            f"{entity} {ident} changed while overriding it; nothing was "
            "written: look at it again (li status) and retry",
        )
        return 1
    _report(args.json, entity, before["status"], after)
    return 0


def _report(as_json: bool, entity: str, previous: str | None, row: dict[str, Any]) -> None:
    if as_json:
        print_json(
            {"entity_type": entity, "previous_status": previous, **row}, schema="lirun.override/1"
        )
        return
    print(
        f"{entity} {row['id']}: {previous} -> {row['status']} "
        f"(reason {row['status_reason_code']}; audited as status_transition_override)"
    )
