"""``li team``: teams, the persistent inbox agents working side by side share (docs/teams.md).

Each subcommand parses, makes one call and renders: ``send``, ``inbox`` and ``log`` call
``lirun.Client.team`` (``client/team.py``), ``--follow`` and the others the store.
Messages are arbitrary agent output: on a terminal each is one escaped line
(``teams/message.py``); ``--json`` gives them as they are, one JSON object per line.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from lirun.cli.common import add_db_option, make_parser, print_json, print_table
from lirun.client import Client, Message
from lirun.errors import DatabaseMissingError, NotFoundError, UsageError
from lirun.settings import Settings
from lirun.signals import SignalTrap
from lirun.store import Store
from lirun.store.rows import TeamRow
from lirun.teams.follow import InboxQuery, follow
from lirun.teams.message import escape_line

PROG = "li team"
EXIT_CODES = """\
  0    done (inbox/log: the messages were printed, none too; --follow: stopped by
       SIGINT/SIGTERM, or the team was archived)
  2    usage error: an invalid team or member name; an active team of that name already
       exists; TEAM not found or ambiguous; a sender or recipient that is not a member;
       an empty message or one over 16384 bytes of UTF-8 (refused, not cut); the team is
       archived (it takes no new messages or members); the database cannot be opened"""

DESCRIPTION = """\
A team is a persistent inbox that agents working in parallel use to tell each other what
they are doing; a person can read it afterwards and join while it happens. Every message
is a record: sender, recipient (a member or all), text, time, read receipts, and the run
that sent it when sent from inside a supervised execution.

subcommands:
  create NAME [--member M]...            make a team (prints its id)
  join TEAM M...                         add members
  list [--status S]                      the teams, active first
  show TEAM                              members, unread and sent counts, last activity
  send TEAM [--from M] [--to M|all] TEXT send a message (TEXT - reads stdin)
  inbox TEAM [--as M] [--unread] [--since ID] [--follow]
                                         what M received; reading marks it read
  log TEAM [--since ID] [--follow]       the whole conversation (marks nothing read)
  archive TEAM --actor A --justification J
                                         end the team: it takes no new messages

