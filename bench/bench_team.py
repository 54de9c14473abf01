"""`li team inbox --follow` wake-up latency and message throughput. Prints ``name: value``.

    .venv/bin/python bench/bench_team.py [--backend sqlite|postgres|both] [--trials N]

Figures (targets in brackets):
- ``<backend>.follow_send_to_line_median_ms`` / ``_p95_ms``: from the return of a
  message's commit in this process to its line on the stdout of a separate
  ``li team inbox --follow`` process, N trials (default 40), a quiet pause before each
  so every trial starts from an idle follower [<= 50 median on both backends].
- ``<backend>.send_per_s``: messages one process records per second, alone.

PostgreSQL uses ``$LIRUN_BENCH_PG_URL`` (default the local ``test`` database) with a
throwaway schema.
"""

from __future__ import annotations

import argparse
import os
import selectors
import statistics
import subprocess
import sys
import time
from contextlib import AbstractContextManager
from typing import Any

from benchkit import out, postgres_url, sqlite_url
from lirun.store import open_store

# Idle time before each trial: longer than the SQLite waker's settle window, so the
# follower is blocked on its watch (or on LISTEN) when the message commits.
QUIET_SECONDS = 0.3


def follow_latency(url: str, trials: int) -> list[float]:
    store = open_store(url)
    team_id = store.teams.create_with_members("bench", ["sender", "reader"]).id
    env = {**os.environ, "LIRUN_DB_URL": url}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    follower = subprocess.Popen(
        [sys.executable, "-m", "lirun", "team", "inbox", "bench", "--as", "reader", "--follow"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0,
    )  # fmt: skip
    assert follower.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(follower.stdout, selectors.EVENT_READ)
    samples: list[float] = []
    try:
        store.teams.send_message(team_id, sender="sender", recipient="reader", text="warm-up")
        _read_line(follower.stdout, selector, 60.0)
        for i in range(trials):
            time.sleep(QUIET_SECONDS)
            store.teams.send_message(team_id, sender="sender", recipient="reader", text=f"t{i}")
            sent = time.perf_counter()
            _read_line(follower.stdout, selector, 10.0)
            samples.append((time.perf_counter() - sent) * 1000)
    finally:
        follower.terminate()
        follower.wait(timeout=30)
        store.close()
    return samples


def _read_line(stream: Any, selector: selectors.BaseSelector, timeout: float) -> bytes:
    line = b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n"):
        if not selector.select(max(0.0, deadline - time.monotonic())):
            raise TimeoutError("the follower printed no line in time")
        chunk = os.read(stream.fileno(), 1)
        if not chunk:
            raise RuntimeError("the follower ended")
        line += chunk
    return line


def send_rate(url: str, count: int = 300) -> float:
    store = open_store(url)
    try:
        team_id = store.teams.create_with_members("rate", ["a", "b"]).id
        started = time.perf_counter()
        for i in range(count):
            store.teams.send_message(team_id, sender="a", recipient="all", text=f"m{i}")
        return count / (time.perf_counter() - started)
    finally:
        store.close()


def run(backend: str, database: AbstractContextManager[str], trials: int) -> None:
    with database as url:
        samples = follow_latency(url, trials)
        out(f"{backend}.follow_send_to_line_median_ms", statistics.median(samples))
        out(f"{backend}.follow_send_to_line_p95_ms", statistics.quantiles(samples, n=20)[-1])
        out(f"{backend}.send_per_s", send_rate(url))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--trials", type=int, default=40)
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        run("sqlite", sqlite_url(), args.trials)
    if args.backend in ("postgres", "both"):
        run("postgres", postgres_url(), args.trials)


if __name__ == "__main__":
    main()
