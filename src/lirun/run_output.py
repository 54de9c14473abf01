"""A run's output files as they lie on disk: ``<run_dir>/stream/``.

A command's stdout and stderr are copied to ``stdout.log`` and ``stderr.log``; an agent's
stdout (its provider's JSON stream) to ``<branch>.jsonl``, its stderr to ``stderr.log``
(``exec/capture.py`` writes them, append-only, while the run runs). This module only
finds and reads them, with ``os`` alone: ``li status`` shows the end of a failed run's
stderr on its fast path, and ``li logs`` and the dashboard read the rest.
"""

from __future__ import annotations

import os
import zlib

STREAM_DIR = "stream"
STDOUT = "stdout.log"
STDERR = "stderr.log"
TRANSCRIPT_SUFFIX = ".jsonl"  # an agent's stdout: one file per conversation branch
BLOCK = 64 * 1024


def stream_dir(run_dir: str | None) -> str | None:
    """``<run_dir>/stream`` when the run has a run directory, else None."""
    return os.path.join(run_dir, STREAM_DIR) if run_dir else None


def stream_names(run_dir: str | None) -> list[str]:
    """The run's stream files, agent transcripts (``*.jsonl``) first, then by name; [] when
    the directory is missing."""
    stream = stream_dir(run_dir)
    if stream is None:
        return []
    try:
        names = [n for n in os.listdir(stream) if os.path.isfile(os.path.join(stream, n))]
    except OSError:
        return []
    return sorted(names, key=lambda n: (not n.endswith(TRANSCRIPT_SUFFIX), n))


def is_stdout(name: str) -> bool:
    """Whether ``name`` holds the run's stdout (a command's log or an agent's transcript)."""
    return name == STDOUT or name.endswith(TRANSCRIPT_SUFFIX)


def signature(run_dir: str | None) -> str:
    """Sizes and modification times of the run's stream files: cheap to compute, and it
    changes whenever one is written (a page following a running run compares it)."""
    stream = stream_dir(run_dir)
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


def read_end(path: str, max_bytes: int) -> tuple[bytes, bool]:
    """The last ``max_bytes`` of ``path``, from a line's start when cut, and whether it was
    cut. OSError when the file cannot be read."""
    with open(path, "rb") as file:
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - max_bytes))
        data = file.read()
    cut = size > max_bytes
    if cut:
        data = data[data.find(b"\n") + 1 :]
    return data, cut


def tail_offset(path: str, lines: int) -> int:
    """Where the last ``lines`` lines of ``path`` start (an unended last line counts as
    one; with ``lines`` 0, where an unended last line starts, else the end). Read
    backwards a block at a time, so a large file costs what it shows."""
    with open(path, "rb") as file:
        pos = file.seek(0, os.SEEK_END)
        if pos == 0:
            return 0
        file.seek(pos - 1)
        ended = file.read(1) == b"\n"
        wanted = lines + 1 if ended else max(lines, 1)  # newlines to pass, from the end
        while pos > 0:
            start = max(0, pos - BLOCK)
            file.seek(start)
            block = file.read(pos - start)
            end = len(block)
            while (end := block.rfind(b"\n", 0, end)) >= 0:
                wanted -= 1
                if wanted == 0:
                    return start + end + 1
            pos = start
    return 0


def last_lines(path: str, count: int, max_bytes: int = BLOCK) -> list[str]:
    """The last ``count`` non-blank lines of ``path`` within its last ``max_bytes``, decoded
    leniently; [] when the file is missing or unreadable."""
    try:
        data, _ = read_end(path, max_bytes)
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    lines = [line for line in text.split("\n") if line.strip()]
    return lines[-count:] if count > 0 else []
