"""Pending outcomes: the pure delivery decision and applying spools on both backends."""

from __future__ import annotations

import errno
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from lirun.record.rundir import RunDir, allocate_run
from lirun.record.spool import (
    SpooledOutcome,
    apply_pending,
    database_key,
    decide_delivery,
    pending_files,
)
from lirun.record.teardown import setup_persist_sync, teardown_persist_sync
from lirun.store import Store
from lirun.store.rows import SessionRow
from support.execkit import get_row, poll, run_li, start_li

SPOOLED = SpooledOutcome(
    run_id="r1",
    database="db",
    status="completed",
    reason_code="run.completed.ok",
    reason_summary="",
)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (None, "keep"),
        ({"status": "running", "status_reason_code": "run.running.started"}, "write"),
        ({"status": "completed", "status_reason_code": "run.completed.ok"}, "done"),
        ({"status": "failed", "status_reason_code": "session.orphaned.no_process"}, "override"),
        ({"status": "failed", "status_reason_code": "session.stale.no_heartbeat"}, "override"),
        ({"status": "cancelled", "status_reason_code": "run.cancelled.sigterm"}, "leave"),
        ({"status": "completed", "status_reason_code": "run.completed.admin"}, "leave"),
    ],
)
def test_delivery_decision(row: dict[str, Any] | None, expected: str) -> None:
    given = None if row is None else {**dict.fromkeys(SessionRow._fields), **row}
    session = None if given is None else SessionRow.from_row(given)
    assert decide_delivery(session, SPOOLED) == expected


def test_the_database_key_holds_no_password_and_names_one_database(tmp_path: Path) -> None:
    url = "postgresql://u:secret@h/db?schema=a"
    assert "secret" not in database_key(url)
    assert database_key(url) == database_key("postgresql://u:other@h/db?schema=a")
    assert database_key(url) != database_key("postgresql://u:secret@h/db?schema=b")
    path = tmp_path / "state.db"
    assert database_key(str(path)) == database_key(f"sqlite://{path}")


@pytest.fixture
def run() -> RunDir:
    return allocate_run()


def _spool_timed_out(db_url: str, run: RunDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """A teardown whose database handle died: its outcome goes to the spool."""
    ctx = setup_persist_sync(run, db=db_url, provider="command")
    assert ctx is not None
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "0.2")  # after setup: it had no fault
    ctx.store.close()
    assert teardown_persist_sync(ctx, status="timed_out") == "timed_out"
    assert len(pending_files(db_url)) == 1


