"""Shows and their plays, ``store.shows`` (``sql/<dialect>/shows.sql``).

A show is created with all its plays in one transaction, so a show never exists with
half its plays. The show row is the show's lock: ``claim`` takes it with a
compare-and-set on the owner the caller judged (alive owners are never displaced),
``beat`` renews it and ``release`` gives it back. Plays' status changes go
through the guarded ``update_status`` like every other entity's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from lirun.errors import ConflictError
from lirun.hints import TYPE_CHECKING, Any
from lirun.store.records import (
    closed_fields,
    column_values,
    decode_row,
    entity_id_or_new,
    require_text,
)
from lirun.store.repository import Repository
from lirun.store.rows import PlayRow, SessionRow, ShowRow

if TYPE_CHECKING:
    pass

# Columns a show or play is created with (beyond id, status and the timestamps).
SHOW_CREATE_FIELDS = frozenset(
    {
        "topic",
        "spec_json",
        "repo",
        "base",
        "base_sha",
        "integration",
        "integration_head",
        "owner_pid",
        "owner_start_time",
        "owner_host",
        "owner_boot_id",
        "heartbeat_at",
        "lease_seconds",
    }
)
PLAY_CREATE_FIELDS = frozenset({"name", "position", "attempts", "depends_on_json", "attempt"})
OWNER_COLUMNS = ("owner_pid", "owner_start_time", "owner_host", "owner_boot_id")


class Shows(Repository):
    """``store.shows``: shows and their plays."""

    def create(self, *, topic: str, id: str | None = None) -> ShowRow:
        """Create a show row; ValidationError for an empty topic or bad id."""
        require_text(topic=topic)
        fields = {"id": entity_id_or_new(id), **column_values({"topic": topic})}
        return ShowRow.from_row(self.store.insert("show", fields))

    def create_play(
        self, *, show_id: str, name: str, session_id: str | None = None, id: str | None = None
    ) -> PlayRow:
        """Create a play row (``pending``); ValidationError for an empty show_id/name or bad id."""
        require_text(show_id=show_id, name=name)
        fields = column_values({"show_id": show_id, "name": name, "session_id": session_id})
        return PlayRow.from_row(self.store.insert("play", {"id": entity_id_or_new(id), **fields}))

    def create_with_plays(
        self,
        *,
        id: str,
        fields: Mapping[str, Any],
        plays: Sequence[Mapping[str, Any]],
        exclusive_topic: bool = False,
    ) -> ShowRow:
        """Create an ``active`` show and its ``pending`` plays (each with its own ``id``)
        in one transaction; returns the show row. ValidationError for a column outside
        ``SHOW_CREATE_FIELDS`` / ``PLAY_CREATE_FIELDS`` or an empty topic or play name.
        ``exclusive_topic``: ConflictError, and nothing created, when a show of the same
        topic is active (checked in the creating transaction, so two starts cannot both
        pass)."""
        require_text(id=id, topic=fields.get("topic"))
        show = {"id": id, **closed_fields(fields, SHOW_CREATE_FIELDS, "create_show_with_plays")}
        rows = []
        for play in plays:
            require_text(id=play.get("id"), name=play.get("name"))
            extra = {k: v for k, v in play.items() if k != "id"}
            values = closed_fields(extra, PLAY_CREATE_FIELDS, "create_show_with_plays(plays)")
            rows.append({"id": play["id"], "show_id": id, **values})
        now = time.time()
        with self.connector.write() as tx:
            if exclusive_topic:
                topic = {"topic": show["topic"]}
                tx.query(self.sql("lock_topic"), topic)
                active = tx.query(self.sql("active_show_ids_for_topic"), topic)
                if active:
                    raise ConflictError(
                        f"show {active[0]['id']} of topic {show['topic']!r} is still active; "
                        f"continue it with `li show resume {active[0]['id']}` or end it with "
                        f"`li show abort {active[0]['id']}`"
                    )
            self.store.insert_in(tx, "show", show, now)
            for row in rows:
                self.store.insert_in(tx, "play", row, now)
        created = self.get(id)
        assert created is not None
        return created

    # -- reads --

    def _rows(self, name: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [decode_row(r) for r in self.connector.read(self.sql(name), params)]

    def get(self, show_id: str) -> ShowRow | None:
        """The show with this id, or None."""
        row = self.store.get_entity("show", show_id)
        return None if row is None else ShowRow.from_row(row)

    def get_play(self, play_id: str) -> PlayRow | None:
        """The play with this id, or None."""
        row = self.store.get_entity("play", play_id)
        return None if row is None else PlayRow.from_row(row)

    def active_for_topic(self, topic: str) -> list[ShowRow]:
        """Active shows of ``topic``, newest first (normally at most one)."""
        return [ShowRow.from_row(r) for r in self._rows("active_shows_for_topic", {"topic": topic})]

    def recent(self, *, limit: int = 20) -> list[ShowRow]:
        """Active shows first, then the newest, at most ``limit``."""
        return [ShowRow.from_row(r) for r in self._rows("recent_shows", {"limit": int(limit)})]

    def list_plays(self, show_id: str) -> list[PlayRow]:
        """The show's plays in the order of its file."""
        return [PlayRow.from_row(r) for r in self._rows("list_plays", {"show_id": show_id})]

    def list_play_sessions(self, play_id: str) -> list[SessionRow]:
        """Every execution linked to the play (agent runs and gate runs), oldest first."""
        return [
            SessionRow.from_row(r) for r in self._rows("list_play_sessions", {"play_id": play_id})
        ]

    def list_gate_sessions(self, show_id: str) -> list[SessionRow]:
        """The gate runs on the show's integration head (final, and after a person moved
        it), oldest first."""
        rows = self._rows("list_show_gate_sessions", {"show_id": show_id})
        return [SessionRow.from_row(r) for r in rows]

    # -- the lock --

    def claim(
        self,
        show_id: str,
        owner: Mapping[str, Any],
        *,
        previous: Mapping[str, Any],
        lease_seconds: float,
    ) -> bool:
        """Make ``owner`` (``owner_pid``, ``owner_start_time``, ``owner_host``,
        ``owner_boot_id``) the show's owner if it is active and still owned by
        ``previous`` (the row's owner columns as the caller read and judged them; None
        values for no owner). False when the show ended or another owner came first."""
        params = {
            **column_values({k: owner.get(k) for k in OWNER_COLUMNS}),
            "old_pid": previous.get("owner_pid"),
            "old_host": previous.get("owner_host"),
            "old_start_time": previous.get("owner_start_time"),
            "now": time.time(),
            "lease_seconds": float(lease_seconds),
            "id": show_id,
        }
        with self.connector.write() as tx:
            return tx.execute(self.sql("claim_show"), params) == 1

    def beat(self, show_id: str, owner: Mapping[str, Any]) -> bool:
        """Renew the owner's lease; False when the show is no longer active or no longer
        ours (the owner then stops: someone took the show over or ended it)."""
        params = {
            "id": show_id,
            "now": time.time(),
            "owner_pid": owner["owner_pid"],
            "owner_host": owner["owner_host"],
        }
        with self.connector.write() as tx:
            return tx.execute(self.sql("beat_show"), params) == 1

    def release(self, show_id: str, owner: Mapping[str, Any]) -> bool:
        """Clear the owner columns if ``owner`` holds the show; False otherwise."""
        params = {"id": show_id, "owner_pid": owner["owner_pid"], "owner_host": owner["owner_host"]}
        with self.connector.write() as tx:
            return tx.execute(self.sql("release_show"), params) == 1
