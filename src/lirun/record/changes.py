"""What changed in a git work tree since a run's start, counted (docs/outcome.md §1).

``changed`` (evidence.py) says whether anything changed; this module says how much, so a
reader can tell a run that committed from one that only replied: the first commits made
since the start (short ids, at most ``MAX_COMMIT_IDS``) and how many files differ from
the start, committed or not.

A file counts when its content now differs from its content at the start: for a file
``git status`` reported at the start (``dirty_at_start``: its content id then), that
content; for any other, the start commit's. ``dirty_at_start`` is kept only up to
``MAX_DIRTY_AT_START`` paths; above that (or when the start had none) the count is
unknown (None). Every git call goes through the caller's bounded runner.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TypedDict

from lirun.record.fingerprint import content_id

__all__ = [
    "MAX_COMMIT_IDS",
    "MAX_DIRTY_AT_START",
    "Counted",
    "GitCallFailed",
    "commit_ids",
    "counted",
    "dirty_at_start",
    "files_changed",
]

MAX_COMMIT_IDS = 3
MAX_DIRTY_AT_START = 256
_ID_CHARS = 16  # of a content id: enough to tell two versions of one file apart

# stdout of a git call that must succeed (evidence._Git.ok: bounded by its timeout).
GitOut = Callable[..., str]


class GitCallFailed(Exception):
    """A git call failed or timed out (the evidence probe's own failure is one)."""


class Counted(TypedDict):
    commit_ids: list[str]
    files_changed: int | None


def _id(top: str, path: str) -> str:
    return content_id(os.path.join(top, path))[:_ID_CHARS]


def dirty_at_start(top: str, entries: Iterable[tuple[str, str]]) -> dict[str, str] | None:
    """``{path: content id}`` of what ``git status`` reports at the start; None above the bound."""
    paths = sorted({path for _, path in entries})
    if len(paths) > MAX_DIRTY_AT_START:
        return None
    return {path: _id(top, path) for path in paths}


def commit_ids(ok: GitOut, head_at_start: str | None) -> list[str]:
    """The newest ``MAX_COMMIT_IDS`` commits reachable from HEAD and not from the start's
    (asked only when there are some: HEAD exists)."""
    since = [] if head_at_start is None else [f"^{head_at_start}"]
    out = ok("rev-list", f"--max-count={MAX_COMMIT_IDS}", "--abbrev-commit", "HEAD", *since)
    return [line.strip() for line in out.splitlines() if line.strip()]


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def files_changed(
    ok: GitOut,
    top: str,
    start: Mapping[str, object],
    now: Iterable[tuple[str, str]],
    roots: tuple[str, ...],
) -> int | None:
    """How many files differ from the start; None when the start kept no per-file ids.

    ``now``: ``(XY, path)`` of ``git status`` at teardown (li's own roots already left
    out); the tracked files that differ from the start commit come from one
    ``git diff --name-only`` against it (the empty tree when the start had no commit).
    """
    before = start.get("dirty_at_start")
    if not isinstance(before, Mapping):
        return None
    base = start.get("head")
    if not isinstance(base, str) or not base:
        base = ok("hash-object", "-t", "tree", "/dev/null").strip()
    names = {n for n in ok("diff", "--name-only", "-z", "--no-renames", base, "--").split("\0")}
    names |= {path for label, path in now if label == "??"}
    changed = {
        n
        for n in names
        if n and n not in before and not _under(os.path.abspath(os.path.join(top, n)), roots)
    }
    changed |= {path for path, was in before.items() if _id(top, path) != was}
    return len(changed)


def counted(
    ok: GitOut,
    top: str,
    start: Mapping[str, object],
    now: Iterable[tuple[str, str]],
    roots: tuple[str, ...],
    commits: int,
) -> Counted:
    """The commits' first ids and the files changed; a git call that fails here leaves
    them unknown and never costs the comparison it adds to."""
    try:
        head = start.get("head")
        ids = commit_ids(ok, head if isinstance(head, str) else None) if commits else []
        return {"commit_ids": ids, "files_changed": files_changed(ok, top, start, now, roots)}
    except GitCallFailed:
        return {"commit_ids": [], "files_changed": None}
