"""A small tmpfs for full-disk tests (root only). i8-faults may hold the general fixture.

Skips where mounting fails, unless ``LIRUN_TEST_REQUIRE_TMPFS=1`` (then it fails).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs: {done.stderr.strip() or done.returncode}"
        if os.environ.get("LIRUN_TEST_REQUIRE_TMPFS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path) -> Path:
    """Fill the filesystem of ``path`` to the last byte; the file to remove to free it."""
    target = path / "filler"
    with open(target, "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    try:
        with open(target, "ab") as handle:
            while True:
                handle.write(b"\0")
                handle.flush()
    except OSError:
        pass
    return target
