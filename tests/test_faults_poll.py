"""The fault suite, poll triggers: each polled item fires exactly once while workers die.

``poll_exactly_once``: three real ``li worker`` processes (lease 4 s) poll one fake source
every second (``--poll``, ``--key id``, ``--backfill``, ``--retries 3``) while a writer
thread appends 200 items to it over about 24 s. Meanwhile, every 1.5 to 3 s, one worker
is SIGKILLed (and a new one started in its place) or SIGSTOPped for longer than its lease
and then SIGCONTed, at least twice each per round. Once all 200 items are there, the
workers drain, then stop.

The action is a ``run`` of a small program that appends ``start``, ``tick`` and ``end``
lines to a ledger of its event (the key from ``LIRUN_EVENT_KEY``; its copy named by its
execution's id, ``LIRUN_PARENT_RUN_ID``). In every round (``support.faultkit``'s categories):

- ``lost``: every item has exactly one ``schedule_events`` row, with the one first run
  it fired; every run of an event (its first and its retries) names that event; each
  event's runs settle, with one completed run that is not a marked repeat;
- ``overlap``: no two copies of one event ran at the same instant (the ledger);
- ``lying``: a completed run's copy ended; a run stopped by its lease whose worker lived
  on has no execution recorded completed (else the worker corrects the record); every
  copy that ended beyond the first is accounted for by the record (a run stopped by its
  lease: its worker SIGKILLed before it could say how its work ended, or the copy
  stopped between its last ledger line and its exit; or a marked repeat);
- ``escaped``: no worker, guard, poll command or action process is left once the
  workers stopped; ``traceback``: none in any worker's stderr.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lirun.store import Store, open_store
from support.faultkit import (
    ROUNDS,
    TAG_VAR,
    TRACEBACK,
    Escaped,
    Lost,
    Lying,
    Round,
    TracebackSeen,
    describe,
    fault_env,
    leftover_processes,
    li,
    li_argv,
    run_rounds,
    tail,
)
from support.ledgerkit import Copy, check_no_overlap
from support.pg import make_pg_url, pg_unavailable

pytestmark = [pytest.mark.faults, pytest.mark.slow]

ITEMS = 200
FEED_SECONDS = 24.0  # the source grows to ITEMS over about this long
LEASE = 4.0
RETRIES = 3
WORK_SECONDS = 0.2
WORKERS = 3
# The drain fails when no run moved for this long: longer than a lease lapse and its
# confirmation, and than the queue's stalled-job recovery (20 s) and sweep (10 s).
STUCK_SECONDS = 40.0
TERMINAL = {"completed", "failed", "cancelled", "timed_out", "skipped"}
LAPSED = "schedule.failed.lease_lapsed"
LEASE_LOST = "schedule.cancelled.lease_lost"
SUPERSEDED = "schedule.cancelled.superseded"
STOPPED_BY_LEASE = {LAPSED, LEASE_LOST}
RETRYABLE_ENDS = STOPPED_BY_LEASE

# The source: the whole lines of the feed, as JSON lines (a line the writer has not
# finished is left for the next poll).
SOURCE = """\
import sys
with open(sys.argv[1]) as feed:
    text = feed.read()
sys.stdout.write(text[: text.rfind("\\n") + 1])
"""

# The work: ``start``, a ``tick`` every 0.1 s, ``end`` in ledger-<event key>; its copy is
# named by the execution's run id (LIRUN_PARENT_RUN_ID), which the schedule run links.
WORK = """\
import os, sys, time
key = os.environ.get("LIRUN_EVENT_KEY", "MISSING")
path = os.path.join(sys.argv[1], "ledger-" + key)
copy = f"{os.environ.get('LIRUN_PARENT_RUN_ID', '-')}.{os.getpid()}.{os.urandom(3).hex()}"

def line(word):
    with open(path, "a") as handle:
        handle.write(f"{word} {copy} {time.time():.3f}\\n")

line("start")
until = time.monotonic() + float(sys.argv[2])
while time.monotonic() < until:
    time.sleep(0.1)
    line("tick")
