"""`li wait` startup, wake-up latency, tick cost and writer impact. Prints ``name: value``.

    .venv/bin/python bench/bench_wait.py [--backend sqlite|postgres|both] [--quick]

Figures (targets in brackets):
- ``startup.wait_terminal_median_ms``: whole process ``python -m lirun wait ID`` on an
  already-terminal id, median of 20 [<= 60]; ``startup.python_bare_median_ms`` is
  ``python -c pass`` on the same machine at the same time, for scale.
- ``<backend>.commit_to_line_median_ms`` / ``_p95_ms``: from the return of a terminal
  commit in this process to its line on a waiting ``li wait`` process's stdout (default
  ``--interval 1``), 50 trials [SQLite <= 50 median, PostgreSQL <= 20].
- ``<backend>.tick_1000_ids_queries`` / ``_cpu_ms``: one waiter on 1,000 running ids:
  queries and CPU per tick [1 query]; ``_idle_cpu_pct``: CPU share of that waiter while
  nothing changes.
- ``sqlite.writer_1000_*``: one process committing 1,000 terminal transitions alone and
  with 50 ``li wait`` processes watching the same file [loss < 20%].

PostgreSQL uses ``$LIRUN_BENCH_PG_URL`` (default the local ``test`` database) with a
throwaway schema.
"""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchkit import complete, out, postgres_url, sqlite_url
from lirun.store import open_store
from lirun.store.core import Store
from lirun.wait.watch import Watcher

PY = sys.executable


