"""`li wait` under faults: what it prints is what the database holds (issue 8)."""

from __future__ import annotations

import time
from typing import Any

from lirun.store import open_store
from support.storekit import row_of, write_lock_held
from support.waitkit import finish, killed_owner, parse_line, start_waiter


def test_printed_reap_is_the_committed_row_while_another_process_holds_the_lock(
    store: Any, db_url: str, li_env: dict[str, str]
) -> None:
    # A dead owner's row, and the write lock held by another process that is then the last
    # one to close the database: the waiter's reap waits for the lock, and the line it
    # prints must be what was committed (a waiter that dropped its own file locks once
    # wrote into a WAL the closing holder had already checkpointed and deleted).
    store.sessions.create(id="A", run_dir="/runs/A", heartbeat_at=time.time(), **killed_owner())
    store.close()
    with write_lock_held(db_url):
        waiter = start_waiter(li_env, "A", "--interval", "0.2", "--timeout", "40")
        time.sleep(3.0)
    code, out, err = finish(waiter, timeout=60)
    line = parse_line(out.strip())
    check = open_store(db_url)
    try:
        row = row_of(check, "session", "A")
        history = [t.status for t in check.list_transitions("session", "A")]
    finally:
        check.close()
    assert (line["status"], line["reason"]) == (row["status"], row["status_reason_code"]), err
    assert row["status"] == "failed"
    assert code == 1
    assert history == ["running", "failed"]
