"""``Client.team(name)``: a handle on one team, its messages and members, as ``li team
send``, ``li team inbox``, ``li team log`` and ``li team show`` reach them (docs/teams.md).

The handle holds the team's id, resolved once when it is made (NotFoundError for a name
that names no team, AmbiguousIdError for an id prefix that names several); each method is
one store call through the client's open store, checked by the same rules (``teams/rules.py``)
under the team row's lock: a sender or recipient that is not a member, an empty or
oversized message (UsageError), an archived team (TeamArchivedError).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lirun.client.values import as_json
from lirun.errors import NotFoundError, UsageError
from lirun.store.rows import InboxMessageRow, TeamMessageRow
from lirun.teams.follow import InboxQuery, read_once
from lirun.teams.message import message_json, message_line

if TYPE_CHECKING:
    from lirun.client.sync import Client

__all__ = ["Member", "Message", "Team"]


@dataclass(frozen=True, slots=True)
class Message:
    """One team message: ``sender`` to ``recipient`` (a member, or ``all``), its ``text``
    as sent (agent output: escape it before a terminal shows it, as ``line`` does), the
    run that sent it from inside a supervised execution, and ``read_at`` for a message
    read from an inbox (None in a conversation read with ``log``)."""

    id: str
    team_id: str
    seq: int
    sender: str
    recipient: str
    text: str
    run_id: str | None
    created_at: float
    read_at: float | None
    _json: Mapping[str, Any] = field(repr=False, compare=False)
    _line: str = field(repr=False, compare=False)

    @classmethod
    def from_row(cls, row: TeamMessageRow | InboxMessageRow) -> Message:
        return cls(
            id=row.id,
            team_id=row.team_id,
            seq=int(row.seq),
            sender=row.sender,
            recipient=row.recipient,
            text=row.body,
            run_id=row.run_id,
            created_at=float(row.created_at),
            read_at=row.read_at if isinstance(row, InboxMessageRow) else None,
            _json=message_json(row),
            _line=message_line(row),
        )

    @property
    def line(self) -> str:
        """The one escaped line ``li team inbox`` prints for it."""
        return self._line

    def as_dict(self) -> dict[str, Any]:
        """The object ``li team inbox --json`` prints for it (``lirun.team_message/1``)."""
        return as_json({"schema": "lirun.team_message/1", **self._json})


@dataclass(frozen=True, slots=True)
class Member:
    """A member of a team: the messages it has not read and has sent, when it last sent,
    and the run it joined as (or that sent its newest message)."""

    name: str
    unread: int
    sent: int
    last_sent_at: float | None
    run_id: str | None


class Team:
    """One team, by id and name: ``send``, ``inbox``, ``log``, ``members``."""

    def __init__(self, client: Client, team: str) -> None:
        self._client = client
        self.id: str = client.store.teams.resolve(team)
        row = client.store.teams.get(self.id)
        if row is None:  # archived, never deleted; gc would have to run meanwhile
            raise NotFoundError(f"no team with id {self.id!r}")
        self.name: str = row.name

    def __repr__(self) -> str:
        return f"Team(id={self.id!r}, name={self.name!r})"

    @property
    def status(self) -> str:
        """``active``, or ``archived`` (it takes no new messages), read now."""
        row = self._client.store.teams.get(self.id)
        return "archived" if row is None else row.status

    def send(self, to: str, text: str, *, sender: str | None = None) -> Message:
        """Send ``text`` to the member ``to`` (or ``all``) as ``sender`` (default: the
        client's ``LIRUN_MEMBER``, which a team's agent has); the stored message."""
        row = self._client.store.teams.send_message(
            self.id,
            sender=self._member(sender, "sender"),
            recipient=to,
            text=text,
            run_id=self._client.settings.parent_run_id,
        )
        return Message.from_row(row)

    def inbox(
        self, member: str | None = None, *, unread: bool = False, since: str | None = None
    ) -> list[Message]:
        """What ``member`` (default ``LIRUN_MEMBER``) received, oldest first, after the
        message ``since`` (an id): ``unread`` only those it has not read. Reading marks
        them read."""
        return self._read(self._member(member, "member"), unread, since)

    def log(self, *, since: str | None = None) -> list[Message]:
        """The whole conversation after the message ``since``, oldest first; marks
        nothing read."""
        return self._read("", False, since)

    def members(self) -> list[Member]:
        """The members in the order they joined."""
        return [
            Member(
                name=m.member,
                unread=int(m.unread),
                sent=int(m.sent),
                last_sent_at=m.last_sent_at,
                run_id=m.run_id,
            )
            for m in self._client.store.teams.member_summary(self.id)
        ]

    def _read(self, member: str, unread: bool, since: str | None) -> list[Message]:
        store = self._client.store
        after = store.teams.message_seq(self.id, since) if since else 0
        rows = read_once(store, InboxQuery(self.id, member, after, unread), after)
        return [Message.from_row(row) for row in rows]

    def _member(self, given: str | None, what: str) -> str:
        member = self._client.settings.with_flags(member=given).member
        if not member:
            raise UsageError(f"give the {what} (or set LIRUN_MEMBER)")
        return member
