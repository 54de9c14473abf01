"""lirun's one diagnostics channel: named loggers, and nothing else.

Library code never writes a warning to stderr itself: each module logs through
``get_logger(__name__)`` (the standard ``logging.getLogger("lirun.<module>")``), with
the facts of the message in ``extra`` (``event``, and ids such as ``run_id``). lirun
installs no handler: a library user sees its warnings as any other library's (with
nothing configured, ``logging``'s last resort prints WARNING and above to stderr), and
routes them with ``logging.getLogger("lirun")``. ``li`` installs the one handler that
prints ``li: …`` lines (``lirun.cli.diagnostics``).

The logger is resolved on first use: ``logging`` (with ``re``, ``threading``,
``traceback``) is on no start-up path of ``li wait`` or ``li status`` that logs
nothing. ``when_logging`` lets ``li`` configure logging at that same moment.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from collections.abc import Callable

__all__ = ["forget_setup", "get_logger", "when_logging"]

_setup: list[Callable[[], None]] = []


def when_logging(setup: Callable[[], None]) -> None:
    """Run ``setup`` when a lirun logger is first used (now, if ``logging`` is loaded)."""
    if "logging" in sys.modules:
        setup()
    else:
        _setup.append(setup)


def forget_setup(setup: Callable[[], None]) -> None:
    """Drop ``setup`` if it has not run yet."""
    if setup in _setup:
        _setup.remove(setup)


def _first_use() -> None:
    while _setup:
        _setup.pop(0)()


class _Deferred:
    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: logging.Logger | None = None

    def __getattr__(self, attr: str) -> object:
        if self._logger is None:
            import logging

            _first_use()
            self._logger = logging.getLogger(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str) -> logging.Logger:
    """The logger called ``name`` (a module's ``__name__``), imported on first use."""
    return _Deferred(name)  # type: ignore[return-value]
