"""The PostgreSQL queue (procrastinate transport): throughput and dispatch latency.

- ``throughput_runs_per_s``: 1,000 queued trivial runs served by 4 serving processes
  (concurrency 2 each): runs / (last run's start - first run's start); ``throughput_wall_s``
  also counts the processes' start-up. Target: at least 20 runs per second.
- ``dispatch_ms_median`` / ``dispatch_ms_p95``: ``enqueue`` → the handle starts, with one
  idle serving process (LISTEN/NOTIFY wake-up). Target: median at most 100 ms.

A trivial run is the handle's real compare-and-set ``queued → running`` on a row and its
``done`` write (no child process: this measures the queue, not the supervisor).

    python bench/bench_worker_pg.py [--runs 1000] [--servers 4] [--samples 50]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchkit import PG_URL, out, postgres_url

HERE = Path(__file__).resolve().parent


def plain(url: str) -> tuple[str, str]:
    from lirun.store.pg_connect import split_schema

    rest, schema = split_schema(url)
    assert schema
    return rest, schema


def make_table(url: str, run_ids: list[str]) -> None:
    import psycopg

    rest, schema = plain(url)
    with psycopg.connect(rest) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {schema}.bruns (run_id text PRIMARY KEY, "
            "state text NOT NULL DEFAULT 'queued', started double precision)"
        )
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {schema}.bruns (run_id) VALUES (%s)", [[r] for r in run_ids]
            )


def serve(url: str, concurrency: int) -> int:
    import psycopg

    from lirun.schedules.pgqueue import ProcrastinateTransport

    rest, schema = plain(url)
    local = threading.local()

    def handle(run_id: str) -> None:
        started = time.time()
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = psycopg.connect(rest, autocommit=True)
        won = conn.execute(
            f"UPDATE {schema}.bruns SET state = 'running', started = %s "
            "WHERE run_id = %s AND state = 'queued' RETURNING 1",
            [started, run_id],
        ).fetchone()
        if won:
            conn.execute(f"UPDATE {schema}.bruns SET state = 'done' WHERE run_id = %s", [run_id])

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    transport = ProcrastinateTransport(url)
    print("ready", flush=True)
    transport.serve(handle, concurrency=concurrency, stop=stop)
    transport.close()
    return 0


def servers(url: str, count: int, concurrency: int) -> list[subprocess.Popen[str]]:
    argv = [sys.executable, str(Path(__file__)), "--serve", url, "--concurrency", str(concurrency)]
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=HERE) for _ in range(count)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    return procs


def stop_all(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        proc.wait(60)


def scalar(url: str, sql: str) -> Any:
    import psycopg

    rest, schema = plain(url)
    with psycopg.connect(rest, autocommit=True) as conn:
        row = conn.execute(sql.format(t=f"{schema}.bruns")).fetchone()
        assert row is not None
        return row[0]


def drop_queue(url: str) -> None:
    import psycopg

    _, schema = plain(url)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}_queue" CASCADE')


def throughput(runs: int, count: int) -> None:
    from lirun.schedules.pgqueue import ProcrastinateTransport

    with postgres_url() as url:
        try:
            run_ids = [f"t{i:05d}" for i in range(runs)]
            make_table(url, run_ids)
            queue = ProcrastinateTransport(url)
            t0 = time.perf_counter()
            for run_id in run_ids:
                queue.enqueue(run_id)
            out("enqueue_per_s", runs / (time.perf_counter() - t0))
            queue.close()
            wall = time.perf_counter()
            procs = servers(url, count, 2)
            try:
                while int(scalar(url, "SELECT count(*) FROM {t} WHERE state = 'done'")) < runs:
                    time.sleep(0.05)
            finally:
                stop_all(procs)
            out("throughput_wall_s", time.perf_counter() - wall)
            span = float(scalar(url, "SELECT max(started) - min(started) FROM {t}"))
            out("throughput_runs", runs)
            out("throughput_servers", count)
            out("throughput_runs_per_s", runs / span if span > 0 else float("inf"))
        finally:
            drop_queue(url)


def latency(samples: int) -> None:
    from lirun.schedules.pgqueue import ProcrastinateTransport

    with postgres_url() as url:
        try:
            run_ids = [f"l{i:04d}" for i in range(samples)]
            make_table(url, run_ids)
            queue = ProcrastinateTransport(url)
            queue.enqueue("warm-up")  # opens the enqueuer's connection before timing
            procs = servers(url, 1, 1)
            delays: list[float] = []
            try:
                for run_id in run_ids:
                    time.sleep(0.1)  # the worker is idle again
                    sent = time.time()
                    queue.enqueue(run_id)
                    while True:
                        started = scalar(
                            url, f"SELECT started FROM {{t}} WHERE run_id = '{run_id}'"
                        )
                        if started is not None:
                            delays.append((float(started) - sent) * 1000)
                            break
                        time.sleep(0.005)
            finally:
                stop_all(procs)
                queue.close()
            delays.sort()
            out("dispatch_samples", len(delays))
            out("dispatch_ms_median", statistics.median(delays))
            out("dispatch_ms_p95", delays[max(0, int(len(delays) * 0.95) - 1)])
        finally:
            drop_queue(url)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--servers", type=int, default=4)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--serve", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.concurrency)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    latency(args.samples)
    throughput(args.runs, args.servers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
