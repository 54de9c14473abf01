"""A full disk on demand: a small tmpfs the test mounts, fills and unmounts.

``tiny_disk`` is a factory fixture (loaded as a plugin by ``conftest.py``): each call
mounts a fresh tmpfs of the given size and returns its directory; all are unmounted at the
end of the test. Mounting needs root; where it fails the test skips, unless
``LIRUN_TEST_REQUIRE_TMPFS=1`` (CI sets it), where that fails instead.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REQUIRE_TMPFS = os.environ.get("LIRUN_TEST_REQUIRE_TMPFS") == "1"
FILLER = ".filler"


def mount_tmpfs(size: str) -> Path:
    """Mount a tmpfs of ``size`` (``mount -o size=``, e.g. ``2m``) on a new directory."""
    where = Path(tempfile.mkdtemp(prefix="lirun-disk-", dir="/tmp"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if done.returncode != 0:
        where.rmdir()
        raise OSError(f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}")
    return where


def unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)
    with contextlib.suppress(OSError):
        where.rmdir()


def fill(where: Path) -> int:
    """Write a filler file until the filesystem is full; return the bytes written."""
    written = 0
    block = b"\0" * 65536
    with open(where / FILLER, "ab", buffering=0) as handle:
        for size in (65536, 4096, 512, 1):
            chunk = block[:size]
            while True:
                try:
                    written += handle.write(chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return written


def free(where: Path) -> None:
    """Give the space back."""
    with contextlib.suppress(FileNotFoundError):
        (where / FILLER).unlink()


@pytest.fixture
def tiny_disk() -> Iterator[Callable[[str], Path]]:
    """``tiny_disk("4m")`` → the directory of a fresh tmpfs of that size."""
    mounted: list[Path] = []

    def make(size: str) -> Path:
        try:
            where = mount_tmpfs(size)
        except (OSError, subprocess.SubprocessError) as exc:
            if REQUIRE_TMPFS:
                pytest.fail(f"a tmpfs is required (LIRUN_TEST_REQUIRE_TMPFS=1) but: {exc}")
            pytest.skip(f"cannot mount a tmpfs here: {exc}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        unmount(where)
