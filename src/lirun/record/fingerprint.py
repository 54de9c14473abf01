"""Bounded fingerprints of a working tree, so teardown can tell what changed during a run.

Two kinds, one digest each: the content of a list of paths (in git: the paths that
``git status`` reports, tracked changes and untracked files) and a walk of a plain
directory (paths, sizes, mtimes). Both stop at ``MAX_FILES`` entries or ``MAX_SECONDS``;
a fingerprint that stopped says so in ``capped`` and only proves a change, never its
absence (see :func:`compare`).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "MAX_FILES",
    "MAX_SECONDS",
    "Fingerprint",
    "compare",
    "content_id",
    "of_paths",
    "of_tree",
]

# The bound for a start snapshot: cheap enough to take before every run.
MAX_FILES = 20_000
MAX_SECONDS = 2.0
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Fingerprint:
    digest: str
    files: int
    capped: str | None = None


class _Budget:
    """Counts entries and watches the clock; ``stop`` names the cap that was hit."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.deadline = clock() + MAX_SECONDS
        self.files = 0
        self.stop: str | None = None

    def take(self) -> bool:
        if self.files >= MAX_FILES:
            self.stop = f"stopped at {MAX_FILES} files"
        elif self.clock() > self.deadline:
            self.stop = f"stopped after {MAX_SECONDS:g} s ({self.files} files)"
        else:
            self.files += 1
        return self.stop is None


def content_id(path: str) -> str:
    """A short content identity: sha256 of a file, a link's target, or the entry's kind."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if not stat.S_ISREG(st.st_mode):
        return f"special:{stat.S_IFMT(st.st_mode)}"
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    return digest.hexdigest()


def of_paths(
    root: str,
    entries: Iterable[tuple[str, str]],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Fingerprint:
    """Digest of ``(label, relative path)`` entries and each path's content under ``root``."""
    budget, digest = _Budget(clock), hashlib.sha256()
    for label, rel in sorted(entries):
        if not budget.take():
            break
        digest.update(
            f"{label}\0{rel}\0{content_id(os.path.join(root, rel))}\n".encode(
                "utf-8", "surrogateescape"
            )
        )
    return Fingerprint(digest.hexdigest(), budget.files, budget.stop)


def _walk(root: str, skip: frozenset[str]) -> Iterator[tuple[str, os.stat_result]]:
    """Entries under ``root`` in a stable order; symlinks are not followed, ``.git`` is skipped."""
    stack = [root]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as it:
                found = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for entry in found:
            if entry.name == ".git" or entry.path in skip:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry.path, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)


def of_tree(
    root: str,
    *,
    exclude: Iterable[str] = (),
    clock: Callable[[], float] = time.monotonic,
) -> Fingerprint:
    """Digest of every entry under ``root``: relative path, kind, size and mtime."""
    skip = frozenset(os.path.abspath(p) for p in exclude)
    budget, digest = _Budget(clock), hashlib.sha256()
    base = os.path.abspath(root)
    prefix = len(os.path.join(base, ""))  # entries are base + sep + relative path
    for path, st in _walk(base, skip):
        if not budget.take():
            break
        kind = "d" if stat.S_ISDIR(st.st_mode) else "f"
        size = 0 if kind == "d" else st.st_size
        mtime = 0 if kind == "d" else st.st_mtime_ns
        rel = path[prefix:]
        digest.update(f"{rel}\0{kind}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    return Fingerprint(digest.hexdigest(), budget.files, budget.stop)


def compare(before: Fingerprint, after: Fingerprint) -> bool | None:
    """True: changed; False: unchanged; None: cannot tell (a capped walk saw equal parts).

    Two capped walks over the same number of entries cover the same stable prefix, so a
    difference there is a real change; equality there says nothing about the rest.
    """
    if before.capped is None and after.capped is None:
        return before.digest != after.digest
    if before.files == after.files and before.digest != after.digest:
        return True
    return None
