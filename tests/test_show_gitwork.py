"""The git side of a show on a real repository: worktrees, merges, the ref move."""

from __future__ import annotations

from pathlib import Path

from lirun.shows.gitwork import ShowGit, attempt_branch
from support.gitkit import git, make_repo

COMMIT = ("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qam")


def _show(tmp_path: Path) -> tuple[Path, ShowGit, str]:
    repo = make_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "main")
    sg = ShowGit(str(repo), "s1", "show/x")
    assert sg.move_integration(base, None)
    assert sg.head() == base
    return repo, sg, base


def _edit(path: Path, text: str) -> str:
    (path / "base.txt").write_text(text)
    git(path, *COMMIT, text)
    return git(path, "rev-parse", "HEAD")


def test_a_redo_resets_the_same_worktree_path_on_a_new_branch(tmp_path: Path) -> None:
    repo, sg, base = _show(tmp_path)
    first = sg.prepare("p", attempt_branch("show/x", "p", 1), base)
    assert first == sg.play_path("p")
    assert not first.is_relative_to(repo)
    _edit(first, "attempt one")
    (first / "junk.txt").write_text("left behind")
    again = sg.prepare("p", attempt_branch("show/x", "p", 2), base)
    assert again == first
    assert not (again / "junk.txt").exists()
    assert git(again, "rev-parse", "--abbrev-ref", "HEAD") == "show/x--p-a2"
    assert git(again, "rev-parse", "HEAD") == base
    # The user's checkout is where it was.
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"


def test_a_half_made_worktree_directory_is_made_anew(tmp_path: Path) -> None:
    _, sg, base = _show(tmp_path)
    path = sg.play_path("p")
    path.mkdir(parents=True)
    (path / "stray").write_text("x")
    (path / ".git").write_text("gitdir: /nowhere\n")
    made = sg.prepare("p", "show/x--p-a1", base)
    assert git(made, "rev-parse", "HEAD") == base
    assert not (made / "stray").exists()


def test_merge_results_conflicts_and_nothing_to_merge(tmp_path: Path) -> None:
    _, sg, base = _show(tmp_path)
    left = sg.prepare("l", "show/x--l-a1", base)
    right = sg.prepare("r", "show/x--r-a1", base)
    _edit(left, "left")
    _edit(right, "right")
    merged = sg.merge_candidate("show/x--l-a1", base, "Merge l")
    assert merged.sha
    assert merged.base == base
    assert not merged.conflicts
    assert sg.move_integration(merged.sha, base)
    clash = sg.merge_candidate("show/x--r-a1", merged.sha, "Merge r")
    assert clash.sha is None
    assert clash.conflicts == ("base.txt",)
    assert git(sg.gate_path, "status", "--porcelain") == ""  # the merge was aborted
    assert sg.merge_candidate("show/x--l-a1", merged.sha, "again").up_to_date
    # A compare-and-swap from a head that is no longer there fails and moves nothing.
    assert not sg.move_integration(base, base)
    assert sg.head() == merged.sha


def test_uncommitted_work_is_committed_with_a_fallback_identity(tmp_path: Path) -> None:
    _, sg, base = _show(tmp_path)
    path = sg.prepare("p", "show/x--p-a1", base)
    assert not sg.commit_leftovers(path, "nothing")
    (path / "new.txt").write_text("n")
    assert sg.commit_leftovers(path, "p: left")
    assert git(path, "status", "--porcelain") == ""
    assert git(path, "log", "-1", "--format=%s") == "p: left"
