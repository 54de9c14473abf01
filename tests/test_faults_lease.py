"""The fault suite, leases: a worker that loses its lease has stopped its run before any
other worker may take it over, whatever took the lease from it.

- ``lease_freeze``: the worker running the work is SIGSTOPped for longer than its lease;
- ``db_outage_workers``: the database (a throwaway PostgreSQL cluster) goes away for less
  or more than the lease while workers run work.

Every copy of the work appends to a ledger (``support.ledgerkit``): in every round no two
copies ran at the same instant (``overlap``), no process of the work outlives the workers
(``escaped``), every run's record is terminal and true to the ledger (``lying``), and the
work was done once to its end (``lost``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from lirun.lifecycle import EXIT_CODE_BY_STATUS
from lirun.schedules.actions import parse_action
from lirun.schedules.definition import make_policies
from lirun.schedules.submit import submit
from lirun.store import Store, open_store
from support.diskkit import fill, free
from support.faultkit import (
    ROUNDS,
    TAG_VAR,
    TRACEBACK,
    Escaped,
    Lost,
    Lying,
    Overlap,
    Round,
    TracebackSeen,
    describe,
    fault_env,
    leftover_processes,
    li_argv,
    migrate,
    read_row,
    run_rounds,
    tail,
)
from support.freezer import unavailable as freezer_unavailable
from support.ledgerkit import (
    check_no_overlap,
    copies,
    entries,
    work_argv,
    write_fenced_program,
    write_program,
)
from support.pgcluster import PgCluster

pytestmark = [pytest.mark.faults, pytest.mark.slow]

LEASE = 4.0
# How long a piece of work runs in an outage round: the server stops 0.3 to 1 s in, so
# the work is under way at the stop; its retry (after a longer outage) takes as long.
OUTAGE_WORK = 1.5
TERMINAL = {"completed", "failed", "cancelled", "timed_out", "skipped"}
LAPSED = "schedule.failed.lease_lapsed"
STOPPED_BY_LEASE = {LAPSED, "schedule.cancelled.lease_lost"}


@contextmanager
def running_workers(
    workdir: Path,
    tag: str,
    env: dict[str, str],
    count: int,
    wrap: Callable[[int, list[str]], list[str]] | None = None,
) -> Iterator[list[Any]]:
    """``count`` ``li worker --lease LEASE`` processes tagged ``tag``, started and ready,
    their stderr in ``workdir``; SIGTERM (then SIGKILL) at the end. ``wrap(index, argv)``:
    the argv that starts worker ``index`` (in a cgroup of its own, say)."""
    procs: list[Any] = []
    env = {**env, TAG_VAR: tag}
    try:
        for index in range(count):
            log = workdir / f"worker-{index}.log"
            argv = li_argv("worker", "--lease", f"{LEASE:g}s", "--grace", "1s")
            with open(log, "wb") as sink:
                proc = subprocess.Popen(
                    wrap(index, argv) if wrap is not None else argv,
                    env=env, cwd=workdir, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=sink,
                )  # fmt: skip
            proc.log = log  # type: ignore[attr-defined]
            procs.append(proc)
        deadline = time.monotonic() + 60
        for proc in procs:
            while " started: " not in proc.log.read_text(errors="replace"):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise Lost(f"a worker did not start: {proc.log.read_text()[-400:]}")
                time.sleep(0.05)
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def logs(procs: list[Any]) -> str:
    return " || ".join(p.log.read_text(errors="replace")[-600:] for p in procs)


def all_runs(store: Store) -> list[dict[str, Any]]:
    rows = store.connector.read("SELECT * FROM schedule_runs ORDER BY created_at, id")
    return [dict(r) for r in rows]


def settled(store: Store, firsts: set[str], timeout: float) -> list[dict[str, Any]]:
    """The runs of the work first queued as ``firsts``, once all are terminal (retries
    included), or Lost after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            rows = all_runs(store)
        except Exception:
            rows = []  # the database may still be coming back
        mine = {r["id"]: r for r in rows if r["id"] in firsts}
        grew = True
        while grew:
            more = {r["id"]: r for r in rows if r.get("retry_of") in mine and r["id"] not in mine}
            mine.update(more)
            grew = bool(more)
        rows = list(mine.values())
        # A run stopped by its lease is retried (retries 1) by a second write: wait for it.
        retried = {r.get("retry_of") for r in rows}
        awaited = [
            r for r in rows
            if r.get("status_reason_code") in STOPPED_BY_LEASE
            and int(r.get("attempt") or 1) == 1 and r["id"] not in retried
        ]  # fmt: skip
        ended = all(r["status"] in TERMINAL for r in rows)
        if len(rows) >= len(firsts) and ended and not awaited:
            return rows
        if time.monotonic() > deadline:
            states = [(r["id"][:8], r["status"], r.get("status_reason_code")) for r in rows]
            raise Lost(f"the runs did not settle in {timeout:.0f}s: {states}")
        time.sleep(0.2)


