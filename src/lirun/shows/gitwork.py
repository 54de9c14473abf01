"""The git side of a show: play worktrees, the merge result a gate runs on, the ref move.

Everything happens under ``<home>/worktrees/<show id>/`` (one worktree per play, one
for gates) and on branches lirun names: ``<integration>--<play>-a<N>`` per attempt and
the integration branch itself, which moves only by a compare-and-swap ``update-ref``
to a merge commit whose gate passed. The user's checkout, current branch and base
branch are never touched. Commands that change the shared repository (worktrees,
refs) are serialized by one lock: plays prepare in parallel threads.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path

from lirun.exec.worktrees import GitError, Repo, commit_leftovers, worktrees_root
from lirun.store.rows import ShowRow

__all__ = ["GATE_DIR", "Merge", "ShowGit", "attempt_branch", "current_head"]

GATE_DIR = ".gate"  # play names never start with a dot: no play can own this path


def current_head(show: ShowRow) -> str | None:
    """The commit the show's integration branch is at now, as git says (a person may
    have moved it by hand since lirun recorded it; None when the branch is gone). The
    recorded ``integration_head`` when the repository cannot be read."""
    recorded = show.integration_head
    repo, branch = show.repo, show.integration
    if not repo or not branch:
        return recorded
    try:
        found = Repo(str(repo))
        return found.branch_head(str(branch)) if found.is_repo() else recorded
    except (GitError, OSError):
        return recorded


def attempt_branch(integration: str, play: str, attempt: int) -> str:
    """``<integration>--<play>-a<N>``: beside the integration branch, never under it (git
    cannot hold ``x`` and ``x/y`` as branches at once)."""
    return f"{integration}--{play}-a{attempt}"


@dataclass(frozen=True, slots=True)
class Merge:
    """The merge of a play branch into ``base``: ``sha`` of the merge commit, or the
    conflicting paths, or ``up_to_date`` when the branch brings nothing."""

    base: str
    sha: str | None = None
    conflicts: tuple[str, ...] = ()
    up_to_date: bool = False


class ShowGit:
    """Git work for one show in ``repo`` (the user's repository, never its checkout)."""

    def __init__(self, repo: str, show_id: str, integration: str) -> None:
        self.repo = Repo(repo)
        self.show_id = show_id
        self.integration = integration
        self.root = worktrees_root() / show_id
        self.lock = threading.Lock()
        self._identity: tuple[str, ...] | None = None

    # -- names and questions --

    def play_path(self, play: str) -> Path:
        return self.root / play

    @property
    def gate_path(self) -> Path:
        return self.root / GATE_DIR

    def head(self) -> str | None:
        """The integration branch's commit, or None when it does not exist."""
        return self.repo.branch_head(self.integration)

    def identity(self) -> tuple[str, ...]:
        """``-c user.*`` for lirun's own commits when the repository names nobody."""
        if self._identity is None:
            self._identity = self.repo.identity()
        return self._identity

    # -- play worktrees --

    def prepare(self, play: str, branch: str, start: str) -> Path:
        """The play's worktree on ``branch`` reset to ``start``: created the first time,
        the same path reset for a redo (an agent CLI finds its conversation by path)."""
        path = self.play_path(play)
        with self.lock:
            if (path / ".git").exists():
                try:
                    wt = Repo(str(path))
                    wt.run("checkout", "--quiet", "--force", "-B", branch, start)
                    wt.run("clean", "-fdq")
                    return path
                except GitError:
                    pass  # a worktree git no longer knows (pruned, half made): make it anew
            self._fresh(path)
            self.repo.run("worktree", "add", "--quiet", "-B", branch, str(path), start)
        return path

    def _fresh(self, path: Path) -> None:
        """Clear ``path`` (lirun's own, under its home) for a new worktree."""
        self.repo.remove_worktree(path)
        path.parent.mkdir(parents=True, exist_ok=True)

    def commit_leftovers(self, path: str | Path, message: str) -> bool:
        """Commit what the agent left uncommitted in its worktree; True if it left any."""
        return commit_leftovers(path, message)

    def adopt_head(self, path: str | Path, branch: str) -> bool:
        """Put ``branch`` back under the worktree's HEAD when the agent committed on a
        branch of its own or a detached HEAD on top of it (agents do): its work is what
        HEAD holds. True if ``branch`` moved; a HEAD that does not build on it is left."""
        if not Path(path).is_dir():
            return False
        wt = Repo(str(path))
        head, tip = wt.out("rev-parse", "HEAD"), self.repo.branch_head(branch)
        if tip is None or not self.repo.is_ancestor(tip, head):
            return False
        if wt.out("rev-parse", "--abbrev-ref", "HEAD") != branch:
            wt.run("checkout", "--quiet", "-B", branch, head)
        return head != tip

    def remove_play(self, play: str, branches: list[str]) -> None:
        """Remove the play's worktree and its attempt branches (after it merged)."""
        with self.lock:
            self.repo.remove_worktree(self.play_path(play))
            for branch in branches:
                self.repo.run("branch", "-D", "--quiet", branch, check=False)

    # -- the gate worktree --

    def _gate_at(self, commit: str) -> Repo:
        path = self.gate_path
        if (path / ".git").exists():
            gate = Repo(str(path))
            try:
                gate.run("merge", "--abort", check=False)  # a crash may have left one
                gate.run("checkout", "--quiet", "--force", "--detach", commit)
                gate.run("clean", "-fdq")
                return gate
            except GitError:
                pass  # a worktree git no longer knows: make it anew
        with self.lock:
            self._fresh(path)
            return self.repo.add_detached_worktree(path, commit)

    def checkout_gate(self, commit: str) -> Path:
        """The gate worktree with ``commit`` checked out (detached): the final gate."""
        self._gate_at(commit)
        return self.gate_path

    def merge_candidate(self, branch: str, base: str, message: str) -> Merge:
        """In the gate worktree: ``git merge --no-ff branch`` into ``base`` (one merge
        commit per play). A conflict is aborted and reported with its paths."""
        if self.repo.is_ancestor(branch, base):
            return Merge(base, up_to_date=True)
        gate = self._gate_at(base)
        proc = gate.run(
            *self.identity(),
            "merge",
            "--no-ff",
            "--no-verify",
            "--quiet",
            "-m",
            message,
            branch,
            check=False,
        )
        if proc.returncode != 0:
            paths = gate.out("diff", "--name-only", "--diff-filter=U").splitlines()
            gate.run("merge", "--abort", check=False)
            if not paths:
                raise GitError(f"git merge {branch} failed: {proc.stderr.strip() or proc.stdout}")
            return Merge(base, conflicts=tuple(paths))
        return Merge(base, sha=gate.out("rev-parse", "HEAD"))

    def remove_gate(self) -> None:
        """Remove the gate worktree, and the show's directory once no play keeps one."""
        with self.lock:
            self.repo.remove_worktree(self.gate_path)
            with contextlib.suppress(OSError):  # a play's worktree is kept there, or none is
                self.root.rmdir()

    # -- the integration branch --

    def move_integration(self, new: str, old: str | None) -> bool:
        """Compare-and-swap the integration branch from ``old`` to ``new``."""
        with self.lock:
            return self.repo.update_ref(self.integration, new, old)

    def changed_paths(self, old: str | None, new: str) -> list[str]:
        """The paths that differ between ``old`` and ``new`` (all of ``new``'s when
        ``old`` is None); [] when git cannot tell."""
        args = ("diff", "--name-only", old, new) if old else ("ls-tree", "-r", "--name-only", new)
        proc = self.repo.run(*args, check=False)
        return proc.stdout.splitlines() if proc.returncode == 0 else []
