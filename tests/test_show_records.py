"""Show and play records, the show lock and the board, on SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lirun.errors import ConflictError, NotFoundError
from lirun.liveness import current_owner
from lirun.shows.engine import abort_show, recent_shows, resume_show, run_show, show_report
from lirun.store import Store
from lirun.store.records import decode_row
from lirun.store.rows import PlayRow, ShowListRow, ShowRow
from support.gitkit import git
from support.showkit import INTEGRATION, play, show_repo, spec, writes


def _create(store: Store, show_id: str = "s1", topic: str = "t") -> None:
    store.shows.create_with_plays(
        id=show_id,
        fields={"topic": topic, "spec_json": {"k": [1]}, "repo": "/r", "integration": "i"},
        plays=[
            {"id": f"{show_id}.a", "name": "a", "position": 0, "attempts": 2},
            {"id": f"{show_id}.b", "name": "b", "position": 1, "depends_on_json": ["a"]},
        ],
    )


def test_a_show_is_created_with_its_plays_and_their_history(store: Store) -> None:
    _create(store)
    show = store.shows.get("s1")
    assert show is not None
    assert show.status == "active"
    assert show.spec_json == {"k": [1]}
    plays = store.shows.list_plays("s1")
    assert [(p.name, p.status, p.depends_on_json) for p in plays] == [
        ("a", "pending", None),
        ("b", "pending", ["a"]),
    ]
    assert [t.reason_code for t in store.list_transitions("play", "s1.b")] == [
        "play.pending.created"
    ]
    assert store.shows.active_for_topic("t")[0].id == "s1"


def test_a_play_status_write_carries_its_merge_columns(store: Store) -> None:
    _create(store)
    assert store.update_status(
        "play",
        "s1.a",
        new_status="merged",
        reason_code="play.merged.ok",
        extra_fields={"merge_sha": "f" * 40, "merged_at": 5.0},
        expected_statuses={"pending"},
    )
    row = store.shows.get_play("s1.a")
    assert row is not None
    assert row.merge_sha == "f" * 40
    assert row.ended_at is not None


def test_sessions_link_to_their_play_through_metadata(store: Store) -> None:
    _create(store)
    store.sessions.create(id="x1", metadata_json={"play_id": "s1.a", "role": "agent"})
    store.sessions.create(id="x2", metadata_json={"play_id": "s1.a", "role": "gate"})
    store.sessions.create(id="x3", metadata_json={"play_id": "s1.b", "role": "agent"})
    store.sessions.create(id="x4", metadata_json={"show_id": "s1", "role": "final_gate"})
    store.sessions.create(id="x5")
    assert [s.id for s in store.shows.list_play_sessions("s1.a")] == ["x1", "x2"]
    assert [s.id for s in store.shows.list_gate_sessions("s1")] == ["x4"]


def test_the_show_row_is_a_lock_taken_only_from_the_owner_judged(store: Store) -> None:
    _create(store)
    me = current_owner()
    other = {**me, "owner_pid": 999_999_99}
    assert store.shows.claim("s1", me, previous={}, lease_seconds=60)
    # A second claimer that judged "no owner" loses: the row has one now.
    assert not store.shows.claim("s1", other, previous={}, lease_seconds=60)
    row = store.shows.get("s1")
    assert row is not None
    assert row.owner_pid == me["owner_pid"]
    assert store.shows.beat("s1", me)
    assert not store.shows.beat("s1", other)
    # Taking over from the owner one judged dead works once.
    assert store.shows.claim("s1", other, previous=row.as_dict(), lease_seconds=60)
    assert not store.shows.claim("s1", me, previous=row.as_dict(), lease_seconds=60)
    assert not store.shows.beat("s1", me)
    assert store.shows.release("s1", other)
    assert not store.shows.release("s1", other)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_run_resume_abort_and_the_board_on_each_backend(db_url: str, tmp_path: Path) -> None:
    repo = show_repo(tmp_path)
    s = spec(repo, [play("a", writes("a.txt", "A")), play("b", writes("b.txt", "B"), "a")])
    report = run_show(s, db_url=db_url)
    assert report.status == "completed"
    assert report.exit_code == 0
    assert [p.status for p in report.plays] == ["merged", "merged"]
    assert git(repo, "rev-parse", INTEGRATION) == report.integration_head
    board = show_report(report.show_id[:12], db_url=db_url)
    assert board.to_dict()["plays"][1]["gates"][0]["verdict"] == "pass"
    assert board.plays[0].session_ids
    assert board.plays[0].worktree is None
    with pytest.raises(ConflictError, match="already completed"):
        abort_show(report.show_id, db_url=db_url, actor="a", justification="j")
    with pytest.raises(ConflictError, match="nothing to resume"):
        resume_show(report.show_id, db_url=db_url)
    with pytest.raises(NotFoundError):
        show_report("no-such-show", db_url=db_url)
    assert [r.show_id for r in recent_shows(db_url=db_url)] == [report.show_id]


def test_a_live_owner_keeps_the_show_and_a_dead_one_is_taken_over(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    repo = show_repo(tmp_path)
    s = spec(repo, [play("a", writes("a.txt", "A"))])
    sid = "20990101T000000-abcdef"
    store.shows.create_with_plays(
        id=sid,
        fields={
            "topic": "t",
            "spec_json": s.to_dict(),
            "repo": str(repo),
            "base": "main",
            "integration": INTEGRATION,
            "integration_head": git(repo, "rev-parse", "main"),
            **current_owner(),
        },
        plays=[{"id": f"{sid}.a", "name": "a", "position": 0, "attempts": 2}],
    )
    git(repo, "branch", INTEGRATION, "main")
    with pytest.raises(ConflictError, match="still active"):
        run_show(s, db_url=db_url)
    with pytest.raises(ConflictError, match="is running in pid"):
        resume_show("t", db_url=db_url)  # an active topic names its show
    store.update_fields("show", sid, {"owner_pid": _dead_pid()})
    report = resume_show("t", db_url=db_url)
    assert report.status == "completed", report.to_dict()
    row = store.shows.get(sid)
    assert row is not None
    assert row.owner_pid is None


def test_recent_shows_lists_active_ones_first(store: Store) -> None:
    _create(store, "old", topic="x")
    _create(store, "new", topic="y")
    store.update_status("show", "new", new_status="completed", reason_code="show.completed.ok")
    assert [s.id for s in store.shows.recent()] == ["old", "new"]
    assert [s.id for s in store.shows.recent(limit=1)] == ["old"]


def test_a_second_active_show_of_a_topic_is_refused_in_the_creating_transaction(
    store: Store,
) -> None:
    _create(store, "first", topic="same")
    with pytest.raises(ConflictError, match="first"):
        store.shows.create_with_plays(
            id="second",
            fields={"topic": "same"},
            plays=[{"id": "second.a", "name": "a"}],
            exclusive_topic=True,
        )
    assert store.shows.get("second") is None
    assert store.shows.get_play("second.a") is None
    store.update_status("show", "first", new_status="aborted", reason_code="show.aborted.user")
    store.shows.create_with_plays(
        id="second", fields={"topic": "same"}, plays=[], exclusive_topic=True
    )


def test_a_show_row_and_a_play_row_hold_every_column_of_their_tables(store: Store) -> None:
    """``ShowRow.from_row`` and ``PlayRow.from_row`` name each column: one a table gains
    fails here, not later as a missing attribute above the store. ``as_dict`` is the
    decoded row, as ``StateDB`` and the JSON outputs give it."""
    _create(store)
    [show] = store.connector.read(store.sql("active_shows_for_topic"), {"topic": "t"})
    assert set(show) == set(ShowRow._fields)
    assert store.shows.get("s1") == ShowRow.from_row(decode_row(show))
    assert store.shows.active_for_topic("t")[0].as_dict() == decode_row(show)
    raw = store.connector.read(store.sql("list_plays"), {"show_id": "s1"})
    assert set(raw[0]) == set(PlayRow._fields)
    plays = store.shows.list_plays("s1")
    assert [p.as_dict() for p in plays] == [decode_row(r) for r in raw]
    assert store.ui.show_plays("s1") == plays
    assert store.shows.get_play("s1.b") == plays[1]
    assert store.shows.get("no-such-show") is None
    assert store.shows.get_play("no-such-play") is None


def test_a_show_list_row_holds_every_column_its_lists_read(store: Store) -> None:
    """``ShowListRow.from_row`` names each show column of ``li show status`` and the shows
    page; ``plays`` counts the show's plays by status (none for a show without plays)."""
    _create(store)
    store.shows.create_with_plays(id="empty", fields={"topic": "u"}, plays=[])
    store.update_status("play", "s1.a", new_status="prepared", reason_code="play.prepared.ok")
    derived = {"play_status", "play_count"}
    raw = store.connector.read(store.sql("list_recent_shows"), {"limit": 5})
    assert set(raw[0]) - derived == set(ShowListRow._fields) - {"plays"}
    listed = store.waits.recent_shows()
    assert {s.id: s.plays for s in listed} == {
        "s1": {"pending": 1, "prepared": 1},
        "empty": {},
    }
    assert listed[0].as_dict() == {
        **{k: v for k, v in raw[0].items() if k not in derived},
        "plays": listed[0].plays,
    }
    assert store.lists.shows() == listed
