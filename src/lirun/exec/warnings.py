"""Warnings from background threads: logged once per kind of error, never raised."""

from __future__ import annotations

from collections.abc import Callable

from lirun.logs import get_logger

log = get_logger(__name__)


def warn_once_per_type(template: str) -> Callable[[BaseException], None]:
    """A reporter logging ``template`` (``{exc}`` filled) as a WARNING once per error type.

    A background write that keeps failing the same way must not flood stderr, and must not
    stop supervision either.
    """
    seen: set[type[BaseException]] = set()

    def report(exc: BaseException) -> None:
        if type(exc) not in seen:
            seen.add(type(exc))
            log.warning(
                "%s", template.format(exc=exc),
                extra={"event": "background.error", "error": type(exc).__name__},
            )  # fmt: skip

    return report
