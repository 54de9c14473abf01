"""Whether a run's CLI version is one lirun was tested with, and the notice when it is not.

Each provider states the versions its stream parser and failure classes were checked
against (``Provider.tested_versions``: the oldest and the newest the contract suite
passed on, docs/providers.md). A run made with a version outside that window is recorded
as it always is, but its evidence says so: a class read from a newer CLI's wording may be
less exact, and the person reading the record should know before trusting it. Pure: the
caller gathers the version and the window.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["UNTESTED_KIND", "version_key", "version_notice"]

UNTESTED_KIND = "provider_version_untested"
_NUMBERS = re.compile(r"(\d+(?:\.\d+)*)(\S*)")


def version_key(version: str) -> tuple[tuple[int, ...], int] | None:
    """``"2.1.197"`` → ``((2, 1, 197), 1)``; a pre-release (``0.172.0-alpha.1``) sorts just
    below its release. None when the text holds no version number."""
    match = _NUMBERS.search(version)
    if match is None:
        return None
    numbers = tuple(int(part) for part in match.group(1).split("."))
    numbers = numbers + (0,) * max(0, 3 - len(numbers))
    return numbers, 0 if match.group(2).startswith("-") else 1


def version_notice(
    provider: str, version: str | None, window: tuple[str, str] | None
) -> dict[str, Any] | None:
    """The evidence entry for a run whose CLI version lies outside ``window``; None when it
    lies inside, or when there is no window or no version to compare."""
    if window is None or not version:
        return None
    low, high = window
    key, low_key, high_key = version_key(version), version_key(low), version_key(high)
    if low_key is None or high_key is None:
        return None  # a window lirun cannot read is its own bug, not the run's
    tested = f"{low}..{high}"
    if key is None:
        side = "not a version number lirun can compare with"
    elif key < low_key:
        side = "older than"
    elif key > high_key:
        side = "newer than"
    else:
        return None
    return {
        "kind": UNTESTED_KIND,
        "provider": provider,
        "version": version,
        "tested": tested,
        "note": (
            f"{provider} {version} is {side} the versions lirun was tested with "
            f"({low} to {high}); its failure classes may be less exact "
            "(docs/providers.md, tested versions)"
        ),
    }
