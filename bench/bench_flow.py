"""Flow orchestration throughput and memory. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_flow.py [--legs 50,200] [--parallel 8] [--backend sqlite]

One flow per size: a ``for_each`` leg over N literal items, each instance the trivial
command ``echo {{ item }}`` (a rendered template), run at ``--parallel``; each leg is a
full supervised execution with its own row, run directory, evidence and teardown, and
the flow writes its checkpoint after every leg. Each measurement runs in a fresh process
(a throwaway LIRUN_HOME, the database on ``--backend``, the cwd an empty directory):

- ``flow.<N>_legs.legs_per_s``: N / wall time of ``run_flow`` (creation to the terminal
  write); ``flow.<N>_legs.wall_s`` that wall time.
- ``flow.<N>_legs.peak_rss_mb``: the process's peak resident set size.
- ``flow.<N>_legs.traced_peak_mb``: the peak of Python allocations (tracemalloc, in a
  second run of its own, since tracing slows everything down).
- ``flow.rss_growth_mb`` / ``flow.traced_growth_mb``: largest minus smallest size's
  figure; flat in N means orchestration holds nothing per leg beyond its small record.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from contextlib import ExitStack

from benchkit import out, postgres_url, sqlite_url

CHILD = r"""
import json, os, resource, sys, time, tracemalloc
from lirun.exec.task import Task
from lirun.flows.engine import FlowOptions, run_flow
from lirun.flows.spec import FlowSpec, ForEach, LegSpec

legs, parallel, db_url, cwd, traced = sys.argv[1:6]
spec = FlowSpec(
    legs=(LegSpec("each", Task(run=("echo", "{{ item }}")),
                  for_each=ForEach(items=tuple(f"item-{n}" for n in range(int(legs))))),),
    cwd=cwd,
)
if traced == "1":
    tracemalloc.start()
started = time.perf_counter()
report = run_flow(spec, db_url=db_url, options=FlowOptions(parallel=int(parallel)))
wall = time.perf_counter() - started
traced_peak = tracemalloc.get_traced_memory()[1] if traced == "1" else 0
assert report.status == "completed", report.reason_summary
assert len(report.legs) == int(legs)
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"wall": wall, "rss_kb": rss_kb, "traced": traced_peak}))
"""


def _measure(legs: int, parallel: int, backend: str, traced: bool) -> dict[str, float]:
    with ExitStack() as stack:
        home = stack.enter_context(tempfile.TemporaryDirectory(prefix="lirun-bench-home-"))
        cwd = stack.enter_context(tempfile.TemporaryDirectory(prefix="lirun-bench-cwd-"))
        url = stack.enter_context(sqlite_url() if backend == "sqlite" else postgres_url())
        env = {**os.environ, "LIRUN_HOME": home}
        env.pop("LIRUN_DB_URL", None)
        argv = [
            sys.executable,
            "-c",
            CHILD,
            str(legs),
            str(parallel),
            url,
            cwd,
            "1" if traced else "0",
        ]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"bench child failed: {proc.stderr[-2000:]}")
        result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--legs", default="50,200", help="comma-separated fan-out sizes")
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    args = parser.parse_args()
    sizes = [int(n) for n in args.legs.split(",")]
    out("flow.backend", args.backend)
    out("flow.parallel", args.parallel)
    rss: list[float] = []
    traced: list[float] = []
    for legs in sizes:
        timed = _measure(legs, args.parallel, args.backend, traced=False)
        memory = _measure(legs, args.parallel, args.backend, traced=True)
        prefix = f"flow.{legs}_legs"
        out(f"{prefix}.wall_s", timed["wall"])
        out(f"{prefix}.legs_per_s", legs / timed["wall"])
        rss.append(timed["rss_kb"] / 1024)
        traced.append(memory["traced"] / 1024 / 1024)
        out(f"{prefix}.peak_rss_mb", rss[-1])
        out(f"{prefix}.traced_peak_mb", traced[-1])
    out("flow.rss_growth_mb", max(rss) - min(rss))
    out("flow.traced_growth_mb", max(traced) - min(traced))


if __name__ == "__main__":
    main()
