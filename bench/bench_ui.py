"""The dashboard's figures on SQLite and PostgreSQL. Prints ``name: value`` lines.

    .venv/bin/python bench/bench_ui.py [--backend sqlite|postgres|both] [--runs N]

Figures (N stored runs, default 100,000, imported in batches through the Store):
- ``*.runs_page_<case>_median_ms`` / ``_p95_ms``: server time of ``GET /`` (the HTML runs
  page, 50 rows) measured in-process through Starlette's TestClient (routing, the query,
  the template; no network); ``*.api_runs_<case>_*`` the same for ``GET /api/runs``.
  Cases: ``first`` (no filter), ``filtered`` (status and provider: 1 run in 6 matches),
  ``filtered_none`` (a status and provider no run has together: the worst case, every
  run of that status is looked at), ``text`` (a free-text search matching 1 run in 97),
  ``deep`` (the page after 20 pages of keyset cursors).
- ``*.sse_latency_median_ms`` / ``_p95_ms``: from a status write's commit (its return) to
  the event arriving on an open ``/events`` stream of a real uvicorn server, over
  ``--events`` writes spaced apart.
- ``*.browser_latency_median_ms`` / ``_p95_ms``: from the commit of a run's ending to its
  row showing ``completed`` on the runs page open in headless Chromium (a
  MutationObserver notes the moment; both clocks are this machine's), without a reload.
  Skipped (said so) without Debian's chromium and chromium-driver.
Targets: at most 150 ms for a filtered page of 50 over 100,000 runs; at most 250 ms
median from commit to the browser.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import operator
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from benchkit import out, postgres_url, sqlite_url
from lirun.store import Store, open_store

STATUSES = (
    ("completed", "run.completed.ok"),
    ("completed", "run.completed.ok"),
    ("completed", "run.completed.ok"),
    ("failed", "run.failed.exception"),
    ("timed_out", "run.timed_out.deadline"),
    ("completed_empty", "run.completed_empty.no_evidence"),
)
PROVIDERS = ("claude", "codex", "command")
BATCH = 10_000


def fill(store: Store, runs: int) -> float:
    """Import ``runs`` finished executions spread over the last 30 days; seconds taken."""
    started = time.perf_counter()
    now = time.time()
    for first in range(0, runs, BATCH):
        rows = []
        for i in range(first, min(first + BATCH, runs)):
            status, reason = STATUSES[i % len(STATUSES)]
            rows.append(
                {
                    "id": f"bench-{i:07d}",
                    "status": status,
                    "reason_code": reason,
                    "reason_summary": f"summary {i}",
                    "provider": PROVIDERS[i % len(PROVIDERS)],
                    "model": "m",
                    "prompt": f"task number {i}: refactor module {i % 97}",
                    "created_at": now - 30 * 86400 + i * (30 * 86400 / runs),
                    "ended_at": now - 30 * 86400 + i * (30 * 86400 / runs) + 60,
                    "duration_s": 60.0,
                    "input_tokens": 1000 + i % 500,
                    "output_tokens": 200,
                    "cost_usd": 0.01,
                }
            )
        store.sessions.import_many(rows)
    return time.perf_counter() - started


def timings(call: Callable[[], Any], n: int) -> tuple[float, float]:
    """(median, p95) in ms of ``n`` calls after one warm-up call."""
    call()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def page_times(prefix: str, url: str, n: int) -> None:
    from starlette.testclient import TestClient

    from lirun.ui.app import create_app

    with TestClient(create_app(url, watch=False)) as client:
        query: dict[str, str] = {}
        for _ in range(20):
            query = {"cursor": client.get("/api/runs", params=query).json()["next_cursor"]}
        cases = {
            "first": {},
            "filtered": {"status": "failed", "provider": "claude"},
            "filtered_none": {"status": "failed", "provider": "codex"},
            "text": {"q": "module 42"},
            "deep": query,
        }
        for case, params in cases.items():
            for name, path in (("runs_page", "/"), ("api_runs", "/api/runs")):

                def get(path: str = path, params: dict[str, str] = params) -> None:
                    answer = client.get(path, params=params)
                    assert answer.status_code == 200, answer.text

                median, p95 = timings(get, n)
                out(f"{prefix}.{name}_{case}_median_ms", median)
                out(f"{prefix}.{name}_{case}_p95_ms", p95)


@contextmanager
def serve(url: str) -> Iterator[str]:
    """A real uvicorn server for the dashboard in a thread; its base URL."""
    from lirun.ui.app import create_app
    from lirun.ui.server import DashboardServer

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]  # read now: the server may own (and close) the socket
    server = DashboardServer(create_app(url))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def sse_latency(prefix: str, url: str, events: int) -> None:
    store = open_store(url)
    arrived: dict[str, float] = {}
    got = threading.Condition()
    with serve(url) as base:
        host, port = base.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", "/events")
        stream = conn.getresponse()

        def read() -> None:
            with contextlib.suppress(OSError, ValueError):  # ends when the test closes it
                for raw in stream.fp:
                    take(raw.decode().strip())

        def take(line: str) -> None:
            if not line.startswith("data: "):
                return
            data = json.loads(line[6:])
            if data.get("status") == "completed":
                with got:
                    arrived[data["id"]] = time.perf_counter()
                    got.notify_all()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        latencies = []
        for i in range(events):
            run_id = f"sse-{i}"
            store.sessions.create(id=run_id, owner_pid=None)
            time.sleep(0.05)  # spaced writes: each event measured on its own
            store.update_status(
                "session", run_id, new_status="completed", reason_code="run.completed.ok"
            )
            committed = time.perf_counter()
            with got:
                got.wait_for(partial(operator.contains, arrived, run_id), timeout=10)
            latencies.append(max(0.0, arrived.get(run_id, float("inf")) - committed) * 1000)
        with contextlib.suppress(OSError):  # wakes the reader blocked on the socket
            conn.sock.shutdown(socket.SHUT_RDWR)
        reader.join(5)
        conn.close()
    store.close()
    latencies.sort()
    out(f"{prefix}.sse_latency_median_ms", statistics.median(latencies))
    out(f"{prefix}.sse_latency_p95_ms", latencies[int(0.95 * (len(latencies) - 1))])


SEEN_SCRIPT = """
const id = arguments[0], done = arguments[arguments.length - 1];
const seen = () => document.querySelector('#run-' + CSS.escape(id) + '[data-status="completed"]');
if (seen()) { done(Date.now()); return; }
const watch = new MutationObserver(() => { if (seen()) { watch.disconnect(); done(Date.now()); } });
watch.observe(document.getElementById("main"), {subtree: true, childList: true, attributes: true});
"""


def chromium() -> Any:
    """Headless Debian Chromium through its chromedriver, or None when missing."""
    import os
    import tempfile

    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        f"--user-data-dir={tempfile.mkdtemp(prefix='lirun-bench-chromium-')}",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def browser_latency(prefix: str, url: str, events: int) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium()
    if driver is None:
        out(f"{prefix}.browser_latency", "skipped: no chromium / chromium-driver")
        return
    latencies = []
    try:
        driver.set_script_timeout(10)
        with serve(url) as base:
            driver.get(base + "/")
            WebDriverWait(driver, 10).until(lambda d: d.find_element("id", "live").text == "live")
            for i in range(events):
                run_id = f"browser-{i}"
                committed: list[float] = []

                def finish(run_id: str = run_id, committed: list[float] = committed) -> None:
                    store = open_store(url)  # a Store per thread
                    try:
                        store.sessions.create(id=run_id, owner_pid=None)
                        time.sleep(0.1)
                        store.update_status(
                            "session",
                            run_id,
                            new_status="completed",
                            reason_code="run.completed.ok",
                        )
                        committed.append(time.time())
                    finally:
                        store.close()

                writer = threading.Timer(0.1, finish)
                writer.start()
                seen_ms = driver.execute_async_script(SEEN_SCRIPT, run_id)
                writer.join()
                latencies.append(max(0.0, seen_ms - committed[0] * 1000))
    finally:
        driver.quit()
    latencies.sort()
    out(f"{prefix}.browser_latency_median_ms", statistics.median(latencies))
    out(f"{prefix}.browser_latency_p95_ms", latencies[int(0.95 * (len(latencies) - 1))])


def bench(prefix: str, url: str, runs: int, n: int, events: int) -> None:
    store = open_store(url)
    try:
        out(f"{prefix}.runs", runs)
        out(f"{prefix}.import_s", fill(store, runs))
    finally:
        store.close()
    started = time.perf_counter()
    page_times(prefix, url, n)
    out(f"{prefix}.pages_bench_s", time.perf_counter() - started)
    started = time.perf_counter()
    sse_latency(prefix, url, events)
    out(f"{prefix}.sse_bench_s", time.perf_counter() - started)
    browser_latency(prefix, url, min(events, 20))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--events", type=int, default=30)
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        with sqlite_url() as url:
            bench("sqlite", url, args.runs, args.requests, args.events)
    if args.backend in ("postgres", "both"):
        with postgres_url() as url:
            bench("postgres", url, args.runs, args.requests, args.events)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