def check_runs(
    rows: list[dict[str, Any]],
    ledger_of: dict[str, Path],
    *,
    may_lapse: bool,
    spans: bool = True,
) -> None:
    """Each piece of work (a first run and its retries) ran its copies one at a time
    (``spans``: the whole-freeze kind checks its side effects instead), was done to its
    end once, and each run's record is true to its ledger."""
    by_id = {r["id"]: r for r in rows}
    for first_id, ledger in ledger_of.items():
        chain = [by_id[first_id]]
        while True:
            nxt = [r for r in rows if r.get("retry_of") == chain[-1]["id"]]
            if not nxt:
                break
            chain.append(nxt[0])
        found = check_no_overlap(ledger) if spans else copies(ledger)
        outcomes = [(r["status"], r.get("status_reason_code")) for r in chain]
        completed = [r for r in chain if r["status"] == "completed"]
        ended = [c for c in found if c.ended]
        if len(completed) > len(ended):
            raise Lying(f"{ledger.name}: {outcomes} but only {len(ended)} copies ended")
        if not completed:
            raise Lost(f"{ledger.name}: never completed: {outcomes} ({len(found)} copies)")
        started = [r for r in chain if r.get("started_at") is not None]
        for run, copy in zip(started, found, strict=False):
            reason = run.get("status_reason_code")
            if reason in STOPPED_BY_LEASE and copy.ended:
                raise Lying(f"{ledger.name}: {reason} though its copy finished: {outcomes}")
            if reason == LAPSED and not may_lapse:
                raise Lying(f"{ledger.name}: {reason} though the lease never lapsed: {outcomes}")
        if len(ended) > 1:
            raise Lost(f"{ledger.name}: the work was done {len(ended)} times: {outcomes}")


def check_escaped(rnd: Round) -> None:
    left = [p for p in leftover_processes(rnd.tag) if "ledger_work" in " ".join(p.cmdline())]
    if left:
        raise Escaped(f"copies of the work outlived the workers: {describe(left)}")


def wait_started(ledger: Path, timeout: float = 30.0) -> None:
    """Until the work's first copy has started (it may have ended already: the outage
    test only needs the work under way before it stops the server)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ledger.exists() and ledger.read_text().startswith("start "):
            return
        time.sleep(0.05)
    raise Lost(f"{ledger.name}: the work did not start within {timeout:.0f} s")


def owner_of(ledger: Path, timeout: float = 30.0) -> tuple[int, int]:
    """(pid of the first copy, pid of the worker that runs it) once it started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = ledger.read_text() if ledger.exists() else ""
        if text.startswith("start "):
            pid = int(text.split()[1].split(".")[0])
            try:
                return pid, psutil.Process(pid).ppid()
            except psutil.Error:
                raise Lost(f"the first copy {pid} ended before it could be seen") from None
        time.sleep(0.05)
    raise Lost(f"the work never started ({ledger})")


# --- a frozen worker -----------------------------------------------------------------------


