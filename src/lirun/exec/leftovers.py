"""What a show or a flow left in git — worktrees under lirun's home and the branches it
named — and whether each may go.

A clean removes a worktree that holds nothing uncommitted and a branch whose commits
another branch already holds (merged, or never given work of its own) or that a later
attempt replaced and merged (abandoned). Unmerged work and uncommitted changes stay
unless the person said ``--force``; every kept item says why. The decision
(``worktree_verdict``, ``branch_verdict``) is pure; ``gather`` reads the facts from git
and ``sweep`` acts on them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lirun.exec.worktrees import GitError, Repo

__all__ = [
    "BranchFacts",
    "CleanReport",
    "Leftover",
    "WorktreeFacts",
    "branch_verdict",
    "gather",
    "sweep",
    "worktree_verdict",
]


@dataclass(frozen=True, slots=True)
class WorktreeFacts:
    """A worktree a run made: its path, whether it holds uncommitted changes, its branch."""

    path: str
    dirty: bool
    branch: str | None = None


@dataclass(frozen=True, slots=True)
class BranchFacts:
    """A branch a run made. ``unmerged``: its commits that no branch outside the run's own
    holds; ``superseded_by``: a later attempt of the same play that merged; ``held_by``: a
    worktree outside the run's own that has it checked out."""

    name: str
    unmerged: int
    superseded_by: str | None = None
    held_by: str | None = None


@dataclass(frozen=True, slots=True)
class Leftover:
    """One worktree or branch and what the clean did: ``removed`` or kept, and why."""

    kind: Literal["worktree", "branch"]
    name: str
    removed: bool
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "removed": self.removed, "why": self.why}


@dataclass(frozen=True, slots=True)
class CleanReport:
    """What ``li show clean`` / ``li flow clean`` removed and kept. Exit 0 when nothing
    was kept, 1 when something was (each kept item says why)."""

    target: str  # "show" | "flow"
    id: str
    repo: str | None
    items: tuple[Leftover, ...]
    notes: tuple[str, ...] = ()

    @property
    def kept(self) -> tuple[Leftover, ...]:
        return tuple(i for i in self.items if not i.removed)

    @property
    def exit_code(self) -> int:
        return 1 if self.kept else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            self.target: self.id,
            "repo": self.repo,
            "removed": [i.to_dict() for i in self.items if i.removed],
            "kept": [i.to_dict() for i in self.kept],
            "notes": list(self.notes),
            "exit_code": self.exit_code,
        }


def worktree_verdict(facts: WorktreeFacts, *, force: bool) -> tuple[bool, str]:
    """(remove, why) for a run's worktree."""
    if facts.dirty and not force:
        return False, (
            "it holds uncommitted changes; commit them (to keep them on its branch) or "
            "clean with --force to drop them"
        )
    if facts.dirty:
        return True, "--force: its uncommitted changes were dropped"
    where = f" (its work is on branch {facts.branch})" if facts.branch else ""
    return True, f"nothing uncommitted{where}"


def branch_verdict(facts: BranchFacts, *, force: bool) -> tuple[bool, str]:
    """(remove, why) for a run's branch."""
    if facts.held_by is not None:
        return False, f"it is checked out in {facts.held_by}, which is not this run's worktree"
    if facts.unmerged == 0:
        return True, "merged: another branch holds all its commits"
    if facts.superseded_by is not None:
        return True, f"abandoned: attempt {facts.superseded_by} replaced it and merged"
    commits = f"{facts.unmerged} commit(s)"
    if force:
        return True, f"--force: dropped {commits} that no other branch holds"
    return False, (
        f"unmerged: {commits} that no other branch holds; merge them, or clean with "
        "--force to drop them"
    )


def _unmerged(repo: Repo, tip: str, own: Iterable[str]) -> int:
    """Commits reachable from ``tip`` and from no local branch except the run's ``own``."""
    excludes = [f"--exclude={name}" for name in own]
    out = repo.out("rev-list", "--count", tip, "--not", *excludes, "--branches")
    return int(out or 0)


def gather(
    repo: Repo,
    root: Path,
    branches: Mapping[str, str],
    superseded: Mapping[str, str] | None = None,
) -> tuple[list[WorktreeFacts], list[BranchFacts]]:
    """The facts for the worktrees under ``root`` and ``branches`` (name → commit)."""
    checked_out = repo.checked_out_branches()
    by_path = {os.path.realpath(p): b for b, p in checked_out.items()}
    trees = []
    if root.is_dir():
        for entry in sorted(root.iterdir()):
            if not entry.is_dir():
                continue
            dirty = (entry / ".git").exists() and Repo(str(entry)).is_dirty()
            trees.append(WorktreeFacts(str(entry), dirty, by_path.get(os.path.realpath(entry))))
    own_root = os.path.realpath(root)
    facts = []
    for name, tip in sorted(branches.items()):
        where = checked_out.get(name)
        mine = where is not None and os.path.realpath(where).startswith(own_root + os.sep)
        facts.append(
            BranchFacts(
                name=name,
                unmerged=_unmerged(repo, tip, branches),
                superseded_by=(superseded or {}).get(name),
                held_by=where if where is not None and not mine else None,
            )
        )
    return trees, facts


def sweep(
    repo: Repo,
    root: Path,
    trees: list[WorktreeFacts],
    branches: list[BranchFacts],
    *,
    force: bool,
) -> list[Leftover]:
    """Remove what the verdicts let go: worktrees first (a branch checked out in a kept
    worktree stays with it), then branches, then ``root`` when it is empty."""
    done: list[Leftover] = []
    kept_branches: dict[str, str] = {}
    for tree in trees:
        remove, why = worktree_verdict(tree, force=force)
        if remove:
            repo.remove_worktree(tree.path)
        elif tree.branch:
            kept_branches[tree.branch] = tree.path
        done.append(Leftover("worktree", tree.path, remove, why))
    for branch in branches:
        remove, why = branch_verdict(branch, force=force)
        if branch.name in kept_branches:
            remove, why = False, f"its worktree {kept_branches[branch.name]} is kept"
        if remove and not repo.delete_branch(branch.name):
            remove, why = False, "git refused to delete it"
        done.append(Leftover("branch", branch.name, remove, why))
    with contextlib.suppress(OSError):
        root.rmdir()
    return done


def repo_of(path: str) -> Repo | None:
    """The repository at ``path`` (a checkout or a subdirectory of one), or None."""
    try:
        repo = Repo(path)
        return Repo(repo.toplevel()) if repo.is_repo() else None
    except (GitError, OSError):
        return None
