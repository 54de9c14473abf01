"""Checking a YAML file whole: every problem reported, one per line, with ``file:line``.

Show and flow files are validated before anything starts, and a person fixing one wants
all of its problems at once, not one per try. ``ProblemReader`` reads values out of the
``LineMap`` mappings that ``yamlfile.lines.read_yaml`` loads and collects a
``file:line: message`` for each value that does not fit; the caller raises once at the
end with the whole list.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from shutil import which
from typing import Any

from lirun.durations import parse_seconds
from lirun.errors import UsageError
from lirun.yamlfile.lines import LineMap

__all__ = ["ProblemReader", "did_you_mean", "file_seconds"]


def did_you_mean(key: object, allowed: Iterable[str]) -> str:
    """``; did you mean 'every'?`` when ``key`` is close to one of ``allowed``, else
    ``""``: the suggestion every file's unknown key gets (flow, show, schedule, profile)."""
    close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def file_seconds(value: object, what: str, *, zero: bool = False) -> float:
    """A duration key's value: a number of seconds as YAML reads it (``90``, ``2.5``) or
    DURATION text (``20m``, ``1h30m``); UsageError naming ``what`` otherwise (``.nan`` and
    ``.inf``, which YAML reads as floats, too)."""
    return parse_seconds(value, what, zero=zero)


class ProblemReader:
    """Reads values out of a line-numbered YAML file (``read_yaml``), collecting one
    ``file:line: message`` per problem; a problem never stops the reading, so a file is
    reported whole. ``label`` arguments prefix the message (``"play api: "``)."""

    def __init__(self, path: Path, shown: str) -> None:
        self.path = path
        self.shown = shown  # the path as the user gave it: messages name that
        self._found: list[tuple[int, str]] = []

    @property
    def problems(self) -> list[str]:
        """Every problem so far as ``file:line: message``, in file order."""
        return [text for _, text in sorted(self._found, key=lambda item: item[0])]

    def __len__(self) -> int:
        return len(self._found)

    def line_of(self, node: object, key: object = None) -> int:
        """The line of ``key`` in ``node`` (or of ``node``); 0 when unknown."""
        if isinstance(node, LineMap):
            return node.key_lines.get(key, node.line) if key is not None else node.line
        return 0

    def at_line(self, line: int, message: str) -> None:
        where = f"{self.shown}:{line}" if line else self.shown
        self._found.append((line, f"{where}: {message}"))

    def problem(self, node: object, key: object, message: str) -> None:
        self.at_line(self.line_of(node, key), message)

    def add(self, message: str) -> None:
        """A message as written (another checker's); one that starts with
        ``file:line:`` keeps its place in the order."""
        prefix = f"{self.path}:"
        head = message.removeprefix(prefix).partition(":")[0]
        line = int(head) if message.startswith(prefix) and head.isdigit() else 0
        self._found.append((line, message))

    # -- shape --

    def keys(self, node: Mapping[str, Any], allowed: frozenset[str], label: str) -> None:
        for key, line in getattr(node, "duplicates", ()):
            self.at_line(line, f"{label}{key!r} is given twice")
        for key in node:
            if key not in allowed:
                self.problem(
                    node,
                    key,
                    f"{label}unknown key {str(key)!r}{did_you_mean(key, allowed)} (allowed: "
                    f"{', '.join(sorted(allowed))})",
                )

    def text(self, node: Mapping[str, Any], key: str, label: str) -> str | None:
        value = node.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.problem(node, key, f"{label}{key} must be non-empty text, got {value!r}")
            return None
        return value

    def flag(self, node: Mapping[str, Any], key: str, label: str) -> bool:
        value = node.get(key, False)
        if not isinstance(value, bool):
            self.problem(node, key, f"{label}{key} must be true or false, got {value!r}")
            return False
        return value

    def seconds(self, node: Mapping[str, Any], key: str, label: str) -> float | None:
        """A duration key (``timeout: 600`` or ``timeout: 10m``), positive."""
        return self._duration(node, key, label, zero=False)

    def stall_seconds(self, node: Mapping[str, Any], key: str, label: str) -> float | None:
        """``stall_timeout``: a duration, or 0 to turn the stall limit off."""
        return self._duration(node, key, label, zero=True)

    def _duration(
        self, node: Mapping[str, Any], key: str, label: str, *, zero: bool
    ) -> float | None:
        value = node.get(key)
        if value is None:
            return None
        try:
            return file_seconds(value, f"{label}{key}", zero=zero)
        except UsageError as exc:
            self.problem(node, key, str(exc))
            return None

    def command(
        self, node: Mapping[str, Any], key: str, label: str
    ) -> str | tuple[str, ...] | None:
        """A ``sh -c`` string or an argv list of non-empty strings."""
        value = node.get(key)
        if value is None:
            return None
        if isinstance(value, str) and value.strip():
            return value
        if (
            isinstance(value, list)
            and value
            and all(isinstance(item, str) and item for item in value)
        ):
            if os.sep not in value[0] and which(value[0]) is None:
                self.problem(node, key, f"{label}{key}: command {value[0]!r} not found on PATH")
            return tuple(value)
        self.problem(
            node,
            key,
            f"{label}{key} must be a shell command (text) or an argv list of non-empty "
            f"strings, got {value!r}",
        )
        return None
