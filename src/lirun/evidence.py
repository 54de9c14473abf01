"""Git completion evidence (ADR D4): is the work tree dirty, or HEAD ahead of a base?

``checked=False`` means "no opinion" (no cwd, not a repository, no git, a probe failed) and
must never demote a completion. A repository without commits is still checked: its
working tree can be dirty, but ``ahead_of_base``/``commits_ahead`` are None.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import TypedDict

__all__ = [
    "BASE_CANDIDATES",
    "GIT_TIMEOUT_SECONDS",
    "CompletionEvidence",
    "check_completion_evidence",
]

# Probes are local-only and must stay cheap (ADR D4); read at call time so tests can patch it.
GIT_TIMEOUT_SECONDS = 5.0

# (ref to verify, name to report), tried after an explicit ref and origin's HEAD.
BASE_CANDIDATES: tuple[tuple[str, str], ...] = (
    ("refs/remotes/origin/main", "origin/main"),
    ("refs/remotes/origin/master", "origin/master"),
    ("refs/heads/main", "main"),
    ("refs/heads/master", "master"),
)

# Inherited repository overrides would make git look somewhere other than ``cwd``.
_DROPPED_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_PREFIX")


class CompletionEvidence(TypedDict):
    checked: bool
    ahead_of_base: bool | None
    commits_ahead: int | None
    dirty: bool | None
    base_ref: str | None
    reason: str


class _ProbeFailed(Exception):
    """Internal: a git call failed or timed out; the message is the evidence reason."""


@dataclass(frozen=True, slots=True)
class _Git:
    executable: str
    cwd: str
    env: dict[str, str]
    timeout: float

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                [self.executable, "-c", "core.fsmonitor=false", *args],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise _ProbeFailed(
                f"git {args[0]} timed out after {self.timeout:g}s; no opinion"
            ) from None
        except OSError as exc:
            raise _ProbeFailed(f"git could not be run ({exc.strerror or exc}); no opinion") from exc

    def ok(self, *args: str) -> str:
        """stdout of a git call that must succeed."""
        proc = self.run(*args)
        if proc.returncode != 0:
            detail = _first_line(proc.stderr) or f"exit {proc.returncode}"
            raise _ProbeFailed(f"git {args[0]} failed: {detail}; no opinion")
        return proc.stdout

    def commit_exists(self, ref: str) -> bool:
        return self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode == 0


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    # GIT_OPTIONAL_LOCKS=0 keeps `git status` from taking index.lock under a running agent.
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_OPTIONAL_LOCKS="0")
    return env


def _no_opinion(reason: str) -> CompletionEvidence:
    return {
        "checked": False,
        "ahead_of_base": None,
        "commits_ahead": None,
        "dirty": None,
        "base_ref": None,
        "reason": reason,
    }


def _open_repo(cwd: str | None) -> _Git | CompletionEvidence:
    if cwd is None or cwd == "":
        return _no_opinion("no working directory given")
    if not os.path.isdir(cwd):
        return _no_opinion(f"working directory {cwd} does not exist")
    executable = shutil.which("git")
    if executable is None:
        return _no_opinion("git is not on PATH")
    return _Git(executable, cwd, _git_env(), GIT_TIMEOUT_SECONDS)


def _ensure_work_tree(git: _Git) -> None:
    proc = git.run("rev-parse", "--is-inside-work-tree")
    if proc.returncode != 0 and "not a git repository" in proc.stderr:
        raise _ProbeFailed(f"{git.cwd} is not in a git repository")
    if proc.returncode != 0:
        raise _ProbeFailed(f"git rev-parse failed: {_first_line(proc.stderr)}; no opinion")
    if proc.stdout.strip() != "true":
        raise _ProbeFailed(f"{git.cwd} is not inside a git work tree")


def _resolve_base(git: _Git, base_ref: str | None) -> str | None:
    # A leading '-' would be read as an option, so such a ref is never valid.
    if base_ref and not base_ref.startswith("-") and git.commit_exists(base_ref):
        return base_ref
    remote_head = git.run("symbolic-ref", "--quiet", "refs/remotes/origin/HEAD")
    if remote_head.returncode == 0:
        ref = remote_head.stdout.strip()
        if ref and git.commit_exists(ref):
            return ref.removeprefix("refs/remotes/")
    for ref, name in BASE_CANDIDATES:
        if git.commit_exists(ref):
            return name
    return None


def _commits_ahead(git: _Git, base: str) -> int:
    out = git.ok("rev-list", "--count", f"{base}..HEAD")
    try:
        return int(out.strip())
    except ValueError:
        raise _ProbeFailed(f"git rev-list printed {out.strip()!r}; no opinion") from None


def _summary(dirty: bool, ahead: int | None, base: str | None, note: str) -> str:
    tree = "dirty working tree" if dirty else "clean working tree"
    if base is not None:
        return f"{tree}; {ahead} commit(s) ahead of {base}"
    return f"{tree}; {note or 'no base ref found'}"


def _probe(git: _Git, base_ref: str | None) -> CompletionEvidence:
    _ensure_work_tree(git)
    dirty = git.ok("status", "--porcelain").strip() != ""
    if not git.commit_exists("HEAD"):
        return {
            "checked": True,
            "ahead_of_base": None,
            "commits_ahead": None,
            "dirty": dirty,
            "base_ref": None,
            "reason": _summary(dirty, None, None, "no commits yet"),
        }
    base = _resolve_base(git, base_ref)
    ahead = _commits_ahead(git, base) if base is not None else None
    note = f"base ref {base_ref!r} not found" if base_ref and base != base_ref else ""
    reason = _summary(dirty, ahead, base, "")
    return {
        "checked": True,
        "ahead_of_base": None if ahead is None else ahead > 0,
        "commits_ahead": ahead,
        "dirty": dirty,
        "base_ref": base,
        "reason": f"{reason} ({note})" if note else reason,
    }


def check_completion_evidence(
    cwd: str | os.PathLike[str] | None,
    *,
    base_ref: str | None = None,
) -> CompletionEvidence:
    """Probe ``cwd`` with local git calls (each bounded by ``GIT_TIMEOUT_SECONDS``).

    Base: ``base_ref`` if it names a commit, else origin's HEAD, origin/main,
    origin/master, main, master. With no base, only ``dirty`` is reported.
    """
    opened = _open_repo(None if cwd is None else os.fspath(cwd))
    if not isinstance(opened, _Git):
        return opened
    try:
        return _probe(opened, base_ref)
    except _ProbeFailed as exc:
        return _no_opinion(str(exc))
