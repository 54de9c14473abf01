"""Reading a run's output files as lines for a person (``li logs``): all of a file, its
last lines, or what was appended since the last look.

A ``Cursor`` holds one file's offset and its unfinished last line, so a file another
process is still writing is read a piece at a time and each line is given once, whole
(the last one, without its newline, only once the run has ended: ``final``). An agent's
transcript (``*.jsonl``) goes through ``TranscriptLines`` (readable text) unless ``raw``.
Memory is bounded by one read (``CHUNK``) and one line (``MAX_LINE_BYTES``), never by the
file's size. Every line is given with its invisible characters escaped (``visible``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from lirun.exec.transcript_text import TranscriptLines
from lirun.run_output import STDERR, STDOUT, TRANSCRIPT_SUFFIX, stream_names, tail_offset
from lirun.visible import visible

__all__ = ["CHUNK", "Cursor", "pick_streams", "stream_label"]

CHUNK = 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024  # an unended line longer than this is given in pieces


def pick_streams(run_dir: str | None, which: str) -> list[str]:
    """The run's stream files that ``which`` (``stdout``, ``stderr`` or ``all``) names,
    stdout's (an agent's transcript, a command's log) before stderr."""
    names = sorted(stream_names(run_dir), key=lambda n: n == STDERR)
    if which == "stderr":
        return [n for n in names if n == STDERR]
    if which == "stdout":
        return [n for n in names if n == STDOUT or n.endswith(TRANSCRIPT_SUFFIX)]
    return names


def stream_label(name: str, raw: bool, transcripts: int) -> str:
    """How a header names a stream file: stdout, stderr, transcript (its branch when the
    run has several)."""
    if name.endswith(TRANSCRIPT_SUFFIX):
        if raw:
            return "stdout" if transcripts == 1 else f"stdout {name}"
        return "transcript" if transcripts == 1 else f"transcript {name[: -len(TRANSCRIPT_SUFFIX)]}"
    return name.removesuffix(".log")


class Cursor:
    """One stream file read forward from ``offset``."""

    def __init__(self, path: str, *, provider: str | None = None, raw: bool = False) -> None:
        self.path = path
        self.offset = 0
        self.pending = b""
        agent = path.endswith(TRANSCRIPT_SUFFIX) and not raw
        self.transcript = TranscriptLines(provider) if agent else None

    def _render(self, raw_lines: list[bytes]) -> list[str]:
        text = [line.decode("utf-8", errors="replace") for line in raw_lines]
        if self.transcript is not None:
            text = self.transcript.feed(text)
        return [visible(line, keep="\t") for line in text]

    def batches(self, *, final: bool) -> Iterator[list[str]]:
        """The lines appended since the last call, a chunk at a time; with ``final`` (the
        writer is done) an unended last line too. A file not there yet gives nothing."""
        try:
            file = open(self.path, "rb")  # noqa: SIM115 (closed below; a generator)
        except FileNotFoundError:
            return
        with file:
            file.seek(self.offset)
            while True:
                data = file.read(CHUNK)
                if not data:
                    break
                self.offset += len(data)
                data = self.pending + data
                cut = data.rfind(b"\n")
                complete, self.pending = (data[:cut], data[cut + 1 :]) if cut >= 0 else (b"", data)
                lines = complete.split(b"\n") if cut >= 0 else []
                if len(self.pending) > MAX_LINE_BYTES:
                    lines.append(self.pending)
                    self.pending = b""
                if lines:
                    yield self._render(lines)
        if final and self.pending:
            last, self.pending = self.pending, b""
            yield self._render([last])

    def tail(self, count: int, *, final: bool) -> list[str]:
        """The last ``count`` lines (of the readable transcript, for an agent's), leaving
        the cursor after what the file holds now (before an unended line, unless
        ``final``)."""
        try:
            if self.transcript is None:
                self.offset = tail_offset(self.path, count)
            elif count <= 0:  # the parser has nothing to carry across a skipped line
                self.offset = tail_offset(self.path, 0)
        except FileNotFoundError:
            return []
        kept: deque[str] = deque(maxlen=max(count, 0))
        for batch in self.batches(final=final):
            kept.extend(batch)
        return list(kept)
