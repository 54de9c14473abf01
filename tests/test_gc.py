"""Retention (`li gc`'s library, docs/retention.md) on both backends: what a tombstone
keeps and clears, the refusals (running, a running flow, an active show, a spooled
outcome), the filters, dry runs, idempotence and the finishing of a stopped removal."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.liveness import host_name
from lirun.record.retention import GcOptions, collect_garbage, owned_run_dir
from lirun.record.retention_rules import (
    ACTIVE_SHOW,
    RUNNING,
    RUNNING_FLOW,
    SPOOL_PENDING,
    RetentionPolicy,
    Tally,
)
from lirun.record.spool import SpooledOutcome, database_identity, write_spool
from lirun.store import Store
from support.uikit import make_run

DAY = 86400
LATER = time.time() + 10 * DAY  # the clock gc is run with: every record is 10 days old
POLICY = RetentionPolicy(older_than=7 * DAY, batch=2)  # batch 2: several batches per kind
KEPT_COLUMNS = (
    "id",
    "status",
    "status_reason_code",
    "status_reason_summary",
    "exit_code",
    "started_at",
    "ended_at",
    "created_at",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "run_dir",
    "artifacts_path",
    "provider",
    "model",
)
CLEARED_COLUMNS = ("prompt", "reply_text", "status_evidence_refs")


def gc(store: Store, policy: RetentionPolicy = POLICY, *, dry_run: bool = False) -> Tally:
    return collect_garbage(store, policy, GcOptions(now=LATER, actor="tester", dry_run=dry_run))


def pruned_at(store: Store, run_id: str) -> float | None:
    row = store.get_entity("session", run_id)
    assert row is not None
    return row["pruned_at"]


def finished(store: Store, home: Path, run_id: str, **fields: Any) -> dict[str, Any]:
    row = make_run(store, home, run_id, artifacts={"report.md": b"# report\n"}, **fields)
    store.sessions.append_message(run_id, role="assistant", content="a long transcript line")
    return row


def test_a_pruned_run_keeps_its_tombstone_and_loses_its_bulk(
    store: Store, lirun_home: Path
) -> None:
    before = finished(store, lirun_home, "r-old")
    tally = gc(store)
    after = store.get_entity("session", "r-old")
    assert after is not None
    assert {k: after[k] for k in KEPT_COLUMNS} == {k: before[k] for k in KEPT_COLUMNS}
    assert all(after[k] is None for k in CLEARED_COLUMNS)
    assert after["pruned_at"] == pytest.approx(LATER)
    assert after["pruned_by"] == "tester"
    assert after["files_removed_at"] is not None
    assert not Path(str(before["run_dir"])).exists()
    assert store.sessions.list_messages("r-old") == []
    history = store.list_transitions("session", "r-old")
    assert [h.status for h in history] == ["running", "completed"]
    assert all(h.evidence_refs is None for h in history)
    assert tally.pruned == {"session": 1}
    assert tally.file_bytes > 0
    assert tally.bulk_bytes > 0


def test_recent_records_are_not_touched(store: Store, lirun_home: Path) -> None:
    finished(store, lirun_home, "r-new")
    tally = collect_garbage(store, POLICY, GcOptions(actor="tester"))  # the real clock
    row = store.get_entity("session", "r-new")
    assert row is not None
    assert row["pruned_at"] is None
    assert row["prompt"] == "fix the test"
    assert tally.pruned == {}
    assert (lirun_home / "runs" / "r-new").is_dir()


def test_gc_refuses_a_running_record(store: Store, lirun_home: Path) -> None:
    make_run(store, lirun_home, "r-running", status="running")
    tally = gc(store)
    assert tally.refused == [("session", "r-running", RUNNING)]
    row = store.get_entity("session", "r-running")
    assert row is not None
    assert row["pruned_at"] is None
    assert row["prompt"] == "fix the test"
    assert (lirun_home / "runs" / "r-running").is_dir()


def test_gc_refuses_a_leg_of_a_running_flow(store: Store, lirun_home: Path) -> None:
    flow = store.invocations.create(skill="flow", id="inv-running")
    finished(store, lirun_home, "r-leg", invocation_id=flow.id)
    tally = gc(store)
    assert ("session", "r-leg", RUNNING_FLOW) in tally.refused
    assert ("invocation", "inv-running", RUNNING) in tally.refused
    row = store.get_entity("session", "r-leg")
    assert row is not None
    assert row["pruned_at"] is None
    # the write itself checks again: a batch read before the flow was running is refused
    done = store.retention.write_tombstones(
        "session", ["r-leg"], terminal=["completed"], now=LATER, actor="tester"
    )
    assert done == []


@pytest.mark.parametrize("link", ["play_session", "metadata"])
def test_gc_refuses_a_run_of_an_active_show(store: Store, lirun_home: Path, link: str) -> None:
    show = store.shows.create(topic="t", id="show-1")
    if link == "play_session":
        finished(store, lirun_home, "r-play")
        store.shows.create_play(show_id=show.id, name="p", session_id="r-play")
    else:
        play = store.shows.create_play(show_id=show.id, name="p")
        finished(store, lirun_home, "r-play", metadata_json={"play_id": play.id})
    tally = gc(store)
    assert tally.refused == [("session", "r-play", ACTIVE_SHOW)]
    assert (
        store.retention.write_tombstones(
            "session", ["r-play"], terminal=["completed"], now=LATER, actor="tester"
        )
        == []
    )
    store.update_status("show", "show-1", new_status="completed", reason_code="show.completed.ok")
    assert gc(store).pruned == {"session": 1}


def test_gc_refuses_a_record_whose_outcome_is_spooled(store: Store, lirun_home: Path) -> None:
    row = finished(store, lirun_home, "r-spooled")
    spooled = SpooledOutcome(
        run_id="r-spooled",
        database=database_identity(store.url),
        status="failed",
        reason_code="run.failed.exception",
        reason_summary="boom",
    )
    write_spool(store.url, Path(str(row["run_dir"])), spooled)
    tally = gc(store)
    assert tally.refused == [("session", "r-spooled", SPOOL_PENDING)]
    kept = store.get_entity("session", "r-spooled")
    assert kept is not None
    assert kept["pruned_at"] is None
    assert Path(str(row["run_dir"]), "outcome.pending.json").is_file()


def test_filters_keep_what_the_policy_names(store: Store, lirun_home: Path) -> None:
    finished(store, lirun_home, "r-ok")
    finished(store, lirun_home, "r-bad", status="failed", reason="run.failed.exception")
    finished(store, lirun_home, "r-late", status="timed_out", reason="run.timed_out.deadline")
    only_late = RetentionPolicy(older_than=7 * DAY, statuses=("timed_out",))
    assert gc(store, only_late).pruned == {"session": 1}
    keep_failed = RetentionPolicy(older_than=7 * DAY, keep_failed=True)
    tally = gc(store, keep_failed)
    assert tally.pruned == {"session": 1}
    assert tally.kept == {"kept_failed": 1}
    pruned = {i: pruned_at(store, i) is not None for i in ("r-ok", "r-bad", "r-late")}
    assert pruned == {"r-ok": True, "r-bad": False, "r-late": True}


def test_dry_run_changes_nothing_and_gc_is_idempotent(store: Store, lirun_home: Path) -> None:
    for n in range(5):
        finished(store, lirun_home, f"r-{n}")
    dry = gc(store, dry_run=True)
    assert dry.pruned == {"session": 5}
    assert dry.file_bytes > 0
    assert all(pruned_at(store, f"r-{n}") is None for n in range(5))
    assert len(list((lirun_home / "runs").iterdir())) == 5
    first = gc(store)
    assert first.pruned == {"session": 5}
    assert first.file_bytes == dry.file_bytes
    again = gc(store)
    assert again.pruned == {}
    assert again.refused == []
    assert again.files_removed == 0
    assert list((lirun_home / "runs").iterdir()) == []


def test_a_flow_invocation_is_pruned_with_its_run_directory(store: Store, lirun_home: Path) -> None:
    run_dir = lirun_home / "runs" / "inv-done"
    (run_dir / "artifacts").mkdir(parents=True)
    (run_dir / "flow.log").write_text("leg a completed\n")
    store.invocations.create_flow(
        id="inv-done",
        skill="f.yaml",
        flow={"spec": {}},
        flow_digest="d",
        run_dir=str(run_dir),
        artifacts_path=str(run_dir / "artifacts"),
        resumed_from=None,
    )
    store.update_status(
        "invocation", "inv-done", new_status="completed", reason_code="run.completed.ok"
    )
    assert gc(store).pruned == {"invocation": 1}
    row = store.get_entity("invocation", "inv-done")
    assert row is not None
    assert row["pruned_at"] is not None
    assert row["status"] == "completed"
    assert not run_dir.exists()


def test_a_stopped_removal_is_finished_by_the_next_gc(store: Store, lirun_home: Path) -> None:
    row = finished(store, lirun_home, "r-half")
    # a gc killed after its tombstone transaction, before the directory went
    assert store.retention.write_tombstones(
        "session", ["r-half"], terminal=["completed"], now=LATER, actor="tester"
    ) == ["r-half"]
    assert Path(str(row["run_dir"])).is_dir()
    tally = gc(store)
    assert tally.files_removed == 1
    assert not Path(str(row["run_dir"])).exists()
    assert store.retention.unremoved_files(host=host_name(), limit=10) == []


def test_a_run_directory_gc_does_not_own_is_left(store: Store, lirun_home: Path) -> None:
    foreign = lirun_home / "somewhere-else"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    make_run(store, lirun_home, "r-foreign", with_files=False)
    store.update_fields("session", "r-foreign", {"run_dir": str(foreign)})
    assert owned_run_dir("r-foreign", str(foreign)) is None
    assert gc(store).pruned == {"session": 1}
    assert (foreign / "keep.txt").read_text() == "mine"


def test_vacuum_gives_the_space_back_on_sqlite(store: Store, db_url: str) -> None:
    rows = [
        {
            "id": f"r-{n:04}",
            "status": "completed",
            "reason_code": "run.completed.ok",
            "prompt": os.urandom(2000).hex(),
            "created_at": time.time() - 60,
            "ended_at": time.time() - 60,
        }
        for n in range(300)
    ]
    size = lambda: sum(os.path.getsize(p) for p in (db_url, db_url + "-wal") if os.path.exists(p))  # noqa: E731
    # What the runs take beyond the empty database's own pages (which grow with each
    # migration's tables and indexes) is what a vacuum must give back.
    empty = size() if store.dialect == "sqlite" else 0
    store.sessions.import_many(rows)
    before = size() if store.dialect == "sqlite" else 0
    tally = collect_garbage(store, POLICY, GcOptions(now=LATER, actor="t", vacuum=True))
    assert tally.pruned == {"session": 300}
    assert tally.bulk_bytes == 300 * 4000
    if store.dialect == "sqlite":
        assert size() - empty < (before - empty) / 4, (empty, before, size())


def test_a_run_directory_on_another_host_is_left_to_a_gc_there(
    store: Store, lirun_home: Path
) -> None:
    rows = [finished(store, lirun_home, f"r-far-{n}", owner_host="far-away") for n in range(5)]
    tally = gc(store)  # batch 2: finishing would loop if it kept picking the far ones up
    assert tally.pruned == {"session": 5}
    assert tally.files_elsewhere == 5
    assert all(Path(str(r["run_dir"])).is_dir() for r in rows)
    far = store.get_entity("session", "r-far-0")
    assert far is not None
    assert far["pruned_at"] is not None
    assert far["files_removed_at"] is None
    assert store.retention.unremoved_files(host=host_name(), limit=10) == []
    assert len(store.retention.unremoved_files(host="far-away", limit=10)) == 5
    assert gc(store).files_elsewhere == 0  # not picked up again here
