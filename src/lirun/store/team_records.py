"""Teams, their members, messages and read receipts: ``store.teams``
(``sql/<dialect>/teams.sql``, docs/teams.md).

The team row is the team's lock: adding members and sending a message lock it, decide
with the pure rules of ``lirun.teams.rules`` on what they read, then write. So a message
is never taken by an archived team (archiving goes through the guarded ``update_status``,
which takes the same lock), and each message's ``seq`` is its team's message count at
its commit: readers see one order, with no gap and no repeat.

On PostgreSQL a message commits with a notification on the channel ``li wait`` listens
on (``{"type": "team_message", "id": TEAM_ID, "terminal": false}``), so a follower
wakes at once; on SQLite followers see the commit through the change token.
"""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Sequence

from lirun.errors import AmbiguousIdError, ConflictError, NotFoundError, UsageError
from lirun.hints import TYPE_CHECKING, Any
from lirun.lifecycle import policy_for
from lirun.store.connector import NOTIFY_CHANNEL
from lirun.store.records import column_values, decode_row, entity_id_or_new, new_id, require_text
from lirun.store.repository import Repository
from lirun.store.rows import (
    InboxMessageRow,
    RunMembershipRow,
    TeamMemberRow,
    TeamMemberSummaryRow,
    TeamMessageRow,
    TeamRow,
)

if TYPE_CHECKING:
    from lirun.store.connector import Tx
    from lirun.teams.rules import TeamFacts

# json and lirun.teams.rules (dataclasses) are imported where used: every command loads
# the Store, and `li wait` must not pay for them (tests/test_imports.py).

# Messages one read returns at most (a follower reads again for the rest).
READ_LIMIT = 1000


def new_message_id(now: float, seq: int) -> str:
    """``m`` + the creation time in milliseconds (12 hex digits) + the team's seq (8) + 4
    random hex digits: ids sort by creation time, a team's by its order too (``seq``
    is the order itself; the id only sorts with it while the clock does not go back)."""
    return f"m{int(now * 1000):012x}{seq & 0xFFFFFFFF:08x}{os.urandom(2).hex()}"


