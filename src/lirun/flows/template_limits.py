"""The bounds of a leg template: how deep it nests, how much it writes, how long it runs.

A flow file is input: a template nested thousands of levels deep would blow Python's
stack in Jinja2's parser or compiler (a ``RecursionError`` traceback instead of one
``file:line`` line), and one that loops ``range(99999)`` inside ``range(99999)`` would
keep the engine busy for minutes, deaf to SIGTERM. So:

* ``check_shape`` reads the template's tokens (Jinja2's lexer is a loop, not a
  recursion) before anything parses it: brackets and blocks nested more than
  ``MAX_NESTING`` deep, or more than ``MAX_CHAIN`` operators, filters and attribute
  steps in one tag, are refused with the line they are on.
* ``Guard`` watches a render: every ``GUARD_EVERY`` Python events it looks at the clock
  and at ``should_stop`` (the flow's signal trap) and interrupts the render when the
  time is up or a signal came; ``Sink`` ends it when the output passes
  ``MAX_OUTPUT_CHARS``; what could build far more than that before the Sink sees it
  (``*``, ``center``, ``join``, ...) is measured first by ``template_sizes``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

__all__ = [
    "MAX_CHAIN",
    "MAX_NESTING",
    "MAX_OUTPUT_CHARS",
    "RENDER_SECONDS",
    "Guard",
    "RenderInterrupted",
    "ShapeError",
    "check_shape",
]

MAX_NESTING = 30  # brackets and blocks inside one another
MAX_CHAIN = 100  # operators, filters and attribute steps in one {{ }} or {% %}
MAX_OUTPUT_CHARS = 2_000_000  # what one rendered prompt or argument may hold
RENDER_SECONDS = 10.0  # how long one render may take
GUARD_EVERY = 256  # Python events between two looks at the clock and the stop flag

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = frozenset(_OPEN.values())
_BLOCKS = frozenset(
    {"if", "for", "macro", "call", "filter", "with", "block", "autoescape", "trans"}
)
_WORD_OPERATORS = frozenset({"and", "or", "not", "is", "in", "if", "else"})


class ShapeError(ValueError):
    """A template too deep or too long-chained to parse safely (the message says where)."""


class RenderInterrupted(BaseException):
    """Raised inside a render to end it: a BaseException, so no ``except Exception`` in
    Jinja2 or a filter can swallow it. ``reason`` is ``"stopped"``, ``"time"`` or
    ``"output"``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _tags(tokens: Iterator[tuple[int, str, str]]) -> Iterator[tuple[int, str, list[str]]]:
    """(line, kind, significant token values) of each ``{{ }}`` / ``{% %}`` tag; the
    values of operators are kept, names as ``name:<word>``."""
    kind, line = "", 0
    values: list[str] = []
    for lineno, token, value in tokens:
        if token in ("variable_begin", "block_begin"):
            kind, line, values = token, lineno, []
        elif token in ("variable_end", "block_end"):
            yield line, kind, values
            kind = ""
        elif kind and token == "operator":
            values.append(value)
        elif kind and token == "name":
            values.append(f"name:{value}")


def check_shape(env: Any, text: str) -> None:
    """ShapeError when ``text`` nests or chains beyond the bounds; a syntax error is
    left to the parser (TemplateSyntaxError from Jinja2's lexer passes through)."""
    depth = 0
    for line, kind, values in _tags(env.lex(text)):
        chain = 0
        if kind == "block_begin" and values and values[0].startswith("name:"):
            word = values[0][5:]
            if word in _BLOCKS or (word == "set" and "=" not in values):
                depth += 1
            elif word.startswith("end"):
                depth = max(0, depth - 1)
        inner = depth
        for value in values:
            if value in _OPEN:
                inner += 1
                chain += 1
            elif value in _CLOSE:
                inner = max(depth, inner - 1)
            elif value in ("|", ".", "~") or not value.startswith("name:"):
                chain += value not in (",", ":", "=")
            elif value[5:] in _WORD_OPERATORS:
                chain += 1
            if inner > MAX_NESTING:
                raise ShapeError(
                    f"template error on its line {line}: nested more than {MAX_NESTING} "
                    "levels deep (brackets and blocks inside one another); flatten it"
                )
        if depth > MAX_NESTING:
            raise ShapeError(
                f"template error on its line {line}: blocks nested more than {MAX_NESTING} "
                "levels deep; flatten it"
            )
        if chain > MAX_CHAIN:
            raise ShapeError(
                f"template error on its line {line}: more than {MAX_CHAIN} operators, "
                "filters and attribute steps in one tag; split it"
            )


class Guard:
    """A trace function over one render (this thread only): interrupts it when
    ``should_stop()`` is true or ``seconds`` have passed. Use as a context manager
    around the render; the previous trace function is restored after it."""

    def __init__(self, should_stop: Callable[[], bool] | None, seconds: float) -> None:
        self.should_stop = should_stop
        self.deadline = time.monotonic() + seconds
        self.count = 0
        self.previous: Any = None

    def _look(self) -> None:
        self.count += 1
        if self.count % GUARD_EVERY:
            return
        if self.should_stop is not None and self.should_stop():
            raise RenderInterrupted("stopped")
        if time.monotonic() > self.deadline:
            raise RenderInterrupted("time")

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        self._look()
        return self._local if frame.f_code.co_filename == "<template>" else None

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        self._look()
        return self._local

    def __enter__(self) -> Guard:
        if self.should_stop is not None and self.should_stop():
            raise RenderInterrupted("stopped")
        self.previous = sys.gettrace()
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self.previous)


class Sink:
    """Collects a render's pieces; RenderInterrupted("output") past ``limit`` characters."""

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self.limit = limit
        self.size = 0
        self.pieces: list[str] = []

    def add(self, piece: str) -> None:
        self.size += len(piece)
        if self.size > self.limit:
            raise RenderInterrupted("output")
        self.pieces.append(piece)

    def text(self) -> str:
        return "".join(self.pieces)
