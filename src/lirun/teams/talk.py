"""What a record said and heard in its team, for ``li status`` of a play, a flow leg's
execution or a play's execution (docs/teams.md)."""

from __future__ import annotations

from collections.abc import Mapping

from lirun.hints import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lirun.store.core import Store

# Messages ``li status`` lists at most (the newest); ``li team log`` has them all.
STATUS_MESSAGES = 50


def membership_of(store: Store, kind: str, row: Mapping[str, Any]) -> dict[str, str] | None:
    """``{"id", "name", "member"}`` of the team the record belongs to, or None: a
    session's comes from its metadata (its owner put it there), a play's from its show."""
    if kind == "session":
        meta = row.get("metadata_json") or {}
        team = meta.get("team") or (meta.get("flow") or {}).get("team")
        return dict(team) if isinstance(team, Mapping) and team.get("id") else None
    if kind == "play":
        teams = store.teams.of_owner("show", str(row.get("show_id")))
        if teams:
            return {"id": teams[0].id, "name": teams[0].name, "member": str(row["name"])}
    return None


def record_talk(store: Store, kind: str, row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The team, the member and the newest messages it sent or received, oldest first
    (plain dicts: the detail ``li status --json`` prints)."""
    team = membership_of(store, kind, row)
    if team is None:
        return None
    mine = store.teams.conversation(team["id"], member=team["member"], limit=100_000)
    messages = [m.as_dict() for m in mine[-STATUS_MESSAGES:]]
    return {**team, "messages": messages, "total": len(mine)}
