"""Stream buffers: where a child's output goes while it runs.

A child's stdout and stderr are copied chunk by chunk to a file under the run's
``stream/`` directory and, optionally, echoed to one of ``li``'s own descriptors. Nothing
grows with the amount of output: a sink holds at most a bounded tail (the response
excerpt of a generic command) and, for line-oriented agent streams, one partial line.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from pathlib import Path

from lirun.logs import get_logger

__all__ = [
    "DEFAULT_TAIL_BYTES",
    "MAX_LINE_BYTES",
    "ChunkSink",
    "LineSink",
    "open_buffer",
    "write_all",
]

log = get_logger(__name__)
DEFAULT_TAIL_BYTES = 64 * 1024
# A provider line longer than this is handed to the parser in pieces rather than
# buffered without bound; the parser reports the pieces as unparsed.
MAX_LINE_BYTES = 16 * 1024 * 1024


def open_buffer(path: Path) -> int:
    """An append-only descriptor for a stream buffer; a resumed leg appends to the same file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class ChunkSink:
    """Copies chunks to a buffer file and an optional echo descriptor; keeps a bounded tail.

    An echo target that goes away (``li run ... | head``) stops the echo, never the capture.
    """

    def __init__(
        self,
        buffer_fd: int | None,
        *,
        echo_fd: int | None = None,
        tail_bytes: int = 0,
    ) -> None:
        self.buffer_fd = buffer_fd
        self.echo_fd = echo_fd
        self.tail_bytes = tail_bytes
        self.tail = bytearray()
        self.total_bytes = 0
        self.echo_error: OSError | None = None
        self.buffer_error: OSError | None = None

    def feed(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        if self.buffer_fd is not None:
            try:
                write_all(self.buffer_fd, chunk)
            except OSError as exc:
                self._buffer_failed(exc)
        if self.echo_fd is not None:
            self._echo(chunk)
        if self.tail_bytes:
            self._keep_tail(chunk)

    def finish(self) -> None:
        """Called once at end of stream; subclasses flush what they hold."""

    def _buffer_failed(self, exc: OSError) -> None:
        """The buffer file cannot take more (a full disk, a quota): the capture goes on
        without it (the tail, the echo, the lines), and the run is not failed for it."""
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
            raise exc
        self.buffer_error = exc
        log.warning(
            "the run's output file stopped at %d bytes (%s); the rest is not saved",
            self.total_bytes, exc.strerror, extra={"event": "capture.buffer_full"},
        )  # fmt: skip
        self.close()

    def _echo(self, chunk: bytes) -> None:
        try:
            write_all(self.echo_fd, chunk)  # type: ignore[arg-type]
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.EBADF, errno.EIO):
                raise
            self.echo_error = exc
            self.echo_fd = None

    def _keep_tail(self, chunk: bytes) -> None:
        if len(chunk) >= self.tail_bytes:
            self.tail[:] = chunk[-self.tail_bytes :]
            return
        self.tail += chunk
        excess = len(self.tail) - self.tail_bytes
        if excess > 0:
            del self.tail[:excess]

    def tail_text(self) -> str:
        """The tail decoded leniently (a cut multi-byte character becomes U+FFFD)."""
        return bytes(self.tail).decode("utf-8", errors="replace")

    def close(self) -> None:
        if self.buffer_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.buffer_fd)
            self.buffer_fd = None


class LineSink(ChunkSink):
    """A ChunkSink that also hands every complete line to ``on_line`` (agent streams).

    The buffer file still receives the raw bytes, so it is an exact copy of the stream; a
    truncated last line is delivered by :meth:`finish`.
    """

    def __init__(
        self,
        buffer_fd: int | None,
        on_line: Callable[[str], None],
        *,
        echo_fd: int | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        super().__init__(buffer_fd, echo_fd=echo_fd)
        self.on_line = on_line
        self.max_line_bytes = max_line_bytes
        self._pending = bytearray()
        self.lines = 0

    def feed(self, chunk: bytes) -> None:
        super().feed(chunk)
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if self._pending:
                self._pending += chunk[start:end]
                self._deliver(bytes(self._pending))
                self._pending.clear()
            else:
                self._deliver(chunk[start:end])
            start = end + 1
        if start < len(chunk):
            self._pending += chunk[start:]
            if len(self._pending) > self.max_line_bytes:
                self._deliver(bytes(self._pending))
                self._pending.clear()

    def finish(self) -> None:
        if self._pending:
            self._deliver(bytes(self._pending))
            self._pending.clear()

    def _deliver(self, raw: bytes) -> None:
        self.lines += 1
        self.on_line(raw.decode("utf-8", errors="replace"))
