"""``li invoke start`` / ``li invoke end``: create and close invocations, guarded."""

from __future__ import annotations

import json
import subprocess

import pytest

from lirun.cli.main import main as li_main
from lirun.lifecycle import EXIT_CODE_BY_STATUS
from lirun.store import Store
from support.cli import li_command


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(li_command(*args), env=env, capture_output=True, text=True, timeout=60)


def test_start_then_end_through_the_cli(store: Store, li_env: dict[str, str]) -> None:
    started = li(li_env, "invoke", "start", "--skill", "review", "--prompt", "look at PR 12")
    assert started.returncode == 0, started.stderr
    ident = started.stdout.strip()
    assert started.stdout == f"{ident}\n"  # stdout carries the id only
    row = store.get_entity("invocation", ident)
    assert row is not None
    assert (row["status"], row["skill"], row["prompt"]) == ("running", "review", "look at PR 12")

    ended = li(li_env, "invoke", "end", ident, "--status", "completed", "--summary", "done")
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout == f"{ident}\tcompleted\trun.completed.ok\n"
    row = store.get_entity("invocation", ident)
    assert row is not None
    assert (row["status"], row["status_reason_code"], row["status_reason_summary"]) == (
        "completed",
        "run.completed.ok",
        "done",
    )
    assert row["exit_code"] == 0
    assert row["ended_at"] is not None
    history = store.list_transitions("invocation", ident)
    assert [(t.previous_status, t.status, t.source) for t in history] == [
        (None, "running", "system"),
        ("running", "completed", "executor"),
    ]


def test_start_with_id_and_json(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert li_main(["invoke", "start", "--skill", "s", "--id", "inv-7", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["id"], row["status"], row["skill"]) == ("inv-7", "running", "s")
    assert li_main(["invoke", "start", "--skill", "s", "--id", "inv-7"]) == 2  # taken
    assert capsys.readouterr().out == ""
    assert li_main(["invoke", "start", "--skill", "s", "--id", "../x"]) == 2
    assert "invalid invocation id" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("completed", "run.completed.ok"),
        ("completed_empty", "run.completed_empty.no_evidence"),
        ("failed", "run.failed.exception"),
        ("timed_out", "run.timed_out.deadline"),
        ("aborted", "run.cancelled.sigint"),
        ("cancelled", "run.cancelled.system"),
    ],
)
def test_end_exit_code_and_default_reason(
    store: Store, capsys: pytest.CaptureFixture[str], status: str, reason: str
) -> None:
    store.invocations.create(skill="s", id="inv")
    assert li_main(["invoke", "end", "inv", "--status", status]) == EXIT_CODE_BY_STATUS[status]
    row = store.get_entity("invocation", "inv")
    assert row is not None
    assert (row["status"], row["status_reason_code"]) == (status, reason)
    assert row["exit_code"] == EXIT_CODE_BY_STATUS[status]


def test_end_with_explicit_reason_and_json(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    store.invocations.create(skill="s", id="inv")
    argv = ["invoke", "end", "inv", "--status", "failed", "--reason", "run.failed.escalated"]
    assert li_main([*argv, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["applied"], out["status"], out["status_reason_code"]) == (
        True,
        "failed",
        "run.failed.escalated",
    )


def test_second_end_never_rewrites_the_first(
    store: Store, li_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    store.invocations.create(skill="s", id="inv")
    assert li_main(["invoke", "end", "inv", "--status", "timed_out"]) == 124
    capsys.readouterr()
    # the same status again: idempotent, same exit code, a note on stderr
    assert li_main(["invoke", "end", "inv", "--status", "timed_out"]) == 124
    assert "already ended as timed_out" in capsys.readouterr().err
    # a different status: refused, exit 1, nothing written, no rejection audited
    other = li(li_env, "invoke", "end", "inv", "--status", "completed", "--json")
    assert other.returncode == 1
    assert "already ended as timed_out" in other.stderr
    assert "li override" in other.stderr
    assert json.loads(other.stdout)["applied"] is False
    row = store.get_entity("invocation", "inv")
    assert row is not None
    assert row["status"] == "timed_out"
    assert len(store.list_transitions("invocation", "inv")) == 2
    assert store.list_admin_events("inv") == []


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["end", "missing", "--status", "completed"], "no invocation with id 'missing'"),
        (["end", "inv", "--status", "failed", "--reason", "play.merged.ok"], "does not fit"),
        (["end", "inv", "--status", "failed", "--reason", "run.bogus.code"], "not registered"),
        (["end", "inv", "--status", "running"], "invalid choice"),
        (["end", "inv"], "--status"),
        (["start"], "--skill"),
    ],
)
def test_usage_errors_exit_2_and_leave_the_row_running(
    store: Store, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    store.invocations.create(skill="s", id="inv")
    try:
        code = li_main(["invoke", *argv])
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    assert code == 2
    assert fragment in capsys.readouterr().err
    row = store.get_entity("invocation", "inv")
    assert row is not None
    assert row["status"] == "running"
    assert len(store.list_transitions("invocation", "inv")) == 1
