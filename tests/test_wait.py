"""`li wait` as a process, on SQLite and PostgreSQL (design.md D6, §4-6)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.waitkit import (
    complete,
    finish,
    hold_write_lock,
    killed_owner,
    live_owner,
    parse_line,
    read_line,
    run_wait,
    start_waiter,
    wait_until_ready,
)


def test_already_terminal_session_prints_its_line(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="s-done", run_dir="/runs/s-done", artifacts_path="/work/out")
    complete(store, "s-done")
    code, out, err = run_wait(li_env, "s-done")
    assert (code, err) == (0, "")
    assert out == (
        "s-done\tstatus=completed\treason=run.completed.ok\tartifact_dir=/work/out\texit_code=0\n"
    )  # artifact_dir is the stored artifact root, not the run directory (design.md §4.1)


def test_lines_reach_a_pipe_as_each_target_finishes(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="first")
    store.sessions.create(id="second")
    waiter = start_waiter(li_env, "first,second", "--interval", "0.2")
    try:
        wait_until_ready(waiter)
        complete(store, "second")
        line = parse_line(read_line(waiter))
        assert (line["id"], line["status"]) == ("second", "completed")
        assert waiter.poll() is None, "the waiter must still be waiting for 'first'"
        complete(store, "first", status="failed")
        assert parse_line(read_line(waiter))["id"] == "first"
    finally:
        code, rest, _ = finish(waiter)
    assert (code, rest) == (1, "")


def test_results_keep_input_order_and_dedupe(store: Any, li_env: dict[str, str]) -> None:
    for sid in ("b-1", "a-1"):
        store.sessions.create(id=sid)
        complete(store, sid)
    code, out, _ = run_wait(li_env, "b-1, a-1", "a-1", "b-1,,")
    assert code == 0
    assert [parse_line(x)["id"] for x in out.splitlines()] == ["b-1", "a-1"]


def test_deleted_row_reports_unknown(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="doomed", run_dir="/runs/doomed")
    # A finished witness resolves in the same batch: its line proves "doomed" was resolved
    # before the row goes, however slowly the waiter started.
    store.sessions.create(id="witness")
    complete(store, "witness")
    waiter = start_waiter(li_env, "witness", "doomed", "--interval", "0.1")
    try:
        assert read_line(waiter).startswith("witness\tstatus=completed")
        with store.connector.write() as tx:
            tx.execute("DELETE FROM sessions WHERE id = :id", {"id": "doomed"})
        line = read_line(waiter)
    finally:
        code, _, _ = finish(waiter)
    assert line == "doomed\tstatus=unknown\treason=unknown\tartifact_dir=-\texit_code=-"
    assert code == 2


def test_not_found_goes_to_stderr_only(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="real")
    complete(store, "real")
    code, out, err = run_wait(li_env, "nope", "real")
    assert code == 2
    assert [parse_line(x)["id"] for x in out.splitlines()] == ["real"]
    assert "nope" in err
    assert "nope" not in out


def test_ambiguous_prefix_exits_2_and_lists_candidates(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="abc-1")
    store.invocations.create(skill="x", id="abc-2")
    code, out, err = run_wait(li_env, "abc")
    assert (code, out) == (2, "")
    assert "ambiguous" in err
    assert "abc-1" in err
    assert "abc-2" in err


def test_unique_prefix_and_like_metacharacters(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="x_1-long")
    store.sessions.create(id="xa1-long")
    complete(store, "x_1-long")
    code, out, _ = run_wait(li_env, "x_1")  # '_' must not match 'a'
    assert code == 0
    assert parse_line(out.strip())["id"] == "x_1-long"
    code, out, _ = run_wait(li_env, "x%")
    assert (code, out) == (2, "")
    code, out, _ = run_wait(li_env, "X_1")  # ids are case-sensitive
    assert (code, out) == (2, "")


def test_branch_and_run_id_resolve_to_latest_execution(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="old", branch_id="br-1", run_id="r-1")
    complete(store, "old", status="failed")
    time.sleep(0.01)
    store.sessions.create(id="new", branch_id="br-1", run_id="r-1")
    complete(store, "new")
    for name in ("br-1", "r-1"):
        code, out, _ = run_wait(li_env, name)
        assert code == 0
        assert parse_line(out.strip())["id"] == "new"


def test_sigint_and_sigterm_exit_3(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="forever")
    for sig in (signal.SIGINT, signal.SIGTERM):
        waiter = start_waiter(li_env, "forever")
        wait_until_ready(waiter)
        waiter.send_signal(sig)
        code, out, err = finish(waiter)
        assert (code, out) == (3, ""), err
        assert "forever" in err


def test_timeout_exits_3(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="slow")
    started = time.monotonic()
    code, out, err = run_wait(li_env, "slow", "--timeout", "0.3")
    assert (code, out) == (3, "")
    assert "timed out" in err
    assert time.monotonic() - started < 10


def test_not_found_outranks_timeout(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="slow")
    code, _, _ = run_wait(li_env, "slow", "missing", "--timeout", "0.2")
    assert code == 2


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf"])
def test_bad_interval_is_a_usage_error(store: Any, li_env: dict[str, str], value: str) -> None:
    code, out, err = run_wait(li_env, "x", f"--interval={value}")
    assert (code, out) == (2, "")
    assert "--interval" in err


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "1e400", "99999999999999999999"])
def test_a_non_finite_or_absurd_timeout_is_a_usage_error(
    store: Any, li_env: dict[str, str], value: str
) -> None:
    code, out, err = run_wait(li_env, "x", f"--timeout={value}")
    assert (code, out) == (2, "")
    [said] = [line for line in err.splitlines() if "error" in line]
    assert "--timeout" in said, err
    assert "at most" in said or "30s, 5m, 2h, 1d, 1h30m" in said, err


def test_no_ids_is_a_usage_error(store: Any, li_env: dict[str, str]) -> None:
    assert run_wait(li_env, ",")[0] == 2
    assert run_wait(li_env)[0] == 2


def test_missing_database_exits_2_without_creating_it(tmp_path: Path) -> None:
    env_db = tmp_path / "absent.db"
    result = subprocess.run(
        [sys.executable, "-m", "lirun", "wait", "x", "--db", str(env_db)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert "no lirun database" in result.stderr
    assert not env_db.exists()


def test_killed_owner_is_reported_orphaned(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(
        id="crashed", run_dir="/runs/crashed", heartbeat_at=time.time(), **killed_owner()
    )
    code, out, _ = run_wait(li_env, "crashed", "--timeout", "20")
    line = parse_line(out.strip())
    assert (line["status"], line["reason"], line["exit_code"]) == (
        "failed",
        "session.orphaned.no_process",
        "1",
    )
    assert code == 1
    row = store.get_entity("session", "crashed")
    assert row["status"] == "failed"
    assert row["ended_at"] is not None
    assert store.list_transitions("session", "crashed")[-1].source == "system"


def test_stale_heartbeat_is_reported(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(
        id="quiet", owner_host="another-host", owner_pid=1, heartbeat_at=time.time() - 120
    )
    code, out, _ = run_wait(li_env, "quiet", "--timeout", "20")
    assert code == 1
    assert parse_line(out.strip())["reason"] == "session.stale.no_heartbeat"


def test_live_owner_is_not_reaped(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="alive", heartbeat_at=time.time(), lease_seconds=600, **live_owner())
    code, out, _ = run_wait(li_env, "alive", "--timeout", "1.5")
    assert (code, out) == (3, "")
    assert store.get_entity("session", "alive")["status"] == "running"


def test_unregistered_reason_prints_unknown(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="odd")
    complete(store, "odd")
    with store.connector.write() as tx:
        tx.execute(
            "UPDATE sessions SET status_reason_code = 'made.up.code' WHERE id = :id", {"id": "odd"}
        )
    code, out, _ = run_wait(li_env, "odd")
    assert code == 0
    assert parse_line(out.strip())["reason"] == "unknown"


def test_plays_invocations_and_schedule_runs(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(
        id="backing", invocation_id="inv", run_dir="/runs/backing", artifacts_path="/out/backing"
    )
    complete(store, "backing")
    store.invocations.create(skill="s", id="inv")
    store.update_status(
        "invocation",
        "inv",
        new_status="completed",
        reason_code="run.completed.ok",
        extra_fields={"exit_code": 0},
    )
    store.shows.create(topic="t", id="show")
    store.shows.create_play(show_id="show", name="p", session_id="backing", id="play")
    store.update_status(
        "play", "play", new_status="running_complete", reason_code="play.running_complete.ok"
    )
    store.schedules.create_run(action_kind="k", invocation_id="inv", status="timed_out", id="sr")
    # running_complete is not terminal for a play: the waiter must time out on it.
    code, out, _ = run_wait(li_env, "inv", "sr", "play", "--timeout", "0.5")
    lines = {parse_line(x)["id"]: parse_line(x) for x in out.splitlines()}
    assert code == 3
    assert set(lines) == {"inv", "sr"}
    assert lines["inv"]["artifact_dir"] == "/out/backing"
    assert lines["inv"]["exit_code"] == "0"
    assert (lines["sr"]["status"], lines["sr"]["artifact_dir"]) == ("timed_out", "/out/backing")
    store.update_status("play", "play", new_status="merged", reason_code="play.merged.ok")
    code, out, _ = run_wait(li_env, "play")
    assert code == 0
    assert parse_line(out.strip()) == {
        "id": "play",
        "status": "merged",
        "reason": "play.merged.ok",
        "artifact_dir": "/out/backing",
        "exit_code": "-",
    }


def test_json_lines(store: Any, li_env: dict[str, str]) -> None:
    store.sessions.create(id="j", run_dir="/runs/j", artifacts_path="/out/j")
    complete(store, "j", status="completed_empty")
    code, out, _ = run_wait(li_env, "j", "--json")
    assert code == 1
    record = json.loads(out)
    assert record == {
        "schema": "lirun.wait/2",
        "run_id": "j",
        "kind": "run",
        "status": "completed_empty",
        "reason": "run.completed_empty.no_evidence",
        "reason_summary": "",
        "run_dir": "/runs/j",
        "artifact_dir": "/out/j",
        "artifacts_path": "/out/j",
        "exit_code": 1,
        "success": False,
    }


def test_waiter_keeps_working_while_another_process_holds_the_write_lock(
    store: Any, db_url: str, li_env: dict[str, str]
) -> None:
    store.sessions.create(id="locked")
    holder = hold_write_lock(db_url)
    try:
        waiter = start_waiter(li_env, "locked", "--interval", "0.1")
        wait_until_ready(waiter, settle=1.0)
        assert waiter.poll() is None, finish(waiter)
    finally:
        holder.communicate("go\n", timeout=20)
    complete(store, "locked")
    assert parse_line(read_line(waiter))["status"] == "completed"
    assert finish(waiter)[0] == 0


def test_wait_options_take_the_duration_grammar() -> None:
    from lirun.cli.wait import parse_args

    args = parse_args(["x", "--timeout", "1m30s", "--interval=2s"])
    assert (args.timeout, args.interval) == (90.0, 2.0)
    assert parse_args(["x", "--timeout", "90"]).timeout == 90.0  # the quick path
