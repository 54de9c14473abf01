"""Many events at once through two ``li worker`` processes: a poll that finds 1,000 new
items, and 1,000 signed webhook deliveries.

    .venv/bin/python bench/bench_events.py [--events 1000] [--workers 2] [--concurrency 8]
        [--sqlite] [--skip-poll] [--skip-webhook]

A throwaway LIRUN_HOME and a throwaway schema of ``$LIRUN_BENCH_PG_URL`` (``--sqlite``:
a new SQLite file instead). The action of every event is a trivial command (``true``);
the workers run ``--concurrency`` runs each at once.

- Poll: a ``--poll`` schedule (every 1s) reads a file of JSON lines; after its baseline
  poll (the file empty) the bench writes ``--events`` items into it at once. Measured
  from that poll command printing them to the last run ended:
  ``poll.events_per_s`` [budget: >= 20 with 2 workers; issue 32],
  ``poll.stored_to_start_p50_s`` / ``_p99_s`` (a run's row, stored with its event in
  one transaction, to the run starting), ``poll.runs_per_event`` (must be exactly 1).
- Webhook: a real ``li ui`` takes ``--events`` signed deliveries from 8 concurrent
  senders for a ``--webhook`` schedule. ``webhook.intake_per_s`` (202s per second),
  ``webhook.events_per_s`` (first request sent to the last run ended),
  ``webhook.stored_to_start_p50_s`` / ``_p99_s``, ``webhook.runs_per_event``.
- Both: ``*.last_stored_s`` (the start to the last event stored: is the intake or the
  run path the slower?), ``*.most_running`` (runs running at once; at ``workers x
  concurrency`` the slots are full), ``*.worker_cpu_s_per_event`` (the workers' CPU and
  their ended children's: the events per second a core can carry is about its inverse).

Figures (docs/schedules.md, "Figures"): on PostgreSQL at load average ~20 on 2 cores,
medians of 3 runs: poll 18.2 events/s, webhook 12.5 events/s with 34 deliveries/s taken
(before the run threads kept their stores and the intake was pooled: 14.1, 9.1, 12.6).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchkit import out, postgres_url

SECRET = "bench-events-secret"
SENDERS = 8
# The poll command: the items of a JSON-lines file, and when it printed how many.
FEED = """\
import sys, time
lines = [x for x in open(sys.argv[1]) if x.strip()]
sys.stdout.write("".join(lines))
sys.stdout.flush()
with open(sys.argv[2], "a") as stamps:
    stamps.write(f"{time.time()!r} {len(lines)}\\n")
