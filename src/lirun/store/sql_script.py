"""A SQL script (a migration file) split into its statements.

A ``;`` ends a statement only outside a string (``'…'``), a quoted name (``"…"``), a
comment (``-- …``, ``/* … */``), a dollar-quoted body (``$$ … $$``, ``$tag$ … $tag$``:
PostgreSQL functions and ``DO`` blocks) and a ``BEGIN … END`` or ``CASE … END`` block of
a ``CREATE`` statement (a SQLite trigger's body). Comments are left out of the
statements. A pure function of the text: both backends run what it yields one by one,
inside the migration's transaction.
"""

from __future__ import annotations

from collections.abc import Iterator

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _dollar_tag(script: str, at: int) -> str | None:
    """The ``$tag$`` opening a dollar-quoted body at ``at``, or None (``$1`` is a parameter)."""
    end = script.find("$", at + 1)
    if end < 0:
        return None
    tag = script[at + 1 : end]
    if tag and (tag[0].isdigit() or not set(tag) <= _WORD):
        return None
    return script[at : end + 1]


def _skip_quoted(script: str, at: int, quote: str) -> int:
    """The index after the string or quoted name opening at ``at`` (a doubled quote
    stays inside it)."""
    i = at + 1
    while True:
        i = script.find(quote, i)
        if i < 0:
            return len(script)
        if script.startswith(quote * 2, i):
            i += 2
            continue
        return i + 1


class _Statement:
    """The statement being read: its text and how deep it is in BEGIN/CASE blocks."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.depth = 0
        self.first_word = ""

    def word(self, text: str) -> None:
        upper = text.upper()
        if not self.first_word:
            self.first_word = upper
        if upper == "CASE" or (upper == "BEGIN" and self.first_word == "CREATE"):
            self.depth += 1
        elif upper == "END" and self.depth:
            self.depth -= 1

    def text(self) -> str:
        return "".join(self.parts).strip()


def split_statements(script: str) -> Iterator[str]:
    """Each statement of ``script`` without its ending ``;`` (empty ones skipped)."""
    stmt = _Statement()
    i, n = 0, len(script)
    while i < n:
        ch = script[i]
        if script.startswith("--", i):
            i = n if (nl := script.find("\n", i)) < 0 else nl
            continue
        if script.startswith("/*", i):
            i = n if (close := script.find("*/", i + 2)) < 0 else close + 2
            stmt.parts.append(" ")
            continue
        if ch == ";" and not stmt.depth:
            if text := stmt.text():
                yield text
            stmt, i = _Statement(), i + 1
            continue
        if ch in "'\"":
            end = _skip_quoted(script, i, ch)
        elif ch == "$" and (tag := _dollar_tag(script, i)) is not None:
            close = script.find(tag, i + len(tag))
            end = n if close < 0 else close + len(tag)
        elif ch in _WORD and (i == 0 or script[i - 1] not in _WORD | {"$"}):
            end = i
            while end < n and script[end] in _WORD:
                end += 1
            stmt.word(script[i:end])
        else:
            end = i + 1
        stmt.parts.append(script[i:end])
        i = end
    if text := stmt.text():
        yield text
