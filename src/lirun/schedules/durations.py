"""Schedule periods in the DURATION grammar (``lirun.durations``), as whole seconds."""

from __future__ import annotations

from lirun.durations import FORMS, format_duration, parse_seconds
from lirun.errors import UsageError

__all__ = ["EXAMPLE", "MAX_SECONDS", "format_duration", "parse_duration", "seconds_or_duration"]

EXAMPLE = FORMS
MAX_SECONDS = 366 * 86400  # longer periods are calendar matters: use --cron


def parse_duration(text: object, what: str = "duration", *, high: float = MAX_SECONDS) -> int:
    """Whole seconds in ``text`` (``300``, ``5m``, ``1h30m``), positive and at most
    ``high`` (366 days unless given); a fraction of a second is refused."""
    seconds = parse_seconds(text, what, high=high)
    if seconds != int(seconds):
        raise UsageError(
            f"{what} {text!r}: give whole seconds, e.g. {int(seconds) or 1}s, 5m or 1h30m"
        )
    return int(seconds)


def seconds_or_duration(
    text: str, what: str, *, low: float = 0.0, high: float = MAX_SECONDS
) -> float:
    """Seconds in ``text``, from ``low`` to ``high``: the parser of every ``li worker``
    duration option."""
    return parse_seconds(text, what, low=low, high=high)
