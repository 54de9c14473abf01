"""A throwaway PostgreSQL cluster a test may stop and restart (never the machine's own).

``initdb`` refuses to run as root, so the cluster belongs to the ``postgres`` user and
lives in a directory that user can traverse; it listens on a free local port.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.pg import REQUIRE_PG

PG_BIN = Path("/usr/lib/postgresql/15/bin")
AS_POSTGRES = ["setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Cluster:
    """``start()``, ``stop()``, ``url``; the data directory is removed at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.data = base / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres?connect_timeout=2"

    def _pg(self, *args: str, timeout: float = 60) -> None:
        done = subprocess.run(
            [*AS_POSTGRES, *args], capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stdout}{done.stderr}")

    def init(self) -> None:
        self._pg(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        )

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c synchronous_commit=off"
        )
        log = str(self.base / "server.log")
        self._pg(
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start"
        )

    def stop(self) -> None:
        """A fast shutdown: every client connection is cut, as in a server restart."""
        self._pg(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")


def _unavailable() -> str | None:
    if shutil.which("setpriv") is None:
        return "setpriv is missing"
    if not (PG_BIN / "initdb").exists():
        return f"no PostgreSQL server binaries in {PG_BIN}"
    return None


def throwaway_cluster() -> Iterator[Cluster]:
    """A started throwaway cluster; stopped and deleted after the test (``yield from`` it
    in a fixture)."""
    reason = _unavailable()
    if reason:
        if REQUIRE_PG:
            pytest.fail(f"a throwaway PostgreSQL cluster is required but {reason}")
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix="lirun-pgc-", dir="/tmp"))
    base.chmod(0o777)
    cluster = Cluster(base)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        subprocess.run(
            [
                *AS_POSTGRES,
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(cluster.data),
                "-m",
                "immediate",
                "stop",
            ],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)
