"""A worker's poll threads (schedules/poll_pool.py) on SQLite and PostgreSQL, with real
poll commands: a due time claimed while the schedule's poll runs is polled once after it,
never alongside it; ``close`` kills a running poll command, which records nothing; a
worker stopping while a poll stores its events keeps what it stored and loses nothing."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from lirun.schedules import polling
from lirun.schedules.definition import stored_definition
from lirun.schedules.poll_pool import PollPool
from lirun.schedules.polling import PollChildren, PollStopped, run_poll
from lirun.schedules.triggers import poll_trigger
from lirun.store import Store
from support.workerkit import add_schedule, until

# Fails loudly (a line in overlaps) when a second copy runs while one does.
ONE_AT_A_TIME = """\
import os, sys, time
here = sys.argv[1]
try:
    fd = os.open(os.path.join(here, "running"), os.O_CREAT | os.O_EXCL)
except FileExistsError:
    open(os.path.join(here, "overlaps"), "a").write("x\\n")
    raise SystemExit(1)
time.sleep(float(sys.argv[2]))
open(os.path.join(here, "polls"), "a").write("x\\n")
os.close(fd)
os.unlink(os.path.join(here, "running"))
print("[]")
"""


def add_poll(store: Store, tmp_path: Path, seconds: float) -> str:
    script = tmp_path / "one_at_a_time.py"
    script.write_text(ONE_AT_A_TIME)
    command = f"{sys.executable} {script} {tmp_path} {seconds:g}"
    trigger = poll_trigger(command, int(time.time()), every="1s", timeout="60s")
    return add_schedule(store, tmp_path, "src", ["run", "true"], trigger=trigger).id


def claim_next(store: Store, pool: PollPool) -> bool:
    """Submit the schedule's next due time as the firing thread does when it is due."""
    row = store.schedules.get("src")
    assert row is not None
    assert row.next_due_at is not None
    definition = stored_definition(row)
    assert definition is not None
    return pool.submit(store, row, definition, int(row.next_due_at))


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_claims_during_a_poll_make_one_more_poll_after_it(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    add_poll(store, tmp_path, 1.5)
    pool = PollPool(db_url, lambda run_id: None)
    try:
        assert claim_next(store, pool)
        until(lambda: (tmp_path / "running").exists(), what="the first poll to start")
        assert claim_next(store, pool)  # both claimed while the first poll runs
        assert claim_next(store, pool)
        until(lambda: lines(tmp_path / "polls") >= 2, what="the second poll", timeout=30)
        until(lambda: pool.busy() == 0, what="the pool to be idle")
    finally:
        pool.close()
    assert lines(tmp_path / "overlaps") == 0, "two polls of one schedule ran at once"
    assert lines(tmp_path / "polls") == 2  # three claims, the two during the poll as one
    row = store.schedules.get("src")
    assert row is not None
    assert row.last_poll_reason == "schedule.poll.ok"


def test_close_kills_the_running_poll_command_which_records_nothing(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    add_poll(store, tmp_path, 600)
    pool = PollPool(db_url, lambda run_id: None)
    try:
        assert claim_next(store, pool)
        until(lambda: (tmp_path / "running").exists(), what="the poll to start")
    finally:
        began = time.monotonic()
        pool.close()
    assert time.monotonic() - began < 10
    assert not claim_next(store, pool)  # a closed pool claims nothing
    assert lines(tmp_path / "polls") == 0
    row = store.schedules.get("src")
    assert row is not None
    assert row.last_poll_at is None


def test_a_worker_stopping_mid_store_keeps_what_it_stored_and_loses_nothing(
    store: Store, tmp_path: Path
) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text("")
    trigger = poll_trigger(f"cat {feed}", int(time.time()), every="1s")
    schedule = add_schedule(store, tmp_path, "feed", ["run", "true"], trigger=trigger)
    definition = stored_definition(schedule)
    assert definition is not None
    run_poll(store, schedule.id, definition, lambda run_id: None)  # the baseline
    batch = polling.STORE_BATCH  # items stored per transaction
    total = 2 * batch + 20
    feed.write_text("".join(json.dumps({"id": n}) + "\n" for n in range(total)))
    children = PollChildren()
    queued: list[str] = []

    def enqueue(run_id: str) -> None:
        queued.append(run_id)
        if len(queued) == 5:
            children.kill_all()  # the worker stops while the poll stores its events

    with pytest.raises(PollStopped):
        run_poll(store, schedule.id, definition, enqueue, children)
    # The first batch was committed (its runs offered) before the stop: the rest waits.
    assert store.events.count(schedule.id) == (batch, batch)
    assert len(queued) == batch
    row = store.schedules.get("feed")
    assert row is not None
    assert row.last_poll_detail == "0 items, 0 new (baseline)"  # no success recorded
    assert run_poll(store, schedule.id, definition, queued.append) == total - batch
    assert store.events.count(schedule.id) == (total, total)
    assert len(set(queued)) == total
