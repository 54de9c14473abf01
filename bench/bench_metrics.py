"""The cost of one metrics scrape over a large record. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_metrics.py [--backend sqlite|postgres|both] [--runs N]
        [--events E]

Figures (N stored runs, default 100,000, imported through the Store as bench_ui.py does):
- ``*.scrape_median_ms`` / ``_p95_ms``: ``ui.metrics.render`` (the seven aggregate queries,
  the live workers, the spool listing and the text format), in-process, after a warm-up.
- ``*.scrape_bytes``: the size of the text a scrape returns.
- ``*.events_E_scrape_median_ms`` / ``_p95_ms``: the same after E events (default
  20,000) were stored through ``store.events.record`` for 20 poll schedules (a tenth
  baseline, a tenth skipped, the rest fired) and each made 50 polls: the event and poll
  families' two queries read every event row and its run.
A scrape reads aggregates only, so its time grows with the table scan, not with Python
work per run; Prometheus scrapes every 15-60 s.
"""

from __future__ import annotations

import argparse
import time

from bench_ui import fill, timings
from benchkit import out, postgres_url, sqlite_url
from lirun.schedules import registry
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import Definition, make_policies
from lirun.schedules.triggers import poll_trigger
from lirun.store import Store, open_store
from lirun.ui.metrics import render

SCHEDULES = 20


def add_events(store: Store, events: int) -> float:
    """Store ``events`` events over SCHEDULES poll schedules; the seconds it took."""
    started = time.perf_counter()
    ids = []
    for n in range(SCHEDULES):
        trigger = poll_trigger("true", 1, every="1m")
        action = parse_action(["run", "echo", "{{ event.id }}"], base="/tmp")
        definition = Definition(f"poll{n}", trigger, action, make_policies({}, trigger))
        ids.append(registry.add(store, definition, now=1).id)
    for i in range(events):
        kind = None if i % 10 == 0 else "run"
        skipped = i % 10 == 1
        store.events.record(
            schedule_id=ids[i % SCHEDULES],
            event_key=str(i),
            event_json="{}",
            action_kind=kind,
            status="skipped" if skipped else "queued",
            reason_code="schedule.skipped.max_runs" if skipped else "schedule.queued.created",
        )
    for i in range(SCHEDULES * 50):
        reason = "schedule.poll.ok" if i % 5 else "schedule.poll.failed_exit"
        store.events.record_poll(ids[i % SCHEDULES], reason=reason)
    return time.perf_counter() - started


def bench(backend: str, url: str, runs: int, requests: int, events: int) -> None:
    store = open_store(url)
    try:
        out(f"{backend}.import_{runs}_runs_s", fill(store, runs))
        median, p95 = timings(lambda: render(store, url), requests)
        out(f"{backend}.scrape_median_ms", median)
        out(f"{backend}.scrape_p95_ms", p95)
        out(f"{backend}.scrape_bytes", len(render(store, url)))
        if events:
            out(f"{backend}.store_{events}_events_s", add_events(store, events))
            median, p95 = timings(lambda: render(store, url), requests)
            out(f"{backend}.events_{events}_scrape_median_ms", median)
            out(f"{backend}.events_{events}_scrape_p95_ms", p95)
            out(f"{backend}.events_{events}_scrape_bytes", len(render(store, url)))
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        with sqlite_url() as url:
            bench("sqlite", url, args.runs, args.requests, args.events)
    if args.backend in ("postgres", "both"):
        with postgres_url() as url:
            bench("postgres", url, args.runs, args.requests, args.events)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
