"""`lirun.execute`: the execution `li run` uses, as one documented library call."""

from __future__ import annotations

import time
from pathlib import Path

import lirun
from lirun import CommandProgram, Limits, RunRequest, RunResult, execute
from lirun.settings import Settings
from lirun.store import Store


def test_execute_is_the_top_level_library_call() -> None:
    from lirun.exec import execution

    assert lirun.execute is execution.execute
    assert "Raises" in (execute.__doc__ or "")
    assert "Returns" in (execute.__doc__ or "")


def test_the_old_names_of_request_and_result_still_import_and_warn() -> None:
    import pytest

    for old, new in (("ExecutionRequest", RunRequest), ("ExecutionResult", RunResult)):
        with pytest.warns(DeprecationWarning, match=f"use lirun.{new.__name__}"):
            assert getattr(lirun, old) is new
    result = RunResult("r", "completed", None, "/d", "/a", 0, "b", reply="done")
    with pytest.warns(DeprecationWarning, match="use RunResult.reply"):
        assert result.response_text == "done"


def test_execute_runs_a_command_and_records_it(db_url: str, store: Store, tmp_path: Path) -> None:
    request = RunRequest(
        program=CommandProgram(["sh", "-c", "echo made it; exit 3"]),
        cwd=str(tmp_path),
        limits=Limits(timeout=30),
        settings=Settings(db_url=db_url),
    )
    began = time.monotonic()
    result = execute(request)
    assert isinstance(result, RunResult)
    # When li stopped watching the child: a lease holder compares it with its lapses.
    assert result.supervised_until is not None
    assert began < result.supervised_until < time.monotonic()
    assert "supervised_until" not in result.summary()
    assert (result.status, result.reason, result.exit_code) == (
        "failed",
        "run.failed.exit_nonzero",
        1,
    )
    assert result.recorded
    assert result.pending is None
    row = store.get_entity("session", result.run_id)
    assert row is not None
    assert (row["status"], row["status_reason_code"]) == (result.status, result.reason)
