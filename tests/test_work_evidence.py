"""Evidence tells work from talk (docs/outcome.md §1, "what the record says the run did").

Every kind of evidence is recorded whichever the gate needed, and one pure function
(``record.work.describe_work``) says it for ``li status ID``, ``li status ID --json``
and the dashboard's run page: a table of cases, the counting against a real repository,
then real ``li agent`` runs with fake providers on both backends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lirun.lifecycle import EXIT_CODE_BY_STATUS
from lirun.record.changes import GitCallFailed, counted
from lirun.record.evidence import check_completion_evidence, take_start_snapshot
from lirun.record.work import describe_work
from lirun.store import Store
from lirun.ui.app import create_app
from support.execkit import get_row, run_li
from support.gitkit import GIT_ENV, git
from support.providerkit import env_with_fake_bin

REPLY = {"kind": "assistant_output", "label": "non-empty assistant message", "counted": True}


def _git_entry(**fields: Any) -> dict[str, Any]:
    base = {"kind": "git", "since_start": True, "changed": False, "tree_changed": False}
    return {**base, "commits_since_start": 0, "commit_ids": [], "files_changed": 0, **fields}


@pytest.mark.parametrize(
    ("evidence", "verification", "summary"),
    [
        ([REPLY], None, "reply only"),
        ([REPLY, _git_entry()], None, "reply only"),
        (
            [REPLY, _git_entry(changed=True, commits_since_start=1, commit_ids=["abc1234"],
                               files_changed=3)],
            None,
            "reply, 1 commit (abc1234), 3 files changed",
        ),
        (
            [_git_entry(changed=True, commits_since_start=1, commit_ids=["abc1234"],
                        files_changed=3)],
            None,
            "1 commit (abc1234), 3 files changed",
        ),
        (
            [_git_entry(changed=True, commits_since_start=5, commit_ids=["a1", "b2", "c3"],
                        files_changed=1)],
            None,
            "5 commits (a1, b2, c3, +2 more), 1 file changed",
        ),
        ([_git_entry(changed=True, tree_changed=True, files_changed=None)], None,
         "working tree changed"),
        ([{"kind": "cwd", "changed": True, "tree_changed": True}], None, "files changed"),
        ([{"kind": "exit_code", "exit_code": 0}], {"produced": [{"id": "a"}, {"id": "b"}]},
         "2 artifacts"),
        ([REPLY], {"produced": [{"id": "a"}]}, "reply, 1 artifact"),
        ([_git_entry()], None, "no change"),
        ([_git_entry(changed=None, tree_changed=None)], None, "change unknown"),
        ([{"kind": "git", "dirty": True, "commits_ahead": 2}], None, "working tree changed"),
        ([{"kind": "git", "dirty": False}, {"kind": "agent_activity", "reply": True}], None,
         "reply only"),
        ([], None, "none recorded"),
        (None, "not a mapping", "none recorded"),
    ],
)  # fmt: skip
def test_the_work_said_in_a_few_words(evidence: Any, verification: Any, summary: str) -> None:
    assert describe_work(evidence, verification).summary == summary


def test_the_structured_work_counts_what_the_sentence_says() -> None:
    entry = _git_entry(changed=True, commits_since_start=4, commit_ids=["a", "b", "c"])
    found = describe_work([REPLY, {**entry, "files_changed": 2}]).as_dict()
    assert found == {
        "summary": "reply, 4 commits (a, b, c, +1 more), 2 files changed",
        "reply": True,
        "checked": True,
        "commits": 4,
        "commit_ids": ["a", "b", "c"],
        "files_changed": 2,
        "tree_changed": False,
        "artifacts": 0,
    }


# --- counted against a real repository ------------------------------------------------------


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "counted"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for name in ("a.txt", "b.txt", "c.txt"):
        (repo / name).write_text(f"{name}\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo


def test_files_changed_counts_what_differs_from_the_start_committed_or_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    repo = _repo(tmp_path)
    (repo / "a.txt").write_text("dirty before the run\n", encoding="utf-8")  # left alone
    (repo / "b.txt").write_text("dirty before the run\n", encoding="utf-8")  # changed again
    (repo / "old-untracked.txt").write_text("there before\n", encoding="utf-8")
    start = take_start_snapshot(repo)
    assert set(start["dirty_at_start"] or {}) == {"a.txt", "b.txt", "old-untracked.txt"}
    (repo / "b.txt").write_text("changed by the run\n", encoding="utf-8")
    (repo / "c.txt").write_text("committed by the run\n", encoding="utf-8")
    git(repo, "add", "c.txt")
    git(repo, "commit", "-q", "-m", "work")
    (repo / "new.txt").write_text("new\n", encoding="utf-8")
    found = check_completion_evidence(repo, start=start)
    assert found["files_changed"] == 3  # b.txt, c.txt, new.txt; not a.txt nor old-untracked
    assert found["commits_since_start"] == 1
    assert found["commit_ids"] == [git(repo, "rev-parse", "--short", "HEAD").strip()]


def test_commit_ids_are_bounded_and_an_untouched_tree_counts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    repo = _repo(tmp_path)
    start = take_start_snapshot(repo)
    assert check_completion_evidence(repo, start=start)["files_changed"] == 0
    for index in range(5):
        (repo / "a.txt").write_text(f"{index}\n", encoding="utf-8")
        git(repo, "commit", "-qam", f"c{index}")
    found = check_completion_evidence(repo, start=start)
    assert found["commits_since_start"] == 5
    newest = git(repo, "log", "-3", "--format=%h").split()
    assert found["commit_ids"] == newest
    assert found["files_changed"] == 1


# --- real runs: li agent, li status, the dashboard ----------------------------------------


@pytest.fixture
def client(store: Store, db_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(db_url, watch=False)) as c:
        yield c


FIXTURES = {"claude": "claude/success.jsonl", "codex": "codex/success.jsonl"}


def _agent(
    li_env: dict[str, str], fake_bin: Path, repo: Path, provider: str, *args: str, **kw: Any
) -> tuple[int, str]:
    env = env_with_fake_bin(FIXTURES[provider], base=li_env, fake_bin=fake_bin, **kw)
    env.update(GIT_ENV)
    if kw.get("touch"):
        env["LIRUN_FAKE_COMMIT"] = "the agent's work"
    proc = run_li("agent", provider, "do it", "--json", *args, env=env, cwd=repo)
    return proc.returncode, json.loads(proc.stdout)["run_id"]


def _status(li_env: dict[str, str], repo: Path, run_id: str) -> tuple[str, dict[str, Any]]:
    text = run_li("status", run_id, env=li_env, cwd=repo)
    assert text.returncode == 0, text.stderr
    as_json = run_li("status", run_id, "--json", env=li_env, cwd=repo)
    assert as_json.returncode == 0, as_json.stderr
    return text.stdout, json.loads(as_json.stdout)


def _evidence_line(text: str) -> str:
    found = re.search(r"^evidence +(\S.*)$", text, re.MULTILINE)
    assert found, text
    return found.group(1)


@pytest.mark.parametrize("provider", ["claude", "codex"])
def test_an_agent_that_commits_is_told_from_one_that_only_replies(
    li_env: dict[str, str],
    db_url: str,
    repo: Path,
    fake_bin: Path,
    client: TestClient,
    provider: str,
) -> None:
    code, worker = _agent(li_env, fake_bin, repo, provider, touch="work.txt")
    assert code == 0
    sha = git(repo, "rev-parse", "--short", "HEAD").strip()
    said = f"reply, 1 commit ({sha}), 1 file changed"
    row = get_row(db_url, worker)
    assert (row["status"], row["status_reason_summary"]) == ("completed", f"completed: {said}")
    (entry,) = [e for e in row["status_evidence_refs"] if e["kind"] == "git"]
    assert (entry["commit_ids"], entry["files_changed"]) == ([sha], 1)
    text, detail = _status(li_env, repo, worker)
    assert _evidence_line(text) == said
    assert detail["work"]["summary"] == said
    assert (detail["work"]["commits"], detail["work"]["commit_ids"]) == (1, [sha])
    assert detail["work"]["files_changed"] == 1
    page = client.get(f"/runs/{worker}").text
    assert f'<dd id="run-work">{said}</dd>' in page
    assert client.get(f"/api/runs/{worker}").json()["work"]["summary"] == said

    code, talker = _agent(li_env, fake_bin, repo, provider)
    assert code == 0
    row = get_row(db_url, talker)
    assert (row["status"], row["status_reason_summary"]) == ("completed", "completed: reply only")
    kinds = [e["kind"] for e in row["status_evidence_refs"]]
    assert "assistant_output" in kinds
    assert "git" in kinds  # the cwd was compared anyway
    text, detail = _status(li_env, repo, talker)
    assert _evidence_line(text) == "reply only"
    assert (detail["work"]["summary"], detail["work"]["commits"]) == ("reply only", 0)
    assert '<dd id="run-work">reply only</dd>' in client.get(f"/runs/{talker}").text


@pytest.mark.parametrize("provider", ["claude", "codex"])
def test_require_change_on_the_command_line_refuses_a_reply_alone(
    li_env: dict[str, str], db_url: str, repo: Path, fake_bin: Path, provider: str
) -> None:
    code, run_id = _agent(li_env, fake_bin, repo, provider, "--require-change")
    assert code == EXIT_CODE_BY_STATUS["completed_empty"]
    row = get_row(db_url, run_id)
    assert (row["status"], row["status_reason_code"]) == (
        "completed_empty",
        "run.completed_empty.no_evidence",
    )
    text, detail = _status(li_env, repo, run_id)
    assert _evidence_line(text) == "reply only"
    (reply,) = [e for e in detail["status_evidence_refs"] if e["kind"] == "assistant_output"]
    assert reply["counted"] is False

    code, run_id = _agent(li_env, fake_bin, repo, provider, "--require-change", touch="w.txt")
    assert code == 0
    assert get_row(db_url, run_id)["status"] == "completed"


def test_require_change_is_in_li_agent_help(li_env: dict[str, str], tmp_path: Path) -> None:
    shown = run_li("agent", "--help", env=li_env, cwd=tmp_path)
    assert "--require-change" in shown.stdout
    assert "a reply alone is not evidence of work" in " ".join(shown.stdout.split())


def test_a_failed_count_leaves_it_unknown_and_never_costs_the_comparison() -> None:
    def git_that_times_out_on_diff(*args: str) -> str:
        if args[0] == "diff":
            raise GitCallFailed("git diff timed out after 5s; no opinion")
        return "abc1234\n"

    start = {"head": "f" * 40, "dirty_at_start": {}}
    assert counted(git_that_times_out_on_diff, "/nowhere", start, [], (), 1) == {
        "commit_ids": [],
        "files_changed": None,
    }
    assert counted(lambda *a: "", "/nowhere", {"head": None}, [], (), 0) == {
        "commit_ids": [],
        "files_changed": None,  # the start kept no per-file ids
    }
