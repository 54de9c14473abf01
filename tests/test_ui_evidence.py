"""Evidence on the run page reads as sentences and small tables, the raw JSON behind a
toggle: each kind as a table of cases, then a real command run (a commit in a real
repository, a process left behind) on both backends."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lirun.store import Store
from lirun.ui.app import create_app
from lirun.ui.evidence_view import explain
from support.cli import li_command
from support.gitkit import GIT_ENV


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


@pytest.mark.parametrize(
    ("ref", "title", "words"),
    [
        ({"kind": "exit_code", "exit_code": 3}, "exit code", "exited with code 3"),
        ({"kind": "signal", "signal": "SIGTERM"}, "signal", "ended on SIGTERM"),
        ({"kind": "assistant_output", "label": "x"}, "reply", "final reply counted"),
        (
            {"kind": "git", "commits_since_start": 2, "tree_changed": True, "commits_ahead": 5,
             "base_ref": "main"},
            "work done",
            "2 commits since it started; working tree changed; 5 ahead of main.",
        ),
        (
            {"kind": "cwd", "commits_since_start": None, "tree_changed": None},
            "work done",
            "In its directory: working tree changes unknown.",
        ),
        (
            {"kind": "killed_descendants", "signal": "SIGTERM", "sigkill": [7],
             "processes": [{"pid": 7, "command": "sleep 9"}, {"pid": 8, "command": "cat"}]},
            "processes killed",
            "2 processes the run left behind were ended with SIGTERM (1 needed SIGKILL).",
        ),
        (
            {"kind": "provider_error", "provider": "claude", "retryable": False,
             "class": "auth", "message": "Invalid API key"},
            "provider error",
            "claude reported an error (auth): Invalid API key; a retry will not fix it.",
        ),
        (
            {"kind": "provider_retries", "provider": "codex", "count": 3,
             "last_error": "overloaded", "last_error_status": 529},
            "provider retries",
            "codex retried its API 3 times; the last error: overloaded (HTTP 529).",
        ),
        (
            {"kind": "artifact", "id": "notes", "path": "notes.md", "label": "missing"},
            "artifact check",
            "Artifact notes (notes.md): missing.",
        ),
        ({"kind": "brand_new", "what": "x"}, "brand new", "what: x."),
        ("just text", "note", "just text"),
    ],
)  # fmt: skip
def test_each_kind_reads_as_a_sentence(ref: Any, title: str, words: str) -> None:
    shown = explain(ref)
    assert shown.title == title
    assert words in shown.sentence


def test_killed_processes_and_git_facts_are_small_tables() -> None:
    killed = explain(
        {"kind": "killed_descendants", "signal": "SIGTERM", "sigkill": [7],
         "processes": [{"pid": 7, "command": "sleep 9"}]}
    )  # fmt: skip
    assert killed.head == ("pid", "command", "")
    assert killed.rows == (("7", "sleep 9", "SIGKILL"),)
    work = explain(
        {"kind": "git", "commits_since_start": 1, "tree_changed": False, "dirty": False,
         "branch_at_start": "main", "branch": "main", "head_at_start": "a" * 40,
         "head": "b" * 40}
    )  # fmt: skip
    assert {label: value for label, value in work.rows} == {
        "commits since start": "1",
        "working tree changed": "no",
        "uncommitted changes": "no",
        "branch": "main",
        "head": f"{'a' * 12} → {'b' * 12}",
    }


def test_a_real_runs_page_explains_its_evidence_and_keeps_the_raw_json(
    client: TestClient, li_env: dict[str, str], repo: Path
) -> None:
    script = "echo x > f && git add f && git commit -qm x && { sleep 60 & sleep 0.5; } ; echo done"
    ran = subprocess.run(
        li_command("run", "--require-change", "--", "sh", "-c", script),
        env={**li_env, **GIT_ENV},
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    said = re.search(r"run (\S+) completed", ran.stderr)
    assert said is not None, ran.stderr
    run_id = said.group(1)
    page = client.get(f"/runs/{run_id}").text
    assert "The process exited with code 0." in page
    assert "In the git repository: 1 commit since it started; working tree unchanged" in page
    assert "1 process the run left behind was ended with SIGTERM." in page
    assert "<code>sleep 60</code>" in page
    raw = page.split('<details id="evidence-raw">', 1)[1]
    assert "&#34;killed_descendants&#34;" in raw or "&quot;killed_descendants&quot;" in raw
    assert '<code id="run-command">sh -c' in page  # the command, as typed
    api = client.get(f"/api/runs/{run_id}").json()
    assert [e["kind"] for e in api["explained"]] == ["exit_code", "git", "killed_descendants"]
    assert json.dumps(api["evidence"])  # the raw entries are still there
