"""How an owner (a flow invocation, a show) brings a team to its agents.

A flow or show file says ``team: NAME`` (join the active team of that name, or make it)
or ``team: true`` (one team for this invocation or show, named after it), and may say
``team_preamble: false``. Each agent leg or play joins as a member named by its leg id
(a fan-out instance ``leg[2]`` as ``leg-2``) or play name; its environment carries
``LIRUN_TEAM`` (the team id) and ``LIRUN_MEMBER``; its prompt starts with ``preamble``.
Having ``LIRUN_TEAM``, it is given the database's credential too (``exec.task``: a file
its ``LIRUN_DB_URL`` names when the URL has a password, ``record.credential``), since it
talks to its team through the database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lirun.store.core import Store
from lirun.store.rows import TeamRow
from lirun.teams.rules import MAX_MESSAGE_BYTES, MAX_NAME_LENGTH, is_name

TEAM_ENV = "LIRUN_TEAM"
MEMBER_ENV = "LIRUN_MEMBER"


@dataclass(frozen=True, slots=True)
class TeamSetting:
    """A file's ``team:``: a ``name`` to share, or None for one team per run."""

    name: str | None = None
    preamble: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "preamble": self.preamble}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TeamSetting | None:
        if not data:
            return None
        return cls(name=data.get("name"), preamble=bool(data.get("preamble", True)))


def parse_setting(team: Any, preamble: Any) -> tuple[TeamSetting | None, str | None]:
    """The setting a file's ``team:`` / ``team_preamble:`` values make, or a problem."""
    if preamble is not None and not isinstance(preamble, bool):
        return None, f"team_preamble must be true or false, got {preamble!r}"
    if team is None or team is False:
        if preamble is not None:
            return None, "team_preamble needs team: NAME or team: true"
        return None, None
    on = True if preamble is None else preamble
    if team is True:
        return TeamSetting(None, on), None
    if isinstance(team, str) and is_name(team):
        return TeamSetting(team, on), None
    return None, (
        f"team must be true or a name of 1-{MAX_NAME_LENGTH} of A-Z a-z 0-9 . _ - "
        f"starting with a letter or digit, got {team!r}"
    )


def member_name(instance_id: str) -> str:
    """A leg instance's member name: ``review[2]`` → ``review-2``."""
    return instance_id.replace("[", "-").replace("]", "")


def run_team_name(kind: str, label: str, owner_id: str) -> str:
    """The name of a ``team: true`` team: the owner's label (what of it is a name) and
    the start of its id, e.g. ``refactor-auth-3f2a9c1d``."""
    slug = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in label)
    slug = slug.strip("-._")[: MAX_NAME_LENGTH - 10] or kind
    return f"{slug}-{owner_id[:8]}"


def join(
    store: Store,
    setting: TeamSetting,
    *,
    owner_type: str,
    owner_id: str,
    label: str,
    members: Sequence[str],
    resumed_from: str | None = None,
) -> TeamRow:
    """The team the owner's agents share, with ``members`` in it: for ``team: NAME``
    the active team of that name (made if none), for ``team: true`` a new one, or the
    one of the run it resumes (``resumed_from``) while that is still active."""
    name = setting.name or run_team_name(owner_type, label, owner_id)
    if setting.name is None and resumed_from:
        earlier = [t for t in store.teams.of_owner(owner_type, resumed_from)
                   if t.status == "active"]  # fmt: skip
        name = earlier[0].name if earlier else name
    return store.teams.create_with_members(
        name,
        [member_name(m) for m in members],
        owner_type=owner_type,
        owner_id=owner_id,
        join_existing=True,
    )


def child_env(team_id: str, member: str) -> dict[str, str]:
    return {TEAM_ENV: team_id, MEMBER_ENV: member}


def preamble(team_name: str, member: str) -> str:
    """The lines put before an agent's prompt (``team_preamble: false`` leaves them out)."""
    return (
        f"You work in team {team_name!r} as member {member!r}, beside other agents on the "
        "same repository. Tell them what they need to know (an interface you changed, a "
        "file you are rewriting) and read what they tell you, with the `li` command:\n"
        '  li team inbox "$LIRUN_TEAM" --unread        # messages for you (marks them read)\n'
        '  li team send "$LIRUN_TEAM" --to all "TEXT"  # or --to MEMBER; TEXT - reads stdin\n'
        '  li team show "$LIRUN_TEAM"                  # the members\n'
        "Read your inbox before you start and before you finish. Messages from `lirun` "
        "say what was merged. A message is at most "
        f"{MAX_MESSAGE_BYTES} bytes.\n\n"
    )


def with_preamble(prompt: str | None, team_name: str, member: str, on: bool) -> str | None:
    """``prompt`` with the preamble before it (an agent's; a command has none)."""
    if prompt is None or not on:
        return prompt
    return preamble(team_name, member) + prompt
