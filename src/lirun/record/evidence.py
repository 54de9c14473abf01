"""Completion evidence (design.md D4, §4.9): what changed in the cwd during the run.

``take_start_snapshot`` runs before the work starts: in git, HEAD, branch and a fingerprint
of the working tree (tracked changes and untracked files by content, ignored files
excluded); outside git, a bounded fingerprint of the cwd (paths, sizes, mtimes).
``check_completion_evidence(..., start=snapshot)`` compares against it at teardown:
``changed`` is True for commits reachable from HEAD now that were not at start, or a
fingerprint that moved; None when it cannot tell (the reason says why). The ADR's fields
(``dirty``, ``commits_ahead`` of a base) are still reported, for readers; in git, so are
the first commits' ids and how many files changed (``changes``).

``checked=False`` means "no opinion" (no cwd, not a repository without a start snapshot,
no git, a probe failed) and must never demote a completion. Without ``start`` the ADR's
rule stands: dirty or ahead of a base. A repository without commits is still checked.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from shutil import which
from typing import NotRequired, TypedDict

from lirun.record import changes, fingerprint
from lirun.record.fingerprint import Fingerprint

__all__ = [
    "BASE_CANDIDATES",
    "GIT_TIMEOUT_SECONDS",
    "CompletionEvidence",
    "StartSnapshot",
    "check_completion_evidence",
    "take_start_snapshot",
    "unchecked_snapshot",
]

# Probes are local-only and must stay cheap (design.md D4); read at call time so tests can patch it.
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
    """The ADR's six fields, then what changed since the start snapshot (when there was one)."""

    checked: bool
    ahead_of_base: bool | None
    commits_ahead: int | None
    dirty: bool | None
    base_ref: str | None
    reason: str
    since_start: NotRequired[bool]
    scope: NotRequired[str | None]
    changed: NotRequired[bool | None]
    commits_since_start: NotRequired[int | None]
    tree_changed: NotRequired[bool | None]
    head_at_start: NotRequired[str | None]
    head: NotRequired[str | None]
    branch_at_start: NotRequired[str | None]
    branch: NotRequired[str | None]
    capped: NotRequired[str | None]
    commit_ids: NotRequired[list[str]]
    files_changed: NotRequired[int | None]


class StartSnapshot(TypedDict):
    """The cwd when the run started. ``scope``: "git", "dir", or None when not ``checked``."""

    checked: bool
    scope: str | None
    taken_at: float
    head: str | None
    branch: str | None
    fingerprint: str | None
    files: int | None
    capped: str | None
    reason: str
    excluded: NotRequired[list[str]]
    dirty_at_start: NotRequired[dict[str, str] | None]


class _ProbeFailed(changes.GitCallFailed):
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
    executable = which("git")
    if executable is None:
        return _no_opinion("git is not on PATH")
    return _Git(executable, cwd, _git_env(), GIT_TIMEOUT_SECONDS)


def _inside_any_repo(path: str) -> bool:
    """False when no ``.git`` exists in ``path`` or above it: git would say "not a git
    repository" (GIT_DIR and friends are dropped from its environment), and asking it
    costs a process start on every run outside git."""
    current = os.path.abspath(path)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return True
        parent = os.path.dirname(current)
        if parent == current:
            return False
        current = parent


def _ensure_work_tree(git: _Git) -> None:
    if not _inside_any_repo(git.cwd):
        raise _ProbeFailed(f"{git.cwd} is not in a git repository")
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


# --- the start snapshot --------------------------------------------------------------------


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def _status_entries(git: _Git, exclude: tuple[str, ...]) -> tuple[str, list[tuple[str, str]]]:
    """(top level, [(XY, path)]) of ``git status``: tracked changes and untracked files."""
    top = git.ok("rev-parse", "--show-toplevel").strip()
    out = git.ok("status", "--porcelain=v1", "-z", "--untracked-files=all")
    tokens, entries = iter(out.split("\0")), []
    for token in tokens:
        if len(token) < 4:
            continue
        label, path = token[:2], token[3:]
        if label[0] in "RC":
            next(tokens, None)  # the rename's source path follows
        if not _under(os.path.abspath(os.path.join(top, path)), exclude):
            entries.append((label, path))
    return top, entries


