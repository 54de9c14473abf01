"""The library side of waiting: pure projection, resolution helpers, the async API."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lirun.store import StateDB, open_store
from lirun.store.base import id_fragment_params
from lirun.store.rows import WaitExactRow, WaitFetchRow
from lirun.wait.api import format_wait_line, wait_for_terminal
from lirun.wait.outcome import project, wait_exit_code
from lirun.wait.resolve import Target, pick_exact, split_ids
from lirun.wait.watch import Watcher
from support.waitkit import complete

# -- pure pieces ------------------------------------------------------------------


def _outcome(**over: Any) -> dict[str, Any]:
    base = {
        "run_id": "r1",
        "status": "completed",
        "reason": "run.completed.ok",
        "artifact_dir": "/runs/r1",
        "exit_code": 0,
    }
    return {**base, **over}


@pytest.mark.parametrize(
    ("over", "line"),
    [
        ({}, "r1\tstatus=completed\treason=run.completed.ok\tartifact_dir=/runs/r1\texit_code=0"),
        (
            {"artifact_dir": None, "exit_code": None},
            "r1\tstatus=completed\treason=run.completed.ok\tartifact_dir=-\texit_code=-",
        ),
        (
            {"reason": "not.a.code", "status": "failed", "exit_code": 1},
            "r1\tstatus=failed\treason=unknown\tartifact_dir=/runs/r1\texit_code=1",
        ),
        (
            {"reason": None, "exit_code": 124, "status": "timed_out"},
            "r1\tstatus=timed_out\treason=unknown\tartifact_dir=/runs/r1\texit_code=124",
        ),
    ],
)
def test_format_wait_line(over: dict[str, Any], line: str) -> None:
    assert format_wait_line(_outcome(**over)) == line


def _result(status: str, *, terminal: bool = True, success: bool = False) -> dict[str, Any]:
    return {"status": status, "terminal": terminal, "success": success}


@pytest.mark.parametrize(
    ("results", "code"),
    [
        ([_result("completed", success=True)], 0),
        ([_result("completed", success=True), _result("failed")], 1),
        ([_result("failed"), _result("running", terminal=False)], 3),
        ([_result("running", terminal=False), _result("not_found", terminal=False)], 2),
        ([_result("completed", success=True), _result("unknown", terminal=False)], 2),
        ([_result("ambiguous", terminal=False)], 2),
        ([], 0),
    ],
)
def test_exit_code_precedence(results: list[dict[str, Any]], code: int) -> None:
    assert wait_exit_code(results) == code


def test_split_ids() -> None:
    assert split_ids(["a,b", " c ", "a", ",,", "d e,f"]) == ["a", "b", "c", "d", "e", "f"]


def test_an_id_prefix_pattern_escapes_like_metacharacters() -> None:
    assert id_fragment_params("a_b%c\\")["prefix_pattern"] == "a\\_b\\%c\\\\%"


def test_pick_exact_prefers_tier_then_newest() -> None:
    rows = [
        WaitExactRow(tier=3, kind="session", id="old", input="br", created_at=1.0),
        WaitExactRow(tier=3, kind="session", id="new", input="br", created_at=2.0),
        WaitExactRow(tier=1, kind="invocation", id="x", input="x", created_at=5.0),
        WaitExactRow(tier=0, kind="session", id="x", input="x", created_at=1.0),
    ]
    assert pick_exact(rows) == {"br": ("session", "new"), "x": ("session", "x")}


def _fetched(kind: str, entity_id: str, status: str) -> WaitFetchRow:
    """A target's row as one tick reads it: only its status known."""
    fields: dict[str, Any] = dict.fromkeys(WaitFetchRow._fields)
    return WaitFetchRow(**{**fields, "kind": kind, "id": entity_id, "status": status})


def test_play_success_is_merged_and_completed_empty_is_not_success() -> None:
    play = project(Target("p", kind="play", id="p"), _fetched("play", "p", "merged"))
    session = _fetched("session", "s", "completed_empty")
    empty = project(Target("s", kind="session", id="s"), session)
    assert (play["terminal"], play["success"]) == (True, True)
    assert (empty["terminal"], empty["success"]) == (True, False)


