"""A show says its plays' provider trouble as it happens, and a play whose provider refused
the run in a way no redo fixes (login, key, request) waits for a person with the
provider's words and what to do (real repositories, fake agents)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lirun.exec.task import Task
from lirun.shows.engine import ShowOptions, resume_show, run_show
from support.cli import li_command
from support.gitkit import GIT_ENV
from support.providerkit import FAKE_PROVIDER, classify_failures, fixture_path
from support.showkit import play, show_repo, spec
from support.storekit import opened


def _refused_codex(tmp_path: Path) -> Path:
    """A codex whose every run is refused: ``unexpected status 401 Unauthorized``."""
    script = tmp_path / "codex"
    script.write_text(
        "#!/bin/sh\n"
        f'LIRUN_FAKE_FIXTURE="{fixture_path("codex/error_401.jsonl")}" LIRUN_FAKE_EXIT=1 '
        f'exec "{sys.executable}" "{FAKE_PROVIDER}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def _working_codex(tmp_path: Path) -> Path:
    """A codex that does the work: a file, committed, then a completed turn."""
    script = tmp_path / "codex-ok"
    script.write_text(
        "#!/bin/sh\n"
        f'LIRUN_FAKE_FIXTURE="{fixture_path("codex/success.jsonl")}" LIRUN_FAKE_EXIT=0 '
        "LIRUN_FAKE_TOUCH=fix.py LIRUN_FAKE_COMMIT='codex work' "
        f'exec "{sys.executable}" "{FAKE_PROVIDER}" "$@"\n'
    )
    script.chmod(0o755)
    return script


def test_a_refused_login_stops_the_play_for_a_person_without_a_redo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "state.db")
    classify_failures(monkeypatch, "401 Unauthorized", "auth")
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LIRUN_CODEX_BIN", str(_refused_codex(tmp_path)))
    repo = show_repo(tmp_path)
    agent = Task(agent="codex", prompt="Fix it")
    lines: list[str] = []
    report = run_show(
        spec(repo, [play("p", agent, attempts=2)]),
        db_url=db,
        options=ShowOptions(on_progress=lines.append),
    )
    assert report.status == "active"  # waiting for a person
    [p] = report.plays
    assert (p.status, p.reason_code, p.attempt) == ("escalated", "play.escalated.provider", 1)
    assert len(p.session_ids) == 1  # not redone: a redo would be refused the same way
    assert p.reason_summary is not None
    assert p.reason_summary.startswith("unexpected status 401 Unauthorized")
    assert "(auth); what to do: log in or fix the API key" in p.reason_summary
    with opened(db) as store:
        row = store.shows.get_play(p.id)
    assert row is not None
    assert "the provider said: unexpected status 401" in str(row.feedback)
    assert "make the change the task asks for" not in str(row.feedback)
    failure = report.to_dict()["plays"][0]["provider_failure"]
    assert failure["reason_code"] == "run.failed.provider_auth"
    assert failure["class"] == "auth"
    assert failure["retryable"] is False
    assert "unexpected status 401 Unauthorized" in failure["message"]
    [sentence] = report.needs_person
    assert "its agent's provider refused the run (run.failed.provider_auth): unexpected status" in (
        sentence
    )
    assert "What to do: log in or fix the API key" in sentence
    assert f"li override play {p.id} --to pending" in sentence
    said = "play p: codex: error: unexpected status 401 Unauthorized"
    assert any(line.startswith(said) for line in lines), lines
    assert any(line.startswith("play p: escalated: unexpected status 401") for line in lines), lines
    # the board says it too
    env = {**os.environ, "LIRUN_DB_URL": db}
    board = subprocess.run(
        li_command("show", "status", report.show_id),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    flat = " ".join(board.stdout.split())
    assert "play.escalated.provider" in flat
    assert "What to do: log in or fix the API key" in flat
    # what the sentence says a person does once logged in: pending again, then resume
    monkeypatch.setenv("LIRUN_CODEX_BIN", str(_working_codex(tmp_path)))
    with opened(db) as store:
        store.update_status(
            "play",
            p.id,
            new_status="pending",
            reason_code="play.pending.created",
            source="admin",
            override=True,
            override_actor="me",
            override_justification="logged in again",
        )
    resumed = resume_show(report.show_id, db_url=db)
    assert resumed.status == "completed", resumed.to_dict()
    assert resumed.plays[0].merge_sha
    assert resumed.plays[0].provider_failure is None


SHOW = """
topic: {topic}
repo: repo
base: main
integration: show/{topic}
gate: "true"
plays:
  - name: p
    agent: codex
    prompt: Fix it
    attempts: 1
"""


@pytest.mark.slow
def test_li_show_run_says_the_trouble_on_stderr_and_in_a_detached_log(
    tmp_path: Path, li_env: dict[str, str]
) -> None:
    from support.execkit import poll
    from support.gitkit import make_repo

    make_repo(tmp_path / "repo")
    path, later = tmp_path / "show.yaml", tmp_path / "later.yaml"
    path.write_text(textwrap.dedent(SHOW.format(topic="keys")).lstrip("\n"), encoding="utf-8")
    later.write_text(textwrap.dedent(SHOW.format(topic="bg")).lstrip("\n"), encoding="utf-8")
    env = {**li_env, **GIT_ENV, "LIRUN_CODEX_BIN": str(_refused_codex(tmp_path))}

    def li(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            li_command(*args), env=env, capture_output=True, text=True, timeout=120
        )

    result = li("show", "run", str(path), "--json")
    assert result.returncode == 1, result.stderr
    # clean JSON; a refused login stops the play for a person, with no redo
    assert json.loads(result.stdout)["plays"][0]["status"] == "escalated"
    wanted = "li show: play p: codex: error: unexpected status 401 Unauthorized"
    assert wanted in result.stderr
    started = li("show", "run", str(later), "--detach", "--json")
    assert started.returncode == 0, started.stderr
    log = Path(json.loads(started.stdout)["log_dir"]) / "li.stderr.log"
    poll(lambda: wanted in log.read_text(), timeout=60, what="the line in the detached log")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # let the detached show settle before the test ends
        shown = json.loads(li("show", "status", "bg", "--json").stdout)
        if shown["plays"][0]["status"] == "escalated":
            break
        time.sleep(0.2)
