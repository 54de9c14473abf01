"""The record as Prometheus metrics: ``/metrics`` on the dashboard and ``li metrics``.

Nothing is counted in memory: every scrape reads the aggregates of the database
(``store.metrics.facts``) and the spool directory, so the numbers are the same from any
process on any machine, survive restarts, and a run's end moves them as soon as its row
is written. ``families`` is the pure part (facts in, metric families out); ``render``
gathers the facts and writes the text format with ``prometheus_client`` (the ``ui`` or
``metrics`` extra). docs/ui.md lists the families.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from lirun.lifecycle import is_terminal
from lirun.record.spool import pending_files
from lirun.schedules.events import BAD_OUTPUT, FAILED_EXIT, OK, TIMED_OUT
from lirun.store import Store
from lirun.store.metric_reads import DURATION_BUCKETS, MetricFacts

__all__ = ["CONTENT_TYPE", "OVERDUE_AFTER", "families", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A queued run or an enabled schedule this long past its due time counts as overdue: a
# worker polls every few seconds, so a minute means none is taking it.
OVERDUE_AFTER = 60.0
_TOKEN_COLUMNS = ("input", "output", "cache_read", "cache_write")
POLL_FAILURES = (FAILED_EXIT, TIMED_OUT, BAD_OUTPUT)


def _runs(facts: MetricFacts) -> Iterator[Metric]:
    started = CounterMetricFamily(
        "lirun_runs_started", "Runs recorded, by kind (every row started once)", labels=["kind"]
    )
    ended = CounterMetricFamily(
        "lirun_runs_ended",
        "Runs that reached a terminal status, by kind, status and reason code",
        labels=["kind", "status", "reason"],
    )
    active = GaugeMetricFamily(
        "lirun_runs_active", "Runs not yet in a terminal status", labels=["kind", "status"]
    )
    per_kind: dict[str, int] = defaultdict(int)
    open_: dict[tuple[str, str], int] = defaultdict(int)
    for row in facts.status_counts:
        kind, status, n = str(row["kind"]), row["status"], int(row["n"])
        per_kind[kind] += n
        if is_terminal(kind, status):
            ended.add_metric([kind, str(status), str(row["reason"] or "")], n)
        else:
            open_[(kind, str(status or ""))] += n
    for kind, n in sorted(per_kind.items()):
        started.add_metric([kind], n)
    for (kind, status), n in sorted(open_.items()):
        active.add_metric([kind, status], n)
    yield from (started, ended, active)


def _durations(facts: MetricFacts) -> Metric:
    histogram = HistogramMetricFamily(
        "lirun_run_duration_seconds",
        "Wall-clock seconds of ended runs, from start (or creation) to end, by kind",
        labels=["kind"],
    )
    for row in facts.durations:
        buckets = [
            (floatToGoString(b), float(row[f"le{i}"] or 0)) for i, b in enumerate(DURATION_BUCKETS)
        ]
        buckets.append(("+Inf", float(row["n"])))
        histogram.add_metric([str(row["kind"])], buckets, float(row["total"] or 0.0))
    return histogram


def _usage(facts: MetricFacts) -> Iterator[Metric]:
    cost = CounterMetricFamily(
        "lirun_cost_usd", "Provider cost in US dollars, by provider and model",
        labels=["provider", "model"],
    )  # fmt: skip
    tokens = CounterMetricFamily(
        "lirun_tokens", "Tokens by provider, model and type (input, output, cache_read, "
        "cache_write)", labels=["provider", "model", "type"],
    )  # fmt: skip
    for row in facts.usage:
        labels = [str(row["provider"]), str(row["model"])]
        cost.add_metric(labels, float(row["cost_usd"] or 0.0))
        for kind in _TOKEN_COLUMNS:
            tokens.add_metric([*labels, kind], float(row[f"{kind}_tokens"] or 0))
    yield from (cost, tokens)


def _workers(facts: MetricFacts, now: float) -> Iterator[Metric]:
    live = GaugeMetricFamily(
        "lirun_workers_live", "Workers not stopped whose heartbeat is within their lease"
    )
    age = GaugeMetricFamily(
        "lirun_worker_heartbeat_age_seconds",
        "Seconds since each worker's last heartbeat (workers not stopped, beat in the last hour)",
        labels=["worker", "host"],
    )
    count = 0
    for worker in facts.workers:
        seconds = max(0.0, now - worker.heartbeat_at)
        age.add_metric([worker.id, worker.host], seconds)
        count += seconds <= worker.lease_seconds
    live.add_metric([], count)
    yield from (live, age)


def _backlog(facts: MetricFacts, spooled: int) -> Iterator[Metric]:
    gauges = (
        ("lirun_schedule_runs_queued", "Schedule runs waiting for a worker", "queued"),
        (
            "lirun_schedule_runs_overdue",
            f"Schedule runs still queued {OVERDUE_AFTER:g} s past their due time",
            "overdue_runs",
        ),
        (
            "lirun_schedules_overdue",
            f"Enabled schedules {OVERDUE_AFTER:g} s past their next due time, not fired",
            "overdue_schedules",
        ),
    )
    for name, text, column in gauges:
        yield GaugeMetricFamily(name, text, value=int(facts.backlog[column] or 0))
    yield GaugeMetricFamily(
        "lirun_spooled_outcomes_pending",
        "Outcomes the database refused, spooled on this machine until a command delivers them",
        value=spooled,
    )


def _events(facts: MetricFacts) -> Iterator[Metric]:
    seen = CounterMetricFamily(
        "lirun_schedule_events_seen",
        "Events a schedule stored, by source (poll, webhook, chain); a first poll's "
        "baseline included",
        labels=["schedule", "source"],
    )
    fired = CounterMetricFamily(
        "lirun_schedule_events_fired",
        "Events whose run was queued, by schedule and source",
        labels=["schedule", "source"],
    )
    skipped = CounterMetricFamily(
        "lirun_schedule_events_skipped",
        "Events whose run a policy refused (a skipped run), by schedule, source and reason",
        labels=["schedule", "source", "reason"],
    )
    refused: dict[tuple[str, str], int] = defaultdict(int)
    for row in facts.skipped_events:
        key, n = (str(row["schedule"]), str(row["source"])), int(row["n"])
        refused[key] += n
        skipped.add_metric([*key, str(row["reason"] or "")], n)
    for row in facts.events:
        key = (str(row["schedule"]), str(row["source"]))
        seen.add_metric(list(key), int(row["seen"]))
        fired.add_metric(list(key), int(row["with_run"]) - refused[key])
    yield from (seen, fired, skipped)


def _polls(facts: MetricFacts) -> Iterator[Metric]:
    polls = CounterMetricFamily(
        "lirun_schedule_polls", "Polls a poll schedule made, good or failed", labels=["schedule"]
    )
    failures = CounterMetricFamily(
        "lirun_schedule_poll_failures",
        "Failed polls, by schedule and reason code (schedule.poll.*)",
        labels=["schedule", "reason"],
    )
    failing = GaugeMetricFamily(
        "lirun_schedule_poll_failing",
        "1 for the reason code of a poll schedule's last poll when it failed, else 0",
        labels=["schedule", "reason"],
    )
    total: dict[str, int] = defaultdict(int)
    last: dict[str, str] = {}
    for row in facts.polls:
        schedule, reason, n = str(row["schedule"]), str(row["reason"]), int(row["n"])
        total[schedule] += n
        last[schedule] = str(row["last_reason"] or "")
        if reason != OK:
            failures.add_metric([schedule, reason], n)
    for schedule, n in sorted(total.items()):
        polls.add_metric([schedule], n)
        for reason in POLL_FAILURES:
            failing.add_metric([schedule, reason], int(last[schedule] == reason))
    yield from (polls, failures, failing)


def families(facts: MetricFacts, *, spooled: int, now: float) -> list[Metric]:
    """Every metric family of one scrape, from its facts (pure)."""
    return [
        *_runs(facts),
        _durations(facts),
        *_usage(facts),
        *_workers(facts, now),
        *_backlog(facts, spooled),
        *_events(facts),
        *_polls(facts),
    ]


class _Scrape(Collector):
    def __init__(self, found: list[Metric]) -> None:
        self.found = found

    def collect(self) -> Iterator[Metric]:
        return iter(self.found)


def render(store: Store, db_url: str, *, now: float | None = None) -> bytes:
    """The Prometheus text format of the record in ``store`` (whose URL is ``db_url``:
    the spool is kept per database)."""
    at = time.time() if now is None else now
    facts = store.metrics.facts(now=at, overdue_after=OVERDUE_AFTER)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Scrape(families(facts, spooled=len(pending_files(db_url)), now=at)))
    return generate_latest(registry)
