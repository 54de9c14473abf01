"""A run's transcript, read from its stream files (``<run_dir>/stream/``).

An agent's stdout (``<branch>.jsonl``) goes back through its provider's stream parser, so
the dashboard shows what the record was built from: assistant messages, tool calls and
their results, errors. A command's ``stdout.log`` / ``stderr.log`` are shown as text. A
run whose files live on another host says so rather than showing nothing.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

from lirun.exec.transcript_text import Entry, TranscriptLines, clip, event_entry
from lirun.run_output import read_end, stream_names
from lirun.run_output import signature as stream_signature

__all__ = ["Entry", "Transcript", "event_entry", "read_transcript", "stream_signature"]

MAX_FILE_BYTES = 4 * 1024 * 1024  # the tail of a bigger stream file is shown
MAX_ENTRIES = 2000


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


def _tail(path: str) -> tuple[str, bool]:
    data, cut = read_end(path, MAX_FILE_BYTES)
    return data.decode("utf-8", errors="replace"), cut


def _agent_entries(path: str, provider: str | None) -> tuple[list[Entry], bool]:
    text, cut = _tail(path)
    reader = TranscriptLines(provider)
    if reader.parser is None:  # not an agent provider: show the lines as they are
        return [Entry("stdout", os.path.basename(path), clip(text))], cut
    return reader.entries(text.splitlines()), cut


def _log_entry(path: str) -> tuple[list[Entry], bool]:
    text, cut = _tail(path)
    if not text.strip():
        return [], cut
    name = os.path.basename(path)
    kind = "stderr" if name.startswith("stderr") else "stdout"
    return [Entry(kind, name, clip(text), error=False)], cut


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
    for name in stream_names(run_dir):
        path = os.path.join(stream, name)
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
