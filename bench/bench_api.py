"""The client's cost: ``Client().run(["true"])`` in a warm interpreter on SQLite.

    .venv/bin/python bench/bench_api.py [--runs N]

Prints ``name: value`` lines (budget in brackets; issue 31):
- ``api.run_true_median_ms`` [<= 30]: one ``Client(db, settings).run(["true"])`` (the
  client made, the run supervised and recorded, its ``Run`` read back, the client
  closed) in a plain directory, median over ``--runs``, after warm-up runs that load
  every module; ``api.run_true_p90_ms`` its 90th percentile.
- ``api.execute_true_median_ms``: ``execute()`` of the same request (which opens and
  closes the database itself, as a client made for one run does), timed alternately
  with the client's runs so a busy machine moves both alike; ``api.client_share_ms``
  is the difference: what the client adds (the program checked, the ``Run`` read back).
- ``api.run_true_git_median_ms``: the same in a git repository, as a run usually has:
  the run's change evidence (``record.evidence``) then asks git, in processes of its own.
- ``api.bare_true_median_ms`` (``subprocess.run(["true"])`` alone, the floor) and
  ``api.overhead_median_ms`` (the plain directory's median less it).
- ``api.status_median_ms``: ``Client.status(id)`` of a finished run, on an open client.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchkit import out, sqlite_url
from lirun import Client
from lirun.settings import Settings

WARMUP = 3


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def timed_runs(
    url: str, settings: Settings, cwd: str, count: int
) -> tuple[list[float], list[float], str]:
    """``Client().run(["true"])`` and ``execute()`` of the same request, alternately,
    ``count`` times each in ``cwd`` after the warm-up; both samples and the last run's id."""
    from lirun.exec.execution import execute
    from lirun.exec.task import Task, build_request

    client_samples, execute_samples, last = [], [], ""
    for index in range(WARMUP + count):
        start = time.perf_counter()
        with Client(url, settings=settings) as client:
            run = client.run(["true"], cwd=cwd)
        middle = time.perf_counter()
        request = build_request(Task(run=("true",)), cwd=cwd, db_url=url, settings=settings)
        result = execute(request)  # opens and closes the database itself, as the client
        end = time.perf_counter()
        if index >= WARMUP:
            client_samples.append(middle - start)
            execute_samples.append(end - middle)
        assert run.success, run
        assert result.status == "completed", result
        last = run.id
    return client_samples, execute_samples, last


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args(argv)
    with sqlite_url() as url, tempfile.TemporaryDirectory(prefix="lirun-bench-") as tmp:
        home, plain, repo = (os.path.join(tmp, name) for name in ("home", "plain", "repo"))
        os.makedirs(plain)
        subprocess.run(["git", "init", "-q", repo], check=True)
        os.environ["LIRUN_HOME"] = home  # the runs' directories: as a user's program would
        settings = Settings.from_env()
        runs, executes, last = timed_runs(url, settings, plain, args.runs)
        in_git, _, _ = timed_runs(url, settings, repo, args.runs)
        bare = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run(["true"], cwd=plain, check=True)
            bare.append(time.perf_counter() - start)
        reads = []
        with Client(url, settings=settings) as client:
            client.status(last)
            for _ in range(args.runs):
                start = time.perf_counter()
                client.status(last)
                reads.append(time.perf_counter() - start)
    out("api.run_true_median_ms", _ms(runs))
    out("api.run_true_p90_ms", statistics.quantiles(runs, n=10)[-1] * 1000)
    out("api.execute_true_median_ms", _ms(executes))
    out("api.client_share_ms", _ms(runs) - _ms(executes))
    out("api.run_true_git_median_ms", _ms(in_git))
    out("api.bare_true_median_ms", _ms(bare))
    out("api.overhead_median_ms", _ms(runs) - _ms(bare))
    out("api.status_median_ms", _ms(reads))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
