"""How an owner (a flow invocation, a show) brings a team to its agents.

A flow or show file says ``team: NAME`` (join the active team of that name, or make it)
or ``team: true`` (a new team for this invocation or show, named after it and its whole
id), and may say
``team_preamble: false``. Each agent leg or play joins as a member named by its leg id
(a fan-out instance ``leg[2]`` as ``leg-2``) or play name; its environment carries
``LIRUN_TEAM`` (the team id) and ``LIRUN_MEMBER``; its prompt starts with ``preamble``,
which names `li` by its absolute path (``LIRUN_LI``, ``exec.environment``).
Having ``LIRUN_TEAM``, it is given the database's credential too (``exec.task``: a file
its ``LIRUN_DB_URL`` names when the URL has a password, ``record.credential``), since it
talks to its team through the database.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lirun.settings import li_path
from lirun.store.core import Store
from lirun.store.rows import TeamRow
from lirun.teams.rules import EVERYONE, MAX_MESSAGE_BYTES, MAX_NAME_LENGTH, SYSTEM_MEMBER, is_name

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
    its whole id, e.g. ``refactor-auth-20260301T101500-3f2a9c``: one team per
    invocation or show, and a person can tell whose. The label is cut to fit the name
    bound, never the id (an id over the bound, a long ``--show-id``, is cut last)."""
    tail = _slug(owner_id)
    room = MAX_NAME_LENGTH - len(tail) - 1
    head = _slug(label)[: max(0, room)].strip("-._") or (kind if len(kind) <= room else "")
    return (f"{head}-{tail}" if head and tail else head or tail or kind)[:MAX_NAME_LENGTH]


def _slug(text: str) -> str:
    slug = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "-" for c in text)
    return slug.strip("-._")


@dataclass(frozen=True, slots=True)
class Joined:
    """The team an owner's agents share, and, when it joined a team another owner (or a
    person) made, the line that says so."""

    team: TeamRow
    existing: str | None = None


def join(
    store: Store,
    setting: TeamSetting,
    *,
    owner_type: str,
    owner_id: str,
    label: str,
    members: Sequence[str],
    resumed_from: str | None = None,
) -> Joined:
    """The team the owner's agents share, with ``members`` in it.

    ``team: true``: a new team of the owner's own (``run_team_name``), or the active team
    it made before (a resumed show) or that the run it resumes made (``resumed_from``);
    never another owner's. ``team: NAME``: the active team of that name, made if none;
    joining one another owner made says so in the team's conversation (as ``lirun``)
    and in ``Joined.existing`` for the owner's log.
    """
    names = [member_name(m) for m in members]
    if setting.name is None:
        for owner in filter(None, (owner_id, resumed_from)):
            for team in store.teams.of_owner(owner_type, owner):
                if team.status == "active":
                    store.teams.add_members(team.id, names)
                    return Joined(team)
        name = run_team_name(owner_type, label, owner_id)
        team = store.teams.create_with_members(
            name, names, owner_type=owner_type, owner_id=owner_id
        )
        return Joined(team)
    team = store.teams.create_with_members(
        setting.name, names, owner_type=owner_type, owner_id=owner_id, join_existing=True
    )
    if (team.owner_type, team.owner_id) == (owner_type, owner_id):
        return Joined(team)
    line = joined_line(team)
    store.teams.send_message(
        team.id, sender=SYSTEM_MEMBER, recipient=EVERYONE,
        text=f"{_owner_text(owner_type, owner_id)} ({label}) joined this team"
        + (f" with members {', '.join(names)}" if names else ""),
    )  # fmt: skip
    return Joined(team, line)


def joined_line(team: TeamRow) -> str:
    """``joined existing team NAME (ID, created by flow X)``: what an owner says when its
    ``team: NAME`` named a team it did not make."""
    maker = _owner_text(team.owner_type, team.owner_id) if team.owner_type else "`li team create`"
    return f"joined existing team {team.name} ({team.id}, created by {maker})"


def _owner_text(owner_type: str | None, owner_id: str | None) -> str:
    kind = {"invocation": "flow"}.get(str(owner_type), str(owner_type))
    return f"{kind} {owner_id}"


def child_env(team_id: str, member: str) -> dict[str, str]:
    return {TEAM_ENV: team_id, MEMBER_ENV: member}


def li_command() -> str:
    """How a child runs this `li`: its absolute path (``settings.li_path``), shell-quoted,
    or ``li`` when none is known."""
    path = li_path()
    return shlex.quote(path) if path else "li"


def li_warning() -> str | None:
    """What an owner says when it knows no `li` to give its team's agents (a bare
    ``li`` is all their preamble can name), else None."""
    if li_path() is not None:
        return None
    return (
        "warning: no `li` script found (lirun runs as `python -m lirun` without one beside "
        "the interpreter); team agents get no LIRUN_LI and must find `li` on their PATH"
    )


def preamble(team_name: str, member: str, li: str | None = None) -> str:
    """The lines put before an agent's prompt (``team_preamble: false`` leaves them out).
    They name `li` by its absolute path (``li``, default ``li_command()``): the agent's
    shell may not find a bare ``li`` (a venv not on its PATH)."""
    li = li or li_command()
    return (
        f"You work in team {team_name!r} as member {member!r}, beside other agents on the "
        "same repository. Tell them what they need to know (an interface you changed, a "
        "file you are rewriting) and read what they tell you, with lirun's `li` command "
        "(also in $LIRUN_LI):\n"
        f'  {li} team inbox "$LIRUN_TEAM" --unread        # messages for you (marks them read)\n'
        f'  {li} team send "$LIRUN_TEAM" --to all "TEXT"  # or --to MEMBER; TEXT - reads stdin\n'
        f'  {li} team show "$LIRUN_TEAM"                  # the members\n'
        "Read your inbox before you start and before you finish. Messages from `lirun` "
        "say what was merged. A message is at most "
        f"{MAX_MESSAGE_BYTES} bytes.\n\n"
    )


# A preamble's first and last words, whatever `li` it names: what ``without_preamble`` finds.
_PREAMBLE_HEAD = "You work in team "
_PREAMBLE_TAIL = f"A message is at most {MAX_MESSAGE_BYTES} bytes.\n\n"
# The most a preamble can be (a name, a member and a `li` path of 1,024 characters each):
# a list reads this many more characters of each prompt to find the task after it.
PREAMBLE_MAX_CHARS = len(preamble("", "", li="-")) + 2 * (MAX_NAME_LENGTH + 2) + 3 * 1024


def without_preamble(prompt: str) -> str:
    """A team member's prompt without the preamble before it (its task). The preamble names
    the `li` of the process that started the member, which need not be this process's."""
    if not prompt.startswith(_PREAMBLE_HEAD):
        return prompt
    end = prompt.find(_PREAMBLE_TAIL)
    return prompt if end < 0 else prompt[end + len(_PREAMBLE_TAIL) :]


def with_preamble(prompt: str | None, team_name: str, member: str, on: bool) -> str | None:
    """``prompt`` with the preamble before it (an agent's; a command has none)."""
    if prompt is None or not on:
        return prompt
    return preamble(team_name, member) + prompt