def test_lease_freeze(tmp_path: Path) -> None:
    """Two workers (lease 4 s) on SQLite, a 7 s piece of work with one retry; the worker
    running it is SIGSTOPped 0.3 to 1.5 s in, for lease + 1 to 4 s: the run is taken over
    by the other worker only once its first copy is stopped, and done once to its end."""

    def body(rnd: Round) -> None:
        url = str(rnd.workdir / "state.db")
        env = fault_env(rnd.workdir / "home", url)
        program = write_program(rnd.workdir)
        ledger = rnd.workdir / "ledger.txt"
        store = open_store(url)
        try:
            with running_workers(rnd.workdir, rnd.tag, env, 2) as procs:
                action = parse_action(
                    ["run", *work_argv(program, ledger, 7)], base=str(rnd.workdir)
                )
                run = submit(store, action, policies=make_policies({"retries": 1}, None))
                _, owner = owner_of(ledger)
                at, frozen = rnd.rng.uniform(0.3, 1.5), LEASE + rnd.rng.uniform(1.0, 4.0)
                rnd.note(f"SIGSTOP the owner at {at:.2f}s for {frozen:.1f}s")
                time.sleep(at)
                os.kill(owner, signal.SIGSTOP)
                time.sleep(frozen)
                os.kill(owner, signal.SIGCONT)
                rows = settled(store, {run.id}, 40)
                try:
                    check_runs(rows, {run.id: ledger}, may_lapse=True)
                except AssertionError as exc:
                    raise type(exc)(f"{exc}; workers: {logs(procs)}") from None
            check_escaped(rnd)
        finally:
            store.close()

    run_rounds("lease_freeze[sqlite]", body, tmp_path, parallel=4)


# --- a whole worker frozen: the worker, its guard and its work ----------------------------

# How long the work runs (its retry as long); within what time of a check's start its
# effect must land (a quarter of the lease: no takeover can come sooner, docs/queue.md).
FREEZE_WORK = 7.0
EFFECT_BOUND = LEASE / 4
# The old copy may run this long after the thaw before the guard's kill counts as late:
# milliseconds are the measure (the figure), a second is a guard that did not look first.
THAW_BOUND = 1.0
EFFECTS = ("effect", "end")  # what the work commits (the ledger's FENCED_PROGRAM)


def whole_freeze_round(rnd: Round, mode: str, url: str | None = None) -> None:
    """Two workers (lease 4 s) on SQLite (or ``url``), each in a cgroup of its own with
    its guard and its work; 0.3 to 1.5 s into a 7 s piece of work (one retry) the cgroup
    of the worker running it is frozen whole (``cgroup.freeze``: nothing in it runs, its
    guard neither) until the other worker has taken the run over and started the retry,
    and 0.2 to 1.5 s longer; then thawed. The work commits an ``effect`` after each tick
    and its ``end``, ``fenced``: only after `li lease check` said 0. Figures: how long the
    old copy ran after the thaw (``after_thaw_ms``), its effects after the takeover, the
    checks that stopped it. Unfenced (the control) the old copy's effects after the
    takeover are only counted: it commits whatever it reaches before the thawed guard's
    kill lands."""
    from support.freezer import freezer

    url = url or str(rnd.workdir / "state.db")
    env = fault_env(rnd.workdir / "home", url)
    program = write_fenced_program(rnd.workdir)
    ledger = rnd.workdir / "ledger.txt"
    store = open_store(url)
    with freezer(f"w0-{rnd.index}") as first, freezer(f"w1-{rnd.index}") as second:
        groups = [first, second]
        try:
            with running_workers(
                rnd.workdir, rnd.tag, env, 2, wrap=lambda i, argv: groups[i].argv(argv)
            ) as procs:
                argv = [sys.executable, str(program), str(ledger), f"{FREEZE_WORK:g}"]
                action = parse_action(
                    ["run", *argv, mode, f"{EFFECT_BOUND:g}"], base=str(rnd.workdir)
                )
                run = submit(store, action, policies=make_policies({"retries": 1}, None))
                _, owner = owner_of(ledger)
                group = next(g for g in groups if owner in g.pids())
                time.sleep(rnd.rng.uniform(0.3, 1.5))
                frozen_at = group.freeze()
                took_over = retry_started(ledger, 30.0)
                if took_over:
                    time.sleep(rnd.rng.uniform(0.2, 1.5))
                thawed = group.thaw()
                rnd.note(f"froze worker-{groups.index(group)} {thawed - frozen_at:.1f}s")
                rows = settled(store, {run.id}, 60)
                try:
                    if mode == "fenced" or not took_over:
                        check_runs(rows, {run.id: ledger}, may_lapse=True, spans=not took_over)
                except AssertionError as exc:
                    raise type(exc)(f"{exc}; workers: {logs(procs)}") from None
            if took_over:
                judge_thaw(rnd, ledger, rows, run.id, thawed, fenced=mode == "fenced")
            else:
                # The frozen worker held SQLite's write lock: nobody could take over, and
                # the ledger's spans show no overlap (check_runs checked them).
                rnd.note("no takeover during the freeze")
            check_escaped(rnd)
        finally:
            store.close()


