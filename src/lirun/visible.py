"""Text from the record shown to a person with its invisible characters made visible.

Agent output, prompts and names can hold characters that draw nothing yet change how a
line reads: control characters (C0, DEL, C1: an escape sequence recolours or retitles a
terminal), format characters (Unicode category Cf: the bidirectional overrides and
isolates that turn "txt.exe" around, zero-width spaces and joiners, the byte order mark,
tag characters) and the line and paragraph separators. Each is shown as its Python
escape (``\\x1b``, ``\\u202e``, ``\\U000e0041``), so what a person reads is what is stored.

``INVISIBLE`` lists those categories' ranges as of Unicode 15 (a test checks it covers
every such character the running Python knows); a regular expression finds them, so a
long text without any costs one scan in C.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["INVISIBLE", "escape_char", "visible"]

# Cc, Cf, Zl and Zp, as (first, last) code points.
INVISIBLE: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)


def _pattern(keep: str, extra: str) -> re.Pattern[str]:
    ranges = [re.escape(ch) for ch in extra]
    for first, last in INVISIBLE:
        ranges.append(re.escape(chr(first)) + ("-" + re.escape(chr(last)) if last > first else ""))
    found = f"[{''.join(ranges)}]"
    return re.compile(f"(?![{''.join(map(re.escape, keep))}]){found}" if keep else found)


_PATTERNS: dict[tuple[str, str], re.Pattern[str]] = {}


def escape_char(ch: str) -> str:
    """``ch`` as Python writes it in a string literal: ``\\x07``, ``\\u202e``, ``\\U000e0041``."""
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str, keep: str = "", names: Mapping[str, str] | None = None) -> str:
    """``text`` with every invisible character except those in ``keep`` (say ``"\\n\\t"``
    where the text is shown as lines) written as its escape; ``names`` gives some
    characters (invisible or not, a backslash say) an escape of their own."""
    names = names or {}
    key = (keep, "".join(sorted(names)))
    pattern = _PATTERNS.get(key)
    if pattern is None:
        pattern = _PATTERNS[key] = _pattern(keep, key[1])
    return pattern.sub(lambda m: names.get(m.group()) or escape_char(m.group()), text)
