"""Jinja filters of the templates: times, durations, money, tokens, JSON; and ``shown``,
which every value a template prints passes through."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from jinja2 import Undefined
from markupsafe import Markup, escape

from lirun.visible import visible


def _missing(value: Any) -> bool:
    return value is None or isinstance(value, Undefined)


def shown(value: Any) -> Any:
    """Every value a template prints (the environment's ``finalize``): text with its
    invisible characters (controls, bidirectional overrides, zero-width spaces: see
    ``lirun.visible``) as visible escapes, so a page reads as the record is stored; line
    breaks and tabs stay, for the text shown as lines. Markup stays markup: the escapes
    hold no character HTML gives a meaning to."""
    if not isinstance(value, str):
        return value
    text = visible(value, keep="\n\r\t")
    if text == value:
        return value
    return Markup(text) if isinstance(value, Markup) else text


def when(ts: Any) -> str:
    if _missing(ts):
        return ""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(ts))) + " UTC"
    except (TypeError, ValueError, OverflowError, OSError):
        return str(ts)


def seconds(value: Any) -> str:
    if _missing(value):
        return ""
    total = float(value)
    if total < 60:
        return f"{total:.1f} s"
    minutes, secs = divmod(int(total), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def money(value: Any) -> str:
    return "" if _missing(value) else f"${float(value):.4f}"


def tokens(row: dict[str, Any]) -> str:
    got = [row.get("input_tokens"), row.get("output_tokens")]
    if all(v is None for v in got):
        return ""
    return f"{got[0] or 0:,} in / {got[1] or 0:,} out"


def pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def short(text: Any, n: int = 80) -> str:
    s = "" if text is None else str(text)
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def percent(value: Any) -> str:
    return "" if _missing(value) else f"{100 * float(value):.0f}%"


def ticks(text: Any) -> Markup:
    """Text whose `backticked` commands become <code>: the text is escaped first, so
    nothing from the record becomes markup."""
    escaped = str(escape("" if _missing(text) else str(text)))
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))


FILTERS = {
    "when": when,
    "seconds": seconds,
    "money": money,
    "tokens": tokens,
    "pretty": pretty,
    "short": short,
    "percent": percent,
    "ticks": ticks,
}