def skip_without_freezer() -> None:
    why = freezer_unavailable()
    if why is not None:
        pytest.skip(f"cgroup v2 freezer: {why}")


def retry_started(ledger: Path, timeout: float) -> bool:
    """Until a second copy of the work started (the retry, on the other worker)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len({pid for word, pid, _ in entries(ledger) if word == "start"}) >= 2:
            return True
        time.sleep(0.05)
    return False


def judge_thaw(
    rnd: Round, ledger: Path, rows: list[dict[str, Any]], first: str, thawed: float, *, fenced: bool
) -> None:
    """The figures of a thaw after a takeover, and its invariants: the old copy stopped
    within ``THAW_BOUND`` of the thaw, and (fenced) no effect of it after the takeover."""
    lines = entries(ledger)
    old = lines[0][1]
    ended = next(float(r["ended_at"]) for r in rows if r["id"] == first)
    retry = min(at for word, pid, at in lines if word == "start" and pid != old)
    ran = [at for _, pid, at in lines if pid == old and at >= thawed]
    late = [at for word, pid, at in lines if pid == old and word in EFFECTS and at >= ended]
    stopped = [
        word
        for word, pid, at in lines
        if pid == old and word in ("fenced", "late") and at >= thawed
    ]
    after = (max(ran) - thawed) * 1000 if ran else 0.0
    rnd.figure("after_thaw_ms", round(after, 1))
    rnd.figure("effects_after_takeover", len(late))
    rnd.figure("fenced", len(stopped))
    rnd.note(
        f"old copy ran {after:.1f} ms after the thaw, {retry - thawed:+.2f}s from the retry's start"
    )
    if not fenced:
        return
    if after > THAW_BOUND * 1000:
        raise Overlap(f"the old copy ran {after:.0f} ms after the thaw (its guard was late)")
    if late:
        raise Overlap(
            f"the old copy committed {len(late)} effect(s) after the takeover at {ended:.3f}: "
            f"{[f'{at:.3f}' for at in late]}"
        )


def test_lease_whole_freeze(tmp_path: Path) -> None:
    """A whole worker frozen past the takeover (see ``whole_freeze_round``), its work
    fenced: no effect of the old copy lands after the takeover, and the guard kills it
    within milliseconds of the thaw."""
    skip_without_freezer()
    run_rounds(
        "lease_whole_freeze[sqlite]",
        lambda rnd: whole_freeze_round(rnd, "fenced"),
        tmp_path,
        parallel=4,
    )


@pytest.mark.postgres
def test_lease_whole_freeze_postgres(pg_cluster: PgCluster, tmp_path: Path) -> None:
    """The fenced whole freeze on PostgreSQL (its queue transport, `li lease check` over
    a connection), a schema per round. Fewer rounds (a quarter)."""
    skip_without_freezer()
    run_rounds(
        "lease_whole_freeze[postgres]",
        lambda rnd: whole_freeze_round(rnd, "fenced", pg_cluster.new_url()),
        tmp_path,
        rounds=max(1, ROUNDS // 4),
        parallel=2,
    )


def test_lease_whole_freeze_unfenced(tmp_path: Path) -> None:
    """The control: the same freeze, the work not checking its fence. Its effects after
    the takeover are counted (``effects_after_takeover``), not failed on: the guard,
    frozen too, cannot stop the copy before it runs again. Fewer rounds (a quarter)."""
    skip_without_freezer()
    run_rounds(
        "lease_whole_freeze_unfenced[sqlite]",
        lambda rnd: whole_freeze_round(rnd, "unfenced"),
        tmp_path,
        rounds=max(1, ROUNDS // 4),
        parallel=2,
    )


# --- the database goes away ---------------------------------------------------------------


@pytest.mark.postgres
def test_db_outage_workers(pg_cluster: PgCluster, tmp_path: Path) -> None:
    """Two workers (lease 4 s) on a throwaway PostgreSQL cluster; each round runs two
    pieces of work (1.5 s each, one retry) and stops the server 0.3 to 1 s in, for 0.5 to
    1.5 s (shorter than the lease: nothing may lapse; a worker may still stop a run to be
    safe) or lease + 0.3 to 1.2 s (longer: the runs may be retried, never beside a copy
    still running). Once a round's runs are all recorded ended, none of its copies runs
    on."""
    url = pg_cluster.new_url()
    shared = tmp_path / "workers"
    shared.mkdir()
    env = fault_env(shared / "home", url)
    store = open_store(url)
    program = write_program(shared)

    def body(rnd: Round) -> None:
        ledgers = {}
        for index in range(2):
            ledger = rnd.workdir / f"ledger-{index}.txt"
            work = work_argv(program, ledger, OUTAGE_WORK)
            action = parse_action(["run", *work], base=str(rnd.workdir))
            run = submit(store, action, policies=make_policies({"retries": 1}, None))
            ledgers[run.id] = ledger
        for ledger in ledgers.values():
            wait_started(ledger)
        long = rnd.rng.random() < 0.5
        down = LEASE + rnd.rng.uniform(0.3, 1.2) if long else rnd.rng.uniform(0.5, 1.5)
        time.sleep(rnd.rng.uniform(0.3, 1.0))
        rnd.note(f"server down {down:.1f}s ({'longer' if long else 'shorter'} than the lease)")
        pg_cluster.stop(rnd.rng.choice(["fast", "immediate"]))
        try:
            time.sleep(down)
        finally:
            pg_cluster.ensure_up()
        rows = settled(store, set(ledgers), 60)
        try:
            check_runs(rows, ledgers, may_lapse=long)
        except AssertionError as exc:
            raise type(exc)(f"{exc}; workers: {logs(procs)}") from None
        left = [
            p for p in psutil.process_iter()
            if any(str(rnd.workdir) in part for part in _cmdline(p))
        ]  # fmt: skip
        if left:
            raise Escaped(f"copies ran on after their runs were recorded ended: {describe(left)}")

    try:
        with running_workers(shared, f"outage-{os.getpid()}", env, 2) as procs:
            run_rounds("db_outage_workers[postgres]", body, tmp_path)
    finally:
        store.close()
        pg_cluster.ensure_up()


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


# --- a full disk mid-run -------------------------------------------------------------------

# A child that prints a little, waits for ``go``, prints more and exits 0.
CHATTY = (
    "echo begin; i=0; while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; "
    "for i in $(seq 200); do echo line $i of the output after the disk filled up; done; exit 0"
)


def test_disk_full_midrun(tiny_disk: Any, tmp_path: Path) -> None:
    """``LIRUN_HOME`` (the database, the run directories and the spool) on a 2 MB tmpfs
    filled while the run runs; the child exits 0. `li run` exits with the code of the
    outcome it reports (never 2 once the command started), and once space is freed the
    record holds the true outcome: completed, exit code 0. When even the setup cannot
    reserve what the ending needs, nothing starts (exit 2, no row)."""

    def body(rnd: Round) -> None:
        disk = tiny_disk("2m")
        home = disk / "home"
        url = str(home / "state.db")
        env = fault_env(home, url, LIRUN_WRITE_RETRY_SECONDS="1")
        run_id = f"d{rnd.index}-{os.urandom(4).hex()}"
        when = rnd.rng.choice(["during_run", "during_run", "before_setup"])
        rnd.note(f"disk full {when}")
        script = f"touch {rnd.workdir / 'started'}; {CHATTY}"
        argv = li_argv("run", "--run-id", run_id, "--json", "--", "sh", "-c", script)
        if when == "before_setup":
            home.mkdir()
            migrate(url)
            fill(disk)
            (rnd.workdir / "go").touch()
        proc = subprocess.Popen(
            argv, env={**env, TAG_VAR: rnd.tag}, cwd=rnd.workdir, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            if when == "during_run":
                deadline = time.monotonic() + 30
                while not (rnd.workdir / "started").exists() and time.monotonic() < deadline:
                    time.sleep(0.02)
                time.sleep(rnd.rng.uniform(0.0, 0.3))
                fill(disk)
                (rnd.workdir / "go").touch()
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            free(disk)
        if TRACEBACK in err:
            raise TracebackSeen(f"li run printed a traceback: {tail(err)}")
        ran = (rnd.workdir / "started").exists()
        if proc.returncode == 2:
            if ran:
                raise Lying(f"li run exited 2 after the command had started: {tail(err)}")
            if read_row(url, run_id) is not None:
                raise Lying("li run exited 2 (nothing started) but wrote a row")
            return
        if not ran:
            raise Lost(f"li run exited {proc.returncode} but the command never started")
        told = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if not told:
            raise Lost(f"li run exited {proc.returncode} without its summary: {tail(err)}")
        if proc.returncode != EXIT_CODE_BY_STATUS.get(told[-1]["status"]):
            raise Lying(f"li run exited {proc.returncode} but reported {told[-1]['status']}")
        status = subprocess.run(
            li_argv("status", run_id, "--json"), env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        if TRACEBACK in status.stderr:
            raise TracebackSeen(f"li status printed a traceback: {tail(status.stderr)}")
        row = read_row(url, run_id)
        if row is None:
            raise Lost(f"no row {run_id} after the space came back")
        truth = ("completed", 0)
        stored = (row["status"], row.get("exit_code"))
        if stored != truth:
            raise Lying(
                f"the child exited 0 but the record holds {stored} "
                f"({row.get('status_reason_code')}: {row.get('status_reason_summary')})"
            )
        if (told[-1]["status"], proc.returncode) != ("completed", 0):
            raise Lying(f"li run said {told[-1]['status']} (exit {proc.returncode})")

    run_rounds("disk_full_midrun[sqlite]", body, tmp_path, parallel=3)


# --- a cut link between hosts --------------------------------------------------------------


@pytest.mark.postgres
def test_lease_cut_link(tmp_path: Path) -> None:
    """Two simulated hosts (their own network, PID and UTS namespaces), a worker on each
    (lease 4 s); each round runs a 6 s piece of work (one retry) and cuts the link of the
    host running it for lease + 1 to 3 s: the other host retries it only once the first
    copy is stopped. Fewer rounds than the other kinds (a quarter): each is slow."""
    from support.queuekit import TESTS_DIR
    from support.simhosts import simulated_hosts, url_from

    with simulated_hosts(("alpha", 5), ("beta", 6)) as (hosts, cluster):
        url = cluster.new_url()
        store = open_store(url)
        shared = tmp_path / "hosts"
        shared.mkdir()
        program = write_program(shared)
        logs_of = {h.name: shared / f"{h.name}.log" for h in hosts}
        ids: dict[str, str] = {}
        for host in hosts:
            env = fault_env(shared / f"home-{host.name}", url_from(host, cluster, url))
            argv = li_argv("worker", "--lease", f"{LEASE:g}s", "--grace", "1s")
            host.start(argv, log=logs_of[host.name], env=env, cwd=TESTS_DIR)
            deadline = time.monotonic() + 60
            while " started: " not in logs_of[host.name].read_text(errors="replace"):
                assert time.monotonic() < deadline, logs_of[host.name].read_text()
                time.sleep(0.1)
            line = next(x for x in logs_of[host.name].read_text().splitlines() if " started: " in x)
            ids[line.split("worker ", 1)[1].split(" ", 1)[0]] = host.name

        def body(rnd: Round) -> None:
            ledger = rnd.workdir / "ledger.txt"
            action = parse_action(["run", *work_argv(program, ledger, 6)], base=str(rnd.workdir))
            run = submit(store, action, policies=make_policies({"retries": 1}, None))
            owner_of_run = ""
            deadline = time.monotonic() + 30
            while not owner_of_run and time.monotonic() < deadline:
                row = store.get_entity("schedule_run", run.id) or {}
                if row.get("status") == "running" and ledger.exists():
                    owner_of_run = ids.get(str(row.get("worker_id")), "")
                time.sleep(0.05)
            if not owner_of_run:
                raise Lost("the work never started on a known host")
            host = next(h for h in hosts if h.name == owner_of_run)
            cut = LEASE + rnd.rng.uniform(1.0, 3.0)
            rnd.note(f"{host.name}'s link cut {cut:.1f}s")
            time.sleep(rnd.rng.uniform(0.3, 1.5))
            host.cut()
            try:
                time.sleep(cut)
            finally:
                host.restore()
            rows = settled(store, {run.id}, 60)
            try:
                check_runs(rows, {run.id: ledger}, may_lapse=True)
            except AssertionError as exc:
                tails = " || ".join(p.read_text(errors="replace")[-600:] for p in logs_of.values())
                raise type(exc)(f"{exc}; workers: {tails}") from None

        try:
            run_rounds("lease_cut_link[postgres]", body, tmp_path, rounds=max(1, ROUNDS // 4))
        finally:
            for host in hosts:
                for proc in host.procs:
                    host.stop(proc)
            store.close()
