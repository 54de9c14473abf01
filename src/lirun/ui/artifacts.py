"""Serving a run's artifact files without letting one reach beyond its run or run script.

A path is resolved (symlinks followed) and must stay inside the run's artifact root; the
file is opened without following a final symlink and checked to be the file resolved.
What a browser receives can never execute in the dashboard's origin: images it can draw
are sent as themselves, text (HTML and SVG included) as ``text/plain``, anything else as
a download; every answer carries ``nosniff`` and a sandboxing Content-Security-Policy.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

MAX_LISTED = 500
MAX_SERVED_BYTES = 64 * 1024 * 1024

# Only raster images a browser cannot run script from are shown inline as themselves.
_INLINE_IMAGES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_TEXT_SUFFIXES = frozenset(
    f".{suffix}"
    for suffix in [
        "txt",
        "md",
        "log",
        "json",
        "jsonl",
        "yaml",
        "yml",
        "toml",
        "csv",
        "tsv",
        "py",
        "sh",
        "diff",
        "patch",
        "html",
        "htm",
        "svg",
        "xml",
        "js",
        "css",
        "ts",
        "rs",
        "go",
        "c",
        "h",
        "sql",
        "ini",
        "cfg",
    ]
)
ARTIFACT_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "Cache-Control": "no-store",
}


class ArtifactRefused(Exception):
    """The path names nothing servable inside the artifact root (the reason is said)."""


@dataclass(frozen=True, slots=True)
class ServedFile:
    path: str
    size: int
    media_type: str
    attachment: bool


def media_for(name: str) -> tuple[str, bool]:
    """``(content type, as attachment)`` for a file name: never a type that runs script."""
    suffix = os.path.splitext(name)[1].lower()
    if suffix in _INLINE_IMAGES:
        return _INLINE_IMAGES[suffix], False
    if suffix in _TEXT_SUFFIXES or not suffix:
        return "text/plain; charset=utf-8", False
    return "application/octet-stream", True


def resolve_artifact(root: str | None, relative: str) -> ServedFile:
    """The file ``relative`` names under ``root``; ArtifactRefused when it is missing, not
    a regular file, outside the root (``..``, an absolute path, a symlink out), or huge."""
    if not root:
        raise ArtifactRefused("this run has no artifact root")
    if not relative or "\x00" in relative or os.path.isabs(relative):
        raise ArtifactRefused("not a relative path")
    real_root = os.path.realpath(root)
    candidate = os.path.realpath(os.path.join(real_root, relative))
    if os.path.commonpath([real_root, candidate]) != real_root or candidate == real_root:
        raise ArtifactRefused("the path leaves the run's artifact root")
    try:
        info = os.stat(candidate)
    except OSError:
        raise ArtifactRefused("no such artifact") from None
    if not stat.S_ISREG(info.st_mode):
        raise ArtifactRefused("not a regular file")
    if info.st_size > MAX_SERVED_BYTES:
        raise ArtifactRefused("larger than the dashboard serves; open it on the host")
    media_type, attachment = media_for(candidate)
    return ServedFile(candidate, info.st_size, media_type, attachment)


def read_artifact(served: ServedFile) -> bytes:
    """The file's bytes, opened without following a symlink swapped in since it was
    resolved (and refused if the opened file is not the one checked)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(served.path, flags)
    except OSError:
        raise ArtifactRefused("the artifact changed while it was opened") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SERVED_BYTES:
            raise ArtifactRefused("the artifact changed while it was opened")
        return file.read(MAX_SERVED_BYTES)


def list_artifacts(root: str | None) -> list[dict[str, object]]:
    """Files under the artifact root (relative path, size), symlinks not followed, at
    most ``MAX_LISTED``; ``[]`` when the root is missing."""
    if not root or not os.path.isdir(root):
        return []
    found: list[dict[str, object]] = []
    for directory, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(directory, name)
            try:
                info = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                found.append({"path": os.path.relpath(full, root), "size": info.st_size})
            if len(found) >= MAX_LISTED:
                return found
    return found
