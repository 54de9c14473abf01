#!/usr/bin/env python3
"""A stand-in for the ``claude`` / ``codex`` / ``gemini`` CLIs that replays a fixture stream.

Environment:
  LIRUN_FAKE_FIXTURE      path of the .jsonl to replay (absolute, relative to the cwd, or
                          relative to tests/fixtures, e.g. ``claude/success.jsonl``)
  LIRUN_FAKE_EXIT         exit code after the last line (default 0)
  LIRUN_FAKE_DELAY        seconds to sleep between lines (default 0)
  LIRUN_FAKE_HANG_AFTER   "1": sleep forever after the last line (SIGTERM/SIGKILL end it)
  LIRUN_FAKE_ARGV_LOG     append {"argv": [...], "cwd": ..., "stdin": ...} as one JSON line
                          to this file (stdin: the prompt, read to its end as the real CLIs do)
  LIRUN_FAKE_VERSION      what ``--version`` prints (default "fake-provider 9.9.9")
  LIRUN_FAKE_TOUCH        create this file (relative to the cwd) before streaming, to
                          simulate work; LIRUN_FAKE_TOUCH_CONTENT is its content
  LIRUN_FAKE_COMMIT       then commit everything in the cwd's repository with this message
A fixture ``NAME.jsonl`` with a sibling ``NAME.stderr.txt`` (what the CLI wrote on stderr:
Gemini's retries and startup failures are only there) has that text written to stderr
first, line by line.
Lines are written exactly as in the fixture (a truncated last line stays truncated),
flushed one at a time, read one at a time (a bench replays streams of hundreds of MB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _fixture_path(name: str) -> Path:
    path = Path(name)
    if path.is_absolute() or path.exists():
        return path
    return FIXTURES / name


def _log_argv(log_path: str, stdin_text: str) -> None:
    record = {"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": stdin_text}
    with open(log_path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def _touch(relative: str) -> None:
    target = Path.cwd() / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(os.environ.get("LIRUN_FAKE_TOUCH_CONTENT", "touched by fake provider\n"))


def _replay_stderr(fixture: Path) -> None:
    stderr = fixture.with_name(fixture.name.removesuffix(".jsonl") + ".stderr.txt")
    if stderr.exists():
        for line in stderr.read_text(encoding="utf-8").splitlines(keepends=True):
            sys.stderr.write(line)
            sys.stderr.flush()


def _replay(lines: Iterable[str], delay: float) -> None:
    for index, line in enumerate(lines):
        if index and delay:
            time.sleep(delay)
        sys.stdout.write(line)
        sys.stdout.flush()


def main() -> int:
    if sys.argv[1:] == ["--version"]:
        print(os.environ.get("LIRUN_FAKE_VERSION", "fake-provider 9.9.9"))
        return 0
    # Like Claude Code -p and codex exec -, the prompt comes on stdin: read it to its end
    # (an stdin that never closes hangs here, as it hangs the real CLIs).
    stdin_text = sys.stdin.read() if sys.stdin is not None else ""
    if log_path := os.environ.get("LIRUN_FAKE_ARGV_LOG"):
        _log_argv(log_path, stdin_text)
    fixture = os.environ.get("LIRUN_FAKE_FIXTURE")
    if not fixture:
        print("fake_provider: LIRUN_FAKE_FIXTURE is not set", file=sys.stderr)
        return 2
    if touch := os.environ.get("LIRUN_FAKE_TOUCH"):
        _touch(touch)
    if message := os.environ.get("LIRUN_FAKE_COMMIT"):
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "-m", message], check=True)
    _replay_stderr(_fixture_path(fixture))
    try:
        with _fixture_path(fixture).open(encoding="utf-8", newline="") as lines:
            _replay(lines, float(os.environ.get("LIRUN_FAKE_DELAY", "0") or 0))
    except BrokenPipeError:  # the supervisor stopped reading; nothing left to say
        return 1
    if os.environ.get("LIRUN_FAKE_HANG_AFTER") == "1":
        while True:
            time.sleep(3600)
    return int(os.environ.get("LIRUN_FAKE_EXIT", "0") or 0)


if __name__ == "__main__":
    sys.exit(main())
