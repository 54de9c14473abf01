"""Resolving a declared path under the artifact root without ever leaving it.

Symlinks are followed one component at a time while they stay inside the root, so
nothing outside is ever stat'ed (artifacts.py's trust boundary).
"""

from __future__ import annotations

import os
import stat
from collections import deque
from pathlib import Path

__all__ = ["Unresolvable", "lstat_or_none", "root_aliases", "walk_inside"]

_MAX_SYMLINK_HOPS = 40


class Unresolvable(Exception):
    """A path escapes the root or loops; the message says which."""


def root_aliases(given: str | os.PathLike[str], real: Path) -> tuple[tuple[str, ...], ...]:
    absolute = Path(os.path.abspath(Path(given).expanduser()))
    return tuple(dict.fromkeys([real.parts, absolute.parts]))


def walk_inside(
    root: Path, rel: str, aliases: tuple[tuple[str, ...], ...] = ()
) -> tuple[Path, os.stat_result | None]:
    """Resolve ``rel`` under the real directory ``root`` one component at a time.

    Symlinks are followed only while they stay inside ``root`` (absolute targets must
    start with ``root`` or one of ``aliases``); nothing outside is ever stat'ed.
    Returns the physical path and its lstat (None if it does not exist).
    """
    prefixes = (root.parts, *aliases)
    pending: deque[str] = deque(Path(rel).parts)
    done: list[str] = []
    exists, hops = True, 0
    while pending:
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if not done:
                raise Unresolvable("escapes the artifact root")
            done.pop()
            continue
        link = root.joinpath(*done, part)
        st = lstat_or_none(link) if exists else None
        if st is not None and stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > _MAX_SYMLINK_HOPS:
                raise Unresolvable("has too many levels of symbolic links")
            target = Path(os.readlink(link))
            if target.is_absolute():
                done = []
                target = Path(*_strip_root(target, prefixes))
            pending.extendleft(reversed(target.parts))
            continue
        exists = st is not None
        done.append(part)
    path = root.joinpath(*done)
    return path, (lstat_or_none(path) if exists and done else None)


def lstat_or_none(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (OSError, ValueError):
        return None


def _strip_root(target: Path, prefixes: tuple[tuple[str, ...], ...]) -> tuple[str, ...]:
    parts = target.parts
    for prefix in prefixes:
        if parts[: len(prefix)] == prefix:
            return parts[len(prefix) :]
    raise Unresolvable("is a symlink to a location outside the artifact root")
