"""What the metrics count, ``store.metrics`` (SQL in ``sql/*/metrics.sql``).

Each read is one aggregate query; the counting of a year of runs happens in the
database, and the caller (``ui.metrics``) only names and labels the numbers.
"""

from __future__ import annotations

from lirun.hints import NamedTuple
from lirun.store.connector import Row
from lirun.store.repository import Repository
from lirun.store.rows import WorkerRow
from lirun.store.status_write import StatusWrites
from lirun.store.worker_records import Workers

__all__ = ["DURATION_BUCKETS", "MetricFacts", "MetricReads"]

# Upper bounds (seconds) of the run-duration histogram: a second to a day. The query
# binds one parameter per bound (:b0 .. :b11), so the two change together.
DURATION_BUCKETS: tuple[float, ...] = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
    7200.0,
    21600.0,
    86400.0,
)


class MetricFacts(NamedTuple):
    """One scrape's numbers: rows per (kind, status, reason), duration buckets per
    kind, usage per (provider, model), the live workers, the schedule backlog, events
    per (schedule, source), those skipped per (schedule, source, reason) and polls per
    (schedule, reason).
    (A NamedTuple: the Store module is on ``li wait``'s start-up path, dataclasses not.)"""

    status_counts: tuple[Row, ...]
    durations: tuple[Row, ...]
    usage: tuple[Row, ...]
    workers: tuple[WorkerRow, ...]
    backlog: Row
    events: tuple[Row, ...]
    skipped_events: tuple[Row, ...]
    polls: tuple[Row, ...]


class MetricReads(Repository):
    """``store.metrics``: the numbers of one scrape (the live workers from ``workers``)."""

    def __init__(self, store: StatusWrites, workers: Workers) -> None:
        super().__init__(store)
        self.workers = workers

    def facts(self, *, now: float, overdue_after: float) -> MetricFacts:
        """The numbers of one scrape at ``now``; a queued run or a schedule is overdue
        ``overdue_after`` seconds past its due time. Workers: those not stopped that beat
        in the last hour (as ``li worker status`` lists them)."""
        read = self.connector.read
        buckets = {f"b{i}": bound for i, bound in enumerate(DURATION_BUCKETS)}
        backlog = read(
            self.sql("metrics_schedule_backlog"), {"overdue_before": now - overdue_after}
        )
        return MetricFacts(
            status_counts=tuple(read(self.sql("metrics_status_counts"))),
            durations=tuple(read(self.sql("metrics_durations"), buckets)),
            usage=tuple(read(self.sql("metrics_usage"))),
            workers=tuple(self.workers.list_live(since=now - 3600)),
            backlog=backlog[0],
            events=tuple(read(self.sql("metrics_schedule_events"))),
            skipped_events=tuple(read(self.sql("metrics_schedule_events_skipped"))),
            polls=tuple(read(self.sql("metrics_schedule_polls"))),
        )
