"""Reaping dead owners' runs (design.md §4.6): CAS-guarded, audited, safe to race."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

from lirun.liveness import ORPHANED, STALE
from lirun.record.reap import find_orphans, reap_sessions
from support.cli import li_command
from support.waitkit import complete, killed_owner, live_owner


def _seed(store: Any) -> None:
    store.sessions.create(id="dead", heartbeat_at=time.time(), **killed_owner())
    store.sessions.create(id="stale", owner_host="elsewhere", heartbeat_at=time.time() - 600)
    store.sessions.create(id="alive", heartbeat_at=time.time(), **live_owner())
    store.sessions.create(id="bare")  # no liveness info: never reaped
    store.sessions.create(id="finished", **killed_owner())
    complete(store, "finished")


def test_find_orphans_and_reap(store: Any) -> None:
    _seed(store)
    found = {o.row.id: o.verdict.reason_code for o in find_orphans(store)}
    assert found == {"dead": ORPHANED, "stale": STALE}
    reports = reap_sessions(store, ["dead", "stale"])
    assert [(r["id"], r["reaped"]) for r in reports] == [("dead", True), ("stale", True)]
    row = store.get_entity("session", "dead")
    assert (row["status"], row["status_reason_code"], row["exit_code"]) == ("failed", ORPHANED, 1)
    assert row["ended_at"] is not None
    assert row["status_evidence_refs"][0]["kind"] == "owner"
    last = store.list_transitions("session", "dead")[-1]
    assert (last.previous_status, last.status, last.source) == (
        "running",
        "failed",
        "system",
    )
    for untouched in ("alive", "bare"):
        assert store.get_entity("session", untouched)["status"] == "running"
    assert store.get_entity("session", "finished")["status"] == "completed"
    assert find_orphans(store) == []


def test_reap_rejudges_the_fresh_row(store: Any) -> None:
    """A heartbeat landing after the caller's read saves the row."""
    store.sessions.create(id="revived", owner_host="elsewhere", heartbeat_at=time.time() - 600)
    assert [o.row.id for o in find_orphans(store)] == ["revived"]
    store.sessions.heartbeat("revived")
    assert reap_sessions(store, ["revived"]) == []
    assert store.get_entity("session", "revived")["status"] == "running"


def test_second_reaper_loses_the_cas_harmlessly(store: Any) -> None:
    store.sessions.create(id="dead", **killed_owner())
    assert reap_sessions(store, ["dead"])[0]["reaped"] is True
    assert reap_sessions(store, ["dead"]) == []  # already failed: judged alive-or-done, no write
    failed = [t for t in store.list_transitions("session", "dead") if t.status == "failed"]
    assert len(failed) == 1


def test_concurrent_reaper_processes(store: Any, li_env: dict[str, str]) -> None:
    for n in range(6):
        store.sessions.create(id=f"dead-{n}", **killed_owner())
    reapers = [
        subprocess.Popen(
            li_command("reap", "--json"),
            env=li_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=60) for p in reapers]
    assert [p.returncode for p in reapers] == [0] * 4, [err for _, err in outputs]
    wins = [
        json.loads(line)["id"]
        for out, _ in outputs
        for line in out.splitlines()
        if json.loads(line)["reaped"]
    ]
    assert sorted(wins) == [f"dead-{n}" for n in range(6)]  # each row won exactly once
    for n in range(6):
        history = store.list_transitions("session", f"dead-{n}")
        assert [t.status for t in history] == ["running", "failed"]


def test_li_reap_dry_run_writes_nothing(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="dead", **killed_owner())
    result = subprocess.run(
        li_command("reap", "--dry-run"), env=li_env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("dead\twould reap\tsession.orphaned.no_process\t")
    assert store.get_entity("session", "dead")["status"] == "running"
    result = subprocess.run(
        li_command("reap"), env=li_env, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.startswith("dead\treaped\t")
    assert store.get_entity("session", "dead")["status"] == "failed"
