"""Serving a run's artifact files without letting one reach beyond its run or run script.

Only the run's own artifact directory is served: ``<runs root>/<run id>/artifacts``, the
directory lirun made for it, and only when its record names that directory. A run made
with ``--save DIR`` keeps its artifacts where its owner chose, perhaps ``/etc``, and a
record's path can be edited in the database: the dashboard (perhaps running as root)
serves neither. Inside, every component is opened without following a link and the file
must be a regular one (checked on the opened descriptor): no link leads out, no FIFO
hangs the server, no device is read.

What a browser receives can never execute in the dashboard's origin: images it can draw
are sent as themselves, text (HTML and SVG included) as ``text/plain``, anything else as
a download; every answer carries ``nosniff`` and a sandboxing Content-Security-Policy.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from lirun.paths import runs_root
from lirun.record.rundir import SAFE_COMPONENT_PATTERN

MAX_LISTED = 500
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
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
    body: bytes


def media_for(name: str) -> tuple[str, bool]:
    """``(content type, as attachment)`` for a file name: never a type that runs script."""
    suffix = os.path.splitext(name)[1].lower()
    if suffix in _INLINE_IMAGES:
        return _INLINE_IMAGES[suffix], False
    if suffix in _TEXT_SUFFIXES or not suffix:
        return "text/plain; charset=utf-8", False
    return "application/octet-stream", True


def runs_dir() -> str:
    """The real path of this process's runs directory (``<LIRUN_HOME>/runs``): the
    dashboard takes it once, when it starts."""
    return os.path.realpath(runs_root())


def own_root(runs: str, run_id: str, recorded: str | None) -> str:
    """The run's own artifact directory, ``<runs>/<run id>/artifacts`` (``runs``: the
    real path of the runs directory, ``runs_dir``; then no link), when its record names
    it; ArtifactRefused
    when the record names another directory (``--save DIR``, or a path edited in the
    database) or when the directory is reached through a link."""
    if not recorded:
        raise ArtifactRefused("this run has no artifact directory")
    if not SAFE_COMPONENT_PATTERN.fullmatch(run_id):
        raise ArtifactRefused("this run has no directory of its own")
    own = os.path.join(runs, run_id, "artifacts")
    if os.path.realpath(recorded) != own:
        raise ArtifactRefused(
            "this run keeps its artifacts outside its own run directory (--save): "
            "the dashboard serves none of them; open them on the host"
        )
    return own


def artifacts_served(runs: str, run_id: str, recorded: str | None) -> str | None:
    """None when the run's artifacts can be served, else why not (one sentence)."""
    try:
        own_root(runs, run_id, recorded)
    except ArtifactRefused as exc:
        return str(exc) if recorded else None
    return None


def _open_inside(root: str, parts: list[str], last: int) -> int:
    """A descriptor of ``root/parts...``, each component opened without following a
    link (``last``: the flags of the final one); OSError when one is a link or missing."""
    base = os.path.dirname(os.path.dirname(root))  # the runs root's real path
    names = [*root[len(base) :].strip(os.sep).split(os.sep), *parts]
    fd = os.open(base, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for i, name in enumerate(names):
            flags = last if i == len(names) - 1 else os.O_RDONLY | _DIRECTORY
            step = os.open(name, flags | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _parts(relative: str) -> list[str]:
    if not relative or "\x00" in relative or os.path.isabs(relative):
        raise ArtifactRefused("not a relative path")
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ArtifactRefused("the path leaves the run's artifact directory")
    return parts


def read_artifact(root: str, relative: str) -> ServedFile:
    """The regular file ``relative`` names under the run's own artifact directory
    ``root`` (``own_root``), with its bytes. Every component is opened without following
    a link, the file without blocking (a FIFO never hangs the server), and what was
    opened is checked (``fstat``) to be a regular file of a size the dashboard serves:
    ArtifactRefused otherwise (``..``, an absolute path, a link in or out, a FIFO, a
    device, a directory, a missing file)."""
    parts = _parts(relative)
    try:
        fd = _open_inside(root, parts, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        raise ArtifactRefused("no such artifact") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactRefused("not a regular file")
        if info.st_size > MAX_SERVED_BYTES:
            raise ArtifactRefused("larger than the dashboard serves; open it on the host")
        with os.fdopen(os.dup(fd), "rb") as file:
            body = file.read(MAX_SERVED_BYTES)
    finally:
        os.close(fd)
    media_type, attachment = media_for(parts[-1])
    return ServedFile(os.path.join(root, *parts), len(body), media_type, attachment, body)


def list_artifacts(runs: str, run_id: str, recorded: str | None) -> list[dict[str, object]]:
    """The regular files under the run's own artifact directory (relative path, size),
    links neither followed nor listed, at most ``MAX_LISTED``; ``[]`` when there is none
    or the record names another directory (``own_root``)."""
    try:
        root = own_root(runs, run_id, recorded)
        fd = _open_inside(root, [], os.O_RDONLY | _DIRECTORY)
    except (ArtifactRefused, OSError):
        return []
    found: list[dict[str, object]] = []
    try:
        # fwalk below a descriptor opened without links: a directory swapped for a link
        # meanwhile is not entered.
        for directory, dirs, files, dir_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
            dirs.sort()
            for name in sorted(files):
                try:
                    info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode):
                    path = os.path.normpath(os.path.join(directory, name))
                    found.append({"path": path, "size": info.st_size})
                if len(found) >= MAX_LISTED:
                    return found
    finally:
        os.close(fd)
    return found
