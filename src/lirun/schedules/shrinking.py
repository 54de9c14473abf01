"""An event too large to store, shrunk to fit (docs/schedules.md, "Large events"). Pure.

A webhook's body or a polled item may be larger than one stored event may be
(``events.MAX_EVENT_BYTES``; a GitHub pull request payload with a long description is).
``shrink`` keeps every field it can: it replaces values by a marker (``[dropped: N
bytes]``), largest first, until the event's compact JSON fits, and lists the paths it
dropped under ``_truncated`` (``["pull_request.body", "commits.3"]``; an array's items
by index). Within a value that must lose less than its whole self, the largest of its
own values goes first, so one long text costs only that text; a value made of many
small ones (more than ``MAX_CUTS_PER_VALUE`` would have to go) is dropped whole, so
``_truncated`` stays short. Top-level scalars of at most ``SHORT_SCALAR`` bytes (a
number, a title, a URL) are dropped only when nothing else is left to drop.
"""

from __future__ import annotations

import json
from typing import Any

TRUNCATED = "_truncated"
SHORT_SCALAR = 1024
MAX_CUTS_PER_VALUE = 32
MAX_PATHS = 100
_ROUNDS = 6

Cut = tuple[Any, int, list[str]]  # the value as cut, the bytes it saved, the paths dropped


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def compact(value: Any) -> str:
    """The stored form: compact JSON, keys sorted, ASCII (so characters are bytes)."""
    return _ENCODER.encode(value)


def _size(value: Any) -> int:
    return len(compact(value))


def marker(size: int) -> str:
    """What a dropped value becomes: its size, so a reader knows what was there."""
    return f"[dropped: {size:,} bytes]"


# A value no longer than the shortest marker saves nothing when dropped.
_MIN_MARKER = len(compact(marker(0)))


def _drop(value: Any, size: int, path: str) -> Cut:
    mark = marker(size)
    return mark, size - _size(mark), [path]


def _cut(value: dict[str, Any] | list[Any], need: int, path: str) -> Cut:
    """``value`` (nested at ``path``) less at least ``need`` bytes: its largest values
    cut into or dropped first; dropped whole when only many small values are left."""
    keys: list[Any] = list(value) if isinstance(value, dict) else list(range(len(value)))
    sizes = {key: _size(value[key]) for key in keys}
    out: Any = dict(value) if isinstance(value, dict) else list(value)
    saved, dropped = 0, list[str]()
    for key in sorted(keys, key=lambda k: (-sizes[k], str(k))):
        remaining = need - saved
        if remaining <= 0 or sizes[key] * MAX_CUTS_PER_VALUE < remaining:
            break
        new, got, paths = _shrink_child(value[key], sizes[key], remaining, f"{path}.{key}")
        if got > 0:
            out[key], saved = new, saved + got
            dropped.extend(paths)
    if saved < need:
        return _drop(value, _size(value), path)
    return out, saved, dropped


def _shrink_child(child: Any, size: int, need: int, path: str) -> Cut:
    if isinstance(child, dict | list) and child and need < size:
        return _cut(child, need, path)
    return _drop(child, size, path)


def _cut_top(data: dict[str, Any], sizes: dict[str, int], need: int) -> Cut:
    """The event less at least ``need`` bytes (or less all it can): containers and long
    scalars first, largest first; short top-level scalars last."""
    out = dict(data)
    saved, dropped = 0, list[str]()

    def short(key: str) -> bool:
        return sizes[key] <= SHORT_SCALAR and not isinstance(data[key], dict | list)

    for key in sorted(data, key=lambda k: (short(k), -sizes[k], k)):
        if saved >= need:
            break
        if sizes[key] <= _MIN_MARKER:
            continue
        new, got, paths = _shrink_child(data[key], sizes[key], need - saved, key)
        if got > 0:
            out[key], saved = new, saved + got
            dropped.extend(paths)
    return out, saved, dropped


def _with_paths(data: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    listed = paths[:MAX_PATHS]
    if len(paths) > MAX_PATHS:
        listed.append(f"and {len(paths) - MAX_PATHS} more")
    return {**data, TRUNCATED: listed}


def shrink(data: dict[str, Any], limit: int) -> dict[str, Any] | None:
    """``data`` if its compact JSON fits in ``limit`` bytes, else the fullest version
    of it that fits, with ``_truncated`` naming what was dropped; None when even that
    cannot fit (the caller keeps only the event's key)."""
    size = _size(data)
    if size <= limit:
        return data
    base = {key: value for key, value in data.items() if key != TRUNCATED}
    need = _size(base) - limit
    sizes = {key: _size(value) for key, value in base.items()}
    try:
        for _ in range(_ROUNDS):
            out, saved, paths = _cut_top(base, sizes, need)
            if saved < need:
                return None  # nothing left that dropping makes shorter
            result = _with_paths(out, paths)
            over = _size(result) - limit
            if over <= 0:
                return result
            need += over  # the list of dropped paths takes room too: cut that much more
    except RecursionError:
        return None  # nested deeper than can be walked
    return None
