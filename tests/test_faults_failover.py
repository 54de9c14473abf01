"""The fault suite, failover: the PostgreSQL primary dies, its standby is promoted, and
nothing is lost, doubled or stuck (``db_failover``).

Each round makes a fresh primary and streaming standby (``support.pgreplica``) on free
ports and points every `li` at both through one URL, the standby named second. Under
load (three `li worker`s firing a 1 s schedule and running submitted work, plain `li
run`s each with a `li wait`, a three-leg `li flow run`, `li team send` and a `li team
inbox --follow`: ``support.failoverkit``) the primary is killed as a lost host would be
(SIGKILL of every server process, what `pg_ctl -m immediate` does to them) at a random
moment and the standby promoted 0 to 10 s later; in half the rounds the old primary is
then rewound, started as the new primary's standby, and the pair fails over again, back
(``LIRUN_FAULT_FAILBACK=0`` fails over once in every round). Then every round checks:

- every `li run` and `li flow run` exited with the code of the outcome the new primary
  holds, and said that outcome (``lost``/``lying``); every `li wait` printed what the
  record holds; every queued run id `li submit` printed exists;
- no piece of work (a due time of the schedule, a submission, with their retries) ran two
  copies at the same instant (``overlap``, from the work's ledger);
- every due time and submission ended, once: completed (its work ran to its end once),
  skipped by the schedule's policy, or stopped by its lease with a retry that ran once;
- every message `li team send` had acknowledged reached the follower;
- every `li` command ended by its deadline, the workers and the follower within 20 s of
  SIGTERM (``hung``), and no process of the work outlived them (``escaped``);
- no `li` printed a traceback (``traceback``).

Replication is asynchronous: a commit the primary acknowledged may not have reached the
standby when it is killed. A probe commits a counter to the primary throughout; a round
whose promoted standby holds less than the last value acknowledged lost acknowledged
commits. Such rounds are counted on their own (``acked_lost=…(n=ROUNDS)``), and what the
clients had been told before the kill is not held against lirun there (it is noted);
what happened after the promotion still is, and a run must not run again or twice
because its row went back in time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from lirun.store import Store, open_store
from support.failoverkit import WORK, Ended, Load, Probe, held_by, stop_process, summary
from support.faultkit import (
    ROUNDS,
    TAG_VAR,
    TRACEBACK,
    Escaped,
    Hung,
    Lost,
    Lying,
    Overlap,
    Round,
    TracebackSeen,
    check_run_exit,
    check_wait_matches,
    describe,
    fault_env,
    leftover_processes,
    li,
    li_argv,
    migrate,
    run_rounds,
    tail,
)
from support.ledgerkit import check_no_overlap
from support.pgreplica import ReplicaPair, make_pair

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.postgres]

LEASE = 4.0
TERMINAL = {"completed", "failed", "cancelled", "timed_out", "skipped"}
STOPPED_BY_LEASE = {"schedule.failed.lease_lapsed", "schedule.cancelled.lease_lost"}
# After the last failover: how long the runs have to end, and the workers to stop.
SETTLE_SECONDS = 45.0
STOP_SECONDS = 20.0
# The second failover, back to the rewound old primary, in half the rounds (see the
# module's docstring).
FAILBACK = os.environ.get("LIRUN_FAULT_FAILBACK") != "0"


class GaveUp(Exception):
    """A `li` that ended in an honest failure because the database failed over (counted
    as ``gave_up`` on the kind's line, not an invariant broken)."""


def test_db_failover(tmp_path: Path) -> None:
    """A quarter of the rounds of the other kinds (each round is about 50 s, two clusters
    and a dozen `li` processes on the machine's cores): 5 in CI."""
    run_rounds("db_failover[postgres]", failover_round, tmp_path, rounds=max(1, ROUNDS // 4))


def failover_round(rnd: Round) -> None:
    began = time.monotonic()
    with make_pair() as pair:
        rnd.figure("pair_up_s", round(time.monotonic() - began, 1))
        try:
            loaded_round(rnd, pair)
        finally:
            rnd.figure("round_s", round(time.monotonic() - began, 1))


def loaded_round(rnd: Round, pair: ReplicaPair) -> None:
    url = pair.url(schema="fo")
    ledgers = rnd.workdir / "ledgers"
    ledgers.mkdir()
    work = rnd.workdir / "work.py"
    work.write_text(WORK)
    env = fault_env(rnd.workdir / "home", url)
    migrate(url)
    for args in (
        ("team", "create", "crew", "--member", "ann", "--member", "bob"),
        ("schedule", "add", "tick", "--every", "1s", "--retries", "1", "--",
         "run", sys.executable, str(work), str(ledgers), "0.6"),
    ):  # fmt: skip
        done = li(rnd, *args, env=env)
        if done.rc != 0:
            raise Lost(f"li {args[0]} {args[1]} exited {done.rc}: {tail(done.err)}")
    workers = start_workers(rnd, env, 3)
    load = Load(rnd, env, sys.executable, work, ledgers)
    store = open_store(url)
    try:
        lost_before: list[float] = []  # the kills after which acknowledged commits were lost
        load.begin()
        following(rnd, env, store)
        time.sleep(rnd.rng.uniform(1.5, 4.0))
        promotions = [fail_over(rnd, pair, lost_before, "first")]
        time.sleep(rnd.rng.uniform(2.0, 3.0))
        if FAILBACK and rnd.rng.random() < 0.5:
            pair.rejoin()
            rnd.note("old primary rewound and rejoined")
            time.sleep(rnd.rng.uniform(1.0, 2.0))
            promotions.append(fail_over(rnd, pair, lost_before, "back"))
            time.sleep(rnd.rng.uniform(2.0, 3.0))
        load.end()
        done = li(rnd, "schedule", "disable", "tick", env=env)
        if done.rc != 0:
            raise Lost(f"li schedule disable exited {done.rc}: {tail(done.err)}")
        rows = settled(store, SETTLE_SECONDS, workers)
        claims = [claimed_after(ledgers, at) for at in promotions]
        if None in claims:
            raise Hung(f"no work started after a promotion; workers: {logs(workers)}")
        rnd.figure("claim_after_promotion_s", round(max(c or 0.0 for c in claims), 2))
        stop_workers(workers)
        follower = stop_process(load.follower, "li team inbox --follow", STOP_SECONDS)
        li(rnd, "status", env=env)  # delivers what was spooled, as any `li` does
        judge(rnd, load, store, url, rows, ledgers, lost_before, follower)
    finally:
        load.stop.set()
        for proc in [*workers, load.follower]:
            if proc is not None and proc.poll() is None:
                proc.kill()
        store.close()
    left = [p for p in leftover_processes(rnd.tag) if "work.py" in " ".join(_cmdline(p))]
    if left:
        raise Escaped(f"copies of the work outlived the workers: {describe(left)}")


def following(rnd: Round, env: dict[str, str], store: Store, timeout: float = 30.0) -> None:
    """Until the follower has read a first message: it follows before the first kill (a
    `li` that starts while no server takes writes exits 2, which is not this test's
    business)."""
    done = li(rnd, "team", "send", "crew", "--from", "ann", "--to", "bob", "hello", env=env)
    if done.rc != 0:
        raise Lost(f"li team send exited {done.rc}: {tail(done.err)}")
    deadline = time.monotonic() + timeout
    while not store.connector.read("SELECT 1 AS read FROM team_reads"):
        if time.monotonic() > deadline:
            raise Hung(f"li team inbox --follow read nothing in {timeout:.0f}s")
        time.sleep(0.1)


def fail_over(rnd: Round, pair: ReplicaPair, lost_before: list[float], which: str) -> float:
    """Kill the primary under a running probe, promote the standby 0 to 10 s later; the
    wall time of the promotion. Notes (and counts) lost acknowledged commits."""
    probe = Probe(pair.primary.url)
    probe.begin()
    time.sleep(rnd.rng.uniform(0.0, 1.0))
    after = rnd.rng.uniform(0.0, 10.0)
    killed = time.time()
    new = pair.failover(promote_after=after)
    promoted = time.time()
    acked = probe.end()
    held = held_by(new.url)
    rnd.note(f"{which} failover: promoted {after:.1f}s after the kill")
    if held < acked:
        lost_before.append(killed)
        rnd.note(f"the promoted standby lost {acked - held} acknowledged probe commits")
        rnd.figure("acked_lost", rnd.figures.get("acked_lost", 0) + acked - held)
    return promoted


def start_workers(rnd: Round, env: dict[str, str], count: int) -> list[Any]:
    procs: list[Any] = []
    for index in range(count):
        log = rnd.workdir / f"worker-{index}.log"
        argv = li_argv("worker", "--lease", f"{LEASE:g}s", "--grace", "1s")
        with open(log, "wb") as sink:
            proc = subprocess.Popen(
                argv, env={**env, TAG_VAR: rnd.tag, "PYTHONFAULTHANDLER": "1"}, cwd=rnd.workdir,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink,
            )  # fmt: skip
        proc.log = log  # type: ignore[attr-defined]
        proc.started_at = time.monotonic()  # type: ignore[attr-defined]
        procs.append(proc)
    deadline = time.monotonic() + 60
    for proc in procs:
        while " started: " not in proc.log.read_text(errors="replace"):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise Lost(f"a worker did not start: {proc.log.read_text()[-400:]}")
            time.sleep(0.05)
    return procs


def stop_workers(procs: list[Any]) -> None:
    """SIGTERM each worker: each must end within ``STOP_SECONDS``, with no traceback."""
    for proc in procs:
        proc.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for index, proc in enumerate(procs):
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            # Python's fault handler (PYTHONFAULTHANDLER) prints every thread's stack on
            # SIGABRT: where it hangs goes into the report.
            proc.send_signal(signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
            stacks = proc.log.read_text(errors="replace").split("SIGTERM", 1)[-1][-12000:]
            raise Hung(f"li worker {index} still running {STOP_SECONDS:.0f}s after SIGTERM; "
                       f"its threads: {stacks}") from None  # fmt: skip
        text = proc.log.read_text(errors="replace")
        if TRACEBACK in text:
            raise TracebackSeen(f"li worker {index} printed a traceback: {tail(text, 20)}")


def logs(procs: list[Any]) -> str:
    return " || ".join(p.log.read_text(errors="replace")[-600:] for p in procs)


def claimed_after(ledgers: Path, at: float) -> float | None:
    """Seconds from ``at`` to the first copy of any work that started after it."""
    starts = [
        float(parts[2])
        for path in ledgers.glob("*.txt")
        for parts in (line.split() for line in path.read_text().splitlines())
        if len(parts) == 3 and parts[0] == "start" and float(parts[2]) >= at
    ]
    return min(starts) - at if starts else None


def all_runs(store: Store) -> list[dict[str, Any]]:
    rows = store.connector.read("SELECT * FROM schedule_runs ORDER BY created_at, id")
    return [dict(r) for r in rows]


def settled(store: Store, timeout: float, workers: list[Any]) -> list[dict[str, Any]]:
    """Every schedule run, once all are terminal and each stopped by its lease has its
    retry; Lost after ``timeout``."""
    deadline = time.monotonic() + timeout
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            rows = all_runs(store)
        except Exception:
            time.sleep(0.5)
            continue
        retried = {r.get("retry_of") for r in rows}
        awaited = [
            r for r in rows
            if r["status"] not in TERMINAL
            or (r.get("status_reason_code") in STOPPED_BY_LEASE
                and int(r.get("attempt") or 1) == 1 and r["id"] not in retried)
        ]  # fmt: skip
        if not awaited:
            return rows
        time.sleep(0.3)
    states = [(r["id"][:8], r["status"], r.get("status_reason_code")) for r in rows
              if r["status"] not in TERMINAL]  # fmt: skip
    raise Lost(f"runs did not end {timeout:.0f}s after the load stopped: {states}; "
               f"workers: {logs(workers)}")  # fmt: skip


# --- the checks -----------------------------------------------------------------------------


def judge(
    rnd: Round,
    load: Load,
    store: Store,
    url: str,
    rows: list[dict[str, Any]],
    ledgers: Path,
    lost_before: list[float],
    follower: Any,
) -> None:
    for problem in load.problems:
        raise problem  # the first problem a load loop met (a hang, a traceback)

    def excused(ended: Ended) -> bool:
        """Told before a kill that lost acknowledged commits: the record may have lost it."""
        return any(ended.at <= killed for killed in lost_before)

    forgiven = 0
    for kind, check in (("run", check_li_run), ("wait", check_li_wait), ("flow", check_flow),
                        ("submit", check_submit)):  # fmt: skip
        for ended in load.of(kind):
            try:
                check(ended, store, url)
            except GaveUp as exc:
                rnd.note(str(exc))
                rnd.figure("gave_up", rnd.figures.get("gave_up", 0) + 1)
            except (Lost, Lying) as exc:
                if not excused(ended):
                    raise
                forgiven += 1
                rnd.note(f"after lost commits: {exc}")
    forgiven += check_pieces(rnd, rows, ledgers, lost_before)
    forgiven += check_follower(rnd, load, store, follower, excused)
    if forgiven:
        rnd.figure("told_then_lost", forgiven)
    rnd.figure("runs", len(rows))
    rnd.figure("li_runs", len(load.of("run")))


def check_li_run(ended: Ended, store: Store, url: str) -> None:
    row = store.get_entity("session", ended.extra["run_id"])
    check_run_exit(ended.done, row)
    said = summary(ended.done)
    if row is not None and said is not None and said.get("status") != row["status"]:
        raise Lying(f"li run said {said.get('status')}, the new primary holds {row['status']}")


def check_li_wait(ended: Ended, store: Store, url: str) -> None:
    check_wait_matches(ended.done, url, ended.extra["run_id"])


def check_flow(ended: Ended, store: Store, url: str) -> None:
    said = summary(ended.done)
    if said is None and ended.done.rc == 2:
        if " started: " not in ended.done.err:
            return  # refused before it started anything (no server took writes): one line
        # The engine met the lost database between legs and gave up: its record must say
        # so (failed), never stay running.
        flow_id = ended.done.err.split("li flow: flow ", 1)[1].split(" ", 1)[0]
        row = store.get_entity("invocation", flow_id)
        if row is None or row["status"] not in TERMINAL:
            state = row["status"] if row else "no record"
            raise Lost(f"li flow run {flow_id} exited 2 mid-flow and its record is {state}")
        raise GaveUp(f"flow {flow_id} gave up on the database mid-flow: {row['status']} "
                     f"({row.get('status_reason_summary')})")  # fmt: skip
    if said is None:
        raise Lost(f"li flow run exited {ended.done.rc} without its report: {tail(ended.done.err)}")
    row = store.get_entity("invocation", str(said["invocation_id"]))
    if row is None:
        raise Lost(f"flow {said['invocation_id']} ({said.get('status')}) has no record")
    if row["status"] != said.get("status"):
        raise Lying(f"li flow run said {said.get('status')}, the record holds {row['status']}")


def check_submit(ended: Ended, store: Store, url: str) -> None:
    if ended.done.rc != 0:
        if ended.done.rc == 2 and ended.done.out.strip() == "":
            return  # refused with nothing queued: allowed while no server takes writes
        raise Lost(f"li submit exited {ended.done.rc}: {tail(ended.done.err)}")
    run_id = ended.done.out.strip().splitlines()[-1]
    if store.get_entity("schedule_run", run_id) is None:
        raise Lost(f"li submit printed {run_id}, which the new primary does not hold")


def check_pieces(
    rnd: Round, rows: list[dict[str, Any]], ledgers: Path, lost_before: list[float]
) -> int:
    """Per piece of work (a due time, a submission) with its retries: one first run,
    copies one at a time, done once, recorded true to its ledger. The number of findings
    excused by lost commits."""
    by_id = {r["id"]: r for r in rows}
    by_session = {r["session_id"]: r for r in rows if r.get("session_id")}
    pieces: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        first = row
        while first.get("retry_of") in by_id:
            first = by_id[first["retry_of"]]
        if first.get("due_at") is not None:
            key: tuple[Any, ...] = ("due", first["schedule_id"], first["due_at"])
        else:
            key = ("submit", first["id"])
        pieces.setdefault(key, []).append(row)
    forgiven = 0
    orphans = [p for p in ledgers.glob("*.txt") if p.stem not in by_session]
    if orphans:
        text = f"{len(orphans)} copies of work ran with no run recording them: {orphans[:3]}"
        if not lost_before:
            raise Lost(text)
        forgiven += 1
        rnd.note(f"after lost commits: {text}")
    for key, chain in pieces.items():
        firsts = [r for r in chain if not r.get("retry_of")]
        if len(firsts) > 1:
            raise Overlap(f"{key} was queued {len(firsts)} times: {[r['id'] for r in firsts]}")
        merged = rnd.workdir / "merged.txt"
        merged.write_text(
            "".join(
                (ledgers / f"{r['session_id']}.txt").read_text()
                for r in chain
                if r.get("session_id") and (ledgers / f"{r['session_id']}.txt").exists()
            )
        )
        found = check_no_overlap(merged)
        ended = [c for c in found if c.ended]
        outcomes = [(r["status"], r.get("status_reason_code")) for r in chain]
        completed = [r for r in chain if r["status"] == "completed"]
        if len(ended) > 1:
            raise Overlap(f"{key}: the work was done {len(ended)} times: {outcomes}")
        if len(completed) > len(ended):
            raise Lying(f"{key}: {outcomes} but {len(ended)} copies ended")
        if len(completed) > 1:
            raise Lying(f"{key}: completed {len(completed)} times: {outcomes}")
        last = chain[-1]
        if last["status"] not in TERMINAL:
            raise Lost(f"{key}: still {last['status']}: {outcomes}")
    return forgiven


def check_follower(rnd: Round, load: Load, store: Store, follower: Any, excused: Any) -> int:
    """Every acknowledged message the record holds reached the follower."""
    if follower.rc != 0:
        raise Lost(f"li team inbox --follow exited {follower.rc}: {tail(follower.err, 12)}")
    held = {str(r["body"]) for r in store.connector.read("SELECT body FROM team_messages")}
    forgiven = 0
    for ended in load.of("send"):
        text = ended.extra["text"]
        if ended.done.rc != 0:
            continue
        if text not in held:
            if not excused(ended):
                raise Lost(f"li team send of {text} exited 0 but the record has no such message")
            forgiven += 1
            continue
        if text not in follower.out:
            raise Lost(f"{text} is recorded but never reached li team inbox --follow")
    return forgiven


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []
