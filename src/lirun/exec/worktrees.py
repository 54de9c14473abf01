"""Git worktrees under lirun's home, where orchestrated agents work side by side.

Flows (parallel legs) and shows (plays) give an agent its own worktree so parallel runs
never trample each other's files or take each other's changes as evidence. Worktrees
live under ``<home>/worktrees/<owner id>/<name>``, never inside the user's repository,
and never touch the user's checkout or current branch. Every call runs ``git`` with
a prompt-free, C-locale environment and raises ``GitError`` with git's own words.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from shutil import which

from lirun.errors import UsageError
from lirun.paths import lirun_home

__all__ = [
    "GitError",
    "Repo",
    "commit_leftovers",
    "worktrees_root",
]

GIT_TIMEOUT_SECONDS = 120.0
_FALLBACK_IDENTITY = ("-c", "user.name=lirun", "-c", "user.email=lirun@localhost")


class GitError(UsageError):
    """A git command failed; ``stderr`` holds git's message, ``args`` the command."""

    def __init__(self, message: str, *, argv: list[str] | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.argv = argv or []
        self.stderr = stderr


def worktrees_root() -> Path:
    """Where worktrees live: ``<home>/worktrees`` (read at call time)."""
    return lirun_home() / "worktrees"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


@dataclass(frozen=True, slots=True)
class Repo:
    """A git repository (or one of its worktrees) at ``path``."""

    path: str

    def run(
        self, *args: str, check: bool = True, timeout: float = GIT_TIMEOUT_SECONDS
    ) -> subprocess.CompletedProcess[str]:
        git = which("git")
        if git is None:
            raise GitError("git is not on PATH; install git")
        argv = [git, *args]
        try:
            proc = subprocess.run(
                argv,
                cwd=self.path,
                env=_env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise GitError(
                f"git {' '.join(args)} took over {timeout:.0f}s in {self.path}"
            ) from None
        except OSError as exc:
            raise GitError(f"cannot run git in {self.path}: {exc}") from None
        if check and proc.returncode != 0:
            first = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            detail = first[0] if first else f"exit {proc.returncode}"
            raise GitError(
                f"git {' '.join(args)} failed in {self.path}: {detail}",
                argv=argv,
                stderr=proc.stderr,
            )
        return proc

    def out(self, *args: str) -> str:
        return self.run(*args).stdout.strip()

    # -- questions --

    def is_repo(self) -> bool:
        if not os.path.isdir(self.path):
            return False
        proc = self.run("rev-parse", "--git-dir", check=False)
        return proc.returncode == 0

    def toplevel(self) -> str:
        return self.out("rev-parse", "--show-toplevel")

    def resolve(self, ref: str) -> str | None:
        """The commit ``ref`` names, or None when it names none."""
        proc = self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    def branch_head(self, branch: str) -> str | None:
        return self.resolve(f"refs/heads/{branch}")

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        return proc.returncode == 0

    def identity(self) -> tuple[str, ...]:
        """``-c user.*`` for lirun's own commits when the repository names nobody."""
        proc = self.run("config", "user.email", check=False)
        return () if proc.stdout.strip() else _FALLBACK_IDENTITY

    def is_dirty(self) -> bool:
        """Whether the worktree holds changes or untracked files git does not ignore."""
        return bool(self.out("status", "--porcelain"))

    def branches(self, prefix: str) -> dict[str, str]:
        """Local branch name → commit, for every branch whose name starts with ``prefix``."""
        found: dict[str, str] = {}
        listing = self.out("for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/")
        for line in listing.splitlines():
            sha, _, ref = line.partition(" ")
            name = ref[len("refs/heads/") :]
            if name.startswith(prefix):
                found[name] = sha
        return found

    def checked_out_branches(self) -> dict[str, str]:
        """Branch name → worktree path, for every worktree that has a branch checked out."""
        found: dict[str, str] = {}
        path = ""
        for line in self.out("worktree", "list", "--porcelain").splitlines():
            if line.startswith("worktree "):
                path = line[len("worktree ") :]
            elif line.startswith("branch refs/heads/"):
                found[line[len("branch refs/heads/") :]] = path
        return found

    # -- changes (never to the user's checkout) --

    def add_worktree(self, path: str | Path, branch: str, start: str) -> Repo:
        """A new worktree at ``path`` on a new ``branch`` from ``start``; its Repo."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.run("worktree", "add", "--quiet", "-b", branch, str(path), start)
        return Repo(str(path))

    def add_detached_worktree(self, path: str | Path, start: str) -> Repo:
        """A new worktree at ``path`` with ``start`` checked out detached (no branch)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.run("worktree", "add", "--quiet", "--detach", str(path), start)
        return Repo(str(path))

    def remove_worktree(self, path: str | Path) -> None:
        """Remove a worktree lirun made (its files too); a missing one is not an error."""
        if os.path.isdir(path):
            self.run("worktree", "remove", "--force", str(path), check=False)
            shutil.rmtree(path, ignore_errors=True)
        self.run("worktree", "prune", check=False)

    def delete_branch(self, branch: str) -> bool:
        """``git branch -D``; False when git refused (checked out somewhere) or it is gone."""
        return self.run("branch", "-D", "--quiet", branch, check=False).returncode == 0

    def update_ref(self, branch: str, new: str, old: str | None) -> bool:
        """Compare-and-swap ``refs/heads/<branch>`` from ``old`` (None: must not exist) to
        ``new``; False when the branch no longer points at ``old``."""
        expected = old if old is not None else "0" * 40
        proc = self.run("update-ref", f"refs/heads/{branch}", new, expected, check=False)
        return proc.returncode == 0


def commit_leftovers(path: str | Path, message: str) -> bool:
    """Commit what an agent left uncommitted in its worktree at ``path`` to the branch
    checked out there; True if it left any. Its work then lives on its branch."""
    if not Path(path).is_dir():
        return False
    wt = Repo(str(path))
    if not wt.is_dirty():
        return False
    wt.run("add", "-A")
    wt.run(*wt.identity(), "commit", "--quiet", "--no-verify", "-m", message)
    return True