# -- against a database ---------------------------------------------------------------


def test_one_query_per_tick_for_many_ids_of_every_kind(store: Any) -> None:
    ids = []
    for n in range(40):
        ids.append(store.sessions.create(id=f"s{n:03}").id)
        ids.append(store.invocations.create(skill="k", id=f"i{n:03}").id)
        ids.append(store.schedules.create_run(action_kind="k", id=f"r{n:03}").id)
    store.shows.create(topic="t", id="show")
    ids.append(store.shows.create_play(show_id="show", name="p", id="p1").id)
    watcher = Watcher(store, ids)
    try:
        before = watcher.queries
        assert watcher.tick() == []
        assert watcher.queries - before == 1
        assert len(watcher.pending_outcomes()) == len(ids)
    finally:
        watcher.close()


def test_row_deleted_after_resolution_is_unknown(store: Any) -> None:
    store.sessions.create(id="gone", run_dir="/runs/gone")
    watcher = Watcher(store, ["gone"])
    try:
        assert watcher.tick() == []
        with store.connector.write() as tx:
            tx.execute("DELETE FROM sessions WHERE id = :id", {"id": "gone"})
        (outcome,) = watcher.tick()
    finally:
        watcher.close()
    assert (outcome["status"], outcome["reason"], outcome["artifact_dir"]) == ("unknown",) * 2 + (
        None,
    )
    assert watcher.done
    assert wait_exit_code(watcher.results()) == 2


def test_wait_for_terminal_reports_as_targets_finish(store: Any, db_url: str) -> None:
    store.sessions.create(id="a")
    store.sessions.create(id="b")
    seen: list[str] = []

    def finish_later() -> None:
        time.sleep(0.3)
        complete(store, "b")
        time.sleep(0.3)
        complete(store, "a", status="failed")

    async def main() -> list[dict[str, Any]]:
        async with StateDB(db_url) as db:
            return await wait_for_terminal(
                ["a", "b", "missing"],
                interval=0.05,
                db=db,
                on_result=lambda o: seen.append(o["run_id"]),
            )

    writer = threading.Thread(target=finish_later)
    writer.start()
    results = asyncio.run(main())
    writer.join()
    assert seen == ["missing", "b", "a"]
    assert [r["run_id"] for r in results] == ["a", "b", "missing"]
    assert [r["status"] for r in results] == ["failed", "completed", "not_found"]


def test_wait_for_terminal_timeout_and_should_stop(store: Any) -> None:
    store.sessions.create(id="stuck")
    started = time.monotonic()
    (result,) = asyncio.run(wait_for_terminal(["stuck"], interval=0.05, timeout=0.3))
    assert (result["status"], result["terminal"]) == ("running", False)
    assert time.monotonic() - started < 5
    (result,) = asyncio.run(wait_for_terminal(["stuck"], interval=0.05, should_stop=lambda: True))
    assert result["status"] == "running"


def test_wait_for_terminal_rejects_bad_interval(store: Any) -> None:
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="interval"):
            asyncio.run(wait_for_terminal(["x"], interval=bad))


def test_a_commit_wakes_a_waiter_long_before_its_interval(store: Any, db_url: str) -> None:
    store.sessions.create(id="prompt")
    reader = open_store(db_url, readonly=True)
    watcher = Watcher(reader, ["prompt"])
    try:
        assert watcher.tick() == []
        timer = threading.Timer(0.2, complete, args=(store, "prompt"))
        timer.start()
        started = time.monotonic()
        assert watcher.wait(30.0, lambda: False) is True
        assert time.monotonic() - started < 5
        (outcome,) = watcher.tick()
        assert outcome["status"] == "completed"
        timer.join()
    finally:
        watcher.close()
        reader.close()


