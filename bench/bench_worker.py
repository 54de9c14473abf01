"""Dispatch latency and firing accuracy of ``li worker``. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_worker.py [--runs 40] [--fire-seconds 10] [--db URL]

A throwaway LIRUN_HOME; the database is a fresh SQLite file unless ``--db`` names one
(a PostgreSQL URL measures that backend with the transport ``li worker`` picks for it).
One idle ``li worker`` process (concurrency 1) serves everything.

- ``dispatch.<backend>.median_ms`` / ``.p95_ms`` / ``.max_ms``: ``li submit``'s library
  call (``lirun.schedules.submit.submit``: the queued row, its history row, the
  transport's offer) to the moment the action's child process runs (it writes its own
  ``time.time()`` as its first act), one run at a time with the worker idle in between.
- ``firing.<backend>.median_ms`` / ``.max_ms``: an ``--every 1s`` schedule for
  ``--fire-seconds``: the child's start minus the due time, per fire (the target: every
  fire started within 1 s of its due time).
- ``firing.<backend>.row_start_max_ms``: the schedule run's ``started_at`` minus its due
  time (the worker's part, without the child's start-up).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAMP = "import sys, time; open(sys.argv[1], 'a').write(repr(time.time()) + chr(10))"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _until(check: Callable[[], object], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("bench_worker: timed out waiting for the worker")
        time.sleep(0.002)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--fire-seconds", type=int, default=10)
    parser.add_argument("--db", default=None, help="database URL (default: a new SQLite file)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="lirun-bench-worker-") as tmp:
        base = Path(tmp)
        url = args.db or str(base / "state.db")
        env = {**os.environ, "LIRUN_HOME": str(base / "home"), "LIRUN_DB_URL": url}
        os.environ.update({"LIRUN_HOME": env["LIRUN_HOME"], "LIRUN_DB_URL": url})
        from lirun.schedules import registry
        from lirun.schedules.actions import parse_action
        from lirun.schedules.definition import Definition, make_policies
        from lirun.schedules.submit import submit
        from lirun.schedules.triggers import every_trigger
        from lirun.store import open_store

        store = open_store(url)
        backend = store.dialect
        with open(base / "worker.log", "wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "lirun", "worker"],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, cwd=tmp,
            )  # fmt: skip
        try:
            _until(lambda: b" started: " in (base / "worker.log").read_bytes())
            latencies = []
            for index in range(args.runs):
                stamp = base / f"dispatch-{index}"
                action = parse_action(["run", sys.executable, "-c", STAMP, str(stamp)], base=tmp)
                start = time.time()
                row = submit(store, action)

                def stamped(s: Path = stamp) -> bool:
                    return s.exists() and s.read_text().endswith("\n")

                _until(stamped)
                latencies.append((float(stamp.read_text()) - start) * 1000)

                def ended(run_id: str = row.id) -> bool:
                    status = (store.get_entity("schedule_run", run_id) or {}).get("status")
                    return status not in ("queued", "running")

                _until(ended)
            print(f"dispatch.{backend}.runs: {len(latencies)}")
            print(f"dispatch.{backend}.median_ms: {statistics.median(latencies):.1f}")
            print(f"dispatch.{backend}.p95_ms: {_percentile(latencies, 0.95):.1f}")
            print(f"dispatch.{backend}.max_ms: {max(latencies):.1f}")

            fires = base / "fires"
            now = int(time.time())
            trigger = every_trigger("1s", now)
            definition = Definition(
                name="bench-tick",
                trigger=trigger,
                action=parse_action(["run", sys.executable, "-c", STAMP, str(fires)], base=tmp),
                policies=make_policies({"overlap": "allow"}, trigger),
            )
            schedule = registry.add(store, definition, now=now)
            time.sleep(args.fire_seconds + 0.9)
            registry.set_enabled(store, "bench-tick", False, now=int(time.time()))
            time.sleep(1.0)
            runs = [r for r in store.schedules.list_runs(schedule.id, limit=1000) if r.started_at]
            starts = sorted(float(line) for line in fires.read_text().split())
            dues = sorted(int(r.due_at or 0) for r in runs)
            lags = [(s - d) * 1000 for s, d in zip(starts, dues, strict=False)]
            row_lags = [(float(r.started_at or 0) - int(r.due_at or 0)) * 1000 for r in runs]
            print(f"firing.{backend}.fires: {len(runs)}")
            print(f"firing.{backend}.median_ms: {statistics.median(lags):.1f}")
            print(f"firing.{backend}.max_ms: {max(lags):.1f}")
            print(f"firing.{backend}.row_start_max_ms: {max(row_lags):.1f}")
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
