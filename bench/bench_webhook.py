"""From a webhook's 202 to its run starting, with one idle ``li worker`` on PostgreSQL.

    .venv/bin/python bench/bench_webhook.py [--deliveries 10] [--sqlite]

A throwaway LIRUN_HOME and a throwaway schema of ``$LIRUN_BENCH_PG_URL`` (``--sqlite``:
a new SQLite file instead). A real ``li ui`` takes signed deliveries for a ``--webhook``
schedule whose action is a child that writes its ``time.time()`` first; one at a time,
each after the worker has been idle for a random 0-1 s, the bench waits for the child.

- ``webhook.accepted_to_run_start_s`` (median) and ``webhook.accepted_to_run_start_max_s``
  [budget: <= 1 s with an idle worker on PostgreSQL; issue 32]: the 202 received to the
  run's child starting.
- ``webhook.post_s`` (median): the request sent to its 202 received.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchkit import out, postgres_url

STAMP = "import sys, time; open(sys.argv[1], 'a').write(repr(time.time()) + chr(10))"
SECRET = "bench-webhook-secret"


def _until(check: Callable[[], object], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("bench_webhook: timed out waiting")
        time.sleep(0.002)


@contextlib.contextmanager
def database(sqlite: bool, base: Path) -> Iterator[str]:
    if sqlite:
        yield str(base / "state.db")
    else:
        with postgres_url() as url:
            yield url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=10)
    parser.add_argument("--sqlite", action="store_true", help="a SQLite file, not PostgreSQL")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="lirun-bench-hook-") as tmp:
        base = Path(tmp)
        with database(args.sqlite, base) as url:
            env = {**os.environ, "LIRUN_HOME": str(base / "home"), "LIRUN_DB_URL": url}
            os.environ.update({"LIRUN_HOME": env["LIRUN_HOME"], "LIRUN_DB_URL": url})
            from lirun.schedules import registry
            from lirun.schedules.actions import parse_action
            from lirun.schedules.definition import Definition, make_policies
            from lirun.schedules.triggers import webhook_trigger
            from lirun.schedules.webhooks import sign
            from lirun.store import open_store

            store = open_store(url)
            stamps = base / "stamps"
            stamps.mkdir()
            trigger = webhook_trigger("BENCH_HOOK_SECRET")
            action = ["run", sys.executable, "-c", STAMP, str(stamps / "{{ event.id }}")]
            definition = Definition(
                name="bench-hook",
                trigger=trigger,
                action=parse_action(action, base=tmp),
                policies=make_policies({"overlap": "allow"}, trigger),
            )
            registry.add(store, definition, now=int(time.time()))
            store.close()
            procs: list[subprocess.Popen[Any]] = []
            with open(base / "worker.log", "wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "lirun", "worker"],
                    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                    cwd=tmp,
                ))  # fmt: skip
            ui = subprocess.Popen(
                [sys.executable, "-m", "lirun", "ui", "--port", "0"],
                env={**env, "BENCH_HOOK_SECRET": SECRET},
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            procs.append(ui)
            try:
                assert ui.stdout is not None
                hook = ui.stdout.readline().strip() + "hooks/bench-hook"
                time.sleep(2.0)  # the worker is up and idle
                lags, posts = [], []
                for n in range(1, args.deliveries + 1):
                    time.sleep(random.uniform(0, 1))
                    body = json.dumps({"id": n}).encode()
                    request = urllib.request.Request(
                        hook, data=body, method="POST",
                        headers={"X-Lirun-Signature": sign(SECRET, body),
                                 "Content-Type": "application/json"},
                    )  # fmt: skip
                    sent = time.time()
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        assert answer.status == 202, answer.status
                    accepted = time.time()
                    stamp = stamps / str(n)

                    def started(s: Path = stamp) -> bool:
                        return s.exists() and s.read_text().endswith("\n")

                    _until(started)
                    lags.append(float(stamp.read_text()) - accepted)
                    posts.append(accepted - sent)
                out("webhook.backend", "sqlite" if args.sqlite else "postgresql")
                out("webhook.deliveries", len(lags))
                out("webhook.post_s", statistics.median(posts))
                out("webhook.accepted_to_run_start_s", statistics.median(lags))
                out("webhook.accepted_to_run_start_max_s", max(lags))
            finally:
                for proc in procs:
                    proc.terminate()
                for proc in procs:
                    proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