def test_a_reaped_row_is_corrected_by_an_audited_system_override(
    db_url: str, store: Store, run: RunDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    _spool_timed_out(db_url, run, monkeypatch)
    # Another host's reaper finalized the row before the spool was applied.
    assert store.update_status(
        "session",
        run.run_id,
        new_status="failed",
        reason_code="session.orphaned.no_process",
        source="system",
        expected_statuses={"running"},
    )
    assert apply_pending(store) == [(run.run_id, "override")]
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert (row["status"], row["status_reason_code"]) == ("timed_out", "run.timed_out.deadline")
    last = store.list_transitions("session", run.run_id)[-1]
    assert (last.previous_status, last.status, last.source) == (
        "failed",
        "timed_out",
        "system",
    )
    [event] = [
        e
        for e in store.list_admin_events(run.run_id)
        if e.event_type == "status_transition_override"
    ]
    assert event.actor == "lirun"
    assert "spooled" in (event.justification or "")
    assert pending_files(db_url) == []
    assert apply_pending(store) == []  # applying twice changes nothing


def test_a_row_with_another_real_outcome_is_left_alone(
    db_url: str, store: Store, run: RunDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    _spool_timed_out(db_url, run, monkeypatch)
    assert store.update_status(
        "session",
        run.run_id,
        new_status="cancelled",
        reason_code="run.cancelled.sigterm",
        expected_statuses={"running"},
    )
    assert apply_pending(store) == [(run.run_id, "leave")]
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status"] == "cancelled"
    assert pending_files(db_url) == []


def test_nothing_pending_costs_one_listing(db_url: str, store: Store) -> None:
    assert pending_files(db_url) == []
    assert apply_pending(store) == []


def test_when_even_the_spool_cannot_be_written_teardown_says_so(
    db_url: str,
    run: RunDir,
    lirun_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from lirun.errors import OutcomeNotRecordedError
    from lirun.record.teardown import finalize_sync

    ctx = setup_persist_sync(run, db=db_url, provider="command")
    assert ctx is not None
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "0.2")  # after setup: it had no fault
    # The space reserved at setup taken away, and the pending directory with it.
    shutil.rmtree(lirun_home / "pending")
    (lirun_home / "pending").write_text("not a directory")
    ctx.store.close()
    with (
        caplog.at_level(logging.WARNING),
        pytest.raises(OutcomeNotRecordedError, match="neither the database"),
    ):
        finalize_sync(ctx, status="failed")


def test_applying_the_last_spool_leaves_nothing_to_list(
    db_url: str, store: Store, run: RunDir, monkeypatch: pytest.MonkeyPatch, lirun_home: Path
) -> None:
    _spool_timed_out(db_url, run, monkeypatch)
    apply_pending(store)
    assert list((lirun_home / "pending").iterdir()) == []


def test_no_room_for_the_outcome_means_nothing_starts(
    db_url: str, store: Store, run: RunDir, lirun_home: Path
) -> None:
    """The space the ending needs is reserved at setup: when it cannot be, the run is
    refused before its row exists (``li run`` exits 2, nothing started)."""
    from lirun.errors import RecordSetupError
    from lirun.record.teardown import setup_record_sync

    (lirun_home / "pending").write_text("not a directory")
    with pytest.raises(RecordSetupError, match="no room to reserve"):
        setup_record_sync(run, db=db_url, provider="command")
    assert store.get_entity("session", run.run_id) is None


def test_the_reserved_space_takes_the_spool_when_nothing_else_can(
    db_url: str, store: Store, run: RunDir, lirun_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk at the end: the spool is written over the blocks reserved at setup (no
    new file), renamed into place, and applied once the database answers."""
    from lirun.record import spool
    from lirun.record.teardown import finalize_sync

    ctx = setup_persist_sync(run, db=db_url, provider="command")
    assert ctx is not None
    reserved = spool.reservation_path(db_url, run.run_id)
    assert reserved.stat().st_blocks * 512 >= spool.RESERVE_BYTES
    assert pending_files(db_url) == []  # hidden: nothing to apply

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spool, "write_atomically", full)
    monkeypatch.setenv("LIRUN_WRITE_RETRY_SECONDS", "0.2")
    ctx.store.close()  # the database cannot be written either
    done = finalize_sync(ctx, status="completed")
    assert done.spool == spool.pending_dir(db_url) / f"{run.run_id}.json"
    assert not reserved.exists()
    assert pending_files(db_url) == [done.spool]
    assert apply_pending(store) == [(run.run_id, "write")]
    row = store.get_entity("session", run.run_id)
    assert row is not None
    assert row["status"] == done.status


def test_a_recorded_ending_gives_the_reserved_space_back(
    db_url: str, store: Store, run: RunDir, lirun_home: Path
) -> None:
    from lirun.record import spool

    ctx = setup_persist_sync(run, db=db_url, provider="command")
    assert ctx is not None
    assert spool.reservation_path(db_url, run.run_id).exists()
    teardown_persist_sync(ctx, status="completed")
    assert not spool.reservation_path(db_url, run.run_id).exists()
    assert list((lirun_home / "pending").iterdir()) == []


def test_a_reservation_is_stale_only_when_its_owner_is_known_gone() -> None:
    from lirun.liveness import OwnerFacts
    from lirun.record.spool import stale_reservation

    def judge(owner: OwnerFacts) -> object:
        return "gone" if owner.owner_pid == 7 and owner.owner_host == "h" else None

    header = b'{"owner_pid": 7, "owner_host": "h"}\n' + bytes(100)
    assert stale_reservation(header, judge=judge)
    assert not stale_reservation(b'{"owner_pid": 8}\n', judge=judge)  # alive, or elsewhere
    assert not stale_reservation(bytes(4096), judge=judge)  # its header not written yet
    assert not stale_reservation(b'{"owner_pid": null}\n', judge=judge)


def test_a_sigkilled_run_leaves_a_reservation_that_li_reap_gives_back(
    li_env: dict[str, str], db_url: str, repo: Path
) -> None:
    """`li run` SIGKILLed mid-run never releases the space it reserved for its outcome;
    `li reap` removes it once the owner is gone (and leaves a live run's alone)."""
    import signal

    from lirun.record import spool

    li = start_li("run", "--run-id", "kept", "--", "sleep", "30", env=li_env, cwd=repo)
    reserved = spool.reservation_path(db_url, "kept")
    try:
        poll(reserved.exists, what="the run's reservation")
        done = run_li("reap", env=li_env, cwd=repo)
        assert done.returncode == 0, done.stderr
        assert reserved.exists(), "a live run's reservation was taken away"
    finally:
        li.send_signal(signal.SIGKILL)
        li.communicate(timeout=30)
    done = run_li("reap", env=li_env, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert not reserved.exists()
    assert not reserved.parent.exists(), "the emptied pending directory stays behind"
    assert get_row(db_url, "kept")["status"] == "failed"


def test_a_record_whose_commit_landed_before_the_connection_went_is_kept(
    db_url: str, store: Store, run: RunDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row's COMMIT lands and the connection goes before the answer (a primary lost
    in a failover): setup tries again, finds this run's row, and goes on; one row."""
    from lirun.errors import DatabaseConnectionLostError
    from lirun.record.teardown import setup_record_sync
    from lirun.store.session_records import Sessions

    real = Sessions.create
    calls: list[str] = []

    def create_then_lose(self: Sessions, **fields: Any) -> Any:
        calls.append(str(fields.get("id")))
        row = real(self, **fields)
        if len(calls) == 1:
            raise DatabaseConnectionLostError("server closed the connection unexpectedly")
        return row

    monkeypatch.setattr(Sessions, "create", create_then_lose)
    ctx = setup_record_sync(run, db=db_url, provider="command")
    ctx.close()
    assert len(calls) == 2
    assert store.get_entity("session", run.run_id) is not None


def test_a_record_that_another_run_holds_is_not_taken_for_this_one(
    db_url: str, store: Store, run: RunDir
) -> None:
    """A row with this id made by another start (another start time) is a conflict at
    once: the retry takes only its own earlier COMMIT for success."""
    from lirun.errors import RecordSetupError
    from lirun.record.teardown import setup_record_sync

    store.sessions.create(id=run.run_id, started_at=1.0)
    with pytest.raises(RecordSetupError, match="already exists"):
        setup_record_sync(run, db=db_url, provider="command")
