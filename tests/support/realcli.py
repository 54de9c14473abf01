"""The pinned real CLIs (Claude Code, Codex, Gemini CLI) for the contract tests
(``-m real_cli``), from the cache.

``scripts/install-clis`` installs them into ``$LIRUN_CLI_CACHE`` (default
``~/.cache/lirun/clis``), one npm prefix per CLI and version, outside the clone so that
CI and later runs reuse them. :func:`real_clis` installs them once per test session when
they are missing and this machine can (root or a writable cache, npm; not with
``LIRUN_TEST_NO_INSTALL=1``), and otherwise says what is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from support import TESTS_DIR

CLAUDE_VERSION = "2.1.197"
CODEX_VERSION = "0.171.0"
GEMINI_VERSION = "0.61.0"
INSTALLER = TESTS_DIR.parent / "scripts" / "install-clis"
REQUIRE_ENV = "LIRUN_TEST_REQUIRE_REAL_CLI"


def cache_dir() -> Path:
    configured = os.environ.get("LIRUN_CLI_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "lirun" / "clis"


@dataclass(frozen=True)
class RealClis:
    claude: Path
    codex: Path
    gemini: Path


def _paths() -> RealClis:
    root = cache_dir()
    return RealClis(
        claude=root / f"claude-code-{CLAUDE_VERSION}" / "node_modules" / ".bin" / "claude",
        codex=root / f"codex-{CODEX_VERSION}" / "node_modules" / ".bin" / "codex",
        gemini=root / f"gemini-cli-{GEMINI_VERSION}" / "node_modules" / ".bin" / "gemini",
    )


def _missing(paths: RealClis) -> list[str]:
    return [str(p) for p in (paths.claude, paths.codex, paths.gemini) if not os.access(p, os.X_OK)]


@cache
def real_clis() -> RealClis | str:
    """The pinned CLIs, installed if need be; or a sentence saying what is missing and why."""
    paths = _paths()
    if not _missing(paths):
        return paths
    wanted = (
        f"@anthropic-ai/claude-code@{CLAUDE_VERSION}, @openai/codex@{CODEX_VERSION} and "
        f"@google/gemini-cli@{GEMINI_VERSION}"
    )
    if os.environ.get("LIRUN_TEST_NO_INSTALL") == "1":
        return f"the real CLIs ({wanted}) are not in {cache_dir()} (LIRUN_TEST_NO_INSTALL=1)"
    if shutil.which("npm") is None:
        return f"the real CLIs ({wanted}) are not in {cache_dir()} and npm is not installed"
    if os.geteuid() != 0 and not os.access(cache_dir().parent, os.W_OK):
        return f"the real CLIs ({wanted}) are not in {cache_dir()}, which is not writable"
    proc = subprocess.run([str(INSTALLER)], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or _missing(paths):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return f"scripts/install-clis could not install {wanted}: {' / '.join(tail)}"
    return paths
