"""``li show``: help, usage errors, the dry-run plan, and ``li wait`` on show and play ids.

Everything here runs without the show engine: parsing, validation, the plan, waiting.
``tests/test_cli_show_run.py`` runs shows end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from support.cli import li_command
from support.showfilekit import COMMAND_SHOW, refs, write_show
from support.waitkit import finish, parse_line, read_line, run_wait, start_waiter, wait_until_ready

SUBCOMMANDS = ("run", "resume", "abort", "status", "list", "clean")


def li(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args),
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def env(lirun_home: Path, tmp_path: Path) -> dict[str, str]:
    """``li`` against a SQLite file that the usage-error tests must never create."""
    return {
        **os.environ,
        "LIRUN_HOME": str(lirun_home),
        "LIRUN_DB_URL": str(tmp_path / "state.db"),
    }


# --- help and usage errors --------------------------------------------------------------------


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help_with_exit_codes(env: dict[str, str], sub: str) -> None:
    result = li(env, "show", sub, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: li show {sub}"), result.stdout
    assert "exit codes" in result.stdout


def test_show_help_lists_the_subcommands(env: dict[str, str]) -> None:
    result = li(env, "show", "--help")
    assert result.returncode == 0
    for sub in SUBCOMMANDS:
        assert f"  {sub} " in result.stdout
    assert "130" in result.stdout
    assert "143" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("show",),
        ("show", "dance"),
        ("show", "run"),
        ("show", "run", "x.yaml", "--parallel", "0"),
        ("show", "run", "x.yaml", "--parallel", "many"),
        ("show", "run", "x.yaml", "--bogus"),
        ("show", "run", "x.yaml", "--dry-run", "--detach"),
        ("show", "resume"),
        ("show", "abort", "some-show"),
        ("show", "abort", "some-show", "--actor", "a", "--justification", " "),
        ("show", "status", "--limit", "0"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(
    env: dict[str, str], tmp_path: Path, args: tuple[str, ...]
) -> None:
    result = li(env, *args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.strip()
    assert result.stdout == ""
    assert not (tmp_path / "state.db").exists()


def test_a_bad_show_file_lists_every_problem_and_starts_nothing(
    env: dict[str, str], tmp_path: Path, lirun_home: Path
) -> None:
    path = write_show(
        tmp_path,
        """
        topic: t
        repo: repo
        base: nope
        plays:
          - name: a
            run: x
            attempts: 5
        """,
    )
    before = refs(tmp_path / "repo")
    result = li(env, "show", "run", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert any(line.startswith(f"{path}:3: base branch 'nope'") for line in lines), lines
    assert any(line.startswith(f"{path}:7: play a: attempts must be 1") for line in lines)
    assert any(line.startswith(f"{path}:1: no gate for play(s) a") for line in lines)
    assert f"li show run: 3 problems in {path}; nothing was started" in result.stderr
    assert refs(tmp_path / "repo") == before
    assert list(lirun_home.iterdir()) == []
    assert not (tmp_path / "state.db").exists()


# --- the dry run ------------------------------------------------------------------------------


def test_dry_run_prints_the_plan_and_touches_nothing(
    env: dict[str, str], tmp_path: Path, lirun_home: Path
) -> None:
    path = write_show(tmp_path, COMMAND_SHOW.format(topic="plan"))
    before = refs(tmp_path / "repo")
    result = li(env, "show", "run", str(path), "--dry-run", "--parallel", "1")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("show plan: 3 plays in 2 waves, at most 1 at a time\n"), out
    assert "wave 1\n  one\n" in out
    assert "wave 2\n  three (after one, two)\n" in out
    assert "    branch    show/plan--three-a1\n" in out
    assert "    gate      test -f base.txt (the show's)\n" in out
    assert "nothing was started" in result.stderr
    assert refs(tmp_path / "repo") == before
    assert list(lirun_home.iterdir()) == []
    assert not (tmp_path / "state.db").exists()


def test_dry_run_json(env: dict[str, str], tmp_path: Path) -> None:
    path = write_show(tmp_path, COMMAND_SHOW.format(topic="plan"))
    result = li(env, "show", "run", str(path), "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["waves"] == [["one", "two"], ["three"]]
    assert plan["parallel"] == 2
    assert plan["integration"] == "show/plan"
    assert plan["base"] == "main"
    assert plan["repo"] == str((tmp_path / "repo").resolve())
    assert [p["branch"] for p in plan["plays"]] == [
        "show/plan--one-a1",
        "show/plan--two-a1",
        "show/plan--three-a1",
    ]
    assert plan["plays"][2]["attempts"] == 1
    assert plan["plays"][0]["gate"] == {"command": "test -f base.txt", "timeout": None}


# --- li wait on show and play ids (both backends, no engine needed) ---------------------------


def _end_show(store: Any, show_id: str, status: str) -> None:
    reason = {"completed": "show.completed.ok", "aborted": "show.aborted.user"}[status]
    store.update_status("show", show_id, new_status=status, reason_code=reason)


def test_wait_accepts_show_ids(store: Any, li_env: dict[str, str]) -> None:
    store.shows.create(topic="t", id="show-done")
    store.shows.create(topic="t", id="show-gone")
    store.shows.create(topic="t", id="show-live")
    _end_show(store, "show-done", "completed")
    _end_show(store, "show-gone", "aborted")
    code, out, err = run_wait(li_env, "show-done")
    assert (code, err) == (0, "")
    assert (
        out
        == "show-done\tstatus=completed\treason=show.completed.ok\tartifact_dir=-\texit_code=-\n"
    )
    code, out, _ = run_wait(li_env, "show-gone", "--json")
    record = json.loads(out)
    assert code == 1
    assert (record["kind"], record["status"], record["success"]) == (
        "show",
        "aborted",
        False,
    )
    # active is not terminal: the waiter times out (3), then a prefix resolves to the show
    code, out, _ = run_wait(li_env, "show-live", "--timeout", "0.3")
    assert (code, out) == (3, "")
    code, out, _ = run_wait(li_env, "show-d")
    assert code == 0
    assert parse_line(out.strip())["id"] == "show-done"


def test_a_waiter_wakes_when_the_show_completes(store: Any, li_env: dict[str, str]) -> None:
    store.shows.create(topic="t", id="show-soon")
    waiter = start_waiter(li_env, "show-soon", "--interval", "5")
    try:
        wait_until_ready(waiter)
        _end_show(store, "show-soon", "completed")
        line = parse_line(read_line(waiter, timeout=4))  # well before the 5 s poll
        assert (line["id"], line["status"]) == ("show-soon", "completed")
    finally:
        code, _, _ = finish(waiter)
    assert code == 0


def test_wait_on_play_ids_succeeds_only_when_merged(store: Any, li_env: dict[str, str]) -> None:
    store.shows.create(topic="t", id="show-p")
    store.shows.create_play(show_id="show-p", name="a", id="play-merged")
    store.shows.create_play(show_id="show-p", name="b", id="play-escalated")
    store.update_status("play", "play-merged", new_status="merged", reason_code="play.merged.ok")
    store.update_status(
        "play", "play-escalated", new_status="escalated", reason_code="play.escalated.gate"
    )
    code, out, _ = run_wait(li_env, "play-merged", "play-escalated")
    lines = {parse_line(x)["id"]: parse_line(x)["status"] for x in out.splitlines()}
    assert code == 1
    assert lines == {"play-merged": "merged", "play-escalated": "escalated"}


# --- the board and the list (rendered from a report's JSON form and from store rows) ----------


def sample_report(**more: Any) -> dict[str, Any]:
    """A report as ShowReport.to_dict() gives it: one merged play, one escalated, one
    waiting on it."""

    def play(name: str, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": f"S1.{name}",
            "name": name,
            "status": status,
            "reason_code": None,
            "reason_summary": None,
            "attempt": 1,
            "attempts": 2,
            "branch": None,
            "worktree": None,
            "depends_on": [],
            "session_ids": [],
            "gates": [],
            "merge_sha": None,
            "merged_at": None,
            **fields,
        }

    report = {
        "show_id": "S1",
        "topic": "auth",
        "status": "active",
        "reason_code": "show.active.created",
        "reason_summary": "api needs a person",
        "integration": "show/auth",
        "integration_head": "0123456789abcdef",
        "base": "main",
        "plays": [
            play(
                "models",
                "merged",
                reason_code="play.merged.ok",
                merge_sha="feedfacecafe0000",
                session_ids=["run-m1"],
                gates=[{"session_id": "gate-m1", "verdict": "pass", "commit": "feedface"}],
            ),
            play(
                "api",
                "escalated",
                attempt=2,
                reason_code="play.escalated.gate",
                reason_summary="tests fail",
                worktree="/home/wt/api",
                branch="show/auth--api-a2",
                session_ids=["run-a1", "run-a2"],
                gates=[
                    {"session_id": "gate-a1", "verdict": "fail"},
                    {"session_id": "gate-a2", "verdict": "fail"},
                ],
            ),
            play("docs", "pending", attempt=0, depends_on=["api"]),
        ],
        "needs_person": ["play api (S1.api) is escalated: merge it yourself, then resume"],
        "interrupted": None,
        "final_gate": None,
        "exit_code": 1,
    }
    report.update(more)
    return report


def test_play_rows_put_what_needs_a_person_first() -> None:
    from lirun.cli.show_board import play_rows

    rows = play_rows(sample_report())
    assert [r[:5] for r in rows] == [
        ["api", "escalated", "2/2", "failed, failed", "-"],
        ["docs", "pending", "0/2", "-", "-"],
        ["models", "merged", "1/2", "passed", "feedfaceca"],
    ]
    assert rows[0][5] == "play.escalated.gate: tests fail"
    assert rows[2][5] == "play.merged.ok: merged"  # the registry's words when no summary


def test_next_steps_say_what_to_do() -> None:
    from lirun.cli.show_board import next_steps

    steps = next_steps(sample_report())
    assert steps[0].startswith("play api (S1.api) is escalated")
    assert "play api: its last gate's output: li logs gate-a2" in steps
    stopped = next_steps(sample_report(interrupted="SIGTERM", needs_person=[]))
    assert any(
        "li override play S1.api --to merged --reason play.merged.admin" in s for s in stopped
    )
    assert stopped[-1].startswith("li was stopped by SIGTERM; `li show resume S1` continues")
    final = next_steps(
        sample_report(plays=[], needs_person=[], final_gate={"verdict": "fail", "session_id": "g9"})
    )
    assert final == ["the final gate's output: li logs g9"]
    assert next_steps(sample_report(status="completed")) == []
    assert next_steps(sample_report(status="aborted")) == []


def test_the_board_shows_plays_sessions_and_what_needs_a_person(capsys) -> None:
    from lirun.cli.show_board import render_board

    render_board(sample_report())
    out = capsys.readouterr().out
    assert out.startswith("show S1  auth  active\n"), out
    for words in (
        "reason       show.active.created: api needs a person",
        "integration  show/auth at 0123456789",
        "final gate   not run yet",
        "PLAY",
        "api: work run-a1, run-a2; gates gate-a1 failed, gate-a2 failed",
        "models: work run-m1; gates gate-m1 passed",
        "needs a person\n  play api (S1.api) is escalated",
    ):
        assert words in out, out
    assert out.index("escalated") < out.index("pending") < out.index("merged ")


def test_status_lists_recent_shows(store: Any, li_env: dict[str, str]) -> None:
    result = li(li_env, "show", "status")
    assert result.returncode == 0
    assert "no shows yet" in result.stdout
    store.shows.create(topic="older", id="show-1")
    store.shows.create(topic="newer", id="show-2")
    for name, status, reason in (
        ("a", "merged", "play.merged.ok"),
        ("b", "escalated", "play.escalated.gate"),
        ("c", None, None),
    ):
        store.shows.create_play(show_id="show-2", name=name, id=f"show-2.{name}")
        if status:
            store.update_status("play", f"show-2.{name}", new_status=status, reason_code=reason)
    _end_show(store, "show-1", "completed")
    result = li(li_env, "show", "status")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "TOPIC", "STATUS", "MERGED", "NEED", "YOU", "AGE", "REASON"]
    assert lines[1].split()[:5] == ["show-2", "newer", "active", "1/3", "1"]
    assert lines[2].split()[:5] == ["show-1", "older", "completed", "0/0", "-"]
    result = li(li_env, "show", "status", "--json", "--limit", "1")
    [row] = json.loads(result.stdout)
    assert (row["id"], row["plays"]) == ("show-2", {"merged": 1, "escalated": 1, "pending": 1})


def test_a_play_merged_by_hand_reads_so_on_the_board() -> None:
    """A person merged it and recorded it (play.merged.admin): lirun made no merge commit,
    and the board says by hand instead of leaving MERGED AS blank."""
    from lirun.cli.show_board import play_rows

    report = sample_report()
    report["plays"] = [
        {**report["plays"][0], "status": "merged", "merge_sha": None,
         "reason_code": "play.merged.admin", "reason_summary": "fixed the test by hand"},
    ]  # fmt: skip
    [row] = play_rows(report)
    assert row[1] == "merged"
    assert row[4] == "by hand"
