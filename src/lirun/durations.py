"""DURATION, the one grammar of every duration ``li`` reads (docs/cli.md#durations).

A bare number of seconds (``90``, ``2.5``) or one or more ``<number><unit>`` parts with
units w, d, h, m, s, each once and largest first (``30s``, ``5m``, ``2h``, ``1d``,
``1h30m``, ``1.5d``). Command-line options and the duration keys of profile, flow, show and
schedule files all go through ``parse_seconds``. Pure and cheap to import (no ``re``):
it may be loaded on a command's start-up path.
"""

from __future__ import annotations

from lirun.errors import UsageError

__all__ = ["FORMS", "UNITS", "format_duration", "parse_seconds"]

UNITS: dict[str, int] = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_ORDER = "wdhms"
FORMS = "a number of seconds (90, 2.5) or 30s, 5m, 2h, 1d, 1h30m"
# The longest time limit a variable, a flag or a file may give: about three years. More is
# a typo or a way to say "never" (leave the limit out for that), and past ~9e9 Python's
# waits overflow.
MAX_SECONDS = 100_000_000.0


def parse_seconds(
    value: object,
    what: str = "",
    *,
    zero: bool = False,
    low: float = 0.0,
    high: float = MAX_SECONDS,
) -> float:
    """Seconds in ``value`` (text in the DURATION grammar, or an int or float as YAML
    reads it), from ``low`` (exclusive of 0 unless ``zero``) to ``high``. Anything else
    is a one-line UsageError naming ``what`` (an option or key) and the accepted forms."""
    subject = f"{what} {value!r}" if what else repr(value)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UsageError(f"{subject} is not a duration; give {FORMS}")
    seconds = float(value) if not isinstance(value, str) else _seconds_in(value, subject)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise UsageError(f"{subject} is not a duration; give {FORMS}")
    if seconds < 0:
        least = "0 (off) or " if zero else ""
        raise UsageError(f"{subject} is negative; give {least}{FORMS}")
    if seconds == 0 and not zero:
        raise UsageError(f"{subject} is zero; give a positive duration: {FORMS}")
    if seconds == 0:
        return 0.0
    if seconds < low:
        raise UsageError(f"{subject} is shorter than {_shown(low)}; give at least {_shown(low)}")
    if seconds > high:
        raise UsageError(f"{subject} is longer than {_shown(high)}; give at most {_shown(high)}")
    return seconds


def _seconds_in(text: str, subject: str) -> float:
    raw = text.strip().lower()
    negative = raw.startswith("-")
    body = raw[1:] if negative else raw
    if _is_number(body):
        return -float(body) if negative else float(body)
    total, digits, last = 0.0, "", -1
    for char in body:
        if (char.isascii() and char.isdigit()) or char == ".":
            digits += char
            continue
        position = _ORDER.find(char)
        if position < 0 or not _is_number(digits):
            raise UsageError(f"{subject} is not a duration; give {FORMS}")
        if position <= last:
            raise UsageError(f"{subject}: give each unit once, largest first; give {FORMS}")
        if len(digits) > 30:  # more digits would be a float's inf
            raise UsageError(f"{subject} is longer than any duration; give {FORMS}")
        total += float(digits) * UNITS[char]
        digits, last = "", position
    if digits or not body:
        raise UsageError(f"{subject} is not a duration; give {FORMS}")
    return -total if negative else total


def _is_number(text: str) -> bool:
    """``90``, ``2.5``, ``.5``, ``5.``: digits with at most one point (no sign, no
    exponent, no ``nan``)."""
    whole, _, fraction = text.partition(".")
    digits = whole + fraction
    return bool(digits) and digits.isascii() and digits.isdigit()


def _shown(seconds: float) -> str:
    if seconds >= 1 and seconds == int(seconds):
        return format_duration(int(seconds))
    return f"{seconds:g}s"


def format_duration(seconds: int) -> str:
    """``5400`` → ``1h30m``: whole seconds in the DURATION grammar (``0s`` for zero; days,
    not weeks, as ``li`` has always written them)."""
    parts, rest = [], int(seconds)
    for unit in _ORDER[1:]:
        count, rest = divmod(rest, UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
