"""A provider CLI's version, asked once per binary (``--version``) and cached.

Claude Code reports its version in the stream's ``init``; a CLI that does not is asked
``EXE --version`` once. The answer is cached in memory and in ``<home>/cache/versions.json``
keyed by the binary's real path, size and mtime, so a new install is asked again and an
unchanged one never costs a process start after the first run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from lirun.paths import lirun_home

__all__ = ["cli_version"]

_TIMEOUT_S = 5.0
_VERSION = re.compile(r"\d+\.\d+[0-9A-Za-z.+-]*")
_memory: dict[tuple[str, int, int], str | None] = {}


def _cache_path() -> Path:
    return lirun_home() / "cache" / "versions.json"


def _read_cache() -> dict[str, Any]:
    try:
        data = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(data: dict[str, Any]) -> None:
    path = _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # a cache: the next run asks again


def parse_version(output: str) -> str | None:
    """``codex-cli 0.171.0`` → ``0.171.0``; the first line when no version number shows."""
    line = next((ln.strip() for ln in output.splitlines() if ln.strip()), "")
    match = _VERSION.search(line)
    if match:
        return match.group(0)
    return line[:80] or None


def _ask(executable: str) -> str | None:
    try:
        done = subprocess.run(
            [executable, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # pi prints its version on stderr
    return parse_version(done.stdout or done.stderr) if done.returncode == 0 else None


def cli_version(executable: str) -> str | None:
    """The version ``executable --version`` reports (None if it cannot say), cached."""
    try:
        real = os.path.realpath(executable)
        st = os.stat(real)
    except OSError:
        return None
    key = (real, st.st_size, st.st_mtime_ns)
    if key in _memory:
        return _memory[key]
    cache = _read_cache()
    entry = cache.get(real)
    stamp = [st.st_size, st.st_mtime_ns]
    if isinstance(entry, dict) and entry.get("stamp") == stamp:
        version = entry.get("version")
        _memory[key] = version if isinstance(version, str) else None
        return _memory[key]
    version = _ask(executable)
    _memory[key] = version
    if version is not None:
        cache[real] = {"stamp": stamp, "version": version}
        _write_cache(cache)
    return version
