"""Which platform layer the suite runs under (``LIRUN_PLATFORM``; CI runs part of the suite
a second time with ``portable``), and the skip for tests of Linux-only evidence."""

from __future__ import annotations

import pytest

from lirun import platform

PORTABLE = platform.name() == platform.PORTABLE


def linux_only(what: str) -> pytest.MarkDecorator:
    """Skip under the portable platform, which has no ``what`` (README: platforms)."""
    return pytest.mark.skipif(PORTABLE, reason=f"LIRUN_PLATFORM=portable: no {what}")
