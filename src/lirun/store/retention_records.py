"""Retention, ``store.retention`` (``sql/<dialect>/retention.sql``, migration 0010): the
candidates of one gc batch, the tombstone write, and the bookkeeping of removed run
directories. What to prune is decided above the store (``record.retention_rules``)."""

from __future__ import annotations

from collections.abc import Sequence

from lirun.store.bounds import unbounded
from lirun.store.repository import Repository
from lirun.store.rows import GcCandidateRow, UnremovedFileRow

# The kinds gc prunes, each with its candidates query and its tombstone statement.
PRUNED_KINDS = ("session", "invocation")
_CANDIDATES = {"session": "gc_session_candidates", "invocation": "gc_invocation_candidates"}
_TOMBSTONE = {"session": "gc_tombstone_sessions", "invocation": "gc_tombstone_invocations"}
_FILES_REMOVED = {
    "session": "gc_files_removed_sessions",
    "invocation": "gc_files_removed_invocations",
}


class Retention(Repository):
    """``store.retention``."""

    def candidates(
        self, kind: str, *, cutoff: float, after: str, limit: int
    ) -> list[GcCandidateRow]:
        """Up to ``limit`` unpruned ``kind`` rows last touched before ``cutoff``, in id
        order after ``after``: ``id``, ``status``, ``ended_at``, ``updated_at``,
        ``run_dir``, ``artifacts_path``, ``owner_host``, ``flow_status`` (a leg's flow),
        ``in_active_show`` and ``bulk_bytes`` (what the tombstone clears)."""
        params = {"cutoff": float(cutoff), "after": after, "limit": int(limit)}
        rows = self.connector.read(self.sql(_CANDIDATES[kind]), params)
        return [GcCandidateRow.from_row(r) for r in rows]

    def write_tombstones(
        self,
        kind: str,
        ids: Sequence[str],
        *,
        terminal: Sequence[str],
        now: float,
        actor: str,
    ) -> list[str]:
        """Tombstone the ``kind`` rows of ``ids`` in one transaction: bulky columns,
        transcript and history evidence cleared; ``pruned_at`` / ``pruned_by`` set. A row
        no longer ``terminal``, already pruned, or (a run) held again by a running flow or
        an active show is left whole. Returns the ids tombstoned."""
        if not ids:
            return []
        bound = self.connector.bind_list
        params = {"ids": bound(list(ids)), "terminal": bound(list(terminal))}
        with self.connector.write() as tx:
            rows = tx.query(self.sql(_TOMBSTONE[kind]), {**params, "now": now, "actor": actor})
            done = [str(r["id"]) for r in rows]
            if done:
                marked = {"ids": bound(done), "entity_type": kind}
                if kind == "session":
                    tx.execute(self.sql("gc_delete_messages"), {"ids": marked["ids"]})
                tx.execute(self.sql("gc_clear_transition_evidence"), marked)
        return done

    def unremoved_files(self, *, host: str, limit: int) -> list[UnremovedFileRow]:
        """Tombstones of ``host`` (or of no recorded host) whose run directory is not yet
        removed (``kind``, ``id``, ``run_dir``, ``artifacts_path``, ``owner_host``), at
        most ``limit``."""
        params = {"host": host, "limit": int(limit)}
        rows = self.connector.read(self.sql("gc_unremoved_files"), params)
        return [UnremovedFileRow.from_row(r) for r in rows]

    def mark_files_removed(self, kind: str, ids: Sequence[str], *, now: float) -> None:
        """Record that the run directories of these tombstones are gone."""
        if not ids:
            return
        with self.connector.write() as tx:
            tx.execute(
                self.sql(_FILES_REMOVED[kind]),
                {"ids": self.connector.bind_list(list(ids)), "now": now},
            )

    def reclaim_space(self) -> None:
        """``VACUUM``: SQLite rewrites the file without the freed pages; PostgreSQL marks
        the dead tuples of the pruned tables reusable (``VACUUM FULL`` is for an operator)."""
        self.connector.read(self.sql("gc_vacuum_unbounded"))
        try:
            with unbounded():
                self.connector.read(self.sql("gc_vacuum"))
        finally:
            self.connector.read(self.sql("gc_vacuum_bounded"))
        self.connector.read(self.sql("gc_wal_truncate"))
