"""The real CLIs for the contract tests (``-m real_cli``), from the cache: pinned or newest.

``scripts/install-clis`` installs them into ``$LIRUN_CLI_CACHE`` (default
``~/.cache/lirun/clis``), one npm prefix per CLI and version, outside the clone so that
CI and later runs reuse them. ``LIRUN_TEST_CLI_VERSIONS`` picks which: ``pinned`` (the
default, each contract's pin) or ``latest`` (what ``scripts/install-clis --latest`` last
installed, ``<name>-latest`` in the cache; ``scripts/drift`` runs the suite so).
:func:`real_clis` installs them once per test session when they are missing and this
machine can (root or a writable cache, npm; not with ``LIRUN_TEST_NO_INSTALL=1``), and
otherwise says what is missing. The version each run must record is the one the
executable reports (``--version``), never assumed from the pin.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lirun.providers.registry import get_provider
from support import TESTS_DIR
from support.contracts import CONTRACTS, Case, Contract

INSTALLER = TESTS_DIR.parent / "scripts" / "install-clis"
REQUIRE_ENV = "LIRUN_TEST_REQUIRE_REAL_CLI"
VERSIONS_ENV = "LIRUN_TEST_CLI_VERSIONS"
CLIS = CONTRACTS  # provider -> how its CLI is installed (support.contracts)


def cache_dir() -> Path:
    configured = os.environ.get("LIRUN_CLI_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "lirun" / "clis"


def wanted_versions() -> str:
    """``pinned`` or ``latest``, from ``$LIRUN_TEST_CLI_VERSIONS``; anything else is a
    mistake the run should stop on, not a silent fallback to the pins."""
    value = os.environ.get(VERSIONS_ENV, "pinned").strip() or "pinned"
    if value not in ("pinned", "latest"):
        raise ValueError(f"{VERSIONS_ENV}={value!r}: use pinned (the default) or latest")
    return value


@dataclass(frozen=True)
class RealClis:
    # provider → its executable, and the version that executable reports (``--version``).
    paths: dict[str, Path]
    versions: dict[str, str]

    def path(self, provider: str) -> Path:
        return self.paths[provider]

    def bin_env(self) -> dict[str, str]:
        """``LIRUN_<PROVIDER>_BIN`` for every CLI: how ``li agent`` finds each one."""
        return {f"LIRUN_{p.upper()}_BIN": str(path) for p, path in self.paths.items()}


def _prefix(cli: Contract, which: str) -> Path:
    suffix = "latest" if which == "latest" else cli.pinned
    return cache_dir() / f"{cli.cli_name}-{suffix}" / "node_modules" / ".bin" / cli.bin


def _missing(paths: dict[str, Path]) -> list[str]:
    return [str(p) for p in paths.values() if not os.access(p, os.X_OK)]


def reported_version(provider: str, executable: Path) -> str | None:
    """What ``EXE --version`` says (``2.1.332 (Claude Code)`` → ``2.1.332``)."""
    try:
        done = subprocess.run(
            [str(executable), "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    # pi prints its version on stderr.
    parse = get_provider(provider).parse_version
    return parse(done.stdout or done.stderr) if done.returncode == 0 else None


def _found(paths: dict[str, Path]) -> RealClis | str:
    versions = {provider: reported_version(provider, path) for provider, path in paths.items()}
    silent = [provider for provider, version in versions.items() if version is None]
    if silent:
        return f"{', '.join(silent)} --version printed no version ({paths})"
    return RealClis(
        paths=dict(paths), versions={p: v for p, v in versions.items() if v is not None}
    )


@cache
def real_clis() -> RealClis | str:
    """The CLIs, installed if need be; or a sentence saying what is missing and why."""
    which = wanted_versions()
    paths = {provider: _prefix(cli, which) for provider, cli in CLIS.items()}
    if not _missing(paths):
        return _found(paths)
    if which == "latest":
        wanted = "the newest " + " and ".join(cli.package for cli in CLIS.values())
        argv = [str(INSTALLER), "--latest"]
    else:
        wanted = " and ".join(f"{cli.package}@{cli.pinned}" for cli in CLIS.values())
        argv = [str(INSTALLER)]
    if os.environ.get("LIRUN_TEST_NO_INSTALL") == "1":
        return f"the real CLIs ({wanted}) are not in {cache_dir()} (LIRUN_TEST_NO_INSTALL=1)"
    if shutil.which("npm") is None:
        return f"the real CLIs ({wanted}) are not in {cache_dir()} and npm is not installed"
    if os.geteuid() != 0 and not os.access(cache_dir().parent, os.W_OK):
        return f"the real CLIs ({wanted}) are not in {cache_dir()}, which is not writable"
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or _missing(paths):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return f"{' '.join(['scripts/install-clis', *argv[1:]])} could not install {wanted}: " + (
            " / ".join(tail)
        )
    return _found(paths)


def cli_env(case: Case, clis: RealClis, tmp_path: Path) -> dict[str, str]:
    """The environment a contract case runs ``li agent`` in: a private HOME, TMPDIR and
    lirun home under ``tmp_path``, the CLIs' executables, and the case's contract's own
    settings; the machine's own CLI settings stay out (each contract's ``own_env``)."""
    home, tmp, lihome = tmp_path / "cli-home", tmp_path / "cli-tmp", tmp_path / "lirun-home"
    for path in (home, tmp, lihome):
        path.mkdir()
    foreign = tuple(prefix for c in CONTRACTS.values() for prefix in c.own_env)
    env = {k: v for k, v in os.environ.items() if not k.startswith(foreign)}
    env.update(
        HOME=str(home),
        TMPDIR=str(tmp),
        LIRUN_HOME=str(lihome),
        LIRUN_DB_URL=str(tmp_path / "state.db"),
        **clis.bin_env(),
        PYTHONUNBUFFERED="1",
    )
    env.update(case.contract.environment(home, tmp_path, case))
    env.update(case.env)
    return env
