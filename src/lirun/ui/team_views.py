"""The dashboard's team pages (docs/teams.md): the list, one team's conversation with
its members and read receipts, and the conversation beside a show's board. Messages are
agent output: the templates escape them (autoescape), never mark them safe."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lirun.store.core import Store

# Messages a page shows at most (the newest); `li team log` has every one.
PAGE_MESSAGES = 500


def teams_view(store: Store) -> dict[str, Any]:
    """Every team, active first, with its members counted."""
    members = store.team_member_counts()
    teams = [
        {**team, "members": members.get(str(team["id"]), 0), "href": f"/teams/{team['id']}"}
        for team in store.list_teams(limit=200)
    ]
    return {"teams": teams}


def conversation(store: Store, team: Mapping[str, Any]) -> dict[str, Any]:
    """A team's members (with unread counts) and its newest messages, oldest first, each
    with who read it and a link to the run that sent it."""
    team_id = str(team["id"])
    messages = store.team_recent_messages(team_id, limit=PAGE_MESSAGES)
    receipts = store.team_read_receipts([str(m["id"]) for m in messages])
    shown = [
        {
            **m,
            "read_by": sorted(receipts.get(str(m["id"]), {})),
            "run_href": f"/runs/{m['run_id']}" if m.get("run_id") else None,
        }
        for m in messages
    ]
    return {
        "team": dict(team),
        "members": store.team_member_summary(team_id),
        "messages": shown,
        "more": int(team.get("message_count") or 0) - len(shown),
    }


def team_view(store: Store, team_id: str) -> dict[str, Any] | None:
    """One team: its row, members, conversation and history; None when there is none."""
    team = store.get_entity("team", team_id)
    if team is None:
        return None
    return {
        **conversation(store, team),
        "transitions": [t.as_dict() for t in store.list_transitions("team", team_id)],
        "owner_href": _owner_href(team),
    }


def show_team(store: Store, show_id: str) -> dict[str, Any] | None:
    """The conversation of the show's team, or None when its file had no ``team:``."""
    teams = store.teams_of_owner("show", show_id)
    return conversation(store, teams[0]) if teams else None


def _owner_href(team: Mapping[str, Any]) -> str | None:
    kind, ident = team.get("owner_type"), team.get("owner_id")
    if kind == "show":
        return f"/shows/{ident}"
    if kind == "invocation":
        return f"/flows/{ident}"
    return None
