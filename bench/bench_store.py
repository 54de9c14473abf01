"""Store throughput and latency on SQLite and PostgreSQL. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_store.py [--backend sqlite|postgres|both] [--rows N]

Figures:
- ``*.sequential_guarded_writes_per_s``: one process, each write an ``update_status`` to a
  terminal status with ``expected_statuses={"running"}`` on a distinct running row (sync
  ``Store``); ``*.async_guarded_writes_per_s`` is the same through ``StateDB``.
- ``*.contention_8proc_writes_per_s``: 8 processes, each finalizing its own share of rows
  at the same time (so every write contends for the database write lock);
  ``*.contention_8proc_lock_errors`` counts writes that raised.
  ``_write_p99_ms`` / ``_write_max_ms`` are per-write latencies including lock waits.
- ``*.read_while_locked_median_ms`` / ``_p95_ms``: ``get_session`` latency while another
  process holds the write lock (SQLite ``BEGIN IMMEDIATE``; PostgreSQL ``LOCK TABLE …
  IN EXCLUSIVE MODE``, which blocks writers but not readers).

PostgreSQL uses ``$LIRUN_BENCH_PG_URL`` (default the local ``test`` database) with a
throwaway schema.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchkit import postgres_url, running_sessions, sqlite_url
from lirun.store import StateDB, open_store

TERMINALS = ("completed", "failed", "timed_out", "cancelled")
REASONS = {
    "completed": "run.completed.ok",
    "failed": "run.failed.exception",
    "timed_out": "run.timed_out.deadline",
    "cancelled": "run.cancelled.system",
}


def finalize(store: Any, sid: str, status: str) -> bool:
    return bool(
        store.update_status(
            "session",
            sid,
            new_status=status,
            reason_code=REASONS[status],
            expected_statuses={"running"},
        )
    )


def bench_sequential(url: str, n: int) -> float:
    ids = running_sessions(url, "seq", n)
    store = open_store(url)
    try:
        start = time.perf_counter()
        for i, sid in enumerate(ids):
            finalize(store, sid, TERMINALS[i % len(TERMINALS)])
        return n / (time.perf_counter() - start)
    finally:
        store.close()


def bench_async(url: str, n: int) -> float:
    ids = running_sessions(url, "async", n)

    async def run() -> float:
        async with StateDB(url) as db:
            start = time.perf_counter()
            for sid in ids:
                await db.update_status(
                    "session",
                    sid,
                    new_status="completed",
                    reason_code="run.completed.ok",
                    expected_statuses={"running"},
                )
            return n / (time.perf_counter() - start)

    return asyncio.run(run())


def _contender(url: str, ids: list[str], status: str, ready: Any, go: Any, out: Any) -> None:
    store = open_store(url)
    errors = 0
    ready.release()
    go.wait()
    latencies = []
    start = time.perf_counter()
    for sid in ids:
        t0 = time.perf_counter()
        try:
            finalize(store, sid, status)
        except Exception:
            errors += 1
        latencies.append(time.perf_counter() - t0)
    out.put((start, time.perf_counter(), errors, latencies))
    store.close()


def bench_contention(url: str, n: int, procs: int) -> tuple[float, int, float, float]:
    ids = running_sessions(url, "race", n)
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    shares = [ids[i::procs] for i in range(procs)]
    workers = [
        ctx.Process(
            target=_contender, args=(url, share, TERMINALS[i % len(TERMINALS)], ready, go, out)
        )
        for i, share in enumerate(shares)
    ]
    for w in workers:
        w.start()
    for _ in workers:
        ready.acquire()
    go.set()
    results = [out.get(timeout=300) for _ in workers]
    for w in workers:
        w.join()
    elapsed = max(r[1] for r in results) - min(r[0] for r in results)
    latencies = sorted(x * 1000 for r in results for x in r[3])
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return n / elapsed, sum(r[2] for r in results), p99, latencies[-1]


_HOLD_SQLITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""

_HOLD_PG = """
import sys, psycopg
from lirun.store.postgres import split_schema
conninfo, schema = split_schema(sys.argv[1])
conn = psycopg.connect(conninfo, options=f"-c search_path={schema}")
conn.execute("LOCK TABLE sessions IN EXCLUSIVE MODE")
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def write_lock_held(url: str) -> Iterator[None]:
    """Another process holds the database write lock until the block ends."""
    code = _HOLD_PG if url.startswith("postgres") else _HOLD_SQLITE
    proc = subprocess.Popen(
        [sys.executable, "-c", code, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "locked"
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def bench_read_locked(url: str, n: int) -> tuple[float, float]:
    [sid] = running_sessions(url, "read", 1)
    store = open_store(url)
    try:
        with write_lock_held(url):
            samples = []
            for _ in range(n):
                start = time.perf_counter()
                assert store.get_entity("session", sid) is not None
                samples.append((time.perf_counter() - start) * 1000)
        samples.sort()
        return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]
    finally:
        store.close()


def run_backend(name: str, url_for: Any, rows: int, procs: int) -> None:
    figures: list[tuple[str, str]] = []
    with url_for() as url:
        figures.append(("sequential_guarded_writes_per_s", f"{bench_sequential(url, rows):.0f}"))
    with url_for() as url:
        figures.append(("async_guarded_writes_per_s", f"{bench_async(url, rows):.0f}"))
    with url_for() as url:
        rate, errors, p99, worst = bench_contention(url, rows, procs)
        figures.append((f"contention_{procs}proc_writes_per_s", f"{rate:.0f}"))
        figures.append((f"contention_{procs}proc_lock_errors", str(errors)))
        figures.append((f"contention_{procs}proc_write_p99_ms", f"{p99:.2f}"))
        figures.append((f"contention_{procs}proc_write_max_ms", f"{worst:.2f}"))
    with url_for() as url:
        median, p95 = bench_read_locked(url, 500)
        figures.append(("read_while_locked_median_ms", f"{median:.3f}"))
        figures.append(("read_while_locked_p95_ms", f"{p95:.3f}"))
    for key, value in figures:
        print(f"{name}.{key}: {value}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--rows", type=int, default=4000, help="rows per figure")
    parser.add_argument("--procs", type=int, default=8, help="contending processes")
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()}")
    print(f"rows: {args.rows}")
    if args.backend in ("sqlite", "both"):
        run_backend("sqlite", sqlite_url, args.rows, args.procs)
    if args.backend in ("postgres", "both"):
        run_backend("postgres", postgres_url, args.rows, args.procs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
