"""Lists of flows and shows, and the facts of the needs-you page: ``store.lists``
(``sql/<dialect>/lists.sql``). Read-only; callers name what they want, never a query."""

from __future__ import annotations

from lirun.hints import Any
from lirun.store.repository import Repository
from lirun.store.rows import (
    AttentionFlowRow,
    AttentionPlayRow,
    AttentionQueuedRunRow,
    AttentionRows,
    AttentionScheduleRunRow,
    FlowListRow,
    ScheduleRunUsageRow,
    ShowListRow,
    ShowRow,
)
from lirun.store.wait_reads import fold_play_counts

# A year-5000 timestamp: later than any row (infinity is not bound alike by both drivers).
_LATEST = 1e11


def _list_params(
    status: str | None, since: float | None, before: tuple[float, str] | None, limit: int
) -> dict[str, Any]:
    at, ident = before if before is not None else (_LATEST, "")
    return {
        "status": status or None,
        "since": since,
        "before_at": float(at),
        "before_id": str(ident),
        "limit": max(1, int(limit)),
    }


class ListReads(Repository):
    """``store.lists``: the list pages of flows and shows, and the needs-you facts."""

    def flows(
        self,
        *,
        status: str | None = None,
        since: float | None = None,
        before: tuple[float, str] | None = None,
        limit: int = 50,
    ) -> list[FlowListRow]:
        """Flow invocations, newest first, strictly before the ``(created_at, id)`` cursor
        ``before``; ``status`` and ``since`` (epoch seconds, inclusive) filter."""
        params = _list_params(status, since, before, limit)
        return [
            FlowListRow.from_row(r) for r in self.connector.read(self.sql("list_flows"), params)
        ]

    def shows(
        self,
        *,
        status: str | None = None,
        since: float | None = None,
        before: tuple[float, str] | None = None,
        limit: int = 50,
    ) -> list[ShowListRow]:
        """Shows as ``flows`` lists flows, each with ``plays``: how many of its plays
        are in each status (``{"merged": 2, "escalated": 1}``)."""
        params = _list_params(status, since, before, limit)
        return fold_play_counts(self.connector.read(self.sql("list_shows"), params))

    def attention_rows(self, *, since: float) -> AttentionRows:
        """What the needs-you page judges: escalated or gate-failed plays with their
        show's status (``plays``), flows failed since ``since`` and not resumed
        (``flows``), schedule runs failed since ``since`` with no success after them and
        ad-hoc runs failed since then and not retried (``schedule_runs``), active shows
        with their owner (``running_shows``), and queued runs no worker has claimed
        (``queued_runs``)."""
        from lirun.store.records import decode_row

        read, at = self.connector.read, {"since": float(since)}
        shows = read(self.sql("attention_running_shows"))
        return AttentionRows(
            plays=[AttentionPlayRow.from_row(r) for r in read(self.sql("attention_plays"))],
            flows=[AttentionFlowRow.from_row(r) for r in read(self.sql("attention_flows"), at)],
            schedule_runs=[
                AttentionScheduleRunRow.from_row(decode_row(r))
                for r in read(self.sql("attention_schedule_runs"), at)
            ],
            running_shows=[ShowRow.from_row(decode_row(r)) for r in shows],
            queued_runs=[
                AttentionQueuedRunRow.from_row(decode_row(r))
                for r in read(self.sql("attention_queued_runs"))
            ],
        )

    def schedule_runs_with_usage(
        self, schedule_id: str, *, limit: int = 100
    ) -> list[ScheduleRunUsageRow]:
        """One schedule's newest ``limit`` runs, newest first, each with the cost and
        tokens its session or flow recorded (``cost_usd``, ``input_tokens``, ...)."""
        rows = self.connector.read(
            self.sql("schedule_runs_with_usage"),
            {"schedule_id": schedule_id, "limit": max(1, int(limit))},
        )
        return [ScheduleRunUsageRow.from_row(r) for r in rows]
