"""The store's rows for teams, their members and their messages (see
``lirun.store.rows``)."""

from __future__ import annotations

from collections.abc import Mapping

from lirun.hints import Any
from lirun.store.rows.base import TypedRow

__all__ = [
    "InboxMessageRow",
    "RunMembershipRow",
    "TeamMemberRow",
    "TeamMemberSummaryRow",
    "TeamMessageRow",
    "TeamRow",
]


class TeamRow(TypedRow):
    """A ``teams`` row: a team's name, status, owner (the show or flow invocation that
    made it, if any) and its message count."""

    id: str
    name: str
    archived_at: float | None
    status: str
    status_reason_code: str | None
    status_reason_summary: str | None
    status_evidence_refs: Any
    created_at: float
    updated_at: float
    owner_type: str | None
    owner_id: str | None
    message_count: int
    last_message_at: float | None


class TeamMemberRow(TypedRow):
    """A member of a team (``store.teams.members``): its name, when it joined, the run it
    joined as (None for a member added by hand)."""

    member: str
    joined_at: float
    run_id: str | None


class TeamMemberSummaryRow(TypedRow):
    """A member with what it has received unread, what it has sent and when it last
    did (``lirun`` too once it has spoken: no join time, no run)."""

    member: str
    joined_at: float | None
    run_id: str | None
    unread: int
    sent: int
    last_sent_at: float | None


class RunMembershipRow(TypedRow):
    """A team a run joined, and the member name it joined as."""

    team_id: str
    member: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> RunMembershipRow:
        """The membership of one ``team_members`` row of a run."""
        return cls(team_id=str(row["team_id"]), member=str(row["member"]))


class TeamMessageRow(TypedRow):
    """A ``team_messages`` row: one message, its place in its team's order (``seq``),
    who sent it to whom (``all`` for everyone) and the run that sent it."""

    id: str
    team_id: str
    seq: int
    sender: str
    recipient: str
    body: str
    run_id: str | None
    created_at: float


class InboxMessageRow(TypedRow):
    """A message as a member's inbox gives it: the ``team_messages`` row and when that
    member had read it before this read (None: unread until now)."""

    id: str
    team_id: str
    seq: int
    sender: str
    recipient: str
    body: str
    run_id: str | None
    created_at: float
    read_at: float | None
