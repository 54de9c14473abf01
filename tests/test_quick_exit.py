"""After a supervised execution ``li`` ends at once (``cli.quick_exit``): its output and
its record are complete, the ``atexit`` handlers ran, and the interpreter's teardown is
skipped, unless another thread still runs (then the ordinary exit waits for it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.execkit import only_row

# The console entry point, with an object whose finalizer speaks only in a teardown.
PROBE = """
import atexit, sys, threading, time

class Witness:
    def __del__(self):
        sys.stderr.write("TEARDOWN\\n")

witness = Witness()
atexit.register(lambda: sys.stderr.write("ATEXIT\\n"))
if sys.argv[1] == "thread":
    def late():
        time.sleep(0.3)
        sys.stdout.write("THREAD\\n")
    threading.Thread(target=late).start()
sys.argv = ["li", "run", "--", "echo", "hello"]
from lirun.cli import start
sys.exit(start())
"""


def _li(mode: str, li_env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in li_env.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered
    return subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_li_run_ends_without_the_teardown_its_output_and_record_complete(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    proc = _li("alone", li_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello\n"  # the child's echo, flushed before the exit
    assert "completed (run.completed.ok)" in proc.stderr
    assert "ATEXIT" in proc.stderr
    assert "TEARDOWN" not in proc.stderr
    assert only_row(db_url)["status"] == "completed"


def test_another_thread_still_running_gets_the_ordinary_exit(
    li_env: dict[str, str], db_url: str, tmp_path: Path
) -> None:
    proc = _li("thread", li_env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello\nTHREAD\n"
    assert "ATEXIT" in proc.stderr
    assert only_row(db_url)["status"] == "completed"