class Teams(Repository):
    """``store.teams``: teams, members, messages and read receipts."""

    def create(self, *, name: str, id: str | None = None) -> TeamRow:
        """Create a team row; ValidationError for an empty name or bad id."""
        require_text(name=name)
        fields = {"id": entity_id_or_new(id), **column_values({"name": name})}
        return TeamRow.from_row(self.store.insert("team", fields))

    # -- creation and members --

    def create_with_members(
        self,
        name: str,
        members: Sequence[str] = (),
        *,
        owner_type: str | None = None,
        owner_id: str | None = None,
        join_existing: bool = False,
        run_id: str | None = None,
    ) -> TeamRow:
        """Create an ``active`` team with its members in one transaction; returns its row.

        An active team of the same name is a ConflictError, or with ``join_existing`` the
        team the members join (what an owner's ``team: NAME`` does). UsageError for an
        invalid team or member name.
        """
        from lirun.teams.rules import check_member_name, check_team_name

        check_team_name(name)
        for member in members:
            check_member_name(member)
        now = time.time()
        with self.connector.write() as tx:
            tx.query(self.sql("team_lock_name"), {"name": name})
            active = tx.query(self.sql("team_active_by_name"), {"name": name})
            if active and not join_existing:
                raise ConflictError(
                    f"team {name!r} already exists and is active ({active[0]['id']}); "
                    "choose another name or archive it first"
                )
            if active:
                team_id = str(active[0]["id"])
            else:
                team_id = new_id()
                fields: dict[str, Any] = {"id": team_id, "name": name}
                if owner_type:
                    fields.update(owner_type=owner_type, owner_id=owner_id)
                self.store.insert_in(tx, "team", fields, now)
            self._add_members_in(tx, team_id, members, now, run_id)
        team = self.get(team_id)
        assert team is not None
        return team

    def get(self, team_id: str) -> TeamRow | None:
        """The team with this id, or None."""
        row = self.store.get_entity("team", team_id)
        return None if row is None else TeamRow.from_row(row)

    def add_members(
        self, team_id: str, members: Sequence[str], *, run_id: str | None = None
    ) -> list[str]:
        """Add members (those already in are left as they are); returns the new ones.
        TeamArchivedError for an archived team, UsageError for an invalid name."""
        with self.connector.write() as tx:
            return self._add_members_in(tx, team_id, members, time.time(), run_id)

    def _add_members_in(
        self, tx: Tx, team_id: str, members: Sequence[str], now: float, run_id: str | None
    ) -> list[str]:
        from lirun.teams.rules import new_members

        fresh = new_members(self._facts_in(tx, team_id), members)
        for member in fresh:
            params = {"team_id": team_id, "member": member, "now": now, "run_id": run_id}
            tx.execute(self.sql("team_insert_member"), params)
        return fresh

    def _facts_in(self, tx: Tx, team_id: str) -> TeamFacts:
        """Lock the team row and read what the rules decide on."""
        from lirun.teams.rules import TeamFacts

        row = self.store.lock_row(tx, policy_for("team"), team_id)
        named = tx.query(self.sql("get_row", table="teams"), {"id": team_id})[0]
        members = tx.query(self.sql("team_members"), {"team_id": team_id})
        return TeamFacts(
            team_id=team_id,
            name=str(named["name"]),
            status=str(row["status"]),
            members=frozenset(str(m["member"]) for m in members),
        )

    # -- messages --

    def send_message(
        self,
        team_id: str,
        *,
        sender: str,
        recipient: str,
        text: str,
        run_id: str | None = None,
    ) -> TeamMessageRow:
        """Record one message; returns it (with its ``id`` and ``seq``). UsageError for
        empty or oversized text, a sender or recipient not in the team;
        TeamArchivedError for an archived team; NotFoundError for no team."""
        import json

        from lirun.teams.rules import check_send, check_text

        check_text(text)
        with self.connector.write() as tx:
            check_send(self._facts_in(tx, team_id), sender, recipient)
            now = time.time()
            tx.execute(self.sql("team_count_message"), {"team_id": team_id, "now": now})
            seq = int(
                tx.query(self.sql("team_message_count"), {"team_id": team_id})[0]["message_count"]
            )
            message = TeamMessageRow(
                id=new_message_id(now, seq),
                team_id=team_id,
                seq=seq,
                sender=sender,
                recipient=recipient,
                body=text,
                run_id=run_id,
                created_at=now,
            )
            tx.execute(self.sql("team_insert_message"), message.as_dict())
            if self.connector.supports_notify:
                payload = json.dumps(
                    {"type": "team_message", "id": team_id, "seq": seq, "terminal": False}
                )
                tx.query(
                    self.sql("notify_transition"), {"channel": NOTIFY_CHANNEL, "payload": payload}
                )
        return message

    def read_inbox(
        self,
        team_id: str,
        member: str,
        *,
        since_seq: int = 0,
        unread_only: bool = False,
        mark_read: bool = True,
        limit: int = READ_LIMIT,
    ) -> list[InboxMessageRow]:
        """What ``member`` received after ``since_seq`` (oldest first, each with the
        ``read_at`` it had before this read); with ``mark_read`` they are marked read for
        it (a read receipt, kept once). UsageError when ``member`` is not a member."""
        import json

        members = {m.member for m in self.members(team_id)}
        if member not in members:
            raise UsageError(f"{member!r} is not a member of this team; members: "
                             f"{', '.join(sorted(members)) or '(none yet)'}")  # fmt: skip
        params = {
            "team_id": team_id,
            "member": member,
            "since": int(since_seq),
            "unread_only": 1 if unread_only else 0,
            "limit": int(limit),
        }
        rows = [
            InboxMessageRow.from_row(r) for r in self.connector.read(self.sql("team_inbox"), params)
        ]
        unread = [r.id for r in rows if r.read_at is None]
        if mark_read and unread:
            with self.connector.write() as tx:
                tx.execute(
                    self.sql("team_mark_read"),
                    {"ids": json.dumps(unread), "member": member, "now": time.time()},
                )
        return rows

    def conversation(
        self, team_id: str, *, since_seq: int = 0, member: str = "", limit: int = READ_LIMIT
    ) -> list[TeamMessageRow]:
        """Messages after ``since_seq``, oldest first: all, or ``member``'s part (sent by
        it, or to it, or to all). Reading marks nothing."""
        params = {"team_id": team_id, "since": int(since_seq), "member": member,
                  "limit": int(limit)}  # fmt: skip
        rows = self.connector.read(self.sql("team_conversation"), params)
        return [TeamMessageRow.from_row(r) for r in rows]

    def recent_messages(self, team_id: str, *, limit: int = 50) -> list[TeamMessageRow]:
        """The newest ``limit`` messages, oldest first."""
        rows = self.connector.read(self.sql("team_recent"), {"team_id": team_id, "limit": limit})
        return [TeamMessageRow.from_row(r) for r in reversed(rows)]

    def message_seq(self, team_id: str, message_id: str) -> int:
        """The ``seq`` of one of the team's messages; NotFoundError when it has none."""
        rows = self.connector.read(self.sql("team_message"), {"team_id": team_id, "id": message_id})
        if not rows:
            raise NotFoundError(f"no message {message_id!r} in this team")
        return int(rows[0]["seq"])

    def read_receipts(self, message_ids: Collection[str]) -> dict[str, dict[str, float]]:
        """``{message id: {member: read_at}}`` for the messages given."""
        import json

        receipts: dict[str, dict[str, float]] = {}
        if not message_ids:
            return receipts
        rows = self.connector.read(self.sql("team_reads"), {"ids": json.dumps(list(message_ids))})
        for row in rows:
            receipts.setdefault(str(row["message_id"]), {})[str(row["member"])] = float(
                row["read_at"]
            )
        return receipts

    # -- reads about teams --

    def members(self, team_id: str) -> list[TeamMemberRow]:
        """The members, in the order they joined."""
        rows = self.connector.read(self.sql("team_members"), {"team_id": team_id})
        return [TeamMemberRow.from_row(r) for r in rows]

    def member_summary(self, team_id: str) -> list[TeamMemberSummaryRow]:
        """Each member with ``unread``, ``sent`` and ``last_sent_at`` (``lirun`` too once
        it has spoken), in the order they joined. Its ``run_id`` is the run it joined as,
        else the run that sent its newest message (an owner adds its agents before their
        runs exist)."""
        params = {"team_id": team_id}
        unread = {r["member"]: int(r["unread"])
                  for r in self.connector.read(self.sql("team_unread_counts"), params)}  # fmt: skip
        sent = {r["sender"]: r for r in self.connector.read(self.sql("team_sent_counts"), params)}
        out = []
        for member in self.members(team_id):
            s = sent.pop(member.member, None)
            run_id = member.run_id or (s["last_run_id"] if s else None)
            out.append(
                TeamMemberSummaryRow(
                    member.member,
                    member.joined_at,
                    run_id,
                    unread=unread.get(member.member, 0),
                    sent=int(s["sent"]) if s else 0,
                    last_sent_at=s["last_at"] if s else None,
                )
            )
        for name, s in sent.items():  # senders that are no members: lirun
            lirun = {"member": name, "joined_at": None, "run_id": None, "unread": 0}
            out.append(
                TeamMemberSummaryRow(**lirun, sent=int(s["sent"]), last_sent_at=s["last_at"])
            )
        return out

    def list_all(self, *, status: str | None = None, limit: int = 100) -> list[TeamRow]:
        """Teams, active first then newest, optionally of one status."""
        rows = self.connector.read(self.sql("team_list"), {"status": status, "limit": int(limit)})
        return [TeamRow.from_row(decode_row(r)) for r in rows]

    def member_counts(self) -> dict[str, int]:
        """``{team id: members}`` for every team with a member."""
        rows = self.connector.read(self.sql("team_member_counts"))
        return {str(r["team_id"]): int(r["members"]) for r in rows}

    def message_counts(self) -> dict[str, int]:
        """``{team id: message count}`` for every team."""
        rows = self.connector.read(self.sql("team_message_counts"))
        return {str(r["id"]): int(r["message_count"]) for r in rows}

    def of_owner(self, owner_type: str, owner_id: str) -> list[TeamRow]:
        """The teams a show or flow invocation made or joined, newest first."""
        params = {"owner_type": owner_type, "owner_id": owner_id}
        rows = self.connector.read(self.sql("team_by_owner"), params)
        return [TeamRow.from_row(decode_row(r)) for r in rows]

    def memberships_of_run(self, run_id: str) -> list[RunMembershipRow]:
        """The team and the member name of each team the run joined."""
        rows = self.connector.read(self.sql("team_memberships_of_run"), {"run_id": run_id})
        return [RunMembershipRow.from_row(r) for r in rows]

    def resolve(self, text: str) -> str:
        """The team id ``text`` names: an id, a unique id prefix (or suffix), or an
        active team's name. NotFoundError / AmbiguousIdError (exit 2)."""
        if not text.strip():
            raise UsageError("the team must not be empty: give its id or its name")
        if self.get(text) is not None:
            return text
        named = self.connector.read(self.sql("team_active_by_name"), {"name": text})
        if len(named) == 1:
            return str(named[0]["id"])
        ids, total = self.store.match_ids("team", text)
        if total == 1:
            return ids[0]
        if total > 1:
            raise AmbiguousIdError(text, tuple(ids), total)
        # No active team has that name: the newest archived one, so that a message to it
        # is refused for being archived, not for a name that is not found.
        newest = self.connector.read(self.sql("team_newest_by_name"), {"name": text})
        if newest:
            return str(newest[0]["id"])
        raise NotFoundError(f"no team {text!r} (by id, id prefix or active name); "
                            "`li team list` lists them")  # fmt: skip