def _head(git: _Git) -> str | None:
    proc = git.run("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def _branch(git: _Git) -> str | None:
    proc = git.run("symbolic-ref", "--quiet", "--short", "HEAD")
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def _snapshot(
    checked: bool,
    scope: str | None,
    reason: str,
    *,
    head: str | None = None,
    branch: str | None = None,
    tree: Fingerprint | None = None,
    excluded: tuple[str, ...] = (),
) -> StartSnapshot:
    return {
        "excluded": list(excluded),
        "checked": checked,
        "scope": scope,
        "taken_at": time.time(),
        "head": head,
        "branch": branch,
        "fingerprint": tree.digest if tree else None,
        "files": tree.files if tree else None,
        "capped": tree.capped if tree else None,
        "reason": reason,
    }


def unchecked_snapshot(reason: str) -> StartSnapshot:
    """A start snapshot that could not be taken, and why (teardown then has no opinion)."""
    return _snapshot(False, None, reason)


def _is_repo(git: _Git) -> bool:
    """True in a git work tree, False outside any repository; raises when git cannot tell."""
    try:
        _ensure_work_tree(git)
    except _ProbeFailed as exc:
        if "not in a git repository" in str(exc):
            return False
        raise
    return True


def _roots(exclude: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    return tuple(os.path.abspath(os.fspath(p)) for p in exclude)


def take_start_snapshot(
    cwd: str | os.PathLike[str] | None,
    *,
    exclude: Iterable[str | os.PathLike[str]] = (),
) -> StartSnapshot:
    """The cwd before the work starts (bounded: git probes and ``fingerprint`` caps).

    ``exclude``: roots never fingerprinted (li's own files), recorded as ``excluded`` and
    left out again at teardown. Never raises: a snapshot that could not be taken has
    ``checked=False`` and the cause in ``reason``.
    """
    roots = _roots(exclude)
    where = None if cwd is None else os.fspath(cwd)
    opened = _open_repo(where)
    try:
        if isinstance(opened, _Git) and _is_repo(opened):
            top, entries = _status_entries(opened, roots)
            tree = fingerprint.of_paths(top, entries)
            head, branch = _head(opened), _branch(opened)
            label = f"HEAD {head[:12] if head else '(no commits)'} on {branch or 'detached HEAD'}"
            taken = _snapshot(
                True, "git", label, head=head, branch=branch, tree=tree, excluded=roots
            )
            return {**taken, "dirty_at_start": changes.dirty_at_start(top, entries)}
    except _ProbeFailed as exc:
        return _snapshot(False, None, str(exc))
    if where is None or not os.path.isdir(where):
        return _snapshot(False, None, opened["reason"] if isinstance(opened, dict) else "")
    tree = fingerprint.of_tree(where, exclude=roots)
    label = f"{tree.files} entries outside git"
    return _snapshot(True, "dir", label, tree=tree, excluded=roots)


def _start_tree(start: StartSnapshot) -> Fingerprint:
    return Fingerprint(
        str(start.get("fingerprint")), int(start.get("files") or 0), start.get("capped")
    )


# --- compared at teardown -------------------------------------------------------------------


def _commits_since(git: _Git, head_at_start: str | None) -> int:
    if not git.commit_exists("HEAD"):
        return 0
    args = ["HEAD"] if head_at_start is None else ["HEAD", f"^{head_at_start}"]
    out = git.ok("rev-list", "--count", *args)
    try:
        return int(out.strip())
    except ValueError:
        raise _ProbeFailed(f"git rev-list printed {out.strip()!r}; no opinion") from None


def _change_label(
    commits: int | None, tree_changed: bool | None, capped: str | None, what: str
) -> str:
    parts = []
    if commits is not None:
        parts.append(f"{commits} commit(s) since start")
    if tree_changed is None:
        parts.append(f"{what} change unknown (fingerprint {capped or 'not comparable'})")
    else:
        parts.append(f"{what} changed" if tree_changed else f"{what} unchanged")
    return ", ".join(parts)


def _any_change(commits: int | None, tree_changed: bool | None) -> bool | None:
    if commits:
        return True
    return tree_changed


def _since_start_git(
    git: _Git, start: StartSnapshot, base_ref: str | None, roots: tuple[str, ...]
) -> CompletionEvidence:
    adr = _probe(git, base_ref)
    top, entries = _status_entries(git, roots)
    tree = fingerprint.of_paths(top, entries)
    tree_changed = fingerprint.compare(_start_tree(start), tree)
    commits = _commits_since(git, start.get("head"))
    capped = tree.capped or start.get("capped")
    changed = _any_change(commits, tree_changed)
    label = _change_label(commits, tree_changed, capped, "working tree")
    return {
        **adr,
        "since_start": True,
        "scope": "git",
        "changed": changed,
        "commits_since_start": commits,
        "tree_changed": tree_changed,
        "head_at_start": start.get("head"),
        "head": _head(git),
        "branch_at_start": start.get("branch"),
        "branch": _branch(git),
        "capped": capped,
        **changes.counted(git.ok, top, start, entries, roots, commits),
        "reason": f"{label} ({adr['reason']})",
    }


def _since_start_dir(
    where: str, start: StartSnapshot, roots: tuple[str, ...]
) -> CompletionEvidence:
    tree = fingerprint.of_tree(where, exclude=roots)
    tree_changed = fingerprint.compare(_start_tree(start), tree)
    capped = tree.capped or start.get("capped")
    return {
        "checked": True,
        "ahead_of_base": None,
        "commits_ahead": None,
        "dirty": None,
        "base_ref": None,
        "since_start": True,
        "scope": "dir",
        "changed": tree_changed,
        "commits_since_start": None,
        "tree_changed": tree_changed,
        "capped": capped,
        "reason": f"not a git repository; {_change_label(None, tree_changed, capped, 'files')}",
    }


def _since_start(
    cwd: str | None, start: StartSnapshot, base_ref: str | None, roots: tuple[str, ...]
) -> CompletionEvidence:
    if not start.get("checked"):
        cause = start.get("reason") or "unknown cause"
        return {**_no_opinion(f"no start snapshot ({cause}); no opinion"), "since_start": True}
    opened = _open_repo(cwd)
    if not isinstance(opened, _Git) and start.get("scope") == "git":
        return {**opened, "since_start": True}
    if start.get("scope") == "dir":
        if cwd is None or not os.path.isdir(cwd):
            return {**_no_opinion(f"working directory {cwd} does not exist"), "since_start": True}
        return _since_start_dir(cwd, start, roots)
    assert isinstance(opened, _Git)
    try:
        return _since_start_git(opened, start, base_ref, roots)
    except _ProbeFailed as exc:
        return {**_no_opinion(str(exc)), "since_start": True}


def check_completion_evidence(
    cwd: str | os.PathLike[str] | None,
    *,
    base_ref: str | None = None,
    start: StartSnapshot | None = None,
    exclude: Iterable[str | os.PathLike[str]] = (),
) -> CompletionEvidence:
    """Probe ``cwd`` with local git calls (each bounded by ``GIT_TIMEOUT_SECONDS``).

    Base: ``base_ref`` if it names a commit, else origin's HEAD, origin/main,
    origin/master, main, master. With no base, only ``dirty`` is reported. With ``start``
    (from :func:`take_start_snapshot`), ``changed`` says what happened since then.
    """
    where = None if cwd is None else os.fspath(cwd)
    if start is not None:
        roots = _roots([*start.get("excluded", ()), *exclude])
        return _since_start(where, start, base_ref, roots)
    opened = _open_repo(where)
    if not isinstance(opened, _Git):
        return opened
    try:
        return _probe(opened, base_ref)
    except _ProbeFailed as exc:
        return _no_opinion(str(exc))
