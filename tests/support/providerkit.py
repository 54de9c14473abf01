"""Helpers for tests that run fake provider executables instead of real agent CLIs."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

from lirun.providers.registry import BUILTIN

TESTS_DIR = Path(__file__).resolve().parents[1]
FIXTURES_DIR = TESTS_DIR / "fixtures"
FAKE_PROVIDER = TESTS_DIR / "fake_provider.py"
# Every built-in provider gets a fake executable: a new one needs nothing here.
PROVIDER_NAMES = tuple(cls().executable_name for cls in BUILTIN)


def fixture_path(name: str) -> Path:
    """``"claude/success.jsonl"`` → its absolute path under tests/fixtures."""
    return FIXTURES_DIR / name


def fixture_stderr_lines(name: str) -> list[str]:
    """What the CLI wrote on stderr beside fixture ``name`` (``NAME.stderr.txt``), if any."""
    path = fixture_path(name.removesuffix(".jsonl") + ".stderr.txt")
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def load_expectations() -> dict[str, dict[str, Any]]:
    """Fixture name → expected replay settings and verdict (tests/fixtures/expectations.json)."""
    table = json.loads((FIXTURES_DIR / "expectations.json").read_text(encoding="utf-8"))
    return {name: row for name, row in table.items() if not name.startswith("_")}


def make_fake_bin_dir(directory: Path) -> Path:
    """Write an executable per built-in provider (``claude``, ``codex``, …) in ``directory``
    that runs the fake provider.

    Put the directory first on PATH, or point ``LIRUN_<NAME>_BIN`` at a file.
    """
    directory.mkdir(parents=True, exist_ok=True)
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(FAKE_PROVIDER))}"
    script = f'#!/bin/sh\nexec {command} "$@"\n'
    for name in PROVIDER_NAMES:
        wrapper = directory / name
        wrapper.write_text(script, encoding="utf-8")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def fake_env(
    fixture: str,
    *,
    exit_code: int = 0,
    hang_after: bool = False,
    delay: float = 0.0,
    argv_log: Path | None = None,
    touch: str | None = None,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """Environment that makes the fake provider replay ``fixture`` (a name or a path)."""
    env = dict(os.environ if base is None else base)
    path = Path(fixture)
    env["LIRUN_FAKE_FIXTURE"] = str(path if path.is_absolute() else fixture_path(fixture))
    env["LIRUN_FAKE_EXIT"] = str(exit_code)
    env["LIRUN_FAKE_DELAY"] = str(delay)
    env["LIRUN_FAKE_HANG_AFTER"] = "1" if hang_after else "0"
    if argv_log is not None:
        env["LIRUN_FAKE_ARGV_LOG"] = str(argv_log)
    if touch is not None:
        env["LIRUN_FAKE_TOUCH"] = touch
    return env


def fake_env_for(fixture: str, **overrides: Any) -> dict[str, str]:
    """:func:`fake_env` with exit code and hang taken from the expectations table."""
    row = load_expectations()[fixture]
    settings: dict[str, Any] = {"exit_code": row["exit_code"], "hang_after": row["hang_after"]}
    settings.update(overrides)
    return fake_env(fixture, **settings)


def reason_of(verdict: Any) -> str:
    """The design.md §5 reason a parser's verdict leads to when no later gate intervenes,
    by the one reason mapping there is (``lirun.record.outcome``)."""
    from lirun.record.outcome import OutcomeFacts, base_outcome

    return base_outcome(
        OutcomeFacts(status=verdict.status, exception=verdict.exception)
    ).reason_code


def env_with_fake_bin(
    fixture: str, *, base: dict[str, str], fake_bin: Path, **kw: Any
) -> dict[str, str]:
    """:func:`fake_env_for` with ``fake_bin`` first on PATH, so ``li agent claude`` finds
    the fake executables by name (no ``LIRUN_*_BIN`` override)."""
    env = fake_env_for(fixture, base=base, **kw)
    env["PATH"] = f"{fake_bin}{os.pathsep}{env['PATH']}"
    for cls in BUILTIN:  # every built-in's LIRUN_<NAME>_BIN, a new one's too
        env.pop(cls().env_var, None)
    return env


def classify_failures(monkeypatch: Any, words: str, failure_class: str) -> None:
    """Make the parsers classify an unclassified failure whose text holds ``words`` as
    ``failure_class`` (``auth``, ``rejected``, ...), as a classifying parser would; a
    failure already classified is left as it is."""
    from lirun.exec.stream import StreamParser
    from lirun.provider_errors import classified_error

    original = StreamParser._finish_exception

    def finish(self: Any, exit_code: int | None, killed_by: str | None) -> Any:
        exc = original(self, exit_code, killed_by)
        if exc is None or exc.failure_class is not None or words not in str(exc):
            return exc
        return classified_error(
            str(exc), provider=exc.provider, failure_class=failure_class, detail=exc.detail
        )

    monkeypatch.setattr(StreamParser, "_finish_exception", finish)
