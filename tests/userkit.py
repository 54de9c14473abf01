"""Run a snippet as the unprivileged user ``nobody``: tests run as root, and root ignores
directory permissions, so a permission test must drop privileges to be able to fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def run_as_nobody(code: str, *args: str, home: Path) -> str:
    """Run ``python -c code args`` as ``nobody`` with LIRUN_HOME=home; return its stdout."""
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is needed to test permissions as a non-root user")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(SRC), "PYTHONDONTWRITEBYTECODE": "1"}
    env["HOME"] = env["LIRUN_HOME"] = str(home)
    done = subprocess.run(
        [*AS_NOBODY, sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
