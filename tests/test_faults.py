"""The fault suite: real `li` processes killed, signalled, locked out, cut off and starved.

Each test runs ``LIRUN_FAULT_ROUNDS`` rounds of one fault kind at random moments (seeded by
``LIRUN_FAULT_SEED``; see ``faultkit``) and checks in every round what a user who leaves
lirun unattended relies on:

- what `li wait` printed is what the database holds (the row is re-read afterwards);
- no row stays ``running`` once its owner is gone (after `li wait` / `li reap`);
- no `li` command prints a traceback;
- exit codes are the documented ones: `li run` exits with ``EXIT_CODE_BY_STATUS`` of the
  stored status, or 2 when no row was written (and then nothing ran); `li wait` 0/1/2/3.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from lirun.lifecycle import EXIT_CODE_BY_STATUS, SESSION_TERMINAL_STATUSES
from support.diskkit import fill, free
from support.faultkit import (
    TRACEBACK,
    Lost,
    Round,
    check_not_running_after_reap,
    check_run_exit,
    check_wait_matches,
    describe,
    fault_env,
    finish,
    hold_lock,
    leftover_processes,
    li,
    migrate,
    new_run_id,
    no_traceback,
    poll_row,
    read_row,
    release,
    run_rounds,
    start,
    tail,
    traceback_before_lirun,
)
from support.pg import PG_URL, REQUIRE_PG, admin_execute, pg_unavailable
from support.pgcluster import PgCluster

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# Small, so a lock held past it must end in the spool, not in a wait (the bound is
# LIRUN_WRITE_RETRY_SECONDS, default 30).
RETRY_SECONDS = 2
BOTH = [
    pytest.param("sqlite"),
    pytest.param("postgres", marks=pytest.mark.postgres),
]

NewDb = Callable[[Round], str]
# A child that runs until the test creates ``go`` in its directory (at most 20 s).
UNTIL_GO = "i=0; while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"


@pytest.fixture
def new_db(request: pytest.FixtureRequest) -> Iterator[NewDb]:
    """A fresh database per round: a SQLite file in the round's directory, or a schema of
    its own on the test server (``$LIRUN_TEST_PG_URL``)."""
    backend = request.param
    schemas: list[str] = []
    if backend == "postgres":
        reason = pg_unavailable()
        if reason:
            if REQUIRE_PG:
                pytest.fail(f"PostgreSQL is required (LIRUN_TEST_REQUIRE_PG=1) but: {reason}")
            pytest.skip(f"PostgreSQL unavailable: {reason}")

    def make(rnd: Round) -> str:
        if backend == "sqlite":
            return str(rnd.workdir / "state.db")
        schema = f"t_{uuid.uuid4().hex[:16]}"
        schemas.append(schema)
        sep = "&" if "?" in PG_URL else "?"
        return f"{PG_URL}{sep}schema={schema}"

    yield make
    for schema in schemas:
        admin_execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def kind_name(kind: str, request: pytest.FixtureRequest) -> str:
    backend = getattr(request.node, "callspec", None)
    param = backend.params.get("new_db") if backend else None
    return f"{kind}[{param}]" if param else kind


def summary_of(done: Any) -> dict[str, Any]:
    """`li run --json`'s summary line, or Lost if it printed none."""
    for line in reversed(done.out.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise Lost(f"{done.label} exited {done.rc} without its --json summary: {tail(done.err)}")


def wait_and_check(rnd: Round, env: dict[str, str], url: str, run_id: str) -> Any:
    waited = finish(start(rnd, "wait", run_id, "--timeout", "20", env=env), "li wait", timeout=45)
    return check_wait_matches(waited, url, run_id)


# --- SIGKILL of li ---------------------------------------------------------------------------


@pytest.mark.parametrize("new_db", BOTH, indirect=True)
def test_sigkill_li(new_db: NewDb, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """`li run` SIGKILLed 0 to 1.5 s into `sh -c 'sleep 2'`: `li wait` prints what is stored,
    the row ends terminal, and an id whose run died before its row exists is not blocked."""

    def body(rnd: Round) -> None:
        url = new_db(rnd)
        env = fault_env(rnd.workdir / "home", url)
        run_id = new_run_id(rnd)
        at = rnd.rng.uniform(0.0, 1.5)
        rnd.note(f"SIGKILL li at {at:.2f}s")
        proc = start(
            rnd, "run", "--run-id", run_id, "--", "sh", "-c", "sleep 2", env=env, tagged=True
        )
        time.sleep(at)
        proc.kill()
        finish(proc, "li run (SIGKILLed)")
        row = wait_and_check(rnd, env, url, run_id)
        if row is None:
            rnd.note("killed before its row existed")
            again = li(rnd, "run", "--run-id", run_id, "--", "echo", "again", env=env)
            stored = read_row(url, run_id)
            if again.rc != 0 or stored is None:
                raise Lost(
                    f"the id {run_id} of a run killed before its row existed is blocked: "
                    f"li run --run-id exited {again.rc}: {tail(again.err)}"
                )

    run_rounds(kind_name("sigkill_li", request), body, tmp_path, parallel=4)


def test_sigkill_li_lock_held(tmp_path: Path) -> None:
    """Item 1: SIGKILL `li` mid-run, hold BEGIN IMMEDIATE from another process for a few
    seconds while `li wait` runs: it must print only what was committed."""

    def body(rnd: Round) -> None:
        url = str(rnd.workdir / "state.db")
        env = fault_env(rnd.workdir / "home", url)
        run_id = new_run_id(rnd)
        proc = start(
            rnd, "run", "--run-id", run_id, "--", "sh", "-c", "sleep 3", env=env, tagged=True
        )
        if not poll_row(url, run_id):
            proc.kill()
            finish(proc, "li run")
            raise Lost(f"the row of {run_id} never showed running")
        time.sleep(rnd.rng.uniform(0.0, 0.5))
        proc.kill()
        finish(proc, "li run (SIGKILLed)")
        hold = rnd.rng.uniform(2.0, 4.0)
        rnd.note(f"lock held {hold:.1f}s")
        holder = hold_lock(url, hold)
        try:
            waited = finish(
                start(rnd, "wait", run_id, "--timeout", "20", env=env), "li wait", timeout=45
            )
        finally:
            holder.wait(timeout=30)
            release(holder)
        check_wait_matches(waited, url, run_id)
        check_not_running_after_reap(rnd, env, url, run_id)

    run_rounds("sigkill_li_lock_held[sqlite]", body, tmp_path, parallel=5)


# --- SIGKILL of the child ------------------------------------------------------------------


def test_sigkill_child(tmp_path: Path) -> None:
    """The child `sh` SIGKILLed at a random moment: `li` records it, exits with the stored
    status's code, and no process the run started survives (its grandchild `sleep`)."""

    def body(rnd: Round) -> None:
        url = str(rnd.workdir / "state.db")
        env = fault_env(rnd.workdir / "home", url)
        run_id = new_run_id(rnd)
        proc = start(
            rnd, "run", "--run-id", run_id, "--", "sh", "-c", "sleep 8 & wait", env=env, tagged=True
        )
        at = rnd.rng.uniform(0.2, 1.5)
        rnd.note(f"SIGKILL sh at {at:.2f}s")
        time.sleep(at)
        deadline = time.monotonic() + 15
        shells: list[psutil.Process] = []
        while not shells and time.monotonic() < deadline and proc.poll() is None:
            try:
                shells = [
                    c for c in psutil.Process(proc.pid).children() if c.name() in ("sh", "dash")
                ]
            except psutil.Error:
                break
            if not shells:
                time.sleep(0.02)
        if not shells:
            finish(proc, "li run")
            raise Lost("the child sh never appeared under li")
        shells[0].kill()
        done = finish(proc, "li run", timeout=30)
        left = leftover_processes(rnd.tag)
        row = read_row(url, run_id)
        check_run_exit(done, row)
        if left:
            raise Lost(f"processes of the run outlived it: {describe(left)}")
        wait_and_check(rnd, env, url, run_id)

    run_rounds("sigkill_child[sqlite]", body, tmp_path, parallel=4)


def test_background_grandchild_is_ended(tmp_path: Path) -> None:
    """Item 5: `sh -c 'sleep 8 & echo x'` — when the run ends, its background sleep ends
    too (and the record says what had to be killed)."""

    def body(rnd: Round) -> None:
        url = str(rnd.workdir / "state.db")
        env = fault_env(rnd.workdir / "home", url)
        run_id = new_run_id(rnd)
        proc = start(
            rnd,
            "run",
            "--run-id",
            run_id,
            "--",
            "sh",
            "-c",
            "sleep 8 & echo x",
            env=env,
            tagged=True,
        )
        done = finish(proc, "li run", timeout=30)
        left = leftover_processes(rnd.tag)
        check_run_exit(done, read_row(url, run_id))
        if left:
            raise Lost(f"processes of the run outlived it: {describe(left)}")
        wait_and_check(rnd, env, url, run_id)

    run_rounds("background_grandchild[sqlite]", body, tmp_path, rounds=1)


# --- a lock held across setup / teardown ---------------------------------------------------


@pytest.mark.parametrize("new_db", BOTH, indirect=True)
def test_lock_across_setup(new_db: NewDb, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Another process holds the write lock 0.5 to 4 s from before `li run` starts: either it
    refuses (exit 2, one line, no row, nothing ran) or it waits and records the run."""

    def body(rnd: Round) -> None:
        url = new_db(rnd)
        env = fault_env(rnd.workdir / "home", url, LIRUN_WRITE_RETRY_SECONDS=str(RETRY_SECONDS))
        migrate(url)
        run_id = new_run_id(rnd)
        hold = rnd.rng.uniform(0.5, 4.0)
        rnd.note(f"lock held {hold:.1f}s")
        holder = hold_lock(url, hold)
        try:
            done = li(rnd, "run", "--run-id", run_id, "--json", "--", "sh", "-c",
                      "touch started; sleep 0.2", env=env)  # fmt: skip
        finally:
            holder.wait(timeout=30)
            release(holder)
        check_setup_outcome(rnd, env, url, run_id, done)

    run_rounds(kind_name("lock_setup", request), body, tmp_path, parallel=5)


def check_setup_outcome(rnd: Round, env: dict[str, str], url: str, run_id: str, done: Any) -> None:
    """Refused cleanly, or recorded: never a run without a record."""
    row = read_row(url, run_id)
    ran = (rnd.workdir / "started").exists()
    if done.rc == 2:
        lines = [line for line in done.err.splitlines() if line.strip()]
        if row is not None:
            raise Lost(f"li run exited 2 but wrote a row ({row['status']})")
        if ran:
            raise Lost("li run exited 2 after the command had run")
        if len(lines) != 1:
            raise Lost(f"the refusal is not one clear line: {lines}")
        return
    if ran and row is None:
        raise Lost(f"the command ran without a record (exit {done.rc}): {tail(done.err)}")
    check_run_exit(done, row)
    wait_and_check(rnd, env, url, run_id)


@pytest.mark.parametrize("new_db", BOTH, indirect=True)
def test_lock_held_through_setup_refuses(
    new_db: NewDb, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Item 3: a lock held for as long as `li run` takes: it must not run the command
    without a record — one clear line, exit 2, no row, nothing started."""

    def body(rnd: Round) -> None:
        url = new_db(rnd)
        env = fault_env(rnd.workdir / "home", url, LIRUN_WRITE_RETRY_SECONDS=str(RETRY_SECONDS))
        migrate(url)
        run_id = new_run_id(rnd)
        holder = hold_lock(url, 50.0)
        try:
            done = li(rnd, "run", "--run-id", run_id, "--", "sh", "-c", "touch started", env=env)
        finally:
            release(holder)
        if done.rc != 2:
            raise Lost(f"li run exited {done.rc} with the database locked throughout: "
                       f"{tail(done.err)}")  # fmt: skip
        check_setup_outcome(rnd, env, url, run_id, done)

    run_rounds(kind_name("lock_setup_throughout", request), body, tmp_path, rounds=1)


@pytest.mark.parametrize("new_db", BOTH, indirect=True)
def test_lock_across_teardown(
    new_db: NewDb, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A lock held across teardown longer than LIRUN_WRITE_RETRY_SECONDS: `li run` exits
    with the run's status code while the lock is still held, warns the record is pending,
    and the next `li status` applies the spooled outcome (the true one, not orphaned)."""

    def body(rnd: Round) -> None:
        url = new_db(rnd)
        env = fault_env(rnd.workdir / "home", url, LIRUN_WRITE_RETRY_SECONDS=str(RETRY_SECONDS))
        migrate(url)
        run_id = new_run_id(rnd)
        # The child ends only once the lock is held: its teardown must meet the lock.
        proc = start(rnd, "run", "--run-id", run_id, "--json", "--", "sh", "-c", UNTIL_GO,
                     env=env, tagged=True)  # fmt: skip
        if not poll_row(url, run_id):
            finish(proc, "li run")
            raise Lost(f"the row of {run_id} never showed running")
        # The run's ending makes three writes, each bounded by the retry bound (the reply
        # message, the record columns, the terminal write), then the spool and li's exit.
        hold = 3 * RETRY_SECONDS + rnd.rng.uniform(3.0, 4.0)
        rnd.note(f"lock held {hold:.1f}s")
        holder = hold_lock(url, hold)
        (rnd.workdir / "go").touch()
        try:
            done = finish(proc, "li run", timeout=60)
            held_at_exit = holder.poll() is None
        finally:
            release(holder)
        summary = summary_of(done)
        if not held_at_exit:
            raise Lost(
                f"li run ended {done.seconds:.1f}s after start, after the lock ({hold:.1f}s) "
                f"was released: the ending's writes are not bounded by 3 x "
                f"LIRUN_WRITE_RETRY_SECONDS={RETRY_SECONDS}"
            )
        if done.rc != EXIT_CODE_BY_STATUS.get(summary["status"]):
            raise Lost(f"li run exited {done.rc} for status {summary['status']}")
        if "pending" not in done.err.lower():
            raise Lost(f"li run did not warn that the record is pending: {tail(done.err)}")
        status = li(rnd, "status", run_id, "--json", env=env)
        if status.rc != 0:
            raise Lost(f"li status exited {status.rc}: {tail(status.err)}")
        check_spooled_outcome(url, run_id, summary)
        wait_and_check(rnd, env, url, run_id)

    run_rounds(kind_name("lock_teardown", request), body, tmp_path, parallel=5)


def check_spooled_outcome(url: str, run_id: str, summary: dict[str, Any]) -> None:
    row = read_row(url, run_id)
    if row is None:
        raise Lost(f"no row {run_id}")
    stored = (row["status"], row["status_reason_code"])
    told = (summary["status"], summary["reason"])
    if stored != told:
        raise Lost(f"li run said {told}, the database holds {stored} after the spool applied")


# --- PostgreSQL restarted mid-run ----------------------------------------------------------


@pytest.mark.postgres
def test_pg_restart(pg_cluster: PgCluster, tmp_path: Path) -> None:
    """`li run -- sh -c 'sleep 5'` and a `li wait` on it, the server stopped ~1 s in and
    started 3 s later: li exits with the run's code, the row holds the true outcome, and
    the waiter reconnects and prints it."""

    def body(rnd: Round) -> None:
        url = pg_cluster.new_url()
        env = fault_env(rnd.workdir / "home", url)
        migrate(url)
        run_id = new_run_id(rnd)
        proc = start(rnd, "run", "--run-id", run_id, "--json", "--", "sh", "-c", "sleep 5",
                     env=env, tagged=True)  # fmt: skip
        try:
            if not poll_row(url, run_id):
                raise Lost(f"the row of {run_id} never showed running")
            waiter = start(rnd, "wait", run_id, "--timeout", "25", env=env)
            time.sleep(rnd.rng.uniform(0.3, 1.0))
            mode = rnd.rng.choice(["fast", "immediate"])
            down = rnd.rng.uniform(2.5, 3.5)
            rnd.note(f"stop -m {mode}, down {down:.1f}s")
            pg_cluster.stop(mode)
            time.sleep(down)
            pg_cluster.start()
            done = finish(proc, "li run", timeout=60)
            waited = finish(waiter, "li wait", timeout=60)
        finally:
            pg_cluster.ensure_up()
        row = read_row(url, run_id)
        check_run_exit(done, row)
        summary = summary_of(done)
        assert row is not None
        if row["status"] != summary["status"]:
            raise Lost(f"li run said {summary['status']}, the row holds {row['status']}")
        if waited.rc == 3:
            raise Lost(f"li wait never reconnected: {tail(waited.err)}")
        check_wait_matches(waited, url, run_id)

    run_rounds("pg_restart[postgres]", body, tmp_path)


# --- a full disk ---------------------------------------------------------------------------


def test_disk_full(tiny_disk: Callable[[str], Path], tmp_path: Path) -> None:
    """The SQLite database on a tmpfs that fills up before setup or during the run (the
    home, where a spool goes, on normal disk): the outcome lands, or is spooled and applied
    once there is room, or the run is refused cleanly — never a traceback, never a lie."""

    def body(rnd: Round) -> None:
        disk = tiny_disk("4m")
        url = str(disk / "state.db")
        env = fault_env(rnd.workdir / "home", url, LIRUN_WRITE_RETRY_SECONDS=str(RETRY_SECONDS))
        run_id = new_run_id(rnd)
        when = rnd.rng.choice(["before_setup", "during_run"])
        rnd.note(f"disk full {when}")
        script = f"touch started; {UNTIL_GO}"
        command = ["run", "--run-id", run_id, "--json", "--", "sh", "-c", script]
        if when == "before_setup":
            migrate(url)
            fill(disk)
            (rnd.workdir / "go").touch()
            proc = start(rnd, *command, env=env, tagged=True)
        else:
            proc = start(rnd, *command, env=env, tagged=True)
            if not poll_row(url, run_id):
                finish(proc, "li run")
                raise Lost(f"the row of {run_id} never showed running")
            time.sleep(rnd.rng.uniform(0.0, 0.5))
            fill(disk)
            (rnd.workdir / "go").touch()  # the child ends: teardown meets a full disk
        try:
            done = finish(proc, "li run", timeout=60)
        finally:
            free(disk)
        ran = (rnd.workdir / "started").exists()
        if not ran:
            check_setup_outcome(rnd, env, url, run_id, done)
            return
        if done.rc == 2:
            raise Lost(f"li run exited 2 after the command ran: {tail(done.err)}")
        summary = summary_of(done)
        status = li(rnd, "status", run_id, "--json", env=env)
        if status.rc != 0:
            raise Lost(f"li status exited {status.rc}: {tail(status.err)}")
        check_spooled_outcome(url, run_id, summary)
        check_run_exit(done, read_row(url, run_id))
        wait_and_check(rnd, env, url, run_id)

    run_rounds("disk_full[sqlite]", body, tmp_path, parallel=3)


# --- SIGINT / SIGTERM at random moments ----------------------------------------------------


@pytest.mark.parametrize("new_db", BOTH, indirect=True)
def test_sigint_sigterm(new_db: NewDb, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """SIGINT or SIGTERM at a random moment from start-up on: the exit code is the stored
    status's, or 2 with no row; no traceback; nothing the run started survives it."""

    def body(rnd: Round) -> None:
        url = new_db(rnd)
        env = fault_env(rnd.workdir / "home", url)
        run_id = new_run_id(rnd)
        sig = rnd.rng.choice([signal.SIGINT, signal.SIGTERM])
        at = rnd.rng.uniform(0.0, 1.2)
        rnd.note(f"{sig.name} at {at:.2f}s")
        proc = start(rnd, "run", "--run-id", run_id, "--", "sh", "-c", "sleep 1.5", env=env,
                     tagged=True)  # fmt: skip
        time.sleep(at)
        proc.send_signal(sig)
        done = finish(proc, "li run", timeout=30, allow_traceback=True)
        left = leftover_processes(rnd.tag)
        row = read_row(url, run_id)
        # Python's own start-up (runpy, the stdlib lirun's first line needs) takes the
        # signal's default action (exit -N, or 1 with a traceback of the interpreter's
        # frames only) before any code of lirun's can handle it: nothing ran, nothing to
        # record. A traceback through lirun's own frames is a failure.
        early = (done.rc == -sig and TRACEBACK not in done.err) or traceback_before_lirun(done)
        if row is None and early:
            rnd.note("died before lirun ran")
        else:
            no_traceback(done)
            check_run_exit(done, row)
        if row is not None and row["status"] not in SESSION_TERMINAL_STATUSES:
            raise Lost(f"the row is still {row['status']} after li exited")
        if left:
            raise Lost(f"processes of the run outlived it: {describe(left)}")
        if row is not None:
            wait_and_check(rnd, env, url, run_id)

    run_rounds(kind_name("sigint_sigterm", request), body, tmp_path, parallel=4)
