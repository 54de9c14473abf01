"""Rows created through the library can always become terminal (issue 8, item 7)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lirun.liveness import DEFAULT_LEASE_SECONDS, current_owner
from lirun.store import Store, open_store
from support.storekit import row_of
from support.userkit import run_as_nobody
from support.waitkit import killed_owner, parse_line, run_wait

_CREATE_AND_DIE = """
import os, sys
from lirun.store import StateDB
import asyncio

async def main():
    async with StateDB(sys.argv[1]) as db:
        await db.create_session(id="lib-run")
    os._exit(0)  # gone without finalizing: the row is left running

asyncio.run(main())
"""


def test_a_running_row_records_its_creator_as_owner(store: Store) -> None:
    row = store.sessions.create(id="s-1")
    mine = current_owner()
    assert {k: getattr(row, k) for k in mine} == mine
    ownerless = store.sessions.create(id="s-3", owner_pid=None)  # an explicit opt-out
    assert ownerless.owner_pid is None


def test_a_library_row_whose_creator_died_is_reaped_by_wait(
    store: Store, db_url: str, li_env: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CREATE_AND_DIE, db_url], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    code, out, err = run_wait(li_env, "lib-run", "--timeout", "20")
    assert code == 1, err
    line = parse_line(out.strip())
    assert (line["status"], line["reason"]) == ("failed", "session.orphaned.no_process")
    assert row_of(store, "session", "lib-run")["status"] == "failed"


def test_a_heartbeat_gives_a_leaseless_row_the_default_lease(store: Store) -> None:
    store.sessions.create(id="bare", owner_pid=None)
    store.sessions.create(id="leased", owner_pid=None, heartbeat_at=time.time(), lease_seconds=5)
    store.sessions.heartbeat("bare")
    store.sessions.heartbeat("leased")
    bare, leased = row_of(store, "session", "bare"), row_of(store, "session", "leased")
    assert bare["heartbeat_at"] is not None
    assert bare["lease_seconds"] == DEFAULT_LEASE_SECONDS
    assert leased["lease_seconds"] == 5


def test_a_created_heartbeat_comes_with_a_lease(store: Store) -> None:
    row = store.sessions.create(id="s-1", heartbeat_at=time.time())
    assert row.lease_seconds == DEFAULT_LEASE_SECONDS


_WAIT_AS_USER = """
import contextlib, io, sys
from lirun.cli.main import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    code = main(["--db", sys.argv[1], "wait", "dead", "--interval", "0.2", "--timeout", "3"])
print(code)
print(err.getvalue())
"""


def test_a_waiter_that_cannot_write_waits_without_reaping_and_says_so_once(
    shared_dir: Path,
) -> None:
    folder = shared_dir / "ro"
    folder.mkdir()
    path = folder / "state.db"
    writer = open_store(path)
    writer.sessions.create(id="dead", heartbeat_at=time.time(), **killed_owner())
    writer.close()
    path.chmod(0o644)
    folder.chmod(0o555)
    out = run_as_nobody(_WAIT_AS_USER, str(path), home=shared_dir)
    code, _, err = out.partition("\n")
    assert code == "3", out
    assert err.count("waiting without reaping") == 1, err
    reader = open_store(path, readonly=True)
    try:
        row: Any = reader.get_entity("session", "dead")
    finally:
        reader.close()
    assert row["status"] == "running"


def test_a_setup_persist_row_records_its_owner(store: Store, db_url: str) -> None:
    from lirun.record.rundir import allocate_run
    from lirun.record.teardown import setup_persist_sync

    run = allocate_run()
    ctx = setup_persist_sync(run, db=db_url)
    assert ctx is not None
    try:
        row = store.get_entity("session", run.run_id)
    finally:
        ctx.close()
    assert row is not None
    assert row["owner_pid"] == os.getpid()
