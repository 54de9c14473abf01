"""Loggers that import ``logging`` only when something is logged.

``logging`` (with ``traceback``, ``string``, ``textwrap``) costs milliseconds on every
start of ``li run``, which logs nothing when all goes well. ``get_logger(__name__)``
returns a stand-in that resolves the real ``logging.Logger`` on first use; it is typed
as one, so callers keep ``log.warning("...", arg)`` unchanged.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging

__all__ = ["get_logger"]


class _Deferred:
    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: logging.Logger | None = None

    def __getattr__(self, attr: str) -> object:
        if self._logger is None:
            import logging

            self._logger = logging.getLogger(self._name)
        return getattr(self._logger, attr)


def get_logger(name: str) -> logging.Logger:
    """The logger called ``name``, imported on first use."""
    return _Deferred(name)  # type: ignore[return-value]
