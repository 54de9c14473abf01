"""A show's team (``team:`` in its file, docs/teams.md): its plays are members, and the
conductor tells them, as ``lirun``, what they need to know before their gate does: a
play merged (its commit and the paths it changed), the integration head moved, a play
escalated. A notice that cannot be recorded is said on progress and never stops the show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lirun.errors import LirunError
from lirun.shows.spec import ShowSpec
from lirun.store.core import Store
from lirun.store.rows import ShowRow, TeamRow
from lirun.teams import membership
from lirun.teams.rules import MAX_MESSAGE_BYTES, SYSTEM_MEMBER

# Changed paths listed in a merge notice; the rest are counted.
MAX_PATHS = 50


class ShowTeam:
    """The team of one show, or nothing at all when its file has no ``team:``."""

    def __init__(
        self, store: Store, show: ShowRow, spec: ShowSpec, say: Callable[[str], None]
    ) -> None:
        self.store, self.say = store, say
        self.setting = spec.team
        self.team: TeamRow | None = None
        if self.setting is None:
            return
        # Every play is a member: a command play may be a script that talks too.
        joined = membership.join(
            store, self.setting, owner_type="show", owner_id=show.id,
            label=spec.topic, members=[p.name for p in spec.plays],
        )  # fmt: skip
        self.team = joined.team
        for line in filter(None, (joined.existing, membership.li_warning())):
            say(line)

    def env(self, play: str) -> dict[str, str]:
        return membership.child_env(self.team.id, play) if self.team is not None else {}

    def meta(self, play: str) -> dict[str, Any]:
        if self.team is None:
            return {}
        return {"team": {"id": self.team.id, "name": self.team.name, "member": play}}

    def prompt(self, play: str, prompt: str | None, *, resumed: bool) -> str | None:
        """The play's prompt with the preamble (not for a resumed conversation: it has
        read it already)."""
        if self.team is None or self.setting is None or resumed:
            return prompt
        return membership.with_preamble(prompt, self.team.name, play, self.setting.preamble)

    # -- the conductor's notices --

    def merged(self, play: str, sha: str, integration: str, paths: list[str]) -> None:
        shown = "\n".join(f"  {p}" for p in paths[:MAX_PATHS])
        more = f"\n  ... and {len(paths) - MAX_PATHS} more" if len(paths) > MAX_PATHS else ""
        self.notice(
            f"play {play} merged into {integration} as {sha}; the integration head is now "
            f"{sha[:12]}. Changed paths ({len(paths)}):\n{shown}{more}\n"
            "If your work touches these, rebase on it or adapt before your gate runs."
        )

    def head_moved(self, integration: str, sha: str) -> None:
        self.notice(f"the integration branch {integration} moved to {sha} outside the show")

    def escalated(self, play: str, status: str, summary: str) -> None:
        """The play stopped without merging (``escalated``, ``gate_failed``)."""
        said = "escalated" if status == "escalated" else "failed its gate for the last time"
        self.notice(f"play {play} {said} and waits for a person: {summary}")

    def notice(self, text: str) -> None:
        if self.team is None:
            return
        text = text.encode("utf-8")[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")
        try:
            self.store.teams.send_message(
                self.team.id, sender=SYSTEM_MEMBER, recipient="all", text=text
            )
        except LirunError as exc:  # archived by a person meanwhile, or the database
            self.say(f"team {self.team.name}: notice not recorded: {exc}")
