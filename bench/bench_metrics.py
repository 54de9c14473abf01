"""The cost of one metrics scrape over a large record. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_metrics.py [--backend sqlite|postgres|both] [--runs N]

Figures (N stored runs, default 100,000, imported through the Store as bench_ui.py does):
- ``*.scrape_median_ms`` / ``_p95_ms``: ``ui.metrics.render`` (the four aggregate queries,
  the live workers, the spool listing and the text format), in-process, after a warm-up.
- ``*.scrape_bytes``: the size of the text a scrape returns.
A scrape reads aggregates only, so its time grows with the table scan, not with Python
work per run; Prometheus scrapes every 15-60 s.
"""

from __future__ import annotations

import argparse

from bench_ui import fill, timings
from benchkit import out, postgres_url, sqlite_url
from lirun.store import open_store
from lirun.ui.metrics import render


def bench(backend: str, url: str, runs: int, requests: int) -> None:
    store = open_store(url)
    try:
        out(f"{backend}.import_{runs}_runs_s", fill(store, runs))
        median, p95 = timings(lambda: render(store, url), requests)
        out(f"{backend}.scrape_median_ms", median)
        out(f"{backend}.scrape_p95_ms", p95)
        out(f"{backend}.scrape_bytes", len(render(store, url)))
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        with sqlite_url() as url:
            bench("sqlite", url, args.runs, args.requests)
    if args.backend in ("postgres", "both"):
        with postgres_url() as url:
            bench("postgres", url, args.runs, args.requests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
