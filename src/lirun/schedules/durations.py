"""DURATION: ``30s``, ``5m``, ``2h``, ``1d`` or a sum such as ``1h30m``, as whole seconds."""

from __future__ import annotations

from lirun.errors import UsageError

UNITS: dict[str, int] = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_ORDER = "dhms"
EXAMPLE = "30s, 5m, 2h, 1d or a sum such as 1h30m"
MAX_SECONDS = 366 * 86400  # longer periods are calendar matters: use --cron


def parse_duration(text: str, what: str = "duration") -> int:
    """Seconds in ``text``: one or more ``<digits><unit>`` parts, units d, h, m, s, each
    once and largest first, in all at most 366 days. Zero, a bare number, a sign or a
    fraction is a UsageError that names what was wrong and gives valid examples."""
    if not isinstance(text, str):
        raise UsageError(f"{what} must be text such as {EXAMPLE}, not {text!r}")
    raw = text.strip().lower()
    total, digits, last = 0, "", -1
    for char in raw:
        if char.isascii() and char.isdigit():
            digits += char
            continue
        position = _ORDER.find(char)
        if position < 0 or not digits:
            raise UsageError(f"{what} {text!r} is not a duration; use {EXAMPLE}")
        if position <= last:
            raise UsageError(
                f"{what} {text!r}: give each unit once, largest first (e.g. 1h30m); use {EXAMPLE}"
            )
        total += int(digits) * UNITS[char]
        digits, last = "", position
    if digits or not raw:
        hint = f" (a number needs a unit: {raw}s or {raw}m?)" if raw.isdigit() else ""
        raise UsageError(f"{what} {text!r} is not a duration{hint}; use {EXAMPLE}")
    if total <= 0:
        raise UsageError(f"{what} {text!r} is zero; give a positive duration such as {EXAMPLE}")
    if total > MAX_SECONDS:
        raise UsageError(f"{what} {text!r} is longer than 366d; give at most 366d (or use --cron)")
    return total


def format_duration(seconds: int) -> str:
    """``5400`` → ``1h30m`` (the inverse of ``parse_duration`` for positive values)."""
    parts, rest = [], int(seconds)
    for unit in _ORDER:
        count, rest = divmod(rest, UNITS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def seconds_or_duration(
    text: str, what: str, *, low: float = 0.0, high: float = MAX_SECONDS
) -> float:
    """Seconds in ``text``: a plain number (``90``, ``2.5``) or a DURATION (``1h30m``),
    from ``low`` to ``high``; a UsageError of one line otherwise (also for ``nan``,
    ``inf``, ``1e400`` or a number of twenty digits, which a float would take as given).
    The one parser of every ``li worker`` duration option."""
    raw = text.strip()
    plain = raw.replace(".", "", 1).isdigit()
    value = float(raw) if plain else float(parse_duration(raw, what))
    shown = format_duration(int(high)) if high >= 1 and high == int(high) else f"{high:g}s"
    if not low <= value <= high:  # nan compares false
        least = f"at least {format_duration(int(low))}, " if low >= 1 else ""
        raise UsageError(f"{what} {text!r}: give {least}at most {shown}")
    return value
