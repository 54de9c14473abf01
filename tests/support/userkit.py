"""Run a snippet as the unprivileged user ``nobody``: tests run as root, and root ignores
directory permissions, so a permission test must drop privileges to be able to fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _readable_source(home: Path) -> Path:
    """A copy of the package ``nobody`` can read: the checkout may sit in root's home."""
    target = home.parent / f".lirun-src-{os.getpid()}"
    if not target.exists():
        shutil.copytree(SRC / "lirun", target / "lirun", ignore=shutil.ignore_patterns("*.pyc"))
        for path in [target, *target.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def run_as_nobody(code: str, *args: str, home: Path) -> str:
    """Run ``python -c code args`` as ``nobody`` with LIRUN_HOME=home; return its stdout."""
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is needed to test permissions as a non-root user")
    source = _readable_source(home)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(source), "PYTHONDONTWRITEBYTECODE": "1"}
    env["HOME"] = env["LIRUN_HOME"] = str(home)
    done = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=source,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