@pytest.mark.parametrize(
    "argv",
    [
        ["a"],
        ["a,b", "c", "--json"],
        ["--interval", "0.25", "a", "--timeout=3"],
        ["a", "--interval=2", "--db", "/x/state.db", "--timeout", "0"],
    ],
)
def test_quick_argument_parsing_matches_argparse(argv: list[str]) -> None:
    from lirun.cli.wait import _quick_parse, full_parse

    quick = _quick_parse(argv)
    assert quick is not None
    assert vars(quick) == vars(full_parse(argv))


@pytest.mark.parametrize(
    "argv",
    [["a", "--interval"], ["a", "--interval", "0"], ["--int", "2", "a"], ["a", "-x"], ["--", "a"]],
)
def test_anything_unusual_goes_to_argparse(argv: list[str]) -> None:
    from lirun.cli.wait import _quick_parse

    assert _quick_parse(argv) is None


class _FakeConnector:
    """A change token that moves only while ``busy`` (no database, no real sleep)."""

    supports_notify = False

    def __init__(self) -> None:
        self.token = 0
        self.busy = True

    def change_token(self) -> object:
        return self.token

    def sleep(self, seconds: float) -> None:
        if self.busy:
            self.token += 1  # a writer commits something during every sleep


def test_sqlite_waker_backs_off_on_useless_wakes_and_recovers() -> None:
    from lirun.wait.wake import ChangeTokenWaker

    conn = _FakeConnector()
    waker = ChangeTokenWaker(
        conn,  # type: ignore[arg-type]  # a stand-in with the calls used
        check_seconds=0.01,
        max_gap_seconds=0.05,
        sleep=conn.sleep,
    )
    gaps = []
    for _ in range(4):
        assert waker.wait(10.0, lambda: False) is True
        waker.after_read(useful=False)  # the re-read finished nothing
        gaps.append(waker.gap)
    assert gaps == [0.02, 0.04, 0.05, 0.05]
    assert waker.wait(10.0, lambda: False) is True
    waker.after_read(useful=True)
    assert waker.gap == 0.01
    for _ in range(3):
        waker.wait(10.0, lambda: False)
        waker.after_read(useful=False)
    assert waker.gap == 0.05
    conn.busy = False
    assert waker.wait(0.001, lambda: False) is False  # a quiet look restores promptness
    assert waker.gap == 0.01
    assert waker.wait(5.0, lambda: True) is False  # stop is honoured before sleeping


def test_a_library_waiter_reports_through_logging_not_stderr(
    store: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """The library logs (``lirun.wait.watch``); only `li`'s handler writes `li: …` lines."""
    from lirun.errors import DatabaseConnectionLostError

    store.sessions.create(id="w")
    watcher = Watcher(store, ["w"])

    def lost(keys: Any) -> Any:
        raise DatabaseConnectionLostError("the server went away")

    watcher.fetch = lost  # type: ignore[method-assign]  # the connection is lost here
    try:
        with caplog.at_level(logging.WARNING, logger="lirun.wait.watch"):
            watcher.tick()
    finally:
        watcher.close()
    assert "the server went away" in caplog.text
    assert capsys.readouterr().err == ""


def test_start_watching_retries_a_server_lost_at_its_first_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that accepts the connection but goes away before the ids are resolved
    (PostgreSQL "the database system is shutting down") is waited for, not exit 2."""
    import lirun.wait.api as api
    from lirun.errors import DatabaseConnectionLostError
    from lirun.store import open_store

    url = str(tmp_path / "state.db")
    open_store(url).close()
    real, calls = api.Watcher, []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise DatabaseConnectionLostError("the database system is shutting down")
        return real(*args, **kwargs)

    monkeypatch.setattr(api, "Watcher", flaky)
    with caplog.at_level(logging.INFO, logger="lirun.wait.api"):
        store, owned, watcher = api.start_watching(url, ["x"], sleep=lambda s: None)
    try:
        assert owned
        assert len(calls) == 2
        assert caplog.messages == [
            "the database system is shutting down; retrying until the database answers",
            "the database answers again",
        ]
    finally:
        watcher.close()
        store.close()
