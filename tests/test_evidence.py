from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lirun.record import evidence
from lirun.record.evidence import check_completion_evidence
from support.gitkit import GIT_ENV, commit, git, make_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_clean_at_base(repo: Path) -> None:
    ev = check_completion_evidence(str(repo))
    assert ev == {
        "checked": True,
        "ahead_of_base": False,
        "commits_ahead": 0,
        "dirty": False,
        "base_ref": "main",
        "reason": ev["reason"],
    }
    assert "clean" in ev["reason"]
    assert "0 commit(s) ahead of main" in ev["reason"]


def test_untracked_file_is_dirty(repo: Path) -> None:
    (repo / "new.txt").write_text("x", encoding="utf-8")
    ev = check_completion_evidence(str(repo))
    assert ev["checked"]
    assert ev["dirty"] is True
    assert ev["commits_ahead"] == 0


def test_modified_file_is_dirty(repo: Path) -> None:
    (repo / "base.txt").write_text("changed", encoding="utf-8")
    assert check_completion_evidence(repo)["dirty"] is True


def test_commits_ahead_of_main(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "a.txt")
    commit(repo, "b.txt")
    ev = check_completion_evidence(str(repo))
    assert ev["checked"]
    assert ev["base_ref"] == "main"
    assert ev["commits_ahead"] == 2
    assert ev["ahead_of_base"] is True
    assert ev["dirty"] is False


def test_master_fallback(tmp_path: Path) -> None:
    path = tmp_path / "r"
    path.mkdir()
    git(path, "init", "-q", "-b", "master")
    commit(path, "a.txt")
    git(path, "checkout", "-q", "-b", "work")
    commit(path, "b.txt")
    ev = check_completion_evidence(str(path))
    assert ev["base_ref"] == "master"
    assert ev["commits_ahead"] == 1


def test_remote_head_wins_over_local_main(repo: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "checkout", "-q", "-b", "feature")
    commit(clone, "c.txt")
    ev = check_completion_evidence(str(clone))
    assert ev["base_ref"] == "origin/main"
    assert ev["commits_ahead"] == 1


def test_origin_main_without_remote_head(repo: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "remote", "set-head", "origin", "-d")
    git(clone, "branch", "-q", "-m", "main", "trunk")
    commit(clone, "c.txt")
    ev = check_completion_evidence(str(clone))
    assert ev["base_ref"] == "origin/main"
    assert ev["commits_ahead"] == 1


def test_explicit_base_ref(repo: Path) -> None:
    first = git(repo, "rev-parse", "HEAD")
    commit(repo, "a.txt")
    commit(repo, "b.txt")
    ev = check_completion_evidence(str(repo), base_ref=first)
    assert ev["base_ref"] == first
    assert ev["commits_ahead"] == 2
    assert ev["ahead_of_base"] is True
    git(repo, "tag", "v1", first)
    assert check_completion_evidence(str(repo), base_ref="v1")["commits_ahead"] == 2


@pytest.mark.parametrize("bad", ["no-such-ref", "--output=/tmp/x", "HEAD~99"])
def test_invalid_explicit_base_falls_back(repo: Path, bad: str) -> None:
    ev = check_completion_evidence(str(repo), base_ref=bad)
    assert ev["checked"]
    assert ev["base_ref"] == "main"
    assert "not found" in ev["reason"]


def test_detached_head(repo: Path) -> None:
    commit(repo, "a.txt")
    git(repo, "checkout", "-q", "--detach", "HEAD")
    git(repo, "branch", "-q", "-f", "main", "HEAD~1")
    commit(repo, "b.txt")
    ev = check_completion_evidence(str(repo))
    assert ev["checked"]
    assert ev["base_ref"] == "main"
    assert ev["commits_ahead"] == 2


def test_no_commits_yet(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    ev = check_completion_evidence(str(path))
    assert ev == {
        "checked": True,
        "ahead_of_base": None,
        "commits_ahead": None,
        "dirty": False,
        "base_ref": None,
        "reason": ev["reason"],
    }
    assert "no commits yet" in ev["reason"]
    (path / "f.txt").write_text("x", encoding="utf-8")
    assert check_completion_evidence(str(path))["dirty"] is True


def test_no_base_found_still_checks_dirty(tmp_path: Path) -> None:
    path = tmp_path / "r"
    path.mkdir()
    git(path, "init", "-q", "-b", "trunk")
    commit(path, "a.txt")
    ev = check_completion_evidence(str(path))
    assert ev["checked"] is True
    assert ev["dirty"] is False
    assert ev["base_ref"] is None
    assert ev["commits_ahead"] is None
    assert ev["ahead_of_base"] is None
    assert "no base ref" in ev["reason"]


def test_subdirectory_of_repo(repo: Path) -> None:
    sub = repo / "pkg"
    sub.mkdir()
    (sub / "x.py").write_text("x", encoding="utf-8")
    assert check_completion_evidence(str(sub))["dirty"] is True


def _assert_no_opinion(ev: evidence.CompletionEvidence, reason: str) -> None:
    assert ev["checked"] is False
    assert ev["dirty"] is None
    assert ev["ahead_of_base"] is None
    assert ev["commits_ahead"] is None
    assert ev["base_ref"] is None
    assert reason in ev["reason"]


def test_not_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    plain = tmp_path / "plain"
    plain.mkdir()
    _assert_no_opinion(check_completion_evidence(str(plain)), "not in a git repository")


def test_inside_git_dir_is_not_a_work_tree(repo: Path) -> None:
    _assert_no_opinion(check_completion_evidence(str(repo / ".git")), "not inside a git work tree")


def test_cwd_none_or_missing(tmp_path: Path) -> None:
    _assert_no_opinion(check_completion_evidence(None), "no working directory")
    _assert_no_opinion(check_completion_evidence(str(tmp_path / "gone")), "does not exist")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    _assert_no_opinion(check_completion_evidence(str(tmp_path / "file")), "does not exist")


def test_git_missing_from_path(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    _assert_no_opinion(check_completion_evidence(str(repo)), "git is not on PATH")


def _use_fake_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, script: str) -> None:
    """Put a ``git`` running ``script`` first on PATH."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    fake = bindir / "git"
    fake.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_git_probe_timeout(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_fake_git(monkeypatch, tmp_path, "exec sleep 5")
    monkeypatch.setattr(evidence, "GIT_TIMEOUT_SECONDS", 0.2)
    _assert_no_opinion(check_completion_evidence(str(repo)), "timed out after 0.2s")


def test_git_probe_failure(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = 'case "$*" in *rev-parse*) echo true;; *) echo "fatal: boom" >&2; exit 128;; esac'
    _use_fake_git(monkeypatch, tmp_path, script)
    _assert_no_opinion(check_completion_evidence(str(repo)), "git status failed: fatal: boom")


def test_inherited_git_dir_is_ignored(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    ev = check_completion_evidence(str(repo))
    assert ev["checked"]
    assert ev["commits_ahead"] == 0
    assert ev["dirty"] is False


def test_probe_takes_no_index_lock(repo: Path) -> None:
    (repo / "base.txt").write_text("changed", encoding="utf-8")
    (repo / ".git" / "index.lock").write_text("", encoding="utf-8")
    ev = check_completion_evidence(str(repo))
    assert ev["checked"]
    assert ev["dirty"] is True


def test_default_timeout_is_five_seconds() -> None:
    assert evidence.GIT_TIMEOUT_SECONDS == 5.0