TEAM is a team id (or a unique prefix of one) or an active team's name. --from and --as
default to $LIRUN_MEMBER, which agents of a flow or show with `team:` have, as they
have $LIRUN_TEAM."""

SUBCOMMANDS = ("create", "join", "list", "show", "send", "inbox", "log", "archive")


def _sub(sub: Any, parser: Any, name: str, helptext: str) -> Any:
    child = sub.add_parser(
        name, help=helptext, description=helptext, epilog=parser.epilog,
        formatter_class=parser.formatter_class,
    )  # fmt: skip
    add_db_option(child)
    return child


def build_parser() -> Any:
    parser = make_parser(PROG, DESCRIPTION, EXIT_CODES)
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{" + ",".join(SUBCOMMANDS) + "}"
    )
    create = _sub(sub, parser, "create", "make a team; prints its id")
    create.add_argument("name", metavar="NAME", help="1-64 of A-Z a-z 0-9 . _ -")
    create.add_argument("--member", action="append", default=[], metavar="M",
                        help="a member (repeat for more)")  # fmt: skip
    create.add_argument("--json", action="store_true", help="the team as JSON")
    join = _sub(sub, parser, "join", "add members to an active team")
    join.add_argument("team", metavar="TEAM")
    join.add_argument("members", metavar="M", nargs="+")
    listing = _sub(sub, parser, "list", "the teams, active first, then the newest")
    listing.add_argument("--status", choices=("active", "archived"), help="only this status")
    listing.add_argument("--json", action="store_true", help="one JSON array")
    show = _sub(sub, parser, "show", "one team: members, message counts, last activity")
    show.add_argument("team", metavar="TEAM")
    show.add_argument("--json", action="store_true", help="JSON on stdout")
    send = _sub(sub, parser, "send", "send a message")
    send.add_argument("team", metavar="TEAM")
    send.add_argument("text", metavar="TEXT", help="the message; - reads it from stdin")
    send.add_argument("--from", dest="sender", metavar="M", help="default: $LIRUN_MEMBER")
    send.add_argument("--to", dest="recipient", default="all", metavar="M|all",
                      help="a member, or all (default)")  # fmt: skip
    send.add_argument("--json", action="store_true", help="the message as JSON")
    for name, helptext in (
        ("inbox", "what a member received, oldest first; reading marks it read"),
        ("log", "the whole conversation, oldest first; marks nothing read"),
    ):
        child = _sub(sub, parser, name, helptext)
        child.add_argument("team", metavar="TEAM")
        if name == "inbox":
            child.add_argument("--as", dest="member", metavar="M", help="default: $LIRUN_MEMBER")
            child.add_argument("--unread", action="store_true", help="only messages not read yet")
        child.add_argument("--since", metavar="ID", help="only messages after this one")
        child.add_argument("--follow", action="store_true",
                           help="keep printing messages as they arrive (until SIGINT/SIGTERM "
                           "or the team is archived)")  # fmt: skip
        child.add_argument("--json", action="store_true", help="one JSON object per message")
    archive = _sub(sub, parser, "archive", "archive a team (audited; no new messages after)")
    archive.add_argument("team", metavar="TEAM")
    archive.add_argument("--actor", required=True, metavar="A", help="who archives it")
    archive.add_argument("--justification", required=True, metavar="J", help="why")
    archive.add_argument("--json", action="store_true", help="the team as JSON")
    return parser


def main(argv: list[str], settings: Settings) -> int:
    args = build_parser().parse_args(argv)
    _refuse_undecodable(args)
    # Only create makes the database; the others find a team or say there is none.
    with Client(args.db, settings=settings, create=args.command == "create") as client:
        try:
            client.store  # noqa: B018 - opened here, so a missing database is said once
        except DatabaseMissingError as exc:
            raise NotFoundError(f"no team (the database does not exist yet): {exc}") from None
        return int(HANDLERS[args.command](client, args, settings))


def _refuse_undecodable(args: Any) -> None:
    """Bytes that are no UTF-8 reach argv as lone surrogates: one line, not a traceback
    from the driver (a message's text is checked with the message)."""
    for name, value in vars(args).items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, str) and name != "text":
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise UsageError(f"the {name} {item!r} is not UTF-8 text") from None


def _member(given: str | None, option: str, settings: Settings) -> str:
    member = settings.with_flags(member=given).member
    if not member:
        raise UsageError(f"give {option} M (or set LIRUN_MEMBER)")
    return member


def _create(client: Client, args: argparse.Namespace, settings: Settings) -> int:
    store = client.store
    team = store.teams.create_with_members(args.name, args.member)
    if args.json:
        members = [m.member for m in store.teams.members(team.id)]
        print_json({**team.as_dict(), "members": members}, schema="lirun.team/1")
    else:
        print(team.id)
    return 0


def _join(client: Client, args: argparse.Namespace, settings: Settings) -> int:
    store = client.store
    team_id = store.teams.resolve(args.team)
    added = store.teams.add_members(team_id, args.members)
    for name in args.members:
        state = "joined" if name in added else "already a member"
        print(f"{name}: {state}")
    return 0


def _list(client: Client, args: argparse.Namespace, settings: Settings) -> int:
    store = client.store
    teams = store.teams.list_all(status=args.status)
    if args.json:
        print_json([t.as_dict() for t in teams], schema="lirun.team/1")
        return 0
    rows = [(t.id[:8], t.status, t.message_count, _when(t.last_message_at), t.name) for t in teams]
    print_table(("ID", "STATUS", "MESSAGES", "LAST", "NAME"), rows)
    return 0


def _team(store: Store, team_id: str) -> TeamRow:
    team = store.teams.get(team_id)
    if team is None:  # teams are archived, never deleted; gc would have to run meanwhile
        raise NotFoundError(f"no team with id {team_id!r}")
    return team


