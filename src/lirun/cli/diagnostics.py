"""The one handler that prints lirun's log records as ``li: …`` lines on stderr.

The library only logs (``lirun.logs``); ``li`` decides what a person sees: notices
(INFO) as ``li: <message>``, warnings as ``li: warning: <message>``, errors as
``li: error: <message>``. ``-q`` keeps warnings and errors only; ``-v`` adds DEBUG.
The handler is installed when a lirun logger is first used, so a command that logs
nothing (``li wait`` most of the time) never imports ``logging``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from lirun.logs import forget_setup, when_logging

TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging

DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40  # logging's levels, without importing it
# Libraries lirun drives whose warnings `li` shows too (the schedule queue's).
LIBRARIES = ("procrastinate", "psycopg.pool")


def level_for(verbosity: int) -> int:
    """The lowest level ``li`` shows: -q (-1) WARNING, none (0) INFO, -v (1+) DEBUG."""
    if verbosity < 0:
        return WARNING
    return INFO if verbosity == 0 else DEBUG


def first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def line_for(levelno: int, message: str) -> str:
    """The line a person reads for one record (its message's first line)."""
    message = first_line(message)
    if levelno >= ERROR:
        return f"li: error: {message}\n"
    if levelno >= WARNING:
        return f"li: warning: {message}\n"
    return f"li: {message}\n"


@contextmanager
def li_lines(verbosity: int) -> Iterator[None]:
    """Within the block, the ``lirun`` loggers print ``li:`` lines on stderr."""
    installed: list[tuple[logging.Logger, logging.Handler, int]] = []

    def setup() -> None:
        installed.extend(_install(level_for(verbosity)))

    when_logging(setup)
    try:
        yield
    finally:
        forget_setup(setup)
        for logger, handler, level in installed:
            logger.removeHandler(handler)
            logger.setLevel(level)


def _install(level: int) -> list[tuple[logging.Logger, logging.Handler, int]]:
    """The handler on ``lirun`` (at ``level``) and on ``LIBRARIES`` (warnings and up);
    each with the logger's level before, to put back."""
    import logging

    class LiHandler(logging.Handler):
        """One line per record, no traceback, on the ``sys.stderr`` of the moment."""

        def emit(self, record: logging.LogRecord) -> None:
            try:
                text = record.getMessage()
                if record.exc_info and record.exc_info[1] is not None:
                    exc = record.exc_info[1]
                    text = f"{first_line(text)} ({type(exc).__name__}: {first_line(str(exc))})"
                sys.stderr.write(line_for(record.levelno, text))
                sys.stderr.flush()
            except Exception:  # logging's rule: a handler never raises
                self.handleError(record)

    installed: list[tuple[logging.Logger, logging.Handler, int]] = []
    for name, lowest in (("lirun", level), *((lib, max(level, WARNING)) for lib in LIBRARIES)):
        logger = logging.getLogger(name)
        handler = LiHandler(lowest)
        installed.append((logger, handler, logger.level))
        logger.addHandler(handler)
        if name == "lirun":
            logger.setLevel(level)
    return installed
