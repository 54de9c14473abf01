"""Warnings from background threads: said once per kind of error, never raised."""

from __future__ import annotations

import sys
from collections.abc import Callable


def warn_once_per_type(template: str) -> Callable[[BaseException], None]:
    """A reporter writing ``li: warning: <template>`` (``{exc}`` filled) once per error type.

    A background write that keeps failing the same way must not flood stderr, and must not
    stop supervision either.
    """
    seen: set[type[BaseException]] = set()

    def report(exc: BaseException) -> None:
        if type(exc) not in seen:
            seen.add(type(exc))
            sys.stderr.write(f"li: warning: {template.format(exc=exc)}\n")

    return report
