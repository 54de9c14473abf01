"""The dead-owner decision (design.md §4.6) as a table, and the facts it is fed."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from lirun.liveness import (
    DEFAULT_LEASE_SECONDS,
    HEARTBEAT_INTERVAL,
    ORPHANED,
    STALE,
    OwnerFacts,
    OwnerVerdict,
    boot_id,
    current_owner,
    judge_owner,
    orphaned_group,
    process_start_time,
)

NOW = 10_000.0
HOST, BOOT = "h1", "boot-1"
ALIVE = {100: 5_000.0}  # pid → start time on this (fake) machine


def _judge(row: OwnerFacts) -> str | None:
    verdict = judge_owner(row, now=NOW, host=HOST, boot_id=BOOT, process_start_time_of=ALIVE.get)
    return None if verdict is None else verdict.reason_code


OWNER = OwnerFacts(owner_pid=100, owner_start_time=5_000.0, owner_host=HOST, owner_boot_id=BOOT)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (OWNER, None),
        (OWNER._replace(heartbeat_at=NOW - 5), None),
        (OWNER._replace(owner_start_time=5_000.9), None),  # tick rounding is tolerated
        (OWNER._replace(owner_pid=101), ORPHANED),  # gone
        (OWNER._replace(owner_start_time=4_000.0), ORPHANED),  # pid reused by another process
        (OWNER._replace(owner_boot_id="boot-0"), ORPHANED),  # died with the machine
        (OWNER._replace(owner_host="h2", owner_pid=101), None),  # another host: no proof
        (OWNER._replace(owner_host="h2", heartbeat_at=NOW - 61), STALE),
        (OWNER._replace(heartbeat_at=NOW - DEFAULT_LEASE_SECONDS - 1), STALE),
        (OWNER._replace(heartbeat_at=NOW - 100, lease_seconds=300), None),
        (OWNER._replace(heartbeat_at=NOW - 301, lease_seconds=300), STALE),
        (OWNER._replace(owner_pid=101, heartbeat_at=NOW - 500), ORPHANED),  # proof first
        (OwnerFacts(heartbeat_at=NOW - 120), STALE),  # no owner: judged by heartbeat alone
        (OwnerFacts(heartbeat_at=NOW - 1), None),
        (OwnerFacts(), None),  # no liveness info at all: never judged
        (OwnerFacts(owner_pid=None, owner_host=HOST), None),
        (OWNER._replace(owner_boot_id=""), None),  # no recorded boot: pid check only, alive
        (OWNER._replace(owner_boot_id="", owner_pid=101), ORPHANED),
        (OWNER._replace(owner_start_time=None), None),  # start unknown: pid alive is enough
    ],
)
def test_judge_owner(row: OwnerFacts, expected: str | None) -> None:
    assert _judge(row) == expected


def test_same_host_without_our_boot_id_cannot_tell() -> None:
    row = OWNER._replace(owner_pid=101)
    verdict = judge_owner(row, now=NOW, host=HOST, boot_id="", process_start_time_of=ALIVE.get)
    assert verdict is None


@pytest.mark.parametrize(
    ("recorded", "current", "expected"),
    [
        ("btime:1700000000", BOOT, None),  # recorded under the portable platform: cannot tell
        (BOOT, "btime:1700000000", None),  # read under it: cannot tell either
        ("btime:1700000000", "btime:1700000000", None),  # same boot, owner alive
        ("btime:1600000000", "btime:1700000000", ORPHANED),  # rebooted
    ],
)
def test_boot_ids_of_two_platforms_are_not_compared(
    recorded: str, current: str, expected: str | None
) -> None:
    row = OWNER._replace(owner_boot_id=recorded)
    verdict = judge_owner(row, now=NOW, host=HOST, boot_id=current, process_start_time_of=ALIVE.get)
    assert (verdict.reason_code if verdict else None) == expected


def test_verdict_carries_summary_and_evidence() -> None:
    verdict = judge_owner(
        OWNER._replace(owner_pid=101),
        now=NOW,
        host=HOST,
        boot_id=BOOT,
        process_start_time_of=ALIVE.get,
    )
    assert verdict is not None
    assert "101" in verdict.summary
    assert verdict.evidence[0]["pid"] == 101
    assert verdict.evidence[0]["kind"] == "owner"


def test_current_owner_describes_this_process() -> None:
    owner = current_owner()
    assert owner["owner_pid"] == os.getpid()
    assert owner["owner_host"]
    assert isinstance(owner["owner_boot_id"], str)
    assert 0 < time.time() - owner["owner_start_time"] < 24 * 3600
    assert owner["owner_boot_id"] == boot_id()
    assert HEARTBEAT_INTERVAL < DEFAULT_LEASE_SECONDS


def test_process_start_time_of_a_child_and_of_a_dead_or_zombie_process() -> None:
    before = time.time()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = process_start_time(child.pid)
        assert started is not None
        assert before - 1 <= started <= time.time() + 1
        assert process_start_time(child.pid) == started  # stable: it identifies the process
        child.kill()
        deadline = time.monotonic() + 10
        while process_start_time(child.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process_start_time(child.pid) is None  # a zombie counts as gone
    finally:
        child.kill()
        child.wait()
    assert process_start_time(child.pid) is None
    assert process_start_time(0) is None
    assert process_start_time(-5) is None


DEAD_OWNER = OWNER._replace(owner_pid=101)  # owner gone; its child 100 still runs
LEFT = DEAD_OWNER._replace(child_pid=100, child_start_time=5_000.0)  # its child, recorded


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (LEFT, 100),
        (LEFT._replace(child_start_time=5_000.9), 100),  # tick rounding
        (LEFT._replace(child_pid=102), 102),  # leader gone, group may remain
        (LEFT._replace(child_start_time=4_000.0), None),  # pid reused
        (DEAD_OWNER._replace(child_pid=100), None),  # no start time recorded: cannot prove it
        (LEFT._replace(owner_host="h2"), None),  # another machine
        (LEFT._replace(owner_boot_id="boot-0"), None),  # died with the machine
        (DEAD_OWNER, None),  # no child recorded
    ],
)
def test_orphaned_group_is_stopped_only_when_provably_ours(
    row: OwnerFacts, expected: int | None
) -> None:
    verdict = OwnerVerdict(ORPHANED, "owner gone", [])
    got = orphaned_group(row, verdict, host=HOST, boot_id=BOOT, process_start_time_of=ALIVE.get)
    assert got == expected


def test_a_stale_heartbeat_never_stops_the_child() -> None:
    row = LEFT._replace(owner_pid=100, heartbeat_at=NOW - DEFAULT_LEASE_SECONDS - 1)
    verdict = judge_owner(row, now=NOW, host=HOST, boot_id=BOOT, process_start_time_of=ALIVE.get)
    assert verdict is not None
    assert verdict.reason_code == STALE
    assert (
        orphaned_group(row, verdict, host=HOST, boot_id=BOOT, process_start_time_of=ALIVE.get)
        is None
    )
