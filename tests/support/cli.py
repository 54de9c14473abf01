"""Running ``li`` from the tests."""

from __future__ import annotations

import sys


def li_command(*args: str) -> list[str]:
    """The argv that runs ``li`` with this interpreter (works without the console script)."""
    return [sys.executable, "-m", "lirun", *args]