"""


@contextlib.contextmanager
def database(sqlite: bool, base: Path) -> Iterator[str]:
    if sqlite:
        yield str(base / "state.db")
    else:
        with postgres_url() as url:
            yield url


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def most_running(runs: list[Any]) -> int:
    """The most runs running at once (from their start and end times)."""
    edges = sorted(
        [(float(r.started_at), 1) for r in runs if r.started_at is not None]
        + [(float(r.ended_at), -1) for r in runs if r.ended_at is not None]
    )
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


class Bench:
    def __init__(self, base: Path, url: str, args: argparse.Namespace) -> None:
        self.base, self.url, self.args = base, url, args
        self.env = {**os.environ, "LIRUN_HOME": str(base / "home"), "LIRUN_DB_URL": url}
        os.environ.update({"LIRUN_HOME": self.env["LIRUN_HOME"], "LIRUN_DB_URL": url})
        from lirun.store import open_store

        self.store = open_store(url)
        self.procs: list[subprocess.Popen[Any]] = []
        self.workers: list[int] = []

    def add(self, name: str, trigger: Any) -> str:
        from lirun.schedules import registry
        from lirun.schedules.actions import parse_action
        from lirun.schedules.definition import Definition, make_policies

        definition = Definition(
            name=name,
            trigger=trigger,
            action=parse_action(["run", "true"], base=str(self.base)),
            policies=make_policies({"overlap": "allow"}, trigger),
        )
        return registry.add(self.store, definition, now=int(time.time())).id

    def start_workers(self) -> None:
        for n in range(self.args.workers):
            with open(self.base / f"worker-{n}.log", "wb") as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "lirun", "worker",
                     "--concurrency", str(self.args.concurrency)],
                    env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                    stderr=log, cwd=self.base,
                ))  # fmt: skip
            self.workers.append(self.procs[-1].pid)

    def wait_ended(self, schedule_id: str, count: int, timeout: float = 900.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while True:
            runs = self.store.schedules.list_runs(schedule_id, limit=count * 2 + 10)
            if len([r for r in runs if r.ended_at is not None]) >= count:
                return runs
            if time.monotonic() > deadline:
                raise SystemExit(f"bench_events: {count} runs did not end in {timeout:g}s")
            time.sleep(0.25)

    def worker_cpu(self) -> float:
        """CPU seconds the workers used so far, with their ended children's."""
        import psutil

        return sum(sum(psutil.Process(pid).cpu_times()[:4]) for pid in self.workers)

    def report(self, prefix: str, runs: list[Any], began: float, cpu: float) -> None:
        keys = {r.event_key for r in runs}
        ended = max(float(r.ended_at) for r in runs)
        lags = [float(r.started_at) - r.created_at for r in runs if r.started_at is not None]
        failed = [r for r in runs if r.status != "completed"]
        out(f"{prefix}.events", len(keys))
        out(f"{prefix}.seconds", ended - began)
        out(f"{prefix}.events_per_s", len(keys) / (ended - began))
        out(f"{prefix}.stored_to_start_p50_s", percentile(lags, 0.5))
        out(f"{prefix}.stored_to_start_p99_s", percentile(lags, 0.99))
        out(f"{prefix}.last_stored_s", max(r.created_at for r in runs) - began)
        out(f"{prefix}.most_running", most_running(runs))
        out(f"{prefix}.worker_cpu_s_per_event", (self.worker_cpu() - cpu) / len(keys))
        out(f"{prefix}.runs_per_event", len(runs) / len(keys))
        out(f"{prefix}.runs_not_completed", len(failed))

    def poll(self) -> None:
        from lirun.schedules.triggers import poll_trigger

        feed, stamps = self.base / "feed.jsonl", self.base / "stamps"
        feed.write_text("")
        script = self.base / "feed.py"
        script.write_text(FEED)
        command = f"{sys.executable} {script} {feed} {stamps}"
        schedule_id = self.add("bench-poll", poll_trigger(command, int(time.time()), every="1s"))
        deadline = time.monotonic() + 60
        while (row := self.store.schedules.get_by_id(schedule_id)) is None or (
            row.last_poll_ok_at is None
        ):
            if time.monotonic() > deadline:
                raise SystemExit("bench_events: no baseline poll in 60s")
            time.sleep(0.05)
        cpu = self.worker_cpu()
        items = "".join(json.dumps({"id": n}) + "\n" for n in range(self.args.events))
        (self.base / "feed.tmp").write_text(items)
        os.replace(self.base / "feed.tmp", feed)
        runs = self.wait_ended(schedule_id, self.args.events)
        found = [
            float(line.split()[0])
            for line in stamps.read_text().splitlines()
            if int(line.split()[1]) == self.args.events
        ]
        self.report("poll", runs, min(found), cpu)

    def webhook(self) -> None:
        from lirun.schedules.triggers import webhook_trigger
        from lirun.schedules.webhooks import sign

        schedule_id = self.add("bench-hook", webhook_trigger("BENCH_EVENTS_SECRET"))
        ui = subprocess.Popen(
            [sys.executable, "-m", "lirun", "ui", "--port", "0"],
            env={**self.env, "BENCH_EVENTS_SECRET": SECRET},
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.procs.append(ui)
        assert ui.stdout is not None
        hook = ui.stdout.readline().strip() + "hooks/bench-hook"

        def deliver(n: int) -> None:
            body = json.dumps({"id": n}).encode()
            request = urllib.request.Request(
                hook, data=body, method="POST",
                headers={"X-Lirun-Signature": sign(SECRET, body),
                         "Content-Type": "application/json"},
            )  # fmt: skip
            with urllib.request.urlopen(request, timeout=60) as answer:
                assert answer.status == 202, answer.status

        cpu = self.worker_cpu()
        began = time.time()
        with ThreadPoolExecutor(max_workers=SENDERS) as senders:
            list(senders.map(deliver, range(self.args.events)))
        accepted = time.time()
        out("webhook.intake_per_s", self.args.events / (accepted - began))
        self.report("webhook", self.wait_ended(schedule_id, self.args.events), began, cpu)

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=60)
        self.store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--sqlite", action="store_true", help="a SQLite file, not PostgreSQL")
    parser.add_argument("--skip-poll", action="store_true")
    parser.add_argument("--skip-webhook", action="store_true")
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="lirun-bench-events-") as tmp,
        database(args.sqlite, Path(tmp)) as url,
    ):
        bench = Bench(Path(tmp), url, args)
        try:
            out("events.backend", "sqlite" if args.sqlite else "postgresql")
            out("events.workers", args.workers)
            out("events.concurrency", args.concurrency)
            bench.start_workers()
            if not args.skip_poll:
                bench.poll()
            if not args.skip_webhook:
                bench.webhook()
        finally:
            bench.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
