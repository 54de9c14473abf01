"""From a new item in a polled source to its run starting, with one idle ``li worker``.

    .venv/bin/python bench/bench_poll.py [--items 10] [--every 1s] [--db URL]

A throwaway LIRUN_HOME; the database is a fresh SQLite file unless ``--db`` names one.
A ``--poll`` schedule polls a file of JSON lines (``cat``) every ``--every``; after its
baseline poll the bench appends one item at a time, at a random point of the poll
interval, and waits for the run's child (which writes its ``time.time()`` first) to
start before the next.

- ``poll.new_item_to_run_start_s`` (median) and ``poll.new_item_to_run_start_max_s``
  [budget: <= the poll interval + 2 s; issue 32]: the item appended to its run's child
  starting.
- ``poll.interval_s``: the poll interval measured against.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchkit import out

STAMP = "import sys, time; open(sys.argv[1], 'a').write(repr(time.time()) + chr(10))"


def _until(check: Callable[[], object], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("bench_poll: timed out waiting for the worker")
        time.sleep(0.005)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--every", default="1s")
    parser.add_argument("--db", default=None, help="database URL (default: a new SQLite file)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="lirun-bench-poll-") as tmp:
        base = Path(tmp)
        url = args.db or str(base / "state.db")
        env = {**os.environ, "LIRUN_HOME": str(base / "home"), "LIRUN_DB_URL": url}
        os.environ.update({"LIRUN_HOME": env["LIRUN_HOME"], "LIRUN_DB_URL": url})
        from lirun.schedules import registry
        from lirun.schedules.actions import parse_action
        from lirun.schedules.definition import Definition, make_policies
        from lirun.schedules.triggers import poll_trigger
        from lirun.store import open_store

        store = open_store(url)
        feed = base / "feed.jsonl"
        feed.write_text(json.dumps({"id": 0}) + "\n")
        stamps = base / "stamps"
        stamps.mkdir()
        now = int(time.time())
        trigger = poll_trigger(f"cat {feed}", now, every=args.every)
        action = [
            "run", sys.executable, "-c", STAMP, str(stamps / "{{ event.id }}"),
        ]  # fmt: skip
        definition = Definition(
            name="bench-poll",
            trigger=trigger,
            action=parse_action(action, base=tmp),
            policies=make_policies({"overlap": "allow"}, trigger),
        )
        registry.add(store, definition, now=now)
        with open(base / "worker.log", "wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "lirun", "worker"],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, cwd=tmp,
            )  # fmt: skip
        try:

            def baselined() -> bool:
                row = store.schedules.get("bench-poll")
                return row is not None and row.last_poll_ok_at is not None

            _until(baselined)
            interval = float(trigger.seconds or 1)
            lags = []
            for n in range(1, args.items + 1):
                time.sleep(random.uniform(0, interval))
                appended = time.time()
                with feed.open("a") as file:
                    file.write(json.dumps({"id": n}) + "\n")
                stamp = stamps / str(n)

                def started(s: Path = stamp) -> bool:
                    return s.exists() and s.read_text().endswith("\n")

                _until(started)
                lags.append(float(stamp.read_text()) - appended)
            out("poll.items", len(lags))
            out("poll.interval_s", interval)
            out("poll.new_item_to_run_start_s", statistics.median(lags))
            out("poll.new_item_to_run_start_max_s", max(lags))
        finally:
            worker.terminate()
            worker.wait(timeout=30)
            store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
