"""The reads of `li wait` and `li status` across the wait kinds, ``store.waits``
(``sql/<dialect>/wait.sql`` and ``views.sql``): callers above the store name what they
want, never a query or a dialect."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from lirun.hints import Any
from lirun.store.base import id_fragment_params
from lirun.store.connector import Row
from lirun.store.repository import Repository
from lirun.store.rows import SessionRow, ShowListRow, WaitExactRow, WaitFetchRow, WaitMatchRow

# The kinds `li wait` accepts, in the order of the ``wait_fetch`` parameters.
WAIT_KINDS = ("session", "invocation", "play", "schedule_run", "show")


class WaitReads(Repository):
    """``store.waits``: each method is one query, whatever the number of ids."""

    def resolve_exact(self, inputs: Sequence[str]) -> list[WaitExactRow]:
        """Every exact reading of each input (``tier``, ``kind``, ``id``, ``input``,
        ``created_at``); the caller keeps the lowest tier, then the newest row."""
        if not inputs:
            return []
        rows = self.connector.read(
            self.sql("wait_resolve_exact"), {"ids": self.connector.bind_list(inputs)}
        )
        return [WaitExactRow.from_row(r) for r in rows]

    def match_ids(self, fragment: str, *, limit: int) -> list[WaitMatchRow]:
        """Ids of the wait kinds starting or ending with ``fragment`` (``kind``, ``id``,
        ``total``), newest first, at most ``limit``."""
        rows = self.connector.read(
            self.sql("wait_resolve_partial"), id_fragment_params(fragment, limit)
        )
        return [WaitMatchRow.from_row(r) for r in rows]

    def fetch_rows(self, ids_by_kind: Mapping[str, Sequence[str]]) -> list[WaitFetchRow]:
        """The wait view of every id (``kind``, ``id``, status, reason, the backing session's
        ``run_dir`` and ``artifacts_path``, ``exit_code``, liveness facts), one query.

        A kind outside ``WAIT_KINDS`` is a programming error (KeyError)."""
        unknown = set(ids_by_kind) - set(WAIT_KINDS)
        if unknown:
            raise KeyError(f"not a wait kind: {sorted(unknown)}")
        params: dict[str, Any] = {
            f"{kind}_ids": self.connector.bind_list(ids_by_kind.get(kind, ()))
            for kind in WAIT_KINDS
        }
        return [
            WaitFetchRow.from_row(r) for r in self.connector.read(self.sql("wait_fetch"), params)
        ]

    def invocation_sessions(self, invocation_id: str) -> list[SessionRow]:
        """The executions of one invocation, oldest first, JSON columns decoded."""
        from lirun.store.records import decode_row

        rows = self.connector.read(
            self.sql("list_invocation_sessions"), {"invocation_id": invocation_id}
        )
        return [SessionRow.from_row(decode_row(r)) for r in rows]

    def recent_shows(self, *, limit: int = 20) -> list[ShowListRow]:
        """The newest ``limit`` shows, newest first, each with ``plays``: how many of its
        plays are in each status (``{"merged": 2, "escalated": 1}``)."""
        rows = self.connector.read(self.sql("list_recent_shows"), {"limit": int(limit)})
        return fold_play_counts(rows)


def fold_play_counts(rows: Iterable[Row]) -> list[ShowListRow]:
    """One show per id from rows of (show columns, ``play_status``, ``play_count``), in
    the rows' order, each with ``plays``: how many of its plays are in each status."""
    firsts: dict[str, Row] = {}
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        show_id = str(row["id"])
        firsts.setdefault(show_id, row)
        plays = counts.setdefault(show_id, {})
        if row["play_status"] is not None:
            plays[str(row["play_status"])] = int(row["play_count"])
    return [ShowListRow.from_row(row, counts[show_id]) for show_id, row in firsts.items()]