def _show(client: Client, args: argparse.Namespace, settings: Settings) -> int:
    store = client.store
    team_id = store.teams.resolve(args.team)
    team = _team(store, team_id)
    members = store.teams.member_summary(team_id)
    history = store.list_transitions("team", team_id)
    if args.json:
        detail = {
            **team.as_dict(),
            "members": [m.as_dict() for m in members],
            "history": [t.as_dict() for t in history],
        }
        print_json(detail, schema="lirun.team_detail/1")
        return 0
    print(f"team {team.name} ({team_id}): {team.status}, {team.message_count} "
          f"messages, last {_when(team.last_message_at)}")  # fmt: skip
    if team.owner_type:
        print(f"owner: {team.owner_type} {team.owner_id}")
    rows = [
        (escape_line(m.member), m.unread, m.sent, _when(m.last_sent_at), m.run_id or "")
        for m in members
    ]
    print_table(("MEMBER", "UNREAD", "SENT", "LAST SENT", "RUN"), rows)
    for item in history:
        actor = f" by {escape_line(item.actor)}" if item.actor else ""
        print(f"history: {_when(item.created_at)} {item.status} {item.reason_code}{actor}")
    return 0


def _send(client: Client, args: argparse.Namespace, settings: Settings) -> int:
    try:
        text = sys.stdin.read() if args.text == "-" else args.text
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the message from stdin: {exc}") from None
    sender = _member(args.sender, "--from", settings)
    message = client.team(args.team).send(args.recipient, text, sender=sender)
    if args.json:
        print_json(message.as_dict(), schema="lirun.team_message/1")
    else:
        print(message.id)
    return 0


def _read(client: Client, args: argparse.Namespace, settings: Settings) -> int:
    member = _member(args.member, "--as", settings) if args.command == "inbox" else ""
    team = client.team(args.team)
    if not args.follow:
        if member:
            found = team.inbox(member, unread=args.unread, since=args.since)
        else:
            found = team.log(since=args.since)
        _emit(found, as_json=args.json)
        return 0
    store = client.store
    since = store.teams.message_seq(team.id, args.since) if args.since else 0
    query = InboxQuery(team.id, member, since, getattr(args, "unread", False))
    with SignalTrap((signal.SIGINT, signal.SIGTERM)) as trap:
        stop = _Stop(trap)
        for rows in follow(store, query, stop):
            _emit([Message.from_row(row) for row in rows], as_json=args.json)
    return 0


def _emit(messages: Sequence[Message], *, as_json: bool) -> None:
    for message in messages:
        if as_json:
            print_json(message.as_dict(), schema="lirun.team_message/1")
        else:
            sys.stdout.write(message.line + "\n")
    sys.stdout.flush()


class _Stop:
    """True once a signal came; ``fileno()`` lets the PostgreSQL waker sleep on it."""

    def __init__(self, trap: Any) -> None:
        self._trap = trap

    def __call__(self) -> bool:
        return self._trap.received is not None

    def fileno(self) -> int:
        return int(self._trap.fileno())


def _archive(client: Client, args: argparse.Namespace, settings: Settings) -> int:
    store = client.store
    team_id = store.teams.resolve(args.team)
    applied = store.update_status(
        "team",
        team_id,
        new_status="archived",
        reason_code="team.archived.operator",
        reason_summary=args.justification,
        source="admin",
        actor=args.actor,
        expected_statuses=["active"],
    )
    team = _team(store, team_id)
    if not applied:
        raise UsageError(f"team {team.name} ({team_id}) is already {team.status}")
    if args.json:
        print_json(team.as_dict(), schema="lirun.team/1")
    else:
        print(f"team {team.name} ({team_id}) archived")
    return 0


def _when(stamp: Any) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stamp)))


HANDLERS = {
    "create": _create,
    "join": _join,
    "list": _list,
    "show": _show,
    "send": _send,
    "inbox": _read,
    "log": _read,
    "archive": _archive,
}
