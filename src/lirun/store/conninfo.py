"""libpq's keyword/value connection string (``host=h1,h2 port=5432,5433 dbname=db``),
read and rewritten without the driver: its words kept exactly as written, so a rewrite
changes only the word it means to (a password masked, dropped or given by a file).

The grammar is libpq's: ``key = value`` pairs separated by white space; a value is a run
of non-space characters or a single-quoted string, and in either a backslash takes the
next character as it is. A string libpq would refuse (a word with no ``=``, an unclosed
quote) is still split here, its widest reading kept, so a password in it is masked; what
is wrong with it is ``problem()``.
"""

from __future__ import annotations

from dataclasses import dataclass

SECRET_KEYS = ("password", "sslpassword")
# Several hosts: libpq tries them in order; lirun asks for the one that takes writes.
MULTI_HOST_KEYS = ("host", "hostaddr")


@dataclass(frozen=True)
class Word:
    """One ``key=value`` of the string: its text as written, and the value decoded."""

    key: str
    value: str
    text: str
    value_start: int  # where the value's text starts within ``text``
    problem: str | None = None


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _value(text: str, at: int) -> tuple[str, int, str | None]:
    """(the value decoded, where it ends, what is wrong with it) from ``at``."""
    out: list[str] = []
    quoted = at < len(text) and text[at] == "'"
    at += 1 if quoted else 0
    while at < len(text):
        char = text[at]
        if char == "\\" and at + 1 < len(text):
            out.append(text[at + 1])
            at += 2
            continue
        if quoted and char == "'":
            return "".join(out), at + 1, None
        if not quoted and char.isspace():
            break
        out.append(char)
        at += 1
    return "".join(out), at, "an unterminated quoted string" if quoted else None


def words(text: str) -> list[Word]:
    """The string's ``key=value`` words, in order (never raises)."""
    found: list[Word] = []
    at = _skip_space(text, 0)
    while at < len(text):
        start = at
        while at < len(text) and text[at] != "=" and not text[at].isspace():
            at += 1
        key = text[start:at]
        at = _skip_space(text, at)
        if at >= len(text) or text[at] != "=":
            found.append(Word(key, "", text[start:at].rstrip(), len(key), f'no "=" after {key!r}'))
            continue
        at = _skip_space(text, at + 1)
        value_start = at - start
        value, at, problem = _value(text, at)
        found.append(Word(key, value, text[start:at], value_start, problem))
        at = _skip_space(text, at)
    return found


def problem(text: str) -> str | None:
    """What libpq would refuse in the string (None: nothing it cannot read)."""
    for word in words(text):
        if word.problem:
            return word.problem
    return None if words(text) else "no key=value in it"


def join(kept: list[Word]) -> str:
    return " ".join(word.text for word in kept)


def quote(value: str) -> str:
    """``value`` as one libpq value: single-quoted, ``\\`` and ``'`` escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def redact(text: str, mask: str) -> str:
    """The string with every password's value replaced by ``mask``."""
    shown = []
    for word in words(text):
        if word.key.lower() in SECRET_KEYS:
            shown.append(word.text[: word.value_start] + mask)
        else:
            shown.append(word.text)
    return " ".join(shown)


def secrets(text: str) -> list[str]:
    """Every password value, decoded and as written."""
    found = []
    for word in words(text):
        if word.key.lower() in SECRET_KEYS and word.value:
            found += [word.value, word.text[word.value_start :]]
    return found


def without(text: str, *keys: str) -> str:
    """The string without the words whose key is one of ``keys``."""
    return join([word for word in words(text) if word.key.lower() not in keys])


def last_value(text: str, key: str) -> str | None:
    """The value libpq uses for ``key`` (the last one given), None if not given."""
    given = [word.value for word in words(text) if word.key == key]
    return given[-1] if given else None
