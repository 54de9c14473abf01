"""The dashboard's team pages (docs/teams.md): the list, one team's conversation with
its members and read receipts, and the conversation beside a show's board. Messages are
agent output: the templates escape them (autoescape), never mark them safe."""

from __future__ import annotations

from typing import Any

from lirun.store.core import Store
from lirun.store.rows import TeamRow

# Messages a page shows at most (the newest); `li team log` has every one.
PAGE_MESSAGES = 500


def teams_view(store: Store) -> dict[str, Any]:
    """Every team, active first, with its members counted."""
    members = store.teams.member_counts()
    teams = [
        {**team.as_dict(), "members": members.get(team.id, 0), "href": f"/teams/{team.id}"}
        for team in store.teams.list_all(limit=200)
    ]
    return {"teams": teams}


def conversation(store: Store, team: TeamRow) -> dict[str, Any]:
    """A team's members (with unread counts) and its newest messages, oldest first, each
    with who read it and a link to the run that sent it."""
    messages = store.teams.recent_messages(team.id, limit=PAGE_MESSAGES)
    receipts = store.teams.read_receipts([m.id for m in messages])
    shown = [
        {
            **m.as_dict(),
            "read_by": sorted(receipts.get(m.id, {})),
            "run_href": f"/runs/{m.run_id}" if m.run_id else None,
        }
        for m in messages
    ]
    return {
        "team": team.as_dict(),
        "members": [m.as_dict() for m in store.teams.member_summary(team.id)],
        "messages": shown,
        "more": int(team.message_count or 0) - len(shown),
    }


def team_view(store: Store, team_id: str) -> dict[str, Any] | None:
    """One team: its row, members, conversation and history; None when there is none."""
    team = store.teams.get(team_id)
    if team is None:
        return None
    return {
        **conversation(store, team),
        "transitions": [t.as_dict() for t in store.list_transitions("team", team_id)],
        "owner_href": _owner_href(team),
    }


def show_team(store: Store, show_id: str) -> dict[str, Any] | None:
    """The conversation of the show's team, or None when its file had no ``team:``."""
    teams = store.teams.of_owner("show", show_id)
    return conversation(store, teams[0]) if teams else None


def _owner_href(team: TeamRow) -> str | None:
    kind, ident = team.owner_type, team.owner_id
    if kind == "show":
        return f"/shows/{ident}"
    if kind == "invocation":
        return f"/flows/{ident}"
    return None
