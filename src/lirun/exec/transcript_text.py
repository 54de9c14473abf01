"""An agent's transcript told from its stream: what the dashboard shows and ``li logs``
prints, from the same reading.

Each line of ``<branch>.jsonl`` goes back through its provider's stream parser (what the
record was built from); each parsed event worth showing becomes an ``Entry`` (assistant
text, a tool call, its result, an error, a retry or warning). The dashboard draws
entries; ``entry_lines`` says one as readable lines of text: the assistant's words as
written, every other entry on one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lirun.providers.registry import get_provider

__all__ = ["MAX_TEXT_CHARS", "Entry", "TranscriptLines", "clip", "entry_lines", "event_entry"]

MAX_TEXT_CHARS = 20_000
ONE_LINE_CHARS = 300  # a tool call, result or error as one line of `li logs`
QUIET_KINDS = ("usage", "terminal", "session")  # bookkeeping: the record has it


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing the transcript shows: ``kind`` is assistant, tool_call, tool_result,
    error, system, usage, stdout or stderr; ``folded`` entries render inside <details>."""

    kind: str
    title: str
    text: str
    folded: bool = False
    error: bool = False


def clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "\n… (cut)"


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def event_entry(kind: str, data: dict[str, Any]) -> Entry | None:
    """The entry for one parsed stream event (None for ones not worth a line)."""
    if kind == "assistant_text":
        return Entry("assistant", "assistant", clip(str(data.get("text", ""))))
    if kind == "tool_call":
        name = str(data.get("name") or "tool")
        return Entry("tool_call", f"tool call: {name}", clip(_pretty(data.get("input"))), True)
    if kind == "tool_result":
        failed = bool(data.get("is_error"))
        title = "tool result (error)" if failed else "tool result"
        return Entry("tool_result", title, clip(_pretty(_result_content(data))), True, failed)
    if kind == "error":
        return Entry("error", "error", clip(_pretty(data)), error=True)
    if kind in (*QUIET_KINDS, "retry", "warning"):
        return Entry("system", kind, clip(_pretty(data)), True)
    if kind == "unparsed":
        return Entry("system", "unparsed line", clip(_pretty(data)), True)
    return None


def _result_content(data: dict[str, Any]) -> Any:
    """A tool's result: Claude's ``content``; Codex's command output, else the whole item."""
    if "content" in data:
        return data.get("content")
    return data.get("aggregated_output", data)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= ONE_LINE_CHARS else line[: ONE_LINE_CHARS - 1] + "…"


def _compact(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def entry_lines(kind: str, data: dict[str, Any]) -> list[str]:
    """One parsed event as ``li logs`` prints it: the assistant's text as written; a tool
    call, its result, an error, a retry, a warning or an unparsed line on one line each;
    nothing for bookkeeping (session, usage, the terminal event)."""
    if kind == "assistant_text":
        return str(data.get("text", "")).split("\n")
    if kind == "tool_call":
        return [_one_line(f"tool call {data.get('name') or 'tool'}: {_compact(data.get('input'))}")]
    if kind == "tool_result":
        label = "tool result (error)" if data.get("is_error") else "tool result"
        return [_one_line(f"{label}: {_compact(_result_content(data))}")]
    if kind in ("error", "retry", "warning"):
        said = data.get("message") or _compact(data)
        return [_one_line(f"{kind}: {said}")]
    if kind == "unparsed":
        return [_one_line(f"unparsed line: {data.get('line') or _compact(data)}")]
    return []


class TranscriptLines:
    """Stream lines in, readable lines out: one provider parser across every line fed,
    so a transcript read piece by piece (``li logs --follow``) reads as one read whole."""

    def __init__(self, provider: str | None) -> None:
        try:
            self.parser: Any = get_provider(provider or "").new_parser()
        except Exception:  # not an agent provider: the lines are shown as they are
            self.parser = None

    def feed(self, lines: Iterable[str]) -> list[str]:
        out: list[str] = []
        for line in lines:
            if self.parser is None:
                out.append(line)
                continue
            for event in self.parser.feed_line(line):
                out.extend(entry_lines(event.kind, event.data))
        return out

    def entries(self, lines: Iterable[str]) -> list[Entry]:
        """The dashboard's entries for ``lines`` (an unknown provider: one stdout entry)."""
        if self.parser is None:
            return [Entry("stdout", "stdout", clip("\n".join(lines)))]
        found = []
        for line in lines:
            for event in self.parser.feed_line(line):
                entry = event_entry(event.kind, event.data)
                if entry is not None:
                    found.append(entry)
        return found