line("end")
"""


@dataclass
class Pool:
    """The round's ``li worker`` processes: started, killed, frozen, replaced."""

    rnd: Round
    env: dict[str, str]
    procs: list[Any] = field(default_factory=list)
    killed: list[Any] = field(default_factory=list)
    frozen: Any = None
    kills: int = 0
    freezes: int = 0

    def start(self) -> Any:
        index = len(self.procs) + len(self.killed)
        log = self.rnd.workdir / f"worker-{index}.log"
        argv = li_argv("worker", "--lease", f"{LEASE:g}s", "--grace", "1s", "--concurrency", "2")
        with open(log, "wb") as sink:
            proc = subprocess.Popen(
                argv, env={**self.env, TAG_VAR: self.rnd.tag}, cwd=self.rnd.workdir,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink,
            )  # fmt: skip
        proc.log = log  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def wait_started(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            while " started: " not in proc.log.read_text(errors="replace"):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise Lost(f"a worker did not start: {tail(proc.log.read_text())}")
                time.sleep(0.05)

    def victim(self) -> Any:
        """A live worker that is not frozen, one running work more often than not."""
        live = [p for p in self.procs if p is not self.frozen and _started(p)]
        busy = [p for p in live if _runs_work(p.pid)]
        pool = busy if busy and self.rnd.rng.random() < 0.75 else live
        return self.rnd.rng.choice(pool)

    def kill(self) -> None:
        proc = self.victim()
        proc.kill()
        proc.wait()
        self.procs.remove(proc)
        self.killed.append(proc)
        self.kills += 1
        self.start()

    def freeze(self) -> float:
        """SIGSTOP a worker; returns for how long it is to stay stopped."""
        self.frozen = self.victim()
        os.kill(self.frozen.pid, signal.SIGSTOP)
        self.freezes += 1
        return LEASE + self.rnd.rng.uniform(1.0, 3.0)

    def thaw(self) -> None:
        if self.frozen is not None:
            os.kill(self.frozen.pid, signal.SIGCONT)
            self.frozen = None

    def stop(self) -> None:
        self.thaw()
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def every(self) -> list[Any]:
        return [*self.procs, *self.killed]

    def killed_worker_ids(self) -> set[str]:
        return {wid for p in self.killed for wid in _worker_ids(p.log)}


def _started(proc: Any) -> bool:
    return proc.poll() is None and " started: " in proc.log.read_text(errors="replace")


def _worker_ids(log: Path) -> list[str]:
    return re.findall(r"worker (\S+) started: ", log.read_text(errors="replace"))


def _runs_work(pid: int) -> bool:
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
        return any("work.py" in " ".join(c.cmdline()) for c in children)
    except psutil.Error:
        return False


def feed(path: Path, stop: threading.Event) -> None:
    """Append ITEMS items to the source over about FEED_SECONDS, one write per line."""
    gap = FEED_SECONDS / ITEMS
    began = time.monotonic()
    for n in range(1, ITEMS + 1):
        if stop.is_set():
            return
        line = json.dumps({"id": n, "title": f"item {n}"}) + "\n"
        with open(path, "a") as handle:
            handle.write(line)
        time.sleep(max(0.0, began + n * gap - time.monotonic()))


def inject_faults(rnd: Round, pool: Pool, writer: threading.Thread) -> None:
    """Kill and freeze workers until the writer is done and each fault came twice."""
    thaw_at = None
    kinds = ["kill", "freeze"]
    rnd.rng.shuffle(kinds)
    plan = iter(kinds)  # the first two faults: one of each
    next_at = time.monotonic() + rnd.rng.uniform(1.5, 3.0)
    while writer.is_alive() or pool.kills < 2 or pool.freezes < 2 or thaw_at is not None:
        now = time.monotonic()
        if thaw_at is not None and now >= thaw_at:
            pool.thaw()
            thaw_at = None
        ready = any(p is not pool.frozen and _started(p) for p in pool.procs)
        if ready and now >= next_at and (writer.is_alive() or pool.kills < 2 or pool.freezes < 2):
            kind = next(plan, None) or rnd.rng.choice(["kill", "freeze"])
            if kind == "freeze" and thaw_at is None:
                thaw_at = now + pool.freeze()
            else:
                pool.kill()
            next_at = now + rnd.rng.uniform(1.5, 3.0)
        time.sleep(0.05)


def schedule_runs(store: Store, schedule_id: str) -> list[dict[str, Any]]:
    rows = store.connector.read(
        "SELECT * FROM schedule_runs WHERE schedule_id = :s ORDER BY created_at, id",
        {"s": schedule_id},
    )
    return [dict(r) for r in rows]


def chains(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each first run's id → it and its retries, in attempt order."""
    by_retry_of = {r["retry_of"]: r for r in runs if r.get("retry_of")}
    found = {}
    for run in runs:
        if run.get("retry_of"):
            continue
        chain = [run]
        while chain[-1]["id"] in by_retry_of:
            chain.append(by_retry_of[chain[-1]["id"]])
        found[run["id"]] = chain
    return found


def awaiting(chain: list[dict[str, Any]]) -> bool:
    """The chain is not over: a run not ended, or one stopped by its lease whose retry
    is still to be written."""
    if any(r["status"] not in TERMINAL for r in chain):
        return True
    if any(r["status"] == "completed" for r in chain):
        return False
    last = chain[-1]
    return last.get("status_reason_code") in RETRYABLE_ENDS and int(last["attempt"]) <= RETRIES


def settle(store: Store, schedule_id: str) -> list[dict[str, Any]]:
    """The schedule's runs once every item fired and every chain is over; Lost when
    nothing moved for STUCK_SECONDS (on a busy machine the drain takes what it takes:
    only a standstill is a failure), naming what is still open."""
    last, moved = None, time.monotonic()
    while True:
        runs = schedule_runs(store, schedule_id)
        open_ = [c for c in chains(runs).values() if awaiting(c)]
        seen, _fired = store.events.count(schedule_id)
        if seen >= ITEMS and not open_:
            return runs
        now = (seen, len(runs), tuple(sorted((r["id"], r["status"]) for r in runs)))
        if now != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved > STUCK_SECONDS:
            states = [[(r["id"][:8], r["status"], r.get("status_reason_code")) for r in c]
                      for c in open_[:5]]  # fmt: skip
            raise Lost(
                f"nothing moved for {STUCK_SECONDS:.0f}s: {seen} events seen, "
                f"{len(open_)} open, e.g. {states}"
            )
        time.sleep(0.3)


def check_events(store: Store, schedule_id: str, runs: list[dict[str, Any]]) -> None:
    """One event row per item, each with its first run, and every run names its event."""
    events = store.events.list(schedule_id, limit=10 * ITEMS)
    keys = sorted(e.event_key for e in events)
    want = sorted(str(n) for n in range(1, ITEMS + 1))
    if keys != want:
        extra, missing = sorted(set(keys) - set(want)), sorted(set(want) - set(keys))
        raise Lost(f"events {len(keys)}: missing {missing[:10]}, extra {extra[:10]}")
    if any(e.baseline or not e.schedule_run_id for e in events):
        raise Lost("an event was stored without the run it fires (--backfill fires all)")
    first = {r["id"]: r for r in runs if not r.get("retry_of")}
    for event in events:
        run = first.get(str(event.schedule_run_id))
        if run is None or run.get("event_key") != event.event_key:
            raise Lost(f"event {event.event_key}: its run {event.schedule_run_id} is not there")
    if len(first) != ITEMS:
        raise Lost(f"{len(first)} first runs for {ITEMS} events")
    for chain in chains(runs).values():
        keys_named = {r.get("event_key") for r in chain}
        if keys_named != {chain[0]["event_key"]}:
            raise Lost(f"a retry does not name its event: {keys_named}")


def check_chain(
    chain: list[dict[str, Any]],
    found: list[Copy],
    killed: set[str],
    repeats: set[str],
    executions: dict[str, str],
) -> tuple[int, int]:
    """One event's runs against its ledger; returns (lapsed runs, repeats)."""
    key = chain[0]["event_key"]
    outcomes = [(r["status"], r.get("status_reason_code"), r.get("worker_id")) for r in chain]
    by_run = {str(c.pid).split(".")[0]: c for c in found}
    for run in chain:
        reason = run.get("status_reason_code")
        if run["status"] == "completed":
            continue
        if reason not in STOPPED_BY_LEASE and reason != SUPERSEDED:
            raise Lost(f"event {key}: a run ended {run['status']} ({reason}): {outcomes}")
    completed = [r for r in chain if r["status"] == "completed"]
    counted = [r for r in completed if r["id"] not in repeats]
    if len(counted) != 1:
        raise Lost(f"event {key}: {len(counted)} completed runs (not repeats): {outcomes}")
    excused = 0
    for run in chain:
        copy = by_run.get(str(run.get("session_id")))
        if run["status"] == "completed" and (copy is None or not copy.ended):
            raise Lying(
                f"event {key}: run {run['id']} (execution {run.get('session_id')}) completed "
                f"but its copy did not end: copies {[(c.pid, c.ended) for c in found]}"
            )
        if run.get("status_reason_code") in STOPPED_BY_LEASE and copy is not None and copy.ended:
            # Its worker lived on: the execution's own record must not say it completed
            # (a copy stopped between its last line and its exit did not, to lirun).
            execution = executions.get(str(run.get("session_id")))
            if run.get("worker_id") not in killed and execution == "completed":
                raise Lying(
                    f"event {key}: run {run['id']} {run['status_reason_code']} though its "
                    f"execution completed and its worker lived to say so: {outcomes}"
                )
            excused += 1
    ended = [c for c in found if c.ended]
    marked = len([r for r in completed if r["id"] in repeats])
    if len(ended) > 1 + excused + marked:
        raise Lying(
            f"event {key}: done {len(ended)} times, the record accounts for "
            f"{1 + excused + marked}: {outcomes}"
        )
    lapsed = len([r for r in chain if r.get("status_reason_code") in STOPPED_BY_LEASE])
    return lapsed, marked


def check_ledgers(
    rnd: Round,
    ledgers: Path,
    runs: list[dict[str, Any]],
    killed: set[str],
    repeats: set[str],
    executions: dict[str, str],
) -> None:
    names = sorted(p.name for p in ledgers.iterdir())
    if "ledger-MISSING" in names:
        raise Lost("a run's work had no LIRUN_EVENT_KEY in its environment")
    lapsed = marked = 0
    for chain in chains(runs).values():
        found = check_no_overlap(ledgers / f"ledger-{chain[0]['event_key']}")
        one, two = check_chain(chain, found, killed, repeats, executions)
        lapsed, marked = lapsed + one, marked + two
    rnd.figure("lapsed_runs", lapsed)
    rnd.figure("repeats", marked)


def check_logs(pool: Pool) -> None:
    for proc in pool.every():
        text = proc.log.read_text(errors="replace")
        if TRACEBACK in text:
            raise TracebackSeen(f"{proc.log.name}: {text[text.index(TRACEBACK) :][:1500]}")


def poll_round(rnd: Round, url: str) -> None:
    began = time.monotonic()
    env = fault_env(rnd.workdir / "home", url)
    source, work = rnd.workdir / "source.py", rnd.workdir / "work.py"
    source.write_text(SOURCE)
    work.write_text(WORK)
    feed_path, ledgers = rnd.workdir / "feed.jsonl", rnd.workdir / "ledgers"
    feed_path.write_text("")
    ledgers.mkdir()
    added = li(
        rnd,
        "schedule", "add", "items",
        "--poll", f"{sys.executable} {source} {feed_path}", "--key", "id", "--every", "1s",
        "--backfill", "--retries", str(RETRIES),
        "--", "run", "--cwd", str(rnd.workdir), sys.executable, str(work), str(ledgers),
        f"{WORK_SECONDS:g}",
        env=env,
    )  # fmt: skip
    if added.rc != 0:
        raise Lost(f"li schedule add exited {added.rc}: {tail(added.err)}")
    store = open_store(url)
    pool = Pool(rnd, env)
    stop = threading.Event()
    writer = threading.Thread(target=feed, args=(feed_path, stop), name="feed")
    try:
        for _ in range(WORKERS):
            pool.start()
        pool.wait_started()
        writer.start()
        inject_faults(rnd, pool, writer)
        fed = time.monotonic()
        row = store.schedules.get("items")
        assert row is not None
        try:
            runs = settle(store, row.id)
            rnd.figure("drain_s", round(time.monotonic() - fed, 1))
        finally:
            pool.stop()
        rnd.note(f"{pool.kills} kills, {pool.freezes} freezes")
        rnd.figure("kills", pool.kills)
        rnd.figure("freezes", pool.freezes)
        check_logs(pool)
        left = leftover_processes(rnd.tag, grace=3.0)
        if left:
            raise Escaped(f"processes outlived the workers: {describe(left)}")
        runs = schedule_runs(store, row.id)
        check_events(store, row.id, runs)
        marked = store.connector.read(
            "SELECT target_id FROM admin_events WHERE event_type = 'schedule_run_repeat'"
        )
        repeats = {str(r["target_id"]) for r in marked}
        sessions = store.connector.read("SELECT id, status FROM sessions")
        executions = {str(r["id"]): str(r["status"]) for r in sessions}
        check_ledgers(rnd, ledgers, runs, pool.killed_worker_ids(), repeats, executions)
        rnd.figure("seconds", round(time.monotonic() - began, 1))
    finally:
        stop.set()
        pool.stop()
        if writer.is_alive():
            writer.join()
        store.close()


@pytest.mark.postgres
def test_poll_exactly_once_postgres(tmp_path: Path) -> None:
    """Three workers on PostgreSQL (its queue transport), a schema per round."""
    reason = pg_unavailable()
    if reason:
        if os.environ.get("LIRUN_TEST_REQUIRE_PG") == "1":
            pytest.fail(f"PostgreSQL is required (LIRUN_TEST_REQUIRE_PG=1) but: {reason}")
        pytest.skip(f"PostgreSQL unavailable: {reason}")

    def body(rnd: Round) -> None:
        schema = make_pg_url()
        try:
            poll_round(rnd, next(schema))
        finally:
            next(schema, None)  # drops the round's schema

    run_rounds("poll_exactly_once[postgres]", body, tmp_path, rounds=_rounds())


def test_poll_exactly_once_sqlite(tmp_path: Path) -> None:
    """Three workers on one SQLite file."""
    run_rounds(
        "poll_exactly_once[sqlite]",
        lambda rnd: poll_round(rnd, str(rnd.workdir / "state.db")),
        tmp_path,
        rounds=_rounds(),
    )


def _rounds() -> int:
    """A round takes about a minute (more on a loaded machine): a tenth of the rounds of a
    quick kind (CI's 20: 2 per backend; the default 3: 1)."""
    return max(1, ROUNDS // 10)
