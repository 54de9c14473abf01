"""A provider CLI's version, asked once per binary (``--version``) and cached.

A CLI whose stream names its version says it there (``Provider.version_in_stream``); one
that does not is asked ``EXE --version`` (``Provider.version_args``) once and its answer
read by ``Provider.parse_version``. The answer is cached in memory and in
``<home>/cache/versions.json`` keyed by the binary's real path, size and mtime, so a new
install is asked again and an unchanged one never costs a process start after the first
run.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lirun.paths import lirun_home

__all__ = ["cli_version"]

_TIMEOUT_S = 5.0
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


Parse = Callable[[str], "str | None"]


def _ask(executable: str, args: Sequence[str], parse: Parse) -> str | None:
    try:
        done = subprocess.run(
            [executable, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # Some CLIs print their version on stderr.
    return parse(done.stdout or done.stderr) if done.returncode == 0 else None


def cli_version(executable: str, args: Sequence[str], parse: Parse) -> str | None:
    """The version ``executable *args`` reports, read by ``parse`` (None if it cannot
    say), cached per binary."""
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
    version = _ask(executable, args, parse)
    _memory[key] = version
    if version is not None:
        cache[real] = {"stamp": stamp, "version": version}
        _write_cache(cache)
    return version
