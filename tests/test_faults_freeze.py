"""The fault suite, a frozen worker whose work finished: the record says what happened.

``lease_freeze_finished``: the worker running a short piece of work is SIGSTOPped while
the work runs, and the work ends by itself (exit 0) while its worker is frozen. The
freeze lasts either past the guard's deadline but not to a takeover (the thawed worker
finds its lease lapsed and stops its runs: a stop that came after the work had ended),
or past the takeover (another worker's reaper fails the run by lease and runs its
retry). Either way the first attempt's record ends ``completed`` by its own exit, its
execution claims no signal, and a retry the lapse caused is either cancelled before it
started or marked a repeat of completed work.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lirun.schedules.actions import parse_action
from lirun.schedules.definition import make_policies
from lirun.schedules.submit import submit
from lirun.store import Store, open_store
from support.faultkit import Lost, Lying, Round, fault_env, li_argv, run_rounds
from support.ledgerkit import check_no_overlap, work_argv, write_program
from support.pg import make_pg_url
from test_faults_lease import all_runs, check_escaped, logs, owner_of, running_workers

pytestmark = [pytest.mark.faults, pytest.mark.slow]

WORK = 1.5  # seconds: it ends while its worker is frozen
TERMINAL = {"completed", "failed", "cancelled", "timed_out", "skipped"}


def corrected(store: Store, run_id: str, timeout: float) -> list[dict[str, Any]]:
    """The run and its retries once the run is completed, every one is terminal and every
    retry is settled (cancelled as superseded or marked a repeat: the correction writes
    that just after the run's own status, so a read between the two sees neither yet)."""
    deadline = time.monotonic() + timeout
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        rows = [r for r in all_runs(store) if run_id in (r["id"], r.get("retry_of"))]
        first = next(r for r in rows if r["id"] == run_id)
        if (
            first["status"] == "completed"
            and all(r["status"] in TERMINAL for r in rows)
            and all(settled(store, r) for r in rows if r["id"] != run_id)
        ):
            return rows
        time.sleep(0.2)
    return rows  # check_truth says what is wrong with them


def settled(store: Store, retry: dict[str, Any]) -> bool:
    if retry["status_reason_code"] == "schedule.cancelled.superseded":
        return True
    return "schedule_run_repeat" in (e.event_type for e in store.list_admin_events(retry["id"]))


def check_truth(store: Store, rows: list[dict[str, Any]], run_id: str, ledger: Path) -> None:
    first = next(r for r in rows if r["id"] == run_id)
    if first["status"] != "completed" or any(r["status"] not in TERMINAL for r in rows):
        states = [(r["id"][:8], r["status"], r.get("status_reason_code")) for r in rows]
        raise Lying(f"the finished work's run never read completed: {states}")
    if first["status_reason_code"] != "schedule.completed.ok" or first["exit_code"] != 0:
        raise Lying(f"attempt 1: {first['status_reason_code']} exit {first['exit_code']}")
    session = store.get_entity("session", first["session_id"])
    assert session is not None
    if session["status"] != "completed":
        raise Lying(f"its execution is {session['status']} ({session['status_reason_code']})")
    if "signal" in str(session["status_evidence_refs"]) or "li received" in str(session):
        raise Lying(f"its execution claims a signal stopped it: {session['status_reason_summary']}")
    copies = check_no_overlap(ledger)
    if not copies or not copies[0].ended:
        raise Lost(f"the first copy did not end: {copies}")
    for retry in (r for r in rows if r["id"] != run_id):
        events = [e.event_type for e in store.list_admin_events(retry["id"])]
        superseded = retry["status_reason_code"] == "schedule.cancelled.superseded"
        if superseded and retry.get("started_at") is not None:
            raise Lying(f"retry {retry['id']} was cancelled as superseded after it started")
        if not superseded and "schedule_run_repeat" not in events:
            raise Lying(f"retry {retry['id']} ({retry['status']}) is not marked a repeat")
    if len(copies) != 1 + sum(1 for r in rows if r.get("started_at") and r["id"] != run_id):
        raise Lost(f"{len(copies)} copies ran for {len(rows)} attempts")


def check_wait(env: dict[str, str], run_id: str) -> None:
    """``li wait`` on the first attempt answers its true line."""
    done = subprocess.run(
        li_argv("wait", run_id), env=env, capture_output=True, text=True, timeout=60
    )
    fields = dict(p.split("=", 1) for p in done.stdout.split("\t")[1:] if "=" in p)
    if done.returncode != 0 or fields.get("status") != "completed":
        raise Lying(f"li wait {run_id}: exit {done.returncode}: {done.stdout!r}")


@contextmanager
def round_url(backend: str, workdir: Path) -> Iterator[str]:
    """The round's own database: a SQLite file, or a fresh PostgreSQL schema."""
    if backend == "sqlite":
        yield str(workdir / "state.db")
    else:
        yield from make_pg_url()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_lease_freeze_finished(backend: str, tmp_path: Path) -> None:
    """Two workers (lease 4 s), a 1.5 s piece of work with one retry; its worker is
    SIGSTOPped 0.3 to 0.8 s in, for 3.5 to 4.2 s (past its guard's deadline, before a
    takeover) or for 9 to 11 s (past the takeover)."""

    def body(rnd: Round) -> None:
        with round_url(backend, rnd.workdir) as url:
            one_round(rnd, url)

    run_rounds(f"lease_freeze_finished[{backend}]", body, tmp_path, parallel=4)


def one_round(rnd: Round, url: str) -> None:
    env = fault_env(rnd.workdir / "home", url)
    program = write_program(rnd.workdir)
    ledger = rnd.workdir / "ledger.txt"
    store = open_store(url)
    try:
        with running_workers(rnd.workdir, rnd.tag, env, 2) as procs:
            action = parse_action(["run", *work_argv(program, ledger, WORK)], base=str(rnd.workdir))
            run = submit(store, action, policies=make_policies({"retries": 1}, None))
            _, owner = owner_of(ledger)
            long = rnd.rng.random() < 0.5
            at = rnd.rng.uniform(0.3, 0.8)
            frozen = rnd.rng.uniform(9.0, 11.0) if long else rnd.rng.uniform(3.5, 4.2)
            rnd.note(f"SIGSTOP the owner at {at:.2f}s for {frozen:.1f}s")
            time.sleep(at)
            os.kill(owner, signal.SIGSTOP)
            time.sleep(frozen)
            os.kill(owner, signal.SIGCONT)
            try:
                rows = corrected(store, run.id, 30)
                check_truth(store, rows, run.id, ledger)
                check_wait(env, run.id)
            except AssertionError as exc:
                raise type(exc)(f"{exc}; workers: {logs(procs)}") from None
        check_escaped(rnd)
    finally:
        store.close()
