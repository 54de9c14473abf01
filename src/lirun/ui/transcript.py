"""A run's transcript, read from its stream files (``<run_dir>/stream/``).

An agent's stdout (``<branch>.jsonl``) goes back through its provider's stream parser, so
the dashboard shows what the record was built from: assistant messages, tool calls and
their results, errors. A command's ``stdout.log`` / ``stderr.log`` are shown as text. A
run whose files live on another host says so rather than showing nothing.
"""

from __future__ import annotations

import json
import os
import socket
import zlib
from dataclasses import dataclass, field
from typing import Any

from lirun.exec.providers import get_provider

MAX_FILE_BYTES = 4 * 1024 * 1024  # the tail of a bigger stream file is shown
MAX_ENTRIES = 2000
MAX_TEXT_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing the transcript shows: ``kind`` is assistant, tool_call, tool_result,
    error, system, usage, stdout or stderr; ``folded`` entries render inside <details>."""

    kind: str
    title: str
    text: str
    folded: bool = False
    error: bool = False


@dataclass(slots=True)
class Transcript:
    """``state``: ``ok``, ``empty`` (files exist but say nothing), ``missing`` (no stream
    files here) or ``remote`` (the run's owner is another host: ``host``)."""

    state: str
    entries: list[Entry] = field(default_factory=list)
    host: str | None = None
    truncated: bool = False
    files: list[str] = field(default_factory=list)
    signature: str = ""  # changes when a stream file grows (a following page asks for it)


def stream_signature(run_dir: str | None) -> str:
    """Sizes and modification times of the run's stream files: cheap to compute, and it
    changes whenever one is written (a page following a running run compares it)."""
    stream = os.path.join(run_dir, "stream") if run_dir else None
    if stream is None or not os.path.isdir(stream):
        return ""
    parts = []
    for name in sorted(os.listdir(stream)):
        try:
            info = os.stat(os.path.join(stream, name))
        except OSError:
            continue
        parts.append(f"{name}:{info.st_size}:{info.st_mtime_ns}")

    return format(zlib.crc32("|".join(parts).encode()), "08x")


def _tail(path: str) -> tuple[str, bool]:
    with open(path, "rb") as file:
        file.seek(0, os.SEEK_END)
        size = file.tell()
        file.seek(max(0, size - MAX_FILE_BYTES))
        data = file.read()
    cut = size > MAX_FILE_BYTES
    if cut:  # start at a line boundary
        data = data[data.find(b"\n") + 1 :]
    return data.decode("utf-8", errors="replace"), cut


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[:MAX_TEXT_CHARS] + "\n… (cut)"


def _pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def event_entry(kind: str, data: dict[str, Any]) -> Entry | None:
    """The entry for one parsed stream event (None for ones not worth a line)."""
    if kind == "assistant_text":
        return Entry("assistant", "assistant", _clip(str(data.get("text", ""))))
    if kind == "tool_call":
        name = str(data.get("name") or "tool")
        return Entry("tool_call", f"tool call: {name}", _clip(_pretty(data.get("input"))), True)
    if kind == "tool_result":
        failed = bool(data.get("is_error"))
        title = "tool result (error)" if failed else "tool result"
        return Entry("tool_result", title, _clip(_pretty(data.get("content"))), True, failed)
    if kind == "error":
        return Entry("error", "error", _clip(_pretty(data)), error=True)
    if kind in ("usage", "terminal", "session", "retry", "warning"):
        return Entry("system", kind, _clip(_pretty(data)), True)
    if kind == "unparsed":
        return Entry("system", "unparsed line", _clip(_pretty(data)), True)
    return None


def _agent_entries(path: str, provider: str | None) -> tuple[list[Entry], bool]:
    text, cut = _tail(path)
    try:
        parser = get_provider(provider or "").new_parser()
    except Exception:  # not an agent provider: show the lines as they are
        return [Entry("stdout", os.path.basename(path), _clip(text))], cut
    entries = []
    for line in text.splitlines():
        for event in parser.feed_line(line):
            entry = event_entry(event.kind, event.data)
            if entry is not None:
                entries.append(entry)
    return entries, cut


def _log_entry(path: str) -> tuple[list[Entry], bool]:
    text, cut = _tail(path)
    if not text.strip():
        return [], cut
    name = os.path.basename(path)
    kind = "stderr" if name.startswith("stderr") else "stdout"
    return [Entry(kind, name, _clip(text), error=False)], cut


def read_transcript(row: dict[str, Any], *, this_host: str | None = None) -> Transcript:
    """The transcript of an execution row (``run_dir``, ``provider``, ``owner_host``)."""
    run_dir = row.get("run_dir")
    stream = os.path.join(run_dir, "stream") if run_dir else None
    if stream is None or not os.path.isdir(stream):
        host = row.get("owner_host")
        here = this_host or socket.gethostname()
        if host and host != here:
            return Transcript("remote", host=str(host))
        return Transcript("missing")
    result = Transcript("ok", signature=stream_signature(run_dir))
    names = sorted(os.listdir(stream), key=lambda n: (not n.endswith(".jsonl"), n))
    for name in names:
        path = os.path.join(stream, name)
        if not os.path.isfile(path):
            continue
        result.files.append(name)
        try:
            if name.endswith(".jsonl"):
                entries, cut = _agent_entries(path, row.get("provider"))
            else:
                entries, cut = _log_entry(path)
        except OSError as exc:
            entries, cut = [Entry("error", name, f"cannot read: {exc.strerror}", error=True)], False
        result.entries.extend(entries)
        result.truncated = result.truncated or cut
    if len(result.entries) > MAX_ENTRIES:
        result.entries = result.entries[-MAX_ENTRIES:]
        result.truncated = True
    if not result.entries:
        result.state = "empty"
    return result
