"""The start snapshot and what changed since it, on real git repositories and directories."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lirun.record import fingerprint
from lirun.record.evidence import (
    CompletionEvidence,
    StartSnapshot,
    check_completion_evidence,
    take_start_snapshot,
)
from support.gitkit import GIT_ENV, commit, git, make_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def plain(tmp_path: Path) -> Path:
    path = tmp_path / "plain"
    (path / "sub").mkdir(parents=True)
    (path / "a.txt").write_text("a", encoding="utf-8")
    (path / "sub" / "b.txt").write_text("b", encoding="utf-8")
    return path


def since(cwd: Path, start: StartSnapshot, **kw: Any) -> CompletionEvidence:
    return check_completion_evidence(str(cwd), start=start, **kw)


# --- git ---------------------------------------------------------------------------------------


def test_snapshot_records_head_branch_and_fingerprint(repo: Path) -> None:
    snap = take_start_snapshot(repo)
    assert snap["checked"]
    assert snap["scope"] == "git"
    assert snap["head"] == git(repo, "rev-parse", "HEAD")
    assert snap["branch"] == "main"
    assert snap["fingerprint"]
    assert snap["files"] == 0
    assert snap["capped"] is None


def test_a_tree_dirty_before_the_start_is_not_work(repo: Path) -> None:
    (repo / "base.txt").write_text("edited before the run", encoding="utf-8")
    (repo / "notes.txt").write_text("untracked before the run", encoding="utf-8")
    snap = take_start_snapshot(repo)
    ev = since(repo, snap)
    assert ev["checked"]
    assert ev["since_start"]
    assert ev["changed"] is False
    assert ev["dirty"] is True  # the ADR's field stays, for readers
    assert ev["commits_since_start"] == 0
    assert ev["tree_changed"] is False


@pytest.mark.parametrize("how", ["edit again", "revert", "delete", "new untracked", "stage"])
def test_a_change_to_an_already_dirty_tree_is_work(repo: Path, how: str) -> None:
    (repo / "base.txt").write_text("edited before the run", encoding="utf-8")
    snap = take_start_snapshot(repo)
    if how == "edit again":
        (repo / "base.txt").write_text("edited again, same len", encoding="utf-8")
    elif how == "revert":
        git(repo, "checkout", "--", "base.txt")
    elif how == "delete":
        (repo / "base.txt").unlink()
    elif how == "new untracked":
        (repo / "deep" / "dir").mkdir(parents=True)
        (repo / "deep" / "dir" / "f.txt").write_text("x", encoding="utf-8")
    else:
        git(repo, "add", "base.txt")
    ev = since(repo, snap)
    assert ev["changed"] is True
    assert ev["tree_changed"] is True


def test_an_unpushed_commit_from_before_the_start_is_not_work(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "feature")
    commit(repo, "earlier.txt")
    snap = take_start_snapshot(repo)
    ev = since(repo, snap)
    assert ev["commits_ahead"] == 1
    assert ev["ahead_of_base"] is True
    assert ev["changed"] is False
    assert ev["commits_since_start"] == 0


def test_a_commit_on_the_only_branch_trunk_is_work(tmp_path: Path) -> None:
    repo = tmp_path / "trunk-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "trunk")
    commit(repo, "base.txt")
    snap = take_start_snapshot(repo)
    commit(repo, "work.txt")
    ev = since(repo, snap)
    assert ev["base_ref"] is None  # no base to be ahead of: the ADR's rule saw nothing
    assert ev["changed"] is True
    assert ev["commits_since_start"] == 1
    assert (ev["branch_at_start"], ev["branch"]) == ("trunk", "trunk")
    assert ev["head"] != ev["head_at_start"]


def test_a_commit_on_main_itself_is_work(repo: Path) -> None:
    snap = take_start_snapshot(repo)
    commit(repo, "work.txt")
    ev = since(repo, snap)
    assert ev["commits_ahead"] == 0
    assert ev["changed"] is True
    assert ev["commits_since_start"] == 1


def test_a_commit_in_another_worktree_is_not_this_runs_work(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-worktree"
    git(repo, "worktree", "add", "-q", "-b", "elsewhere", str(other))
    snap = take_start_snapshot(repo)
    commit(other, "theirs.txt")
    ev = since(repo, snap)
    assert ev["changed"] is False
    assert ev["commits_since_start"] == 0


def test_ignored_files_are_not_work(repo: Path) -> None:
    (repo / ".gitignore").write_text("build/\n", encoding="utf-8")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore")
    snap = take_start_snapshot(repo)
    (repo / "build").mkdir()
    (repo / "build" / "out.o").write_text("x", encoding="utf-8")
    assert since(repo, snap)["changed"] is False


def test_the_first_commit_of_an_empty_repository_is_work(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    snap = take_start_snapshot(repo)
    assert snap["checked"]
    assert snap["head"] is None
    commit(repo, "first.txt")
    ev = since(repo, snap)
    assert ev["changed"] is True
    assert ev["commits_since_start"] == 1


def test_the_runs_own_directory_is_left_out(repo: Path) -> None:
    state = repo / "runs" / "r1"
    state.mkdir(parents=True)
    snap = take_start_snapshot(repo, exclude=[state])
    assert snap["excluded"] == [str(state)]  # recorded, so teardown leaves it out too
    (state / "run.json").write_text("{}", encoding="utf-8")
    assert since(repo, snap)["changed"] is False
    bare = take_start_snapshot(repo)
    (state / "stream.jsonl").write_text("{}", encoding="utf-8")
    assert since(repo, bare)["changed"] is True  # without the exclusion it would count


def test_a_repository_gone_at_teardown_is_no_opinion(repo: Path) -> None:
    snap = take_start_snapshot(repo)
    shutil.rmtree(repo / ".git")
    ev = since(repo, snap)
    assert ev["checked"] is False
    assert "not in a git repository" in ev["reason"]


# --- outside git ---------------------------------------------------------------------------------


def test_outside_git_nothing_changed(plain: Path) -> None:
    snap = take_start_snapshot(plain)
    assert snap["checked"]
    assert snap["scope"] == "dir"
    assert snap["files"] == 3
    ev = since(plain, snap)
    assert ev["checked"]
    assert ev["scope"] == "dir"
    assert ev["changed"] is False
    assert ev["dirty"] is None
    assert ev["commits_ahead"] is None
    assert "not a git repository" in ev["reason"]


@pytest.mark.parametrize("how", ["new file", "new dir", "delete", "touch", "grow"])
def test_outside_git_a_change_is_work(plain: Path, how: str) -> None:
    snap = take_start_snapshot(plain)
    target = plain / "sub" / "b.txt"
    if how == "new file":
        (plain / "c.txt").write_text("c", encoding="utf-8")
    elif how == "new dir":
        (plain / "empty-dir").mkdir()
    elif how == "delete":
        target.unlink()
    elif how == "touch":
        st = target.stat()
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    else:
        target.write_text("bigger", encoding="utf-8")
    assert since(plain, snap)["changed"] is True


def test_the_tree_digest_names_paths_relative_to_its_root(plain: Path, tmp_path: Path) -> None:
    """The same tree copied elsewhere has the same digest (paths are relative to the root,
    however the root was spelled), and a rename that keeps sizes and times changes it."""
    copy = tmp_path / "copy"
    shutil.copytree(plain, copy, copy_function=shutil.copy2)
    for d in (plain, copy):
        for sub in sorted(d.rglob("*"), reverse=True):
            os.utime(sub, ns=(0, 10**18))
    relative = os.path.relpath(copy)
    assert fingerprint.of_tree(str(plain)).digest == fingerprint.of_tree(relative).digest
    (copy / "sub" / "b.txt").rename(copy / "sub" / "c.txt")
    assert fingerprint.of_tree(str(plain)).digest != fingerprint.of_tree(str(copy)).digest


def test_outside_git_symlinks_are_not_followed(plain: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (plain / "link").symlink_to(outside, target_is_directory=True)
    snap = take_start_snapshot(plain)
    (outside / "elsewhere.txt").write_text("x", encoding="utf-8")
    assert since(plain, snap)["changed"] is False


# --- caps and failures -------------------------------------------------------------------------


def test_the_file_cap_is_stated_and_equal_capped_walks_prove_nothing(
    plain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fingerprint, "MAX_FILES", 2)
    snap = take_start_snapshot(plain)
    assert snap["capped"] == "stopped at 2 files"
    assert snap["files"] == 2
    (plain / "sub" / "z.txt").write_text("beyond the cap", encoding="utf-8")
    ev = since(plain, snap)
    assert ev["changed"] is None
    assert ev["capped"] == "stopped at 2 files"
    assert "unknown" in ev["reason"]
    assert "stopped at 2 files" in ev["reason"]
    (plain / "a.txt").unlink()  # inside the covered prefix: a change is proven
    assert since(plain, snap)["changed"] is True


def test_the_time_cap_is_stated(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "x.txt").write_text("x", encoding="utf-8")
    monkeypatch.setattr(fingerprint, "MAX_SECONDS", -1.0)
    snap = take_start_snapshot(repo)
    assert snap["capped"] is not None
    assert snap["capped"].startswith("stopped after -1 s")
    ev = since(repo, snap)
    assert ev["checked"]
    assert ev["changed"] is None
    assert ev["tree_changed"] is None
    commit(repo, "work.txt")
    assert since(repo, snap)["changed"] is True  # a commit is proof whatever the tree says


def test_no_cwd_gives_an_unchecked_snapshot_with_its_cause(tmp_path: Path) -> None:
    snap = take_start_snapshot(tmp_path / "missing")
    assert snap["checked"] is False
    assert "does not exist" in snap["reason"]
    (tmp_path / "missing").mkdir()
    ev = since(tmp_path / "missing", snap)
    assert ev["checked"] is False
    assert ev["reason"].startswith("no start snapshot (")
    assert take_start_snapshot(None)["reason"] == "no working directory given"


def test_a_failing_git_gives_an_unchecked_snapshot(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    fake = bindir / "git"
    fake.write_text('#!/bin/sh\necho "fatal: boom" >&2; exit 128\n', encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    snap = take_start_snapshot(repo)
    assert snap["checked"] is False
    assert "boom" in snap["reason"]
