"""Real processes racing on the same rows, and readers next to a held write lock."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import support
from lirun.errors import DatabaseBusyError
from lirun.store import Store, open_store
from support.storekit import write_lock_held

PROCESSES = 8
ROWS = 200
TERMINALS = ("completed", "failed", "timed_out", "cancelled", "aborted", "completed_empty")

# Each worker finalizes every row with its own status, guarded on "running", and reports
# which rows it won. Odd workers go backwards, so races happen all along the list. All start
# at the moment the "go" line names, not when each reads it: on a loaded machine the first
# worker to read "go" could otherwise finish every row before the others wake.
_RACER = """
import json, sys, time
from lirun.store import open_store
from support.storekit import reason_for
url, worker, status, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
store = open_store(url)
ids = [f"row-{i}" for i in range(rows)]
if worker % 2:
    ids.reverse()
print("ready", flush=True)
start = float(sys.stdin.readline())
time.sleep(max(0.0, start - time.time()))
won, errors = [], []
for sid in ids:
    try:
        if store.update_status(
            "session", sid, new_status=status, reason_code=reason_for("session", status),
            actor=f"w{worker}", expected_statuses={"running"},
        ):
            won.append(sid)
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
store.close()
print(json.dumps({"won": won, "errors": errors}), flush=True)
"""


def race(db_url: str, env: dict[str, str]) -> list[dict[str, Any]]:
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, db_url, str(i), TERMINALS[i % 6], str(ROWS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(PROCESSES)
    ]
    try:
        for w in workers:
            assert w.stdout is not None
            assert w.stdout.readline().strip() == "ready"
        start = time.time() + 0.5  # all open, then all go at once
        for w in workers:
            assert w.stdin is not None
            w.stdin.write(f"{start}\n")
            w.stdin.flush()
        results = []
        for w in workers:
            out, _ = w.communicate(timeout=120)
            assert w.returncode == 0
            results.append(json.loads(out))
        return results
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()


@pytest.mark.slow
def test_eight_processes_finalizing_the_same_rows_give_one_winner_each(
    store: Store, db_url: str, li_env: dict[str, str]
) -> None:
    for i in range(ROWS):
        store.sessions.create(id=f"row-{i}")
    env = {**li_env, "PYTHONPATH": str(support.TESTS_DIR)}
    results = race(db_url, env)

    assert [r["errors"] for r in results] == [[]] * PROCESSES
    winner: dict[str, int] = {}
    for worker, result in enumerate(results):
        for sid in result["won"]:
            assert sid not in winner, f"{sid} won twice"
            winner[sid] = worker
    assert len(winner) == ROWS
    for i in range(ROWS):
        sid = f"row-{i}"
        worker = winner[sid]
        status = TERMINALS[worker % len(TERMINALS)]
        row = store.get_entity("session", sid)
        assert row is not None
        assert row["status"] == status
        history = store.list_transitions("session", sid)
        assert [(t.previous_status, t.status) for t in history] == [
            (None, "running"),
            ("running", status),
        ]
        assert history[1].actor == f"w{worker}"
    assert store.list_admin_events() == []
    # More than one worker must have won something, or there was no race at all. SQLite's
    # busy handler lets the writer that holds the lock take it again while the others sleep,
    # so on a loaded machine one SQLite writer may win every row: the others still tried
    # and lost (no error, no second winner), which is what this test is for.
    if db_url.startswith("postgresql"):
        assert len(set(winner.values())) > 1


def test_a_reader_answers_while_another_process_holds_the_write_lock(
    store: Store, db_url: str
) -> None:
    store.sessions.create(id="s-1")
    with write_lock_held(db_url):
        start = time.monotonic()
        row = store.get_entity("session", "s-1")
        elapsed = time.monotonic() - start
        assert row is not None
        assert row["status"] == "running"
        assert elapsed < 1.0, f"read took {elapsed:.2f}s behind a held write lock"
        # And from a thread, while this store's own write waits for that lock.
        results: dict[str, Any] = {}
        writer = threading.Thread(
            target=lambda: results.update(
                ok=store.update_status(
                    "session", "s-1", new_status="completed", reason_code="run.completed.ok"
                )
            )
        )
        writer.start()
        time.sleep(0.2)
        assert writer.is_alive(), "the write should be waiting for the lock"
        start = time.monotonic()
        assert store.get_entity("session", "s-1")["status"] == "running"  # type: ignore[index]
        assert store.list_transitions("session", "s-1")
        assert time.monotonic() - start < 1.0
    writer.join(timeout=20)
    assert results == {"ok": True}


_READER = """
import sys, time
from lirun.store import open_store
store = open_store(sys.argv[1])
start = time.monotonic()
row = store.get_entity("session", "s-1")
print(row["status"], time.monotonic() - start, flush=True)
"""


def test_a_reader_process_answers_while_another_holds_the_write_lock(
    store: Store, db_url: str
) -> None:
    store.sessions.create(id="s-1")
    with write_lock_held(db_url):
        out = subprocess.run(
            [sys.executable, "-c", _READER, db_url],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.split()
    assert out[0] == "running"
    assert float(out[1]) < 1.0


def test_a_lock_held_past_the_busy_timeout_is_a_busy_error(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lirun.store.sqlite

    monkeypatch.setattr(lirun.store.sqlite, "BUSY_TIMEOUT_S", 0.5)
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "0.5")  # writes and row locks wait this long
    store = open_store(db_url)
    try:
        store.sessions.create(id="s-1")
        with write_lock_held(db_url):
            start = time.monotonic()
            with pytest.raises(DatabaseBusyError, match="locked by another") as caught:
                store.update_status(
                    "session", "s-1", new_status="completed", reason_code="run.completed.ok"
                )
            assert 0.4 < time.monotonic() - start < 10
            assert caught.value.exit_code == 2
        assert store.get_entity("session", "s-1")["status"] == "running"  # type: ignore[index]
        assert len(store.list_transitions("session", "s-1")) == 1
        assert store.update_status(
            "session", "s-1", new_status="completed", reason_code="run.completed.ok"
        )
    finally:
        store.close()
