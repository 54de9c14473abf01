"""``li show run`` end to end: real git repositories, command plays that commit, real
signals, both backends for the main path. Few and fast: the engine's own tests hold the
heavy scenarios (conflicts, redo with feedback, kill -9 and resume, every ref update)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support.cli import li_command
from support.gitkit import GIT_ENV, git
from support.showfilekit import COMMAND_SHOW, write_show
from support.waitkit import parse_line, run_wait

TIMEOUT = 120


@pytest.fixture
def show_env(li_env: dict[str, str]) -> dict[str, str]:
    """``li`` against this test's database (each backend); plays commit as a fixed person."""
    return {**li_env, **GIT_ENV}


@pytest.fixture
def sqlite_env(lirun_home: Path, tmp_path: Path) -> dict[str, str]:
    """The same on one SQLite file: the scenarios beyond the main path run once, the store
    behaviours they use being covered on both backends by the main path and the engine's
    own tests."""
    return {
        **os.environ,
        **GIT_ENV,
        "LIRUN_HOME": str(lirun_home),
        "LIRUN_DB_URL": str(tmp_path / "state.db"),
        "PYTHONUNBUFFERED": "1",
    }


def li(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        li_command(*args),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def files_on(repo: Path, ref: str) -> set[str]:
    return set(git(repo, "ls-tree", "--name-only", ref).split())


def test_a_show_of_command_plays_completes(
    tmp_path: Path, show_env: dict[str, str], db_url: str
) -> None:
    path = write_show(tmp_path, COMMAND_SHOW.format(topic="cmds"))
    repo = tmp_path / "repo"
    main_before = git(repo, "rev-parse", "main")
    result = li(show_env, "show", "run", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "completed"
    assert report["exit_code"] == 0
    assert {p["name"]: p["status"] for p in report["plays"]} == {
        "one": "merged",
        "two": "merged",
        "three": "merged",
    }
    assert "li show: " in result.stderr  # progress lines go to stderr
    # the integration branch holds every play's work; base and the user's checkout do not
    assert files_on(repo, "show/cmds") == {"base.txt", "one.txt", "two.txt", "three.txt"}
    assert git(repo, "rev-parse", "main") == main_before
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert not (repo / "one.txt").exists()
    # one merge commit per play on the integration branch
    merges = git(repo, "rev-list", "--merges", "main..show/cmds").split()
    assert len(merges) == 3
    merge_shas = {p["merge_sha"] for p in report["plays"]}
    assert merge_shas == set(merges)
    # li wait: the show and its plays succeeded
    code, out, _ = run_wait(show_env, report["show_id"], *(p["id"] for p in report["plays"]))
    assert code == 0
    assert len(out.splitlines()) == 4
    assert parse_line(out.splitlines()[0])["status"] == "completed"
    # the board names every session, and li status opens one
    board = li(show_env, "show", "status", report["show_id"])
    assert board.returncode == 0
    assert "show " + report["show_id"] in board.stdout
    session = report["plays"][0]["session_ids"][0]
    assert session in board.stdout
    assert li(show_env, "status", session).returncode == 0
    # the topic ended: it may run again as a new show (its integration branch now has
    # commits base lacks, which needs --continue-integration)
    again = li(show_env, "show", "run", str(path), "--continue-integration", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["show_id"] != report["show_id"]


def _fixable_show(tmp_path: Path) -> Path:
    """One play whose merge result fails the gate (attempts: 1), one that waits on it."""
    return write_show(
        tmp_path,
        """
        topic: fix
        repo: repo
        base: main
        gate: "test ! -f bad.txt"
        plays:
          - name: bad
            run: "echo x > bad.txt && git add bad.txt && git commit -q -m bad"
            attempts: 1
          - name: after
            depends_on: [bad]
            run: "echo y > after.txt && git add after.txt && git commit -q -m after"
        """,
    )


def test_a_play_that_needs_a_person_then_resume(tmp_path: Path, sqlite_env: dict[str, str]) -> None:
    path = _fixable_show(tmp_path)
    repo = tmp_path / "repo"
    result = li(sqlite_env, "show", "run", str(path))
    assert result.returncode == 1, result.stderr
    assert "needs a person" in result.stdout
    assert "li override play" in result.stdout
    report = json.loads(li(sqlite_env, "show", "status", "fix", "--json").stdout)
    plays = {p["name"]: p for p in report["plays"]}
    assert (plays["bad"]["status"], plays["after"]["status"]) == ("gate_failed", "pending")
    assert report["status"] == "active"
    assert report["needs_person"]
    # what a person does: merge the play by hand with a fix, record it, resume
    branch = plays["bad"]["branch"]
    git(repo, "checkout", "-q", "show/fix")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge bad by hand", branch)
    git(repo, "rm", "-q", "bad.txt")
    git(repo, "commit", "-q", "-m", "fixed by hand")
    git(repo, "checkout", "-q", "main")
    override = li(
        sqlite_env,
        "override",
        "play",
        plays["bad"]["id"],
        "--to",
        "merged",
        "--reason",
        "play.merged.admin",
        "--actor",
        "tester",
        "--justification",
        "merged by hand with a fix",
    )
    assert override.returncode == 0, override.stderr
    resumed = li(sqlite_env, "show", "resume", report["show_id"])
    assert resumed.returncode == 0, resumed.stderr
    assert files_on(repo, "show/fix") == {"base.txt", "after.txt"}
    code, _, _ = run_wait(sqlite_env, report["show_id"])
    assert code == 0


def test_abort_ends_the_show(tmp_path: Path, sqlite_env: dict[str, str]) -> None:
    path = _fixable_show(tmp_path)
    assert li(sqlite_env, "show", "run", str(path)).returncode == 1
    aborted = li(
        sqlite_env, "show", "abort", "fix", "--actor", "tester", "--justification", "wrong idea"
    )
    assert aborted.returncode == 0, aborted.stderr
    report = json.loads(li(sqlite_env, "show", "status", "--json").stdout)[0]
    assert report["status"] == "aborted"
    code, out, _ = run_wait(sqlite_env, report["id"])
    assert code == 1
    assert parse_line(out.strip())["status"] == "aborted"
    again = li(sqlite_env, "show", "abort", report["id"], "--actor", "t", "--justification", "j")
    assert again.returncode == 2  # already ended: nothing to abort
    assert li(sqlite_env, "show", "status", "no-such-show").returncode == 2


def test_detach_prints_the_id_and_a_waiter_follows(
    tmp_path: Path, sqlite_env: dict[str, str]
) -> None:
    path = write_show(tmp_path, COMMAND_SHOW.format(topic="bg"))
    result = li(sqlite_env, "show", "run", str(path), "--detach")
    assert result.returncode == 0, result.stderr
    show_id = result.stdout.strip()
    assert show_id
    assert "\n" not in show_id
    code, out, _ = run_wait(sqlite_env, show_id, "--timeout", str(TIMEOUT))
    assert code == 0, out
    assert parse_line(out.strip())["status"] == "completed"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_show_and_resume_finishes_it(
    tmp_path: Path, sqlite_env: dict[str, str], signum: int
) -> None:
    go = tmp_path / "go"
    path = write_show(
        tmp_path,
        f"""
        topic: slow
        repo: repo
        base: main
        gate: "true"
        plays:
          - name: slow
            run: >-
              while [ ! -f {go} ]; do sleep 0.1; done;
              echo s > s.txt && git add s.txt && git commit -q -m s
        """,
    )
    proc = subprocess.Popen(
        li_command("show", "run", str(path)),
        env=sqlite_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_play_running(sqlite_env, "slow")
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err
    go.touch()
    resumed = li(sqlite_env, "show", "resume", "slow")
    assert resumed.returncode == 0, resumed.stderr
    assert "s.txt" in files_on(tmp_path / "repo", "show/slow")


def _wait_for_play_running(env: dict[str, str], topic: str) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        result = li(env, "show", "status", topic, "--json")
        if result.returncode == 0:
            report = json.loads(result.stdout)
            if any(p["status"] == "running" and p["session_ids"] for p in report["plays"]):
                return report
        time.sleep(0.1)
    raise AssertionError(f"no play of {topic} started running")


def test_setup_errors_exit_2_attached_and_detached(
    tmp_path: Path, sqlite_env: dict[str, str]
) -> None:
    path = write_show(tmp_path, COMMAND_SHOW.format(topic="busy"))
    repo = tmp_path / "repo"
    git(repo, "branch", "show/busy")
    git(repo, "checkout", "-q", "show/busy")  # the integration branch is checked out here
    before = git(repo, "for-each-ref")
    attached = li(sqlite_env, "show", "run", str(path))
    assert attached.returncode == 2, attached.stderr
    assert "checked out" in attached.stderr, attached.stderr
    detached = li(sqlite_env, "show", "run", str(path), "--detach")
    assert detached.returncode == 2
    assert detached.stdout == ""
    assert "the background li for show" in detached.stderr
    assert "checked out" in detached.stderr
    assert git(repo, "for-each-ref") == before