def env_for(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["LIRUN_DB_URL"] = url
    return env


def make_running(store: Store, prefix: str, n: int) -> list[str]:
    return [store.sessions.create(id=f"{prefix}-{i:05}").id for i in range(n)]


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


# -- processes ------------------------------------------------------------------


def start_waiter(url: str, *ids: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "lirun", "wait", *ids],
        env=env_for(url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def wait_ready(proc: subprocess.Popen[str], settle: float) -> None:
    """Until the waiter catches SIGTERM (it then opens the db and reads), plus ``settle``."""
    bit = 1 << (signal.SIGTERM - 1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/status", encoding="ascii") as handle:
            mask = next(line for line in handle if line.startswith("SigCgt:")).split()[1]
        if int(mask, 16) & bit:
            time.sleep(settle)
            return
        time.sleep(0.002)
    raise RuntimeError("waiter did not start")


def read_line(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise RuntimeError("no line from the waiter")
    return proc.stdout.readline()


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        proc.wait(timeout=30)


# -- figures ----------------------------------------------------------------------


def median_process_ms(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def bench_startup(url: str, runs: int) -> None:
    store = open_store(url)
    sid = store.sessions.create(id="terminal-one").id
    complete(store, sid)
    store.close()
    env = env_for(url)
    out("startup.python_bare_median_ms", median_process_ms([PY, "-c", "pass"], env, runs))
    out(
        "startup.wait_terminal_median_ms",
        median_process_ms([PY, "-m", "lirun", "wait", sid], env, runs),
    )


def bench_latency(name: str, url: str, trials: int) -> None:
    store = open_store(url)
    ids = make_running(store, "lat", trials)
    latencies = []
    for sid in ids:
        waiter = start_waiter(url, sid)
        try:
            wait_ready(waiter, settle=0.15)
            complete(store, sid)
            committed = time.perf_counter()
            read_line(waiter)
            latencies.append((time.perf_counter() - committed) * 1000)
        finally:
            stop([waiter])
    store.close()
    out(f"{name}.commit_to_line_median_ms", statistics.median(latencies))
    out(f"{name}.commit_to_line_p95_ms", p95(latencies))


def bench_tick(name: str, url: str, ticks: int) -> None:
    store = open_store(url)
    ids = make_running(store, "tick", 1000)
    reader = open_store(url, readonly=True)
    watcher = Watcher(reader, ids)
    try:
        watcher.tick()  # the first tick also judges liveness once
        before_q, before_cpu = watcher.queries, time.process_time()
        for _ in range(ticks):
            watcher.tick()
        cpu = (time.process_time() - before_cpu) / ticks
        out(f"{name}.tick_1000_ids_queries", (watcher.queries - before_q) / ticks)
        out(f"{name}.tick_1000_ids_cpu_ms", cpu * 1000)
        started_cpu, started = time.process_time(), time.monotonic()
        watcher.wait(1.0, lambda: False)
        idle = (time.process_time() - started_cpu) / (time.monotonic() - started)
        out(f"{name}.idle_waiter_cpu_pct", idle * 100)
    finally:
        watcher.close()
        reader.close()
        store.close()


def _write_1000(url: str, ids: list[str]) -> float:
    store = open_store(url)
    started = time.perf_counter()
    for sid in ids:
        complete(store, sid)
    elapsed = time.perf_counter() - started
    store.close()
    return len(ids) / elapsed


def cpu_seconds(procs: list[subprocess.Popen[str]]) -> float:
    """User + system CPU of ``procs`` so far (Linux /proc)."""
    ticks = 0
    for proc in procs:
        with open(f"/proc/{proc.pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def signal_all(procs: list[subprocess.Popen[str]], sig: int) -> None:
    for proc in procs:
        proc.send_signal(sig)


def bench_writer_with_waiters(url: str, waiters: int, rounds: int = 11) -> None:
    """1,000 commits alone vs. beside ``waiters`` waiting processes, interleaved.

    The same waiter processes are paused (SIGSTOP) for the "alone" batches and resumed
    for the "crowded" ones, so the two medians see the same background load.
    """
    store = open_store(url)
    alone_ids = [make_running(store, f"alone{r}", 1000) for r in range(rounds)]
    crowd_ids = [make_running(store, f"crowd{r}", 1000) for r in range(rounds)]
    watched = make_running(store, "watched", waiters * 20)
    store.close()
    procs = [start_waiter(url, *watched[i * 20 : (i + 1) * 20]) for i in range(waiters)]
    alone, crowded = [], []
    try:
        for proc in procs:
            wait_ready(proc, settle=0)
        time.sleep(1.0)  # every waiter past its first read
        cpu_before, started = cpu_seconds(procs), time.monotonic()
        time.sleep(2.0)
        idle = (cpu_seconds(procs) - cpu_before) / (time.monotonic() - started)
        for r in range(rounds):
            signal_all(procs, signal.SIGSTOP)
            time.sleep(0.2)
            alone.append(_write_1000(url, alone_ids[r]))
            signal_all(procs, signal.SIGCONT)
            time.sleep(0.5)  # they catch up on the alone batch, then idle again
            crowded.append(_write_1000(url, crowd_ids[r]))
        still = sum(p.poll() is None for p in procs)
    finally:
        signal_all([p for p in procs if p.poll() is None], signal.SIGCONT)
        stop(procs)
    out("sqlite.writer_1000_alone_per_s", statistics.median(alone))
    out(f"sqlite.writer_1000_with_{waiters}_waiters_per_s", statistics.median(crowded))
    out("sqlite.writer_1000_waiters_still_waiting", still)
    out(f"sqlite.idle_{waiters}_waiters_cpu_pct_of_one_core", idle * 100)
    loss = 1 - statistics.median(crowded) / statistics.median(alone)
    out("sqlite.writer_1000_loss_pct", max(0.0, loss * 100))


# -- backends ---------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="fewer trials (a smoke run)")
    parser.add_argument(
        "--only", default="startup,latency,tick,writer", help="comma-separated parts to run"
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    trials, runs, waiters = (10, 5, 10) if args.quick else (50, 20, 50)
    os.environ.setdefault("LIRUN_HOME", tempfile.mkdtemp(prefix="lirun-bench-home-"))
    out("machine.cpus", os.cpu_count() or 0)
    out("machine.load_1min", os.getloadavg()[0])
    backends: list[tuple[str, Any]] = []
    if args.backend in ("sqlite", "both"):
        backends.append(("sqlite", sqlite_url))
    if args.backend in ("postgres", "both"):
        backends.append(("postgres", postgres_url))
    for name, url_for in backends:
        if name == "sqlite" and "startup" in parts:
            with url_for() as url:
                bench_startup(url, runs)
        if "latency" in parts:
            with url_for() as url:
                bench_latency(name, url, trials)
        if "tick" in parts:
            with url_for() as url:
                bench_tick(name, url, 20)
        if name == "sqlite" and "writer" in parts:
            with url_for() as url:
                bench_writer_with_waiters(url, waiters)
    return 0


if __name__ == "__main__":
    sys.exit(main())
