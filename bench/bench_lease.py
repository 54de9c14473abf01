"""What ``li lease check`` costs a job that calls it before each side effect. Prints
``name: value`` lines.

    .venv/bin/python bench/bench_lease.py [--runs N]

- ``lease.python_bare_median_ms``: ``python -c pass``, the reference, measured in turn
  with the commands below so a busy machine moves both alike;
- ``lease.<backend>_check_median_ms`` / ``_ratio`` / ``_p95_ms``: the whole process
  ``li lease check`` with ``LIRUN_FENCE`` of a running run whose lease holds (exit 0),
  on SQLite and on PostgreSQL (``$LIRUN_BENCH_PG_URL``, a throwaway schema);
- ``lease.<backend>_query_median_ms``: the check alone in a process already running
  (``fence_token.check`` on an open store): what a job in Python pays when it asks the
  library instead of starting ``li``.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

from benchkit import out, postgres_url, sqlite_url
from lirun.schedules import fence_token
from lirun.schedules.actions import parse_action
from lirun.schedules.submit import submit
from lirun.store import open_store

PY = sys.executable
LI = os.path.join(os.path.dirname(PY), "li")


def running_fence(url: str, cwd: str) -> str:
    """A submitted run claimed by a worker with an hour's lease: its fence."""
    store = open_store(url)
    try:
        run = submit(store, parse_action(["run", "true"], base=cwd))
        assert store.schedules.claim_run(run.id, worker_id="bench", lease_seconds=3600)
        return fence_token.token(run.id, 1)
    finally:
        store.close()


def measure(runs: int, backends: dict[str, Callable[[], AbstractContextManager[str]]]) -> None:
    compileall.compile_dir(os.path.dirname(fence_token.__file__) + "/..", quiet=1)
    with tempfile.TemporaryDirectory(prefix="lirun-bench-") as home:
        urls = _open_all(backends)
        try:
            fences = {name: running_fence(url, home) for name, url in urls.current.items()}
            commands: dict[str, list[str]] = {"python_bare": [PY, "-c", "pass"]}
            envs: dict[str, dict[str, str]] = {"python_bare": dict(os.environ)}
            for name, url in urls.current.items():
                commands[name] = [LI, "lease", "check", "--quiet"]
                envs[name] = {
                    **os.environ, "LIRUN_HOME": home, "LIRUN_DB_URL": url,
                    "LIRUN_FENCE": fences[name],
                }  # fmt: skip
            times = _alternating(commands, envs, runs, home)
            bare = statistics.median(times["python_bare"])
            out("lease.python_bare_median_ms", bare)
            for name, url in urls.current.items():
                median = statistics.median(times[name])
                out(f"lease.{name}_check_median_ms", median)
                out(f"lease.{name}_check_p95_ms", _p95(times[name]))
                out(f"lease.{name}_check_ratio", median / bare)
                out(f"lease.{name}_query_median_ms", _query_ms(url, fences[name], runs))
        finally:
            urls.close()


class _Urls:
    def __init__(self) -> None:
        self.current: dict[str, str] = {}
        self.contexts: list[AbstractContextManager[str]] = []

    def close(self) -> None:
        for context in reversed(self.contexts):
            context.__exit__(None, None, None)


def _open_all(backends: dict[str, Callable[[], AbstractContextManager[str]]]) -> _Urls:
    urls = _Urls()
    for name, make in backends.items():
        context = make()
        urls.current[name] = context.__enter__()
        urls.contexts.append(context)
    return urls


def _alternating(
    commands: dict[str, list[str]], envs: dict[str, dict[str, str]], runs: int, cwd: str
) -> dict[str, list[float]]:
    """Wall ms of each command, the commands taking turns run by run (after a warm-up)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for name, argv in commands.items():
        done = subprocess.run(argv, env=envs[name], cwd=cwd, capture_output=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr.decode()[-300:]}")
    for _ in range(runs):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, env=envs[name], cwd=cwd, capture_output=True, check=False)
            times[name].append((time.perf_counter() - start) * 1000)
    return times


def _query_ms(url: str, token: str, runs: int) -> float:
    store = open_store(url, readonly=True)
    fence = fence_token.parse(token)
    try:
        took = []
        for _ in range(runs):
            start = time.perf_counter()
            assert fence_token.check(store, fence).current
            took.append((time.perf_counter() - start) * 1000)
        return statistics.median(took)
    finally:
        store.close()


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def _backends(only: str) -> Iterator[tuple[str, Callable[[], AbstractContextManager[str]]]]:
    if only in ("all", "sqlite"):
        yield "sqlite", sqlite_url
    if only in ("all", "postgres"):
        yield "postgres", postgres_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs of each command (40)")
    parser.add_argument("--only", choices=["all", "sqlite", "postgres"], default="all")
    args = parser.parse_args()
    measure(max(5, args.runs), dict(_backends(args.only)))


if __name__ == "__main__":
    main()
