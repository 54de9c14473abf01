"""The pure decisions of teams: valid names, the message bound, and whether a message
may be sent. No I/O: the store calls these under the team row's lock with what it read."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from lirun.errors import ConflictError, UsageError

# A message is at most this many bytes of UTF-8; a longer one is refused, never cut.
MAX_MESSAGE_BYTES = 16 * 1024
# A member or team name: 1-64 of A-Z a-z 0-9 . _ - , starting with a letter or digit.
MAX_NAME_LENGTH = 64
# The recipient that means every member.
EVERYONE = "all"
# lirun's own voice: the show conductor's notices. Every team accepts it as a sender;
# it is no member, so no person or agent can join under it.
SYSTEM_MEMBER = "lirun"
RESERVED_NAMES = frozenset({EVERYONE, SYSTEM_MEMBER})

_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


class TeamArchivedError(ConflictError):
    """The team is archived: it takes no new messages and no new members. Start a new
    team (``li team create``) for new work; the archived one stays readable."""


def is_name(text: str) -> bool:
    """True for 1-64 of A-Z a-z 0-9 . _ - starting with a letter or digit."""
    return (
        0 < len(text) <= MAX_NAME_LENGTH
        and text[0].isascii()
        and text[0].isalnum()
        and all(c in _NAME_CHARS for c in text)
    )


def check_team_name(name: str) -> str:
    """The team name, or UsageError saying what a name may be."""
    if not is_name(name):
        raise UsageError(
            f"invalid team name {name!r}: use 1-{MAX_NAME_LENGTH} of A-Z a-z 0-9 . _ - "
            "starting with a letter or digit, e.g. refactor-auth"
        )
    return name


def check_member_name(name: str) -> str:
    """A name a member may join under, or UsageError (``all`` and ``lirun`` are reserved)."""
    if not is_name(name):
        raise UsageError(
            f"invalid member name {name!r}: use 1-{MAX_NAME_LENGTH} of A-Z a-z 0-9 . _ - "
            "starting with a letter or digit, e.g. backend"
        )
    if name in RESERVED_NAMES:
        raise UsageError(f"member name {name!r} is reserved; choose another")
    return name


def check_text(text: str) -> str:
    """The message text, or UsageError: empty (or blank), holding a NUL character, not
    UTF-8 (bytes that are no text arrive as lone surrogates), or over
    ``MAX_MESSAGE_BYTES`` bytes of UTF-8 (refused, never cut)."""
    if not text.strip():
        raise UsageError("the message is empty; give some text (or - to read it from stdin)")
    if "\x00" in text:
        raise UsageError("the message holds a NUL character; send text, not binary data")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"the message is not UTF-8 text (at character {exc.start}); send text, not binary data"
        ) from None
    if size > MAX_MESSAGE_BYTES:
        raise UsageError(
            f"the message is {size} bytes; the limit is {MAX_MESSAGE_BYTES} bytes of UTF-8 "
            "(send a path to a file instead of its contents)"
        )
    return text


@dataclass(frozen=True, slots=True)
class TeamFacts:
    """What the store read under the team row's lock."""

    team_id: str
    name: str
    status: str
    members: frozenset[str]


def check_open(team: TeamFacts) -> None:
    """TeamArchivedError unless the team is active."""
    if team.status != "active":
        raise TeamArchivedError(
            f"team {team.name} ({team.team_id}) is {team.status}: it takes no new messages "
            "or members"
        )


def check_send(team: TeamFacts, sender: str, recipient: str) -> None:
    """Refuse a message the team cannot take: archived team, a sender that is neither a
    member nor ``lirun``, a recipient that is neither a member nor ``all``, or a member
    writing to itself. UsageError / TeamArchivedError, one line each."""
    check_open(team)
    if sender not in team.members and sender != SYSTEM_MEMBER:
        raise UsageError(
            f"{sender!r} is not a member of team {team.name}; members: {_listed(team.members)}"
        )
    if recipient != EVERYONE and recipient not in team.members:
        raise UsageError(
            f"no member {recipient!r} in team {team.name}; send --to one of "
            f"{_listed(team.members)} or --to all"
        )
    if recipient == sender:
        raise UsageError(f"{sender!r} cannot send a message to itself")


def new_members(team: TeamFacts, names: Collection[str]) -> list[str]:
    """The names that are not members yet, checked, in the order given (repeats once)."""
    check_open(team)
    fresh: list[str] = []
    for name in names:
        check_member_name(name)
        if name not in team.members and name not in fresh:
            fresh.append(name)
    return fresh


def _listed(names: Collection[str]) -> str:
    return ", ".join(sorted(names)) if names else "(none yet)"
