"""`li wait` delivers spooled outcomes within its --timeout (issue 33): a database that holds
its write lock, or a PostgreSQL server that is frozen, keeps the outcome in the spool and
the waiter ends by its deadline; the next waiter delivers it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from lirun.record.rundir import allocate_run
from lirun.record.spool import pending_files
from lirun.record.teardown import setup_persist_sync, teardown_persist_sync
from support.pgcluster import PgCluster
from support.waitkit import hold_write_lock, parse_line, run_wait

TIMEOUT = 3
# What a waiter may take past its --timeout: the grace, a connect that is under way (at
# least 2 s) and the start-up of `li` on a loaded machine.
SLACK = 5


def _spooled_run(url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A run whose teardown could not write (its handle died): its outcome, timed_out, is
    in the spool and its row still says running."""
    run = allocate_run()
    ctx = setup_persist_sync(run, db=url, provider="command")
    assert ctx is not None
    with monkeypatch.context() as m:
        m.setenv("LIRUN_WRITE_RETRY_SECONDS", "0.2")
        ctx.store.close()
        assert teardown_persist_sync(ctx, status="timed_out") == "timed_out"
    assert len(pending_files(url)) == 1
    return run.run_id


def _env(url: str, home: Path) -> dict[str, str]:
    """`--db` on the command line says the database (`li wait` finds its spool by it)."""
    drop = {"LIRUN_DB_URL", "LIRUN_WRITE_RETRY_SECONDS"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "LIRUN_HOME": str(home)}


def _delivered_by_a_later_wait(url: str, env: dict[str, str], run_id: str) -> None:
    code, out, err = run_wait(env, "--timeout", "20", "--db", url, run_id)
    line = parse_line(out.strip())
    assert (line["id"], line["status"], line["reason"]) == (
        run_id,
        "timed_out",
        "run.timed_out.deadline",
    ), err
    assert code == 1, err  # terminal, unsuccessful
    assert pending_files(url) == []


def test_a_held_write_lock_keeps_the_spool_and_the_wait_ends_by_its_timeout(
    db_url: str, lirun_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _spooled_run(db_url, monkeypatch)
    env = _env(db_url, lirun_home)
    holder = hold_write_lock(db_url)
    try:
        started = time.monotonic()
        code, out, err = run_wait(env, "--timeout", str(TIMEOUT), "--db", db_url, run_id)
        took = time.monotonic() - started
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    assert code == 3, err  # the documented exit code of a timeout
    assert took < TIMEOUT + SLACK, (took, err)
    assert out == ""
    assert f"timed out; still waiting on {run_id} (running)" in err, err
    assert "stay spooled" in err, err
    assert "Traceback" not in err, err
    assert len(pending_files(db_url)) == 1  # nothing lost
    _delivered_by_a_later_wait(db_url, env, run_id)


@pytest.mark.slow
def test_a_frozen_server_keeps_the_spool_and_the_wait_ends_by_its_timeout(
    pg_cluster: PgCluster, lirun_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = pg_cluster.new_url()
    run_id = _spooled_run(url, monkeypatch)
    env = _env(url, lirun_home)
    with pg_cluster.frozen():
        started = time.monotonic()
        code, out, err = run_wait(env, "--timeout", str(TIMEOUT), "--db", url, run_id)
        took = time.monotonic() - started
    assert code == 3, err  # the documented exit code of a timeout
    assert took < TIMEOUT + SLACK, (took, err)
    assert out == ""
    assert "timed out" in err, err
    assert "stay spooled" in err, err
    assert "Traceback" not in err, err
    assert len(pending_files(url)) == 1  # nothing lost
    _delivered_by_a_later_wait(url, env, run_id)
